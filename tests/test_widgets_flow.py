"""FlowView: what it sends for the hand-built graphs of tests/flow_cases.py, recomputation
when the threshold or the head restriction changes, the collection mode."""

from __future__ import annotations

import numpy as np
import pytest

import attnkit
from attnkit.errors import InputError, TokenizationMismatchError
from attnkit.widgets import FlowView, Heatmap
from attnkit.widgets.flow import encode_graph

from flow_cases import att_a, att_b, dirichlet_att


def u16(b: bytes, cols: int) -> list[list[int]]:
    return np.frombuffer(b, dtype="<u2").reshape(-1, cols).tolist()


def test_encode_graph_of_the_hand_built_case():
    g = attnkit.attention_graph(att_a(), threshold=0.3)
    enc = encode_graph(g)
    # (upper level, upper position, lower position, model code 1 = the only model)
    assert u16(enc["edges"], 4) == [[2, 0, 1, 1], [2, 0, 2, 1], [1, 1, 0, 1], [1, 1, 1, 1],
                                    [1, 1, 2, 1], [1, 2, 1, 1], [1, 2, 3, 1]]
    heads = np.frombuffer(enc["edge_heads"], dtype=np.uint8).reshape(-1, 2)[:, 0].tolist()
    offsets = np.frombuffer(enc["edge_head_offsets"], dtype="<u4").tolist()
    assert offsets == [0, 2, 3, 4, 5, 6, 7, 9]
    assert [heads[a:b] for a, b in zip(offsets, offsets[1:])] == [[0, 1], [1], [1], [1], [0], [0], [0, 1]]
    w = np.frombuffer(enc["edge_weight"], dtype="<f2").astype(float)
    np.testing.assert_allclose(w, [0.6, 0.35, 0.4, 0.4, 0.7, 0.4, 0.7], atol=1e-3)
    assert u16(enc["nodes"], 3)[0] == [0, 0, 1] and enc["n_nodes"] == 7
    assert enc["source"] == [[2, 0]]


def test_single_view_sends_graph_influence_and_head_counts():
    view = FlowView(att_a(), threshold=0.3)
    g = view.graph
    assert (view.n_nodes, view.n_edges) == (g.number_of_nodes(), g.number_of_edges()) == (7, 7)
    inf = attnkit.influence(g, alpha=0.5)
    np.testing.assert_allclose(np.frombuffer(view.influence_a, dtype="<f4"), inf["score"], rtol=1e-6)
    assert np.frombuffer(view.rating_a, dtype=np.uint8).tolist() == inf["rating"].tolist()
    counts = np.frombuffer(view.head_counts_a, dtype="<f4").reshape(2, 2)
    # layer 0: head 0 makes a->b, b->a, b->[SEP]; head 1 a->[CLS], a->a, b->[SEP];
    # layer 1: head 0 [CLS]->a; head 1 [CLS]->a, [CLS]->b
    assert counts.tolist() == [[3, 3], [1, 2]]
    assert view.mode == "single" and "[CLS]" in view.title


def test_threshold_and_head_restriction_recompute_the_graph():
    view = FlowView(att_a(), threshold=0.3)
    view.set_state({"threshold": 0.5})  # the slider
    assert view.n_edges == 2  # [CLS] -> a (head 0, 0.6), then a -> b (head 0, 0.7)
    view.set_state({"threshold": 0.3, "restrict": [[0, 1]]})  # a head glyph click
    # layer 0 only through head 1: a -> [CLS], a -> a, b -> [SEP]; layer 1 unchanged
    assert view.allowed_heads() == [(0, 1), (1, 0), (1, 1)]
    assert view.n_edges == 5
    view.restrict = []
    assert view.n_edges == 7
    with pytest.raises(InputError):
        view.restrict = [[2, 0]]
    with pytest.raises(InputError):
        view.threshold = 1.0


def test_compare_colours_and_split_counts():
    view = FlowView(att_a(), other=att_b(), threshold=0.3)
    cmp = attnkit.compare(att_a(), att_b(), threshold=0.3)
    assert view.mode == "compare" and view.names == ["pre", "fine"]
    edges = {(e[0], e[1], e[2]): e[3] for e in u16(view.edges, 4)}
    for (u, v, d) in cmp.union.edges(data=True):
        assert edges[(u[0], u[1], v[1])] == {"both": 0, "a": 1, "b": 2}[d["model"]]
    assert edges[(2, 0, 2)] == 1 and edges[(2, 0, 3)] == 2  # b only in pre, [SEP] only in fine
    np.testing.assert_array_equal(np.frombuffer(view.head_counts_b, dtype="<f4").reshape(2, 2),
                                  attnkit.flow.head_edge_counts(cmp.graph_b))
    np.testing.assert_allclose(np.frombuffer(view.influence_b, dtype="<f4"), cmp.influence["score_b"])
    other = att_b()
    other.tokens[1] = "x"
    with pytest.raises(TokenizationMismatchError):
        FlowView(att_a(), other=other)


def test_collection_mode_and_static_output(tmp_path):
    atts = [dirichlet_att(2, 3, n, 0.3, seed=n) for n in (5, 6, 7)]
    view = FlowView.collection(atts, threshold=0.2)
    summary = attnkit.flow_summary(atts, threshold=0.2)
    assert view.mode == "collection" and view.n_inputs == 3
    np.testing.assert_allclose(np.frombuffer(view.head_counts_a, dtype="<f4"), summary.heads["edges_mean"], rtol=1e-6)
    assert view.categories == list(summary.categories.index)
    assert view.top_tokens == list(summary.tokens.index[:15])
    for w in (view, FlowView(att_a()), FlowView(att_a(), other=att_b())):
        data, _ = w._repr_mimebundle_()
        assert data["text/html"].startswith('<img src="data:image/png;base64,')
        assert w.save(tmp_path / "f.svg").stat().st_size > 1000


def test_flow_view_links_a_heatmap():
    view = FlowView(att_a())
    hm = view.link(Heatmap(att_a()))
    view.set_state({"selected": [1, 1], "restrict": [[1, 1]]})
    assert (hm.layer, hm.head) == (1, 1)
