"""Attention graph, brushing, path queries and influence on hand-built attention
(tests/flow_cases.py spells out every edge)."""

from __future__ import annotations

import numpy as np
import pytest

from attnkit.errors import InputError
from attnkit.flow import (attention_graph, head_counts, influence, paths_between,
                          resolve_source, subgraph_through)
from flow_cases import TOKENS, att_a, dirichlet_att, make_att, two_layer_maps

pytestmark = pytest.mark.numerics

EXPECTED_EDGES = {
    ((2, 0), (1, 1)): ([0, 1], [0.6, 0.5]),
    ((2, 0), (1, 2)): ([1], [0.35]),
    ((1, 1), (0, 2)): ([0], [0.7]),
    ((1, 1), (0, 0)): ([1], [0.4]),
    ((1, 1), (0, 1)): ([1], [0.4]),
    ((1, 2), (0, 1)): ([0], [0.4]),
    ((1, 2), (0, 3)): ([0, 1], [0.4, 0.7]),
}


def test_graph_edges_heads_and_weights():
    g = attention_graph(att_a(), threshold=0.3)
    assert set(g.edges) == set(EXPECTED_EDGES)
    for e, (heads, weights) in EXPECTED_EDGES.items():
        d = g.edges[e]
        assert d["heads"] == heads
        assert d["weights"] == pytest.approx(weights, abs=1e-6)
        assert d["weight"] == pytest.approx(max(weights), abs=1e-6)
    # (1, 0) and (1, 3) attend strongly but are never reached from [CLS]
    assert (1, 0) not in g and (1, 3) not in g
    assert set(g.nodes) == {(2, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2), (0, 3)}


def test_graph_attributes_and_nodes():
    g = attention_graph(att_a(), threshold=0.3)
    assert g.graph["tokens"] == TOKENS
    assert g.graph["n_layers"] == 2 and g.graph["n_heads"] == 2
    assert g.graph["source"] == [(2, 0)]
    assert g.graph["threshold"] == 0.3
    assert g.nodes[(1, 2)] == {"level": 1, "position": 2, "token": "b", "role": "word"}
    assert g.nodes[(2, 0)]["token"] == "[CLS]"


def test_threshold_is_strict_and_prunes():
    # at 0.45 only weights 0.6, 0.5, 0.7 survive: (2,0)->(1,1), then (1,1)->(0,2)
    g = attention_graph(att_a(), threshold=0.45)
    assert set(g.edges) == {((2, 0), (1, 1)), ((1, 1), (0, 2))}
    # a uniform 0.25 row never passes a 0.25 threshold (strictly greater)
    m = np.full((1, 1, 4, 4), 0.25)
    g = attention_graph(make_att(m, roles=["cls", "word", "word", "sep"]), threshold=0.25)
    assert g.number_of_edges() == 0 and list(g.nodes) == [(1, 0)]


def test_heads_filter():
    # only head 0 in the top layer and head 1 in the bottom layer
    g = attention_graph(att_a(), threshold=0.3, heads=[(1, 0), (0, 1)])
    assert set(g.edges) == {((2, 0), (1, 1)), ((1, 1), (0, 0)), ((1, 1), (0, 1))}
    assert g.edges[(2, 0), (1, 1)]["heads"] == [0]
    assert g.graph["heads"] == [(1, 0), (0, 1)]
    with pytest.raises(InputError, match=r"heads: (layer|head) -?\d+ is outside 0\.\."):
        attention_graph(att_a(), heads=[(2, 0)])


def test_sources():
    att = att_a()
    assert resolve_source(att) == [(2, 0)]
    assert resolve_source(att, sources=2) == [(2, 2)]
    assert resolve_source(att, sources=[1, 2]) == [(2, 1), (2, 2)]
    assert resolve_source(att, sources=[(1, 1)]) == [(1, 1)]
    # from (1, 1) alone: its three edges
    g = attention_graph(att, sources=[(1, 1)])
    assert set(g.edges) == {((1, 1), (0, 2)), ((1, 1), (0, 0)), ((1, 1), (0, 1))}
    # causal models and inputs without [CLS] start from the last token
    causal = make_att(two_layer_maps(), TOKENS, ["cls", "word", "word", "sep"], causal=True)
    assert resolve_source(causal) == [(2, 3)]
    no_cls = make_att(two_layer_maps(), TOKENS, ["word"] * 4)
    assert resolve_source(no_cls) == [(2, 3)]
    with pytest.raises(InputError, match=r"sources: level 3 is outside 0\.\.2"):
        resolve_source(att, sources=[(3, 0)])
    with pytest.raises(InputError, match="threshold"):
        attention_graph(att, threshold=1.0)


def test_subgraph_through_one_and_several():
    g = attention_graph(att_a())
    sub = subgraph_through(g, (1, 2))
    assert set(sub.edges) == {((2, 0), (1, 2)), ((1, 2), (0, 1)), ((1, 2), (0, 3))}
    assert sub.graph["selected"] == [(1, 2)]
    assert sub.edges[(1, 2), (0, 3)]["heads"] == [0, 1]
    # input position 1 ("a") is reached through both (1, 1) and (1, 2)
    sub = subgraph_through(g, 1)
    assert set(sub.edges) == {((2, 0), (1, 1)), ((2, 0), (1, 2)),
                              ((1, 1), (0, 1)), ((1, 2), (0, 1))}
    # intersection of the subgraphs through (1, 1) and input "b" (position 2)
    sub = subgraph_through(g, [(1, 1), 2])
    assert set(sub.edges) == {((2, 0), (1, 1)), ((1, 1), (0, 2))}
    with pytest.raises(InputError, match="not in the attention graph"):
        subgraph_through(g, (1, 3))


