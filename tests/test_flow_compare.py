"""compare() of two models on one input, and aggregation over collections (hand-built
attention of tests/flow_cases.py: model b moves one top-layer edge from "b" to [SEP])."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnkit.errors import EmptyInputError, InputError, TokenizationMismatchError
from attnkit.flow import compare, compare_sets, flow_summary, js_divergence
from flow_cases import ROLES, TOKENS, att_a, att_b, make_att, two_layer_maps

pytestmark = pytest.mark.numerics


def jsd_by_hand(p, q):
    m = [(x + y) / 2 for x, y in zip(p, q)]
    kl = lambda a: sum(x * math.log2(x / z) for x, z in zip(a, m) if x > 0)  # noqa: E731
    return 0.5 * kl(p) + 0.5 * kl(q)


def test_js_divergence_extremes():
    assert js_divergence([0.5, 0.5], [0.5, 0.5]) == pytest.approx(0.0)
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)
    p, q = [0.1, 0.5, 0.35, 0.05], [0.1, 0.5, 0.05, 0.35]
    assert js_divergence(p, q) == pytest.approx(jsd_by_hand(p, q))


def test_tokenization_mismatch_names_the_tokens():
    other = make_att(two_layer_maps()[:, :, :3, :3] / two_layer_maps()[:, :, :3, :3].sum(
        -1, keepdims=True), ["[CLS]", "a", "c"], ["cls", "word", "word"])
    with pytest.raises(TokenizationMismatchError) as err:
        compare(att_a(), other)
    msg = str(err.value)
    assert "position 2: 'b' (pre) vs 'c' (b)" in msg
    assert "position 3: '[SEP]' (pre) vs (none) (b)" in msg
    assert "4 tokens" in msg and "3 tokens" in msg


def test_shape_mismatch():
    b = make_att(two_layer_maps()[:1], TOKENS, ROLES)
    with pytest.raises(InputError, match="layers"):
        compare(att_a(), b)


def test_compare_layers_heads_and_union():
    c = compare(att_a(), att_b(), threshold=0.3)
    assert c.names == ("pre", "fine")
    top, bottom = c.layers.loc[1], c.layers.loc[0]
    assert (top.tokens_both, top.tokens_a, top.tokens_b) == ([1], [2], [3])
    assert (top.heads_both, top.heads_a, top.heads_b) == ([0, 1], [], [])
    assert (bottom.tokens_both, bottom.tokens_a, bottom.tokens_b) == ([0, 1, 2, 3], [], [])
    assert (top.edges_both, top.edges_a, top.edges_b) == (1, 1, 1)
    assert (bottom.edges_both, bottom.edges_a, bottom.edges_b) == (3, 2, 1)
    assert (top.n_tokens_both, top.n_tokens_a, top.n_tokens_b) == (1, 1, 1)

    u = c.union
    assert u.edges[(2, 0), (1, 1)]["model"] == "both"
    assert u.edges[(2, 0), (1, 2)]["model"] == "a"
    assert u.edges[(2, 0), (1, 3)]["model"] == "b"
    assert u.nodes[(1, 2)]["model"] == "a" and u.nodes[(1, 3)]["model"] == "b"
    assert u.nodes[(0, 3)]["model"] == "both"
    e = u.edges[(2, 0), (1, 3)]
    assert e["heads_a"] == [] and e["heads_b"] == [1] and e["weight_b"] == pytest.approx(0.35)
    assert u.graph["models"] == ("pre", "fine")

    # only head 1 of the top layer differs, in row 0 of 4
    jsd = jsd_by_hand([0.1, 0.5, 0.35, 0.05], [0.1, 0.5, 0.05, 0.35])
    h = c.heads
    assert h.loc[(1, 1), "jsd"] == pytest.approx(jsd / 4, abs=1e-6)
    assert h.loc[(1, 1), "jsd_max"] == pytest.approx(jsd, abs=1e-6)
    assert h.loc[(1, 1), "jsd_source"] == pytest.approx(jsd, abs=1e-6)
    assert h.drop(index=(1, 1))["jsd"].abs().max() < 1e-9
    assert h.loc[(0, 0), ["edges_a", "edges_b"]].tolist() == [3, 2]
    assert h.loc[(1, 1), ["edges_a", "edges_b"]].tolist() == [2, 2]
    assert set(h["model"]) == {"both"}

    # influence: a = [1/3, 2, 1, 2/3]; b = [1/3, 5/3, 1/3, 4/3]
    assert c.influence["score_a"].tolist() == pytest.approx([1 / 3, 2, 1, 2 / 3])
    assert c.influence["score_b"].tolist() == pytest.approx([1 / 3, 5 / 3, 1 / 3, 4 / 3])
    assert c.influence["delta"].tolist() == pytest.approx([0, -1 / 3, -2 / 3, 2 / 3])


def test_compare_heads_only_in_one_model():
    # only head 0 may make edges: head 1 of the top layer (where the models differ) is
    # excluded, so it is "none" and the two graphs agree
    c = compare(att_a(), att_b(), threshold=0.3, heads=[(1, 0), (0, 0)])
    assert c.heads.loc[(1, 1), "model"] == "none"
    assert c.heads.loc[(1, 0), "model"] == "both"
    assert set(c.union.edges) == {((2, 0), (1, 1)), ((1, 1), (0, 2))}
    assert {d["model"] for _, _, d in c.union.edges(data=True)} == {"both"}


def test_flow_summary_by_hand():
    s = flow_summary([att_a(), att_b()], threshold=0.3, alpha=0.5)
    assert s.n_inputs == 2
    # head (0, 0) makes 3 edges in a, 2 in b
    assert s.heads.loc[(0, 0), "edges_mean"] == pytest.approx(2.5)
    assert s.heads.loc[(0, 0), "edges_std"] == pytest.approx(np.std([3, 2], ddof=1))
    assert s.heads.loc[(1, 1), "share"] == 1.0
    # influence shares: a = [1/3, 2, 1, 2/3] / 4; b = [1/3, 5/3, 1/3, 4/3] / (11/3)
    cat = s.categories
    assert cat.loc["cls", "share_mean"] == pytest.approx((1 / 12 + 1 / 11) / 2)
    assert cat.loc["word", "share_mean"] == pytest.approx((3 / 4 + 6 / 11) / 2)
    assert cat.loc["sep", "share_mean"] == pytest.approx((1 / 6 + 4 / 11) / 2)
    assert cat.loc["sep", "share_std"] == pytest.approx(np.std([1 / 6, 4 / 11], ddof=1))
    assert np.isnan(cat.loc["punct", "share_mean"]) and cat.loc["punct", "inputs"] == 0
    assert cat.loc["word", "positions"] == 4
    # ratings (min(5, ceil I)): a = [1, 2, 1, 1]; b = [1, 2, 1, 2]
    assert cat.loc["word", "rating_mean"] == pytest.approx((2 + 1 + 2 + 1) / 4)
    assert s.tokens.loc["a", "share_mean"] == pytest.approx((0.5 + 5 / 11) / 2)
    assert s.tokens.loc["a", "count"] == 2 and s.tokens.loc["a", "inputs"] == 2
    assert s.tokens.index[0] == "a"  # largest mean share first
    assert s.per_input["edges"].tolist() == [7, 6]
    assert s.per_input["top_token"].tolist() == ["a", "a"]


def test_flow_summary_empty():
    with pytest.raises(EmptyInputError):
        flow_summary([])


def test_compare_sets():
    r = compare_sets([att_a(), att_a()], [att_b(), att_a()], threshold=0.3)
    jsd = jsd_by_hand([0.1, 0.5, 0.35, 0.05], [0.1, 0.5, 0.05, 0.35]) / 4
    assert r.n_inputs == 2 and r.names == ("pre", "fine")
    assert r.heads.loc[(1, 1), "jsd_mean"] == pytest.approx(jsd / 2, abs=1e-6)
    assert r.heads.loc[(1, 1), "jsd_std"] == pytest.approx(np.std([jsd, 0], ddof=1), abs=1e-6)
    assert r.heads.loc[(0, 0), "edges_a_mean"] == 3 and r.heads.loc[(0, 0), "edges_b_mean"] == 2.5
    # [SEP] share: a 1/6 both times; b 4/11 then 1/6
    assert r.categories.loc["sep", "delta_mean"] == pytest.approx((4 / 11 - 1 / 6) / 2)
    with pytest.raises(TokenizationMismatchError, match="Input 1"):
        other = make_att(two_layer_maps(), ["[CLS]", "a", "c", "[SEP]"], ROLES)
        compare_sets([att_a(), att_a()], [att_a(), other])
    with pytest.raises(EmptyInputError, match="1 and 2"):
        compare_sets([att_a()], [att_a(), att_b()])


PAIRS = [("The cat sat on the mat.", "A cat sat on the mat."),
         ("She reads the new book.", "She has written three letters."),
         ("We did n't see the movie.", "Mary gave John a red apple yesterday!")]


def test_flow_summary_over_an_attention_set(tiny_bert):
    import attnkit as ak
    from attnkit.flow import attention_graph, head_edge_counts

    sset = ak.extract(tiny_bert, PAIRS, level="token", progress=False)
    s = flow_summary(sset, threshold=0.1)
    assert s.n_inputs == len(PAIRS)
    assert len(s.heads) == tiny_bert.n_layers * tiny_bert.n_heads
    counts = np.stack([head_edge_counts(attention_graph(a, threshold=0.1)) for a in sset])
    assert s.heads["edges_mean"].to_numpy() == pytest.approx(counts.mean(0).ravel())
    assert s.per_input["n"].tolist() == [len(a) for a in sset]
    # shares of the influence over the categories add up to 1 for every input
    present = s.categories["share_mean"].fillna(0)
    assert present.sum() == pytest.approx(1.0)
    same = compare_sets(sset, sset, threshold=0.1)
    assert same.heads["jsd_mean"].max() == pytest.approx(0.0, abs=1e-9)
    assert (same.categories["delta_mean"].fillna(0) == 0).all()


@pytest.mark.realmodel
def test_bundled_model_compare_and_mismatch(minilm):
    a = minilm.attend("The cat sat on the mat.")
    same = compare(a, minilm.attend("The cat sat on the mat."), threshold=0.1)
    assert same.heads["jsd"].max() == pytest.approx(0.0, abs=1e-6)
    assert set(nx_models(same.union)) == {"both"}
    assert same.graph_a.graph["source"] == [(minilm.n_layers, 0)]
    with pytest.raises(TokenizationMismatchError) as err:
        compare(a, minilm.attend("The cat sat on the rug."))
    msg = str(err.value)
    assert "position 6: 'mat'" in msg and "vs 'rug'" in msg and "position 5" not in msg


def nx_models(g):
    return [d["model"] for _, _, d in g.edges(data=True)] + [d["model"] for _, d in
                                                              g.nodes(data=True)]


def test_comparisons_and_summaries_are_head_results():
    """compare, compare_sets and flow_summary return the contract's result type: the
    per-head table with meta (names, options) and plot(), keeping their attributes."""
    import pickle

    from attnkit.core.results import HeadResult

    a, b = att_a(), att_b()
    c = compare(a, b, threshold=0.2, heads=iter([(0, 0), (1, 0)]), names=("pre", "fine"))
    assert isinstance(c, HeadResult) and c.table.equals(c.heads.table)
    assert c.meta["names"] == ("pre", "fine") and c.meta["threshold"] == 0.2
    # a generator of heads is read once, for both graphs
    assert c.meta["heads"] == [(0, 0), (1, 0)] and c.graph_b.number_of_edges() > 0
    assert c.plot().axes[0].get_title() == "pre vs fine"  # the union graph
    assert float(c["jsd"].max()) == pytest.approx(float(c.heads["jsd"].max()))
    again = pickle.loads(pickle.dumps(c))
    assert again == c and again.names == c.names and set(again.union.edges) == set(c.union.edges)
    s = compare_sets([a, a], [b, b], progress=False)
    assert isinstance(s, HeadResult) and s.meta["n_inputs"] == s.n_inputs == 2
    assert s.value_column() == "jsd_mean" and len(s.plot().axes) == 2  # map and colour bar
    f = flow_summary([a, b], progress=False)
    assert isinstance(f, HeadResult) and f.n_inputs == f.meta["n_inputs"] == 2
    assert f.value_column() == "edges_mean"
