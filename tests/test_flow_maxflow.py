"""Rollout and attention flow: hand-computed cases and exactness against networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from attnkit.errors import InputError
from attnkit.flow import (attention_flow, flow_network, layered_max_flow, residual_attention,
                          rollout)
from flow_cases import dirichlet_att, make_att

pytestmark = pytest.mark.numerics

# One head, two tokens. Layer 1: A1 = [[1, 0], [.5, .5]] -> Â1 = [[1, 0], [.25, .75]];
# layer 2: A2 = [[0, 1], [1, 0]] -> Â2 = [[.5, .5], [.5, .5]].
A1 = [[1.0, 0.0], [0.5, 0.5]]
A2 = [[0.0, 1.0], [1.0, 0.0]]


def small():
    return make_att(np.array([[A1], [A2]]), ["x", "y"])


def test_residual_attention_by_hand():
    a = residual_attention(small())
    assert a[0] == pytest.approx(np.array([[1, 0], [0.25, 0.75]]))
    assert a[1] == pytest.approx(np.full((2, 2), 0.5))
    # heads are averaged before the identity is mixed in
    att = make_att(np.array([[A1, np.eye(2)]]), ["x", "y"])
    assert residual_attention(att)[0] == pytest.approx(np.array([[1, 0], [0.125, 0.875]]))
    # rows are renormalised (e.g. float16 maps that sum to 0.995)
    att = make_att(np.array([[[[0.4975, 0.4975], [0.0, 0.995]]]]), ["x", "y"])
    assert residual_attention(att, residual=0.0)[0] == pytest.approx(
        np.array([[0.5, 0.5], [0, 1]]))
    with pytest.raises(InputError, match="residual"):
        residual_attention(small(), residual=1.5)


def test_rollout_by_hand():
    r = rollout(small())
    # R2 = Â2 @ Â1 = [[.5*1 + .5*.25, .5*0 + .5*.75]] for both rows
    assert r == pytest.approx(np.array([[0.625, 0.375], [0.625, 0.375]]))
    every = rollout(small(), all_layers=True)
    assert every.shape == (2, 2, 2)
    assert every[0] == pytest.approx(residual_attention(small())[0])
    assert every[-1] == pytest.approx(r)


def test_rollout_rows_sum_to_one():
    r = rollout(dirichlet_att(6, 4, 9, 0.3, seed=1), all_layers=True)
    assert r.sum(-1) == pytest.approx(np.ones((6, 9)))


def test_flow_by_hand_two_layers():
    # from (2, x): to input x via (1, x): min(.5, 1) + via (1, y): min(.5, .25) = .75;
    # to input y via (1, x): min(.5, 0) + via (1, y): min(.5, .75) = .5
    f = attention_flow(small(), sources="all")
    assert f == pytest.approx(np.array([[0.75, 0.5], [0.75, 0.5]]), abs=1e-12)
    assert attention_flow(small(), sources=0) == pytest.approx([0.75, 0.5], abs=1e-12)
    assert attention_flow(small(), sources=[1]).shape == (1, 2)
    # default source: no [CLS] here, so the last token
    assert attention_flow(small()) == pytest.approx(f[1], abs=1e-12)
    # not the same as rollout, which multiplies along paths
    assert not np.allclose(f, rollout(small()))


def test_layered_max_flow_shared_bottleneck():
    # source -> both level-2 nodes (1 each) -> only level-1 node 0 (1 each) -> sink (0.5):
    # two disjoint-looking routes share the bottleneck edge, so the max flow is 0.5
    caps = np.zeros((3, 2, 2))
    caps[2, 0] = [1.0, 1.0]
    caps[1] = [[1.0, 0.0], [1.0, 0.0]]
    caps[0][:, 0] = [0.5, 1.0]
    lower, upper = layered_max_flow(caps, starts=[0], ends=[0])
    assert lower[0] == pytest.approx(0.5, abs=1e-12) and upper[0] == pytest.approx(0.5)
    # and nothing reaches sink 1, whose column is empty
    lower, upper = layered_max_flow(caps, starts=[0, 1], ends=[1, 0])
    assert lower.tolist() == [0.0, 0.0] and upper.tolist() == [0.0, 0.0]


def test_single_layer_flow_is_the_matrix():
    att = dirichlet_att(1, 3, 5, 1.0, seed=2)
    assert attention_flow(att, sources="all") == pytest.approx(residual_attention(att)[0], abs=1e-15)
    one = make_att(np.ones((3, 2, 1, 1)), ["x"])
    assert attention_flow(one).tolist() == [1.0]


@pytest.mark.parametrize("n_layers,n,conc,causal,seed", [
    (3, 5, 1.0, False, 0),
    (4, 6, 0.1, False, 1),
    (5, 6, 0.03, False, 2),
    (4, 7, 0.2, True, 3),
    (12, 6, 0.5, False, 4),
])
def test_flow_equals_networkx_max_flow(n_layers, n, conc, causal, seed):
    att = dirichlet_att(n_layers, 3, n, conc, seed=seed, causal=causal)
    lower, upper = attention_flow(att, sources="all", return_bounds=True)
    g = flow_network(att)
    ref = np.array([[nx.maximum_flow_value(g, (n_layers, s), (0, t)) for t in range(n)]
                    for s in range(n)])
    assert lower == pytest.approx(ref, rel=1e-6, abs=1e-12)
    # the certified bracket holds the reference and is tight
    assert np.all(lower <= ref * (1 + 1e-12) + 1e-15)
    assert np.all(upper >= ref * (1 - 1e-12) - 1e-15)
    assert np.max((upper - lower) / np.maximum(ref, 1e-300)) < 1e-9


def test_flow_network_matches_residual_attention():
    att = dirichlet_att(2, 2, 3, 1.0, seed=5)
    g = flow_network(att)
    a = residual_attention(att)
    assert g.number_of_nodes() == 9 and g.number_of_edges() == 18
    assert g.edges[(2, 1), (1, 2)]["capacity"] == pytest.approx(a[1, 1, 2])
    assert g.nodes[(0, 0)]["token"] == "[CLS]"


def test_flow_sources_validation():
    att = small()
    with pytest.raises(InputError, match="outside"):
        attention_flow(att, sources=[2])
    with pytest.raises(InputError, match="empty"):
        attention_flow(att, sources=[])
    with pytest.raises(InputError, match="'all'"):
        attention_flow(att, sources="cls")


def test_flow_on_tiny_bert_matches_networkx(tiny_bert):
    att = tiny_bert.attend("The cat sat on the mat.")
    cls = int(att.cls_positions[0])
    values = attention_flow(att)  # from [CLS] by default
    assert values == pytest.approx(attention_flow(att, sources=cls))
    g = flow_network(att)
    ref = [nx.maximum_flow_value(g, (att.n_layers, cls), (0, t)) for t in range(len(att))]
    assert values == pytest.approx(ref, rel=1e-6)


@pytest.mark.realmodel
def test_flow_on_bundled_model_matches_networkx(minilm):
    att = minilm.attend("The cat sat on the mat.")
    values, upper = attention_flow(att, return_bounds=True)
    g = flow_network(att)
    ref = [nx.maximum_flow_value(g, (att.n_layers, 0), (0, t)) for t in range(len(att))]
    assert values == pytest.approx(ref, rel=1e-6)
    assert np.all(upper - values <= 1e-9 * values)
