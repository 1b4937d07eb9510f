"""CircuitView and RoutesView: what they send for hand-built circuits (ak.circuit's schema)
and for the induction toy's flow routes, edge selection linked to a Heatmap and a ScoreView,
the comparison of two circuits, the static figure, and bad input."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import attnkit as ak
from attnkit.errors import InputError
from attnkit.testing import tiny_model
from attnkit.widgets._codec import read
from attnkit.widgets.circuit import PORTS
from tolerances import F32, assert_close


def circuit(edges, n_layers=2, n_heads=2, name=None):
    """A circuit in ak.circuit's schema from ``(up, down, input, score)`` edges."""
    g = nx.MultiDiGraph(n_layers=n_layers, n_heads=n_heads, tokens=None, metric="logprob",
                        method="hand")
    if name:
        g.graph["name"] = name

    def node(c):
        if c in g:
            return
        if c in ("embed", "pos_embed"):
            g.add_node(c, layer=-1, kind="embed")
        elif c == "logits":
            g.add_node(c, layer=n_layers, kind="logits")
        elif c.endswith("-mlp"):
            g.add_node(c, layer=int(c.split("-")[0]) - 1, kind="mlp")
        else:
            g.add_node(c, layer=int(c.split("-")[0]) - 1, kind="head")

    for up, down, port, score in edges:
        node(up)
        node(down)
        g.add_edge(up, down, key=port, score=score, input=port)
    return g


INDUCTION = [("1-1", "2-2", "k", 0.9), ("embed", "2-2", "v", 0.7), ("2-2", "logits", "out", 1.5),
             ("embed", "1-1", "q", -0.2), ("1-mlp", "logits", "out", 0.1)]


def test_circuit_view_sends_the_layered_graph():
    view = ak.CircuitView(circuit(INDUCTION))
    labels = view.node_labels
    rows = dict(zip(labels, read(view.node_rows).tolist()))
    # embeddings at the bottom, each layer's heads on its row, the logits on top
    assert rows == {"1-1": 1, "2-2": 2, "embed": 0, "logits": 3, "1-mlp": 1}
    order = dict(zip(labels, read(view.node_order).tolist()))
    assert order["1-1"] < order["1-mlp"]  # a layer's heads, then its MLP
    heads = dict(zip(labels, map(tuple, read(view.node_heads).tolist())))
    assert heads["2-2"] == (1, 1) and heads["embed"] == (-1, -1)
    # edges strongest first, each ending at the input it enters
    scores = read(view.edge_score)
    assert_close(scores, [1.5, 0.9, 0.7, -0.2, 0.1], F32)
    ports = [PORTS[p] for p in read(view.edge_port).tolist()]
    ends = [(labels[a], labels[b]) for a, b in zip(read(view.edge_from), read(view.edge_to))]
    assert list(zip(ends, ports)) == [(("2-2", "logits"), "out"), (("1-1", "2-2"), "k"),
                                      (("embed", "2-2"), "v"), (("embed", "1-1"), "q"),
                                      (("1-mlp", "logits"), "out")]
    assert view.edge_text[1] == "1-1 → 2-2.k: score +0.9"
    assert view.signed and not view.shared_x and view.n_edges == 5
    assert view.row_labels == ["embeddings", "layer 1", "layer 2", "logits"]


def test_clicking_an_edge_into_a_head_shows_it_in_a_linked_heatmap():
    model = tiny_model("llama")
    view = ak.CircuitView(circuit(INDUCTION))
    heatmap = view.link(ak.Heatmap(model.attend("The cat sat.")))
    view.select_edge("1-1", "2-2", "k")
    assert view.selected == [1, 1] and (heatmap.layer, heatmap.head) == (1, 1)
    view.select_edge("embed", "1-1")
    assert (heatmap.layer, heatmap.head) == (0, 0)
    # an edge into the logits enters no head: the selection stays
    view.select_edge("2-2", "logits")
    assert (heatmap.layer, heatmap.head) == (0, 0)
    with pytest.raises(InputError, match="no edge"):
        view.select_edge("1-1", "logits")