def test_paths_between():
    g = attention_graph(att_a())
    q = paths_between(g, 3, (2, 0))  # order does not matter: the upper node starts
    assert (q.upper, q.lower, q.n_paths) == ((2, 0), (0, 3), 1)
    assert q.tokens.to_dict("records") == [{"level": 1, "position": 2, "token": "b"}]
    assert q.edges[["layer", "head", "from_position", "to_position"]].values.tolist() == [
        [1, 1, 0, 2], [0, 0, 2, 3], [0, 1, 2, 3]]
    assert q.edges["weight"].tolist() == pytest.approx([0.35, 0.4, 0.7], abs=1e-6)
    # two paths to "a": through a and through b at level 1
    q = paths_between(g, (2, 0), (0, 1))
    assert q.n_paths == 2
    assert q.tokens["position"].tolist() == [1, 2]
    # no path from (1, 2) to (0, 0)
    q = paths_between(g, (1, 2), (0, 0))
    assert q.n_paths == 0 and q.edges.empty and q.tokens.empty
    with pytest.raises(InputError, match="same level"):
        paths_between(g, (0, 1), (0, 2))


def test_head_counts_and_influence_by_hand():
    g = attention_graph(att_a())
    counts = head_counts(g)
    # c_1 (maps index 0) and c_2 (index 1) of tests/flow_cases.py
    assert counts.tolist() == [[1, 2, 1, 2], [0, 2, 1, 0]]
    inf = influence(g, alpha=0.5)
    # I(w) = (1 * c_2 + 0.5 * c_1) / 1.5
    assert inf["score"].tolist() == pytest.approx([1 / 3, 2.0, 1.0, 2 / 3])
    # rating = min(5, ceil(I)), as the paper and the FlowView: 1, 2, 1, 1
    assert inf["rating"].tolist() == [1, 2, 1, 1]
    # relative: ceil(5 I / max over words) (the source [CLS] and [SEP] left out): 1, 5, 3, 2
    assert influence(g, alpha=0.5, rating="relative")["rating"].tolist() == [1, 5, 3, 2]
    assert inf["token"].tolist() == TOKENS
    assert inf["role"].tolist() == ["cls", "word", "word", "sep"]
    assert inf["heads"].tolist() == [1, 4, 2, 2]
    assert inf.index.name == "position"
    # alpha = 1: plain mean over layers; small alpha: the last layer dominates
    assert influence(g, alpha=1.0)["score"].tolist() == pytest.approx([0.5, 2.0, 1.0, 1.0])
    low = influence(g, alpha=1e-6)
    assert low["score"].tolist() == pytest.approx([0, 2, 1, 0], abs=1e-5)
    with pytest.raises(InputError, match="alpha"):
        influence(g, alpha=0)


def test_rating_zero_for_unreached_tokens():
    g = attention_graph(att_a(), threshold=0.45)
    inf = influence(g)
    # a: c_2 = 2 -> I = 4/3, rating ceil(4/3) = 2; b: c_1 = 1 -> I = 1/3, rating 1
    assert inf["rating"].tolist() == [0, 2, 1, 0]
    assert inf["score"].tolist() == pytest.approx([0, 4 / 3, 1 / 3, 0])


def test_graph_on_tiny_bert(tiny_bert):
    att = tiny_bert.attend("The cat sat on the mat.")
    g = attention_graph(att, threshold=0.1)
    cls = int(att.cls_positions[0])
    assert g.graph["source"] == [(att.n_layers, cls)]
    # every node is reached from the source, and every edge is a real head above 0.1
    import networkx as nx
    assert set(g.nodes) == nx.descendants(g, (att.n_layers, cls)) | {(att.n_layers, cls)}
    for (lv, q), (_, k), d in g.edges(data=True):
        for h, w in zip(d["heads"], d["weights"]):
            assert att.maps[lv - 1, h, q, k] == pytest.approx(w) and w > 0.1
    assert len(influence(g)) == len(att)


def test_graph_matches_maps_on_random_input():
    att = dirichlet_att(6, 12, 40, 0.1, seed=3)
    g = attention_graph(att, threshold=0.3)
    maps = att.maps
    assert g.number_of_edges() > 20
    # each edge carries exactly the heads above threshold for its (query, key) ...
    for (lv, q), (_, k), hs in g.edges(data="heads"):
        assert hs == np.flatnonzero(maps[lv - 1, :, q, k] > 0.3).tolist()
    # ... and every reached node has all its above-threshold keys as successors
    for lv, q in g.nodes:
        if lv > 0:
            keys = np.flatnonzero((maps[lv - 1, :, q, :] > 0.3).any(axis=0))
            assert sorted(k for _, k in g.successors((lv, q))) == keys.tolist()
