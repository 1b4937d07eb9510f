"""FlowView: what it sends for the hand-built graphs of tests/flow_cases.py, recomputation
when the threshold or the head restriction changes, the collection mode."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from flow_cases import att_a, att_b, dirichlet_att

import attnkit
from attnkit.errors import InputError, TokenizationMismatchError
from attnkit.widgets import FlowView, Heatmap, _flow_wire
from attnkit.widgets import flow as _widgets_flow
from attnkit.widgets._codec import read
from attnkit.widgets._flow_wire import encode_graph
from attnkit.widgets.flow import ratings
from tolerances import assert_close, F32


def u16(d: dict, cols: int) -> list[list[int]]:
    assert d["dtype"] == "uint16" and d["shape"][1] == cols
    return read(d).tolist()


def test_encode_graph_of_the_hand_built_case():
    g = attnkit.attention_graph(att_a(), threshold=0.3)
    enc = encode_graph(g)
    # (upper level, upper position, lower position, model code 1 = the only model), layer by
    # layer from the source, strongest first within a layer
    assert u16(enc["edges"], 4) == [[2, 0, 1, 1], [2, 0, 2, 1], [1, 1, 2, 1], [1, 2, 3, 1],
                                    [1, 1, 0, 1], [1, 1, 1, 1], [1, 2, 1, 1]]
    heads = read(enc["edge_heads"])[:, 0].tolist()
    offsets = read(enc["edge_head_offsets"]).tolist()
    assert offsets == [0, 2, 3, 4, 6, 7, 8, 9]
    assert [heads[a:b] for a, b in itertools.pairwise(offsets)] == [[0, 1], [1], [0], [0, 1], [1], [1], [0]]
    assert_close(read(enc["edge_weight"]), [0.6, 0.35, 0.7, 0.7, 0.4, 0.4, 0.4], F32)
    assert u16(enc["nodes"], 3)[0] == [0, 0, 1] and enc["n_nodes"] == 7
    assert enc["source"] == [[2, 0]] and enc["n_edges_total"] == 7


def test_encode_graph_keeps_the_strongest_edges_of_each_layer():
    g = attnkit.attention_graph(att_a(), threshold=0.3)
    enc = encode_graph(g, max_edges=2)
    # layer 2 keeps both its edges; layer 1 its two strongest (the two of weight 0.7)
    assert u16(enc["edges"], 4) == [[2, 0, 1, 1], [2, 0, 2, 1], [1, 1, 2, 1], [1, 2, 3, 1]]
    assert (enc["n_edges"], enc["n_edges_total"]) == (4, 7)
    # only the nodes the kept edges touch (and the source)
    assert sorted(map(tuple, u16(enc["nodes"], 3))) == [(0, 2, 1), (0, 3, 1), (1, 1, 1), (1, 2, 1), (2, 0, 1)]


def test_the_typescript_reader_is_generated_from_the_wire_description():
    """js/src/flow/wire.gen.ts must be what `python -m attnkit.widgets._flow_wire` writes."""
    assert _flow_wire.GENERATED.read_text(encoding="utf-8") == _flow_wire.typescript()
    assert "export const EDGES = { upper: 0, from: 1, to: 2, model: 3, width: 4 } as const;" in _flow_wire.typescript()


def test_ratings_clamp_at_five_or_leave_the_source_out():
    scores = np.array([44.5, 0.4, 2.0, 5.6, 0.0, 3.2])
    roles = ["cls", "word", "word", "word", "word", "sep"]
    # the paper: influence clamped at 5 ([CLS] 44.5 -> 5, words keep their differences)
    assert ratings(scores, roles, [0], "clamp").tolist() == [5, 1, 2, 5, 0, 4]
    # relative: fifths of the largest word score (5.6); [CLS] and [SEP] out of the scale
    assert ratings(scores, roles, [0], "relative").tolist() == [5, 1, 2, 5, 0, 3]
    with pytest.raises(InputError, match="rating"):
        ratings(scores, roles, [0], "log")


def test_single_view_sends_graph_influence_and_head_counts():
    view = FlowView(att_a(), threshold=0.3)
    g = view.graph
    assert (view.n_nodes, view.n_edges) == (g.number_of_nodes(), g.number_of_edges()) == (7, 7)
    inf = attnkit.influence(g, alpha=0.5)
    assert_close(read(view.influence_a), inf["score"], F32)
    assert read(view.rating_a).tolist() == ratings(inf["score"].to_numpy(), view.roles, [0]).tolist()
    counts = read(view.head_counts_a).reshape(2, 2)
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
    np.testing.assert_array_equal(read(view.head_counts_b), attnkit.flow.head_edge_counts(cmp.graph_b))
    assert_close(read(view.influence_b), cmp.influence["score_b"], F32)
    other = att_b()
    other.tokens[1] = "x"
    with pytest.raises(TokenizationMismatchError):
        FlowView(att_a(), other=other)


def test_collection_mode_and_static_output(tmp_path):
    atts = [dirichlet_att(2, 3, n, 0.3, seed=n) for n in (5, 6, 7)]
    view = FlowView.collection(atts, threshold=0.2)
    summary = attnkit.flow_summary(atts, threshold=0.2)
    assert view.mode == "collection" and view.n_inputs == 3
    assert_close(read(view.head_counts_a).ravel(), summary.heads["edges_mean"], F32)
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


def test_default_threshold_is_chosen_for_a_readable_graph():
    att = dirichlet_att(2, 3, 40, 0.05, seed=4)
    view = FlowView(att)
    counts = {t: attnkit.attention_graph(att, threshold=t).number_of_edges() for t in _widgets_flow.THRESHOLDS}
    readable = [t for t, c in counts.items() if c <= _widgets_flow.READABLE_EDGES]
    assert view.threshold == min(readable)
    assert view.n_edges == counts[view.threshold] and "chosen" in view.threshold_note
    view.threshold = 0.3  # set by hand: no longer "chosen"
    assert view.threshold_note == ""
    assert FlowView(att, threshold=0.3).threshold_note == ""
    assert FlowView(att, threshold=0.3).threshold == 0.3  # passed: used as given


def test_edges_sets_how_many_edges_a_chosen_threshold_leaves():
    att = dirichlet_att(2, 3, 40, 0.05, seed=4)
    counts = {t: attnkit.attention_graph(att, threshold=t).number_of_edges() for t in _widgets_flow.THRESHOLDS}
    view = FlowView(att, edges=40)
    assert view.threshold == min(t for t, c in counts.items() if c <= 40)
    assert FlowView(att, threshold=0.25, edges=40).threshold == 0.25
    with pytest.raises(attnkit.errors.InputError, match="edges"):
        FlowView(att, edges=0)


@pytest.mark.realmodel
def test_minilm_defaults_are_readable_and_ratings_tell_words_apart(minilm):
    att = minilm.attend("The cat sat on the mat because it was tired of chasing the mouse.")
    view = FlowView(att)
    assert 20 <= view.n_edges <= _widgets_flow.READABLE_EDGES
    assert view.threshold_note.startswith("chosen") and f"{view.n_edges} edges" in view.threshold_note
    scores, rated = read(view.influence_a), read(view.rating_a)
    words = [i for i, role in enumerate(view.roles) if role == "word"]
    assert scores[0] > 5 and rated[0] == 5  # [CLS], the source, clamped at 5
    assert len({int(rated[i]) for i in words}) >= 3  # the words' ratings differ


@pytest.mark.realmodel
def test_minilm_default_threshold_is_off_the_cliff_and_its_note_goes_when_moved(minilm):
    """Issue 19: the default sat on a cliff (0.20 -> 136 edges, 0.21 -> 14), and after moving
    the slider the status still quoted the chosen threshold's edge count."""
    from attnkit import flow

    att = minilm.attend("The cat sat on the mat because it was tired of chasing the mouse.")
    view = FlowView(att)
    t = view.threshold

    def edges(x: float) -> int:
        return flow.attention_graph(att, threshold=round(x, 2)).number_of_edges()

    e, lower, upper = edges(t), edges(t - 0.01), edges(t + 0.01)
    assert e <= _widgets_flow.READABLE_EDGES
    assert lower - e <= max(3, e) and e - upper <= max(3, e / 2), (t, lower, e, upper)
    assert f"{e} edges" in view.threshold_note
    view.threshold = round(t + 0.02, 2)
    assert view.threshold_note == "" and view.n_edges == edges(t + 0.02)
    view.threshold = t  # back on the chosen one: its note holds again
    assert view.threshold_note.startswith("chosen")
