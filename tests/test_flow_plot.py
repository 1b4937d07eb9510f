"""Figures of attention graphs: what they draw, checked on the hand-built graphs."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from attnkit.errors import InputError  # noqa: E402
from attnkit.flow import attention_graph, compare, influence  # noqa: E402
from attnkit.plot.flow import (MODEL_COLORS, plot_comparison, plot_flow_graph,  # noqa: E402
                               plot_flow_radial, plot_influence, radial_positions)
from flow_cases import TOKENS, att_a, att_b  # noqa: E402


def edges_of(fig):
    (lines,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    return lines


def texts(fig):
    ax = fig.axes[0]
    return [t.get_text() for t in ax.get_xticklabels()] + [t.get_text() for t in ax.texts]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_layered_graph_draws_each_edge_at_its_levels():
    g = attention_graph(att_a())
    fig = plot_flow_graph(g)
    segs = edges_of(fig).get_segments()
    assert len(segs) == g.number_of_edges() == 7
    drawn = {(tuple(s[0]), tuple(s[1])) for s in segs}
    # x = position, y = level
    assert ((0.0, 2.0), (2.0, 1.0)) in drawn and ((2.0, 1.0), (3.0, 0.0)) in drawn
    assert texts(fig)[:4] == TOKENS
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["input", "L1", "L2"]


def test_given_axes_are_used():
    fig0, ax = plt.subplots()
    fig = plot_flow_graph(attention_graph(att_a()), ax=ax)
    assert fig is fig0 and fig.axes[0] is ax


def test_radial_layout_rings_and_labels():
    g = attention_graph(att_a())
    pos = radial_positions(g)
    # the source's level is the inner ring (radius 1), the inputs the outer (radius 3)
    assert np.hypot(*pos[(2, 0)]) == pytest.approx(1.0)
    assert np.hypot(*pos[(0, 3)]) == pytest.approx(3.0)
    assert pos[(0, 0)] == pytest.approx((0.0, 3.0))  # position 0 at the top
    fig = plot_flow_radial(g)
    assert len(edges_of(fig).get_segments()) == 7
    assert [t.get_text() for t in fig.axes[0].texts] == TOKENS


def test_comparison_colours_edges_by_model():
    c = compare(att_a(), att_b())
    fig = plot_comparison(c)
    lines = edges_of(fig)
    colours = [tuple(np.round(col[:3], 3)) for col in lines.get_colors()]
    keys = list(c.union.edges)
    want = {m: tuple(np.round(to_rgb(MODEL_COLORS[m]), 3)) for m in MODEL_COLORS}
    for key, col in zip(keys, colours):
        assert col == want[c.union.edges[key]["model"]]
    assert {t.get_text() for t in fig.axes[0].get_legend().get_texts()} == {
        "both models", "only pre", "only fine"}
    fig = plot_comparison(c, layout="radial")
    assert len(edges_of(fig).get_segments()) == c.union.number_of_edges()
    with pytest.raises(InputError, match="layout"):
        plot_comparison(c, layout="circle")


def test_influence_bars_heights_and_ratings():
    inf = influence(attention_graph(att_a()))
    fig = plot_influence(inf)
    bars = fig.axes[0].patches
    assert [b.get_height() for b in bars] == pytest.approx([1 / 3, 2, 1, 2 / 3])
    assert [t.get_text() for t in fig.axes[0].texts] == ["1", "2", "1", "1"]  # min(5, ceil(score))
    c = compare(att_a(), att_b())
    fig = plot_influence(c.influence, names=c.names)
    assert len(fig.axes[0].patches) == 8
    with pytest.raises(InputError, match="score"):
        plot_influence(inf.drop(columns="score"))


def test_plot_rejects_other_graphs():
    import networkx as nx
    with pytest.raises(InputError, match="attention graph"):
        plot_flow_graph(nx.DiGraph())
