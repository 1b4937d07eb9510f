"""Figures of the syntax-head analysis: best head per relation vs baseline, relation × head grid.

Heads are labelled 1-indexed "L-H" as in the papers.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..core.labels import head_label
from .._compat import renamed
from ..errors import InputError
from ..core.results import HeadResult, Result, table_and_meta
from .common import figure_axes


@renamed(table="data")
def plot_relation_heads(data: Result | pd.DataFrame, *, relations: Sequence[str] | None = None,
                        ax: Axes | None = None, title: str | None = None) -> Axes:
    """Grouped bars: accuracy of the best head of each relation beside the best fixed offset.

    Each head bar is labelled with its head ("L-H", 1-indexed) and direction arrow
    (→ for dependent→head, ← for head→dependent), each baseline bar with its offset.

    Parameters
    ----------
    data : Result or DataFrame
        What :func:`attnkit.relation_heads` returned.
    relations : sequence of str, optional
        Rows to show, in order (default: all).
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    title : str, optional
        The title.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    InputError
        For anything but a :func:`relation_heads` table, or an empty one.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_relation_heads
    >>> from attnkit.testing import tiny_model
    >>> tb = ak.read_conllu(ak.data.sample_treebank())
    >>> table = ak.relation_heads(ak.extract(tiny_model("bert"), tb, progress=False), tb, min_count=1)
    >>> plot_relation_heads(table, title="sample").get_title()
    'sample'
    """
    table, _ = table_and_meta(data)
    need = {"accuracy", "offset_accuracy", "label", "direction", "offset"}
    if not need <= set(table.columns):
        raise InputError(
            f"plot_relation_heads needs a relation_heads() table; missing columns "
            f"{sorted(need - set(table.columns))}."
        )
    t = table.loc[list(relations)] if relations is not None else table
    if t.empty:
        raise InputError("The relation table is empty: nothing to plot.")
    _, ax = figure_axes(ax, (max(6.0, 0.55 * len(t) + 1.5), 4.0), pyplot=True)
    x = np.arange(len(t))
    w = 0.4
    head = ax.bar(x - w / 2, 100 * t["accuracy"].to_numpy(float), w, label="best head",
                  color="#3b6fb6")
    base = ax.bar(x + w / 2, 100 * t["offset_accuracy"].to_numpy(float), w,
                  label="best fixed offset", color="#bbbbbb")
    arrows = {"dep->head": "→", "head->dep": "←"}
    for bar, (_, row) in zip(head, t.iterrows()):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 1,
                f"{row['label']}{arrows.get(row['direction'], '')}", ha="center", va="bottom",
                fontsize=7, rotation=90)
    for bar, (_, row) in zip(base, t.iterrows()):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 1, f"{int(row['offset']):+d}",
                ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(x, [str(r) for r in t.index], rotation=45, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 110)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.set_title(title or "Best attention head per relation vs fixed-offset baseline")
    return ax


@renamed(accuracy="data")
def plot_relation_grid(data: HeadResult, *, direction: str = "best",
                       relations: Sequence[str] | None = None, ax: Axes | None = None,
                       cmap: str = "viridis", title: str | None = None) -> Axes:
    """Heatmap of every head's accuracy at every relation.

    Columns are heads in layer order, labelled "L-H" (1-indexed); rows are relations.

    Parameters
    ----------
    data : HeadResult
        What :func:`attnkit.analysis.head_accuracy` returned (two rows per
        ``(layer, head)``, one per direction; one column per relation).
    direction : {"dep->head", "head->dep", "best"}
        One direction, or the better of the two per cell.
    relations : sequence of str, optional
        Rows to show, in order (default: all).
    ax : matplotlib Axes, optional
        Draw into these axes (else a new pyplot figure).
    cmap : str
        A matplotlib colour map.
    title : str, optional
        The title.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    InputError
        For anything but a :func:`head_accuracy` result, or an unknown direction.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_relation_grid
    >>> from attnkit.testing import tiny_model
    >>> tb = ak.read_conllu(ak.data.sample_treebank())
    >>> acc = ak.analysis.head_accuracy(ak.extract(tiny_model("bert"), tb, progress=False), tb)
    >>> plot_relation_grid(acc, direction="dep->head").get_xlabel()
    'head (grouped by layer; 1-indexed)'
    """
    accuracy = data
    if not isinstance(accuracy, HeadResult) or "direction" not in accuracy.columns:
        raise InputError("plot_relation_grid needs a head_accuracy() result "
                         "(per-head rows with a direction column).")
    table = accuracy.table
    rel_cols = [c for c in table.columns if c != "direction"]
    by_dir = {d: table[table["direction"] == d][rel_cols] for d in ("dep->head", "head->dep")}
    if direction == "best":
        grid = np.maximum(by_dir["dep->head"].to_numpy(), by_dir["head->dep"].to_numpy()).T
    elif direction in by_dir:
        grid = by_dir[direction].to_numpy().T
    else:
        raise InputError(
            f"direction must be 'dep->head', 'head->dep' or 'best', not {direction!r}.")
    heads = list(by_dir["dep->head"].index)
    rows = list(rel_cols)
    if relations is not None:
        idx = [rows.index(r) for r in relations]
        grid, rows = grid[idx], list(relations)
    labels = [head_label(layer, head) for layer, head in heads]
    _, ax = figure_axes(ax, (max(6.0, 0.12 * len(labels) + 2), max(3.0, 0.28 * len(rows) + 1.2)), pyplot=True)
    im = ax.imshow(100 * grid, aspect="auto", cmap=cmap, vmin=0, vmax=100, interpolation="nearest")
    ax.set_yticks(np.arange(len(rows)), rows, fontsize=8)
    n_layers = len({layer for layer, _ in heads})
    per_layer = len(labels) // max(n_layers, 1)
    ticks = np.arange(0, len(labels), per_layer)
    ax.set_xticks(ticks, [f"L{labels[t].split('-')[0]}" for t in ticks], fontsize=8)
    for t in ticks[1:]:
        ax.axvline(t - 0.5, color="white", lw=0.6)
    ax.set_xlabel("head (grouped by layer; 1-indexed)")
    ax.figure.colorbar(im, ax=ax, label="accuracy (%)", shrink=0.8)
    ax.set_title(title or f"Accuracy of every head at every relation ({direction})")
    return ax