def test_a_key_edge_explains_its_head_in_a_linked_score_view():
    model = tiny_model("llama")
    text = "The cat sat on the mat."
    view = ak.CircuitView(circuit(INDUCTION), model=model, inputs=text)
    scores = view.link(ak.ScoreView(ak.score_attribution(model, text, layer=0, head=0,
                                                                 queries=[-1])))
    view.select_edge("1-1", "2-2", "k")
    want = ak.ScoreView(ak.score_attribution(model, text, layer=1, head=1, queries=[-1]))
    assert (scores.layer, scores.head, scores.query) == (1, 1, want.query)
    assert_close(read(scores.scores), read(want.scores), F32)
    # a value edge leaves the score view as it is
    view.select_edge("embed", "2-2", "v")
    assert (scores.layer, scores.head) == (1, 1)
    with pytest.raises(InputError, match="model and inputs"):
        ak.CircuitView(circuit(INDUCTION), model=model)
    with pytest.raises(InputError, match="needs the model"):
        ak.CircuitView(circuit(INDUCTION)).link(scores)


def test_two_circuits_compared_share_and_split_their_edges():
    a = circuit(INDUCTION, name="pre-trained")
    b = circuit([("1-1", "2-2", "k", 0.5), ("2-1", "logits", "out", 0.8),
                 ("embed", "2-2", "q", 0.3)], name="fine-tuned")
    view = ak.CircuitView(a, other=b)
    assert not view.signed and view.group_names == ["pre-trained", "fine-tuned"]
    labels = view.node_labels
    got = {(labels[u], labels[v], PORTS[p]): g for u, v, p, g in zip(
        read(view.edge_from), read(view.edge_to), read(view.edge_port), read(view.edge_group))}
    assert got[("1-1", "2-2", "k")] == 0  # in both
    assert got[("2-2", "logits", "out")] == 1  # only in the first
    assert got[("2-1", "logits", "out")] == 2  # only in the second
    assert got[("embed", "2-2", "q")] == 2  # same nodes, another input: not shared
    assert sum(g == 0 for g in got.values()) == 1 and len(got) == 7
    assert "1 shared, 4 only in pre-trained, 2 only in fine-tuned" == view.note
    i = [t.startswith("1-1 → 2-2.k") for t in view.edge_text].index(True)
    assert view.edge_text[i] == "1-1 → 2-2.k: pre-trained +0.9; fine-tuned +0.5"


def test_bad_circuits_are_refused_before_anything_is_drawn():
    with pytest.raises(InputError, match="MultiDiGraph"):
        ak.CircuitView(nx.DiGraph())
    with pytest.raises(InputError, match="no edges"):
        ak.CircuitView(nx.MultiDiGraph(n_layers=2, n_heads=2))
    bad = circuit(INDUCTION)
    bad.add_edge("embed", "2-2", key="x", score=0.1, input="x")
    with pytest.raises(InputError, match="key in"):
        ak.CircuitView(bad)
    nan = circuit([("1-1", "2-2", "k", float("nan"))])
    with pytest.raises(InputError, match="finite score"):
        ak.CircuitView(nan)
    with pytest.raises(InputError, match="different shapes"):
        ak.CircuitView(circuit(INDUCTION), other=circuit(INDUCTION, n_heads=4))


def test_user_text_stays_text_and_the_figure_saves(tmp_path):
    g = circuit([("embed", "1-1", "v", 0.4), ("1-1", "logits", "out", 0.6)])
    g.graph["name"] = "<b>bold</b>"
    view = ak.CircuitView(g, title="<script>alert(1)</script> $x$")
    assert view.title == "<script>alert(1)</script> $x$"
    for suffix in ("png", "svg"):
        assert view.save(tmp_path / f"c.{suffix}").stat().st_size > 1000
    assert "2 edges" in view._alt_text()


# ------------------------------------------------------------------ routes
N = 32


@pytest.fixture(scope="module")
def toy_routes():
    model = ak.toy.induction_model()
    item = ak.induction_inputs(model, 1, N, seed=1)[0]
    t = N + 9
    return model, item, t, ak.flow_routes(model, item, position=t, threshold=0.3)


def test_routes_view_draws_the_induction_route_over_the_tokens(toy_routes):
    model, item, t, g = toy_routes
    view = ak.RoutesView(g)
    assert view.shared_x and not view.signed and view.n_edges == g.number_of_edges()
    labels = view.node_labels
    rows = read(view.node_rows).tolist()
    order = read(view.node_order).tolist()
    nodes = {(int(r), int(o)) for r, o in zip(rows, order)}
    assert nodes == set(g.nodes)
    assert labels[order.index(float(t))] == g.nodes[(2, t)]["token"]
    # the edge from the induction key up to the prediction, through layer-2 heads
    i = view.select_edge((2, t), (1, t - N + 1))
    assert view.selected[0] == 1 and view.selected[1] in g.edges[(2, t), (1, t - N + 1)]["heads"]
    assert "position " + str(t - N + 1) in view.edge_text[i]
    heatmap = view.link(ak.Heatmap(model.attend(item)))
    view.select_edge((1, t - N + 1), (0, t - N))
    assert (heatmap.layer, heatmap.head) == (0, g.edges[(1, t - N + 1), (0, t - N)]["heads"][0])
    assert view.row_labels == ["embeddings", "layer 1", "layer 2"]


