"""Figures of attention graphs (DeRose et al. 2020): layered and radial layouts, the colouring
of a pre-trained vs fine-tuned comparison, and influence bars over the tokens.

Every function takes ``ax=None`` (a new figure is made when omitted) and returns the
Figure. Layers are labelled 1-indexed ("L1" = output of the first layer, "input" = level 0).
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .._compat import renamed
from ..errors import InputError
from .common import figure_axes

#: Colours of the comparison: shared by both models, only model a, only model b (the
#: paper's turquoise for the pre-trained and purple for the fine-tuned model).
MODEL_COLORS = {"both": "#8c8c8c", "a": "#1a9e9e", "b": "#7b3294"}
SINGLE_COLOR = "#1a6e9e"
ROLE_COLORS = {"cls": "#d95f02", "sep": "#e6ab02", "special": "#999999", "word": "#1a6e9e"}


def _check_graph(g) -> tuple[int, list[str]]:
    if not isinstance(g, nx.DiGraph) or "n_layers" not in g.graph or "tokens" not in g.graph:
        raise InputError("Expected an attention graph from attnkit.attention_graph (or the "
                         "union graph of attnkit.compare).")
    return int(g.graph["n_layers"]), list(g.graph["tokens"])


def _edge_style(g, color_by_model: bool):
    segs_key, colors, widths, alphas = [], [], [], []
    for u, v, d in g.edges(data=True):
        segs_key.append((u, v))
        w = float(d.get("weight", 1.0))
        colors.append(MODEL_COLORS[d["model"]] if color_by_model else SINGLE_COLOR)
        widths.append(0.4 + 1.8 * w)
        alphas.append(0.3 + 0.6 * w)
    return segs_key, colors, widths, alphas


def _draw(g, ax, pos_of, color_by_model: bool, path_of=None):
    keys, colors, widths, alphas = _edge_style(g, color_by_model)
    if path_of is None:
        segs = [(pos_of(u), pos_of(v)) for u, v in keys]
    else:
        segs = [path_of(u, v) for u, v in keys]
    rgba = [(*plt.matplotlib.colors.to_rgb(c), a) for c, a in zip(colors, alphas)]
    lines = LineCollection(segs, colors=rgba, linewidths=widths, zorder=1)
    lines.set_gid("flow-edges")
    ax.add_collection(lines)
    nodes = list(g.nodes)
    if nodes:
        xy = np.array([pos_of(v) for v in nodes])
        if color_by_model:
            fc = [MODEL_COLORS[g.nodes[v].get("model", "both")] for v in nodes]
        else:
            fc = [ROLE_COLORS.get(g.nodes[v].get("role", "word"), SINGLE_COLOR) for v in nodes]
        ax.scatter(xy[:, 0], xy[:, 1], s=22, c=fc, zorder=2, edgecolors="white",
                   linewidths=0.5)
    return lines


def _legend(ax, g, color_by_model: bool, loc: str = "upper right"):
    if color_by_model:
        a, b = g.graph.get("models", ("a", "b"))
        labels = {"both": "both models", "a": f"only {a}", "b": f"only {b}"}
        handles = [Line2D([], [], color=MODEL_COLORS[k], lw=2, label=labels[k])
                   for k in ("both", "a", "b")]
        ax.legend(handles=handles, loc=loc, fontsize=8, frameon=False)


@renamed(positional=("ax", "title"), g="graph")
def plot_flow_graph(graph: nx.DiGraph, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Layered drawing of an attention graph: x = token position, y = level (input at
    the bottom, the source's layer at the top); line width and opacity follow the edge
    ``weight``. A comparison's union graph is coloured by ``model``.

    Parameters
    ----------
    graph : networkx.DiGraph
        An :func:`attnkit.attention_graph`, or the ``union`` graph of :func:`attnkit.compare`.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    title : str, optional
        The title (default: the graph's threshold).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a graph that is not an attention graph.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_flow_graph
    >>> from attnkit.testing import tiny_model
    >>> graph = ak.attention_graph(tiny_model("bert").attend("The cat sat."), threshold=0.1)
    >>> fig = plot_flow_graph(graph, title="from [CLS]")
    >>> fig.axes[0].get_title()
    'from [CLS]'
    """
    g = graph
    n_layers, tokens = _check_graph(g)
    n = len(tokens)
    by_model = "models" in g.graph
    fig, ax = figure_axes(ax, (max(4.0, 0.45 * n + 1.5), 0.55 * (n_layers + 1) + 1.8), pyplot=True)
    _draw(g, ax, lambda v: (float(v[1]), float(v[0])), by_model)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(-0.5, n_layers + 0.5)
    ax.set_xticks(range(n), tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(n_layers + 1), ["input"] + [f"L{lv}" for lv in range(1, n_layers + 1)],
                  fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    _legend(ax, g, by_model)
    ax.set_title(title or f"attention graph (threshold {g.graph.get('threshold', '?')})")
    return fig


def _polar(level: int, pos: int, n_layers: int, n: int) -> tuple[float, float]:
    return 1.0 + (n_layers - level), np.pi / 2 - 2 * np.pi * pos / max(n, 1)


def radial_positions(g: nx.DiGraph) -> dict:
    """Node -> (x, y) of the radial layout: one ring per level, the source's level on the
    innermost ring (radius 1) and the input tokens on the outermost (radius L + 1);
    positions go clockwise from the top."""
    n_layers, tokens = _check_graph(g)
    out = {}
    for level, pos in g.nodes:
        r, theta = _polar(level, pos, n_layers, len(tokens))
        out[(level, pos)] = (r * np.cos(theta), r * np.sin(theta))
    return out


def _radial_path(n_layers: int, n: int, steps: int = 12):
    """An edge between adjacent rings as a spiral arc (radius and angle interpolated along
    the shorter way round), so it stays between its two rings instead of cutting across."""
    t = np.linspace(0.0, 1.0, steps)

    def path(u, v):
        r1, a1 = _polar(*u, n_layers, n)
        r2, a2 = _polar(*v, n_layers, n)
        da = (a2 - a1 + np.pi) % (2 * np.pi) - np.pi
        r, a = r1 + t * (r2 - r1), a1 + t * da
        return np.column_stack([r * np.cos(a), r * np.sin(a)])

    return path


@renamed(positional=("ax", "title"), g="graph")
def plot_flow_radial(graph: nx.DiGraph, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Radial ("token rings") drawing of an attention graph: each level a ring, the
    source's level innermost, the input tokens outermost with their labels around the
    outside. A comparison's union graph is coloured by ``model``.

    Parameters
    ----------
    graph : networkx.DiGraph
        An :func:`attnkit.attention_graph`, or the ``union`` graph of :func:`attnkit.compare`.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    title : str, optional
        The title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a graph that is not an attention graph.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_flow_radial
    >>> from attnkit.testing import tiny_model
    >>> graph = ak.attention_graph(tiny_model("bert").attend("The cat sat."), threshold=0.1)
    >>> fig = plot_flow_radial(graph, title="rings")
    >>> fig.axes[0].get_title()
    'rings'
    """
    g = graph
    n_layers, tokens = _check_graph(g)
    n = len(tokens)
    by_model = "models" in g.graph
    fig, ax = figure_axes(ax, (7.0, 7.0), pyplot=True)
    xy = radial_positions(g)
    for level in range(n_layers + 1):
        ring = plt.Circle((0, 0), 1.0 + (n_layers - level), fill=False, lw=0.4,
                          color="#dddddd", zorder=0)
        ax.add_patch(ring)
    _draw(g, ax, lambda v: xy[v], by_model, path_of=_radial_path(n_layers, n))
    r_out = 1.0 + n_layers + 0.25
    for pos, tok in enumerate(tokens):
        theta = np.pi / 2 - 2 * np.pi * pos / max(n, 1)
        deg = np.degrees(theta) % 360
        flip = 90 < deg < 270
        ax.text(r_out * np.cos(theta), r_out * np.sin(theta), str(tok), fontsize=8,
                rotation=deg + 180 if flip else deg, rotation_mode="anchor",
                ha="right" if flip else "left", va="center")
    lim = r_out + 1.6
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axis("off")
    _legend(ax, g, by_model, loc="lower right")
    ax.set_title(title or "attention graph, radial (centre = last layer, outside = input)")
    return fig


@renamed(positional=("ax", "layout", "title"), cmp="data")
def plot_comparison(data: Any, *, ax: Axes | None = None, layout: str = "layered",
                    title: str | None = None) -> Figure:
    """Draw the union graph of a :func:`attnkit.compare` result, coloured by which model
    has each node and edge (grey: both, turquoise: model a only, purple: model b only).

    Parameters
    ----------
    data : Comparison
        What :func:`attnkit.compare` returned.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    layout : {"layered", "radial"}
        As :func:`plot_flow_graph` or :func:`plot_flow_radial`.
    title : str, optional
        The title (default: "<a> vs <b>").

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For an unknown layout.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_comparison
    >>> from attnkit.testing import tiny_model
    >>> a = tiny_model("bert", seed=0).attend("The cat sat.")
    >>> b = tiny_model("bert", seed=1).attend("The cat sat.")
    >>> fig = plot_comparison(ak.compare(a, b, names=("seed 0", "seed 1")), layout="radial")
    >>> fig.axes[0].get_title()
    'seed 0 vs seed 1'
    """
    cmp = data
    if layout not in ("layered", "radial"):
        raise InputError(f"layout must be 'layered' or 'radial', not {layout!r}.")
    a, b = cmp.names
    title = title or f"{a} vs {b}"
    draw = plot_flow_graph if layout == "layered" else plot_flow_radial
    return draw(cmp.union, ax=ax, title=title)


@renamed(positional=("ax", "title", "names"), inf="data")
def plot_influence(data: pd.DataFrame, *, ax: Axes | None = None, title: str | None = None,
                   names: tuple[str, str] | None = None) -> Figure:
    """Bars of token influence over the tokens, the 0-5 rating written above each bar.

    Parameters
    ----------
    data : pandas.DataFrame
        :func:`attnkit.influence` output (column ``score``) or the ``influence`` table of
        a comparison (``score_a``/``score_b``: side-by-side bars in the comparison
        colours).
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    title : str, optional
        The title.
    names : (str, str), optional
        Labels of a comparison's two bars (default "a", "b").

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a table without influence scores.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_influence
    >>> from attnkit.testing import tiny_model
    >>> graph = ak.attention_graph(tiny_model("bert").attend("The cat sat."), threshold=0.1)
    >>> fig = plot_influence(ak.influence(graph), title="influence")
    >>> fig.axes[0].get_title()
    'influence'
    """
    inf = data
    tokens = [str(t) for t in inf["token"]]
    n = len(tokens)
    fig, ax = figure_axes(ax, (max(4.0, 0.4 * n + 1.5), 3.2), pyplot=True)
    x = np.arange(n)
    series: list[tuple[Any, Any, float, str, str | None]]
    if "score_a" in inf:
        names = names or ("a", "b")
        width = 0.4
        series = [(inf["score_a"], inf["rating_a"], -width / 2, MODEL_COLORS["a"], names[0]),
                  (inf["score_b"], inf["rating_b"], width / 2, MODEL_COLORS["b"], names[1])]
    elif "score" in inf:
        width = 0.7
        series = [(inf["score"], inf["rating"], 0.0, SINGLE_COLOR, None)]
    else:
        raise InputError("Expected an influence table with a 'score' column (attnkit."
                         "influence) or 'score_a'/'score_b' (a comparison's influence).")
    for score, rating, dx, color, label in series:
        bars = ax.bar(x + dx, np.asarray(score, dtype=float), width=width, color=color,
                      label=label)
        for rect, r in zip(bars, np.asarray(rating)):
            if r > 0:
                ax.text(rect.get_x() + rect.get_width() / 2, rect.get_height(), str(int(r)),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, tokens, rotation=90, fontsize=8)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylabel("influence (weighted head count)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if len(series) > 1:
        ax.legend(fontsize=8, frameon=False)
    ax.set_title(title or "token influence (numbers: 0-5 rating)")
    return fig