def test_routes_view_refuses_other_graphs_and_saves(toy_routes, tmp_path):
    *_, g = toy_routes
    with pytest.raises(InputError, match="flow_routes"):
        ak.RoutesView(nx.DiGraph())
    model = tiny_model("llama")
    lone = ak.flow_routes(model, "The cat sat.", threshold=0.999)
    assert list(lone.nodes) == [lone.graph["source"]]  # nothing above the threshold
    with pytest.raises(InputError, match="no edges"):
        ak.RoutesView(lone)
    view = ak.RoutesView(g)
    assert view.save(tmp_path / "routes.png").stat().st_size > 1000
    marks = read(view.node_marks)
    assert np.all(marks == 0)  # the toy's MLPs are zero: no MLP square


# ------------------------------------------------------------------ real circuits
@pytest.mark.slow
def test_circuit_view_of_the_toys_induction_circuit():
    """ak.circuit of the induction toy (EAP, two corruptions) drawn and compared: the view
    draws exactly the circuit's edges, and a click on an edge into a head selects it."""
    model = ak.toy.induction_model()
    inputs = ak.induction_inputs(model, 2, N, seed=1)
    other = ak.induction_inputs(model, 2, N, seed=2)
    replaced = [np.concatenate([a[:1], b[1:N + 1], a[N + 1:]]) for a, b in zip(inputs, other)]
    rng = np.random.default_rng(3)
    permuted = [np.concatenate([a[:1], a[1:N + 1][rng.permutation(N)], a[N + 1:]]) for a in inputs]
    loss = ak.interventions.loss(positions=slice(N + 2, 2 * N + 1))
    graphs = [ak.circuit(ak.edge_attribution(model, inputs, corr, metric=loss, method="eap",
                                             progress=False), top=10)
              for corr in (replaced, permuted)]
    view = ak.CircuitView(graphs[0])
    labels = view.node_labels
    drawn = {(labels[u], labels[v], PORTS[p]) for u, v, p in zip(
        read(view.edge_from), read(view.edge_to), read(view.edge_port))}
    assert drawn == set(graphs[0].edges(keys=True)) and view.n_edges == 10
    for u, v, k in graphs[0].edges(keys=True):  # an edge into a head selects that head
        if k in ("q", "k", "v"):
            view.select_edge(u, v, k)
            assert view.selected == [int(x) - 1 for x in v.split("-")]
    both = ak.CircuitView(graphs[0], other=graphs[1], names=("replaced", "permuted"))
    shared = set(graphs[0].edges(keys=True)) & set(graphs[1].edges(keys=True))
    groups = read(both.edge_group).tolist()
    assert groups.count(0) == len(shared)
    assert len(groups) == len(set(graphs[0].edges(keys=True)) | set(graphs[1].edges(keys=True)))


def test_a_grouped_query_circuit_draws_each_shared_key_value_head_between_its_query_heads():
    """A tiny Llama with 4 query heads on 2 key/value heads: ak.circuit's "L-kvG" nodes sit in
    their layer's row between the query heads they serve, and an edge into one selects the
    first of them in a linked heatmap."""
    model = tiny_model("llama", heads=4, kv_heads=2)
    clean, corrupted = [[5, 40, 41, 42, 43, 44]], [[5, 90, 41, 42, 43, 44]]
    s = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss())
    G = ak.circuit(s, top=len(s.table))
    view = ak.CircuitView(G)
    heatmap = view.link(ak.Heatmap(model.attend("The cat sat.")))
    labels = view.node_labels
    rows = dict(zip(labels, read(view.node_rows).tolist()))
    order = dict(zip(labels, read(view.node_order).tolist()))
    heads = dict(zip(labels, map(tuple, read(view.node_heads).tolist())))
    assert rows["2-kv2"] == rows["2-3"] == 2 and rows["1-kv1"] == 1
    assert order["2-3"] < order["2-kv2"] < order["2-4"] and order["2-kv1"] == 0.5
    assert heads["2-kv2"] == (1, 2)
    i = view.select_edge("1-1", "2-kv2", "v")
    assert view.edge_text[i].startswith("1-1 → 2-kv2.v: score ")
    assert view.edge_text[i].endswith("(the key/value head of 2-3, 2-4)")
    assert (heatmap.layer, heatmap.head) == (1, 2)
