"""Figures of per-head statistics (``head_stats`` output)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def head_metric_grid(df: pd.DataFrame, column: str, *, ax=None, cmap: str = "viridis",
                     title: str | None = None):
    """A layer × head image of one per-head metric (DataFrame indexed by (layer, head)).

    Rows are layers and columns heads, labelled 1-indexed as in the papers.
    """
    grid = df[column].unstack("head").sort_index()
    fig, ax = _fig_ax(ax, (0.45 * grid.shape[1] + 2, 0.4 * grid.shape[0] + 1.2))
    im = ax.imshow(grid.to_numpy(), cmap=cmap, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(h + 1) for h in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(l + 1) for l in grid.index])
    ax.set_xlabel("head (1-indexed)")
    ax.set_ylabel("layer (1-indexed)")
    ax.set_title(title or column)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def head_stats_figures(stats: pd.DataFrame) -> dict[str, plt.Figure]:
    """The standard figures of a ``head_stats`` table: name → Figure."""
    figs = {}
    for col, cmap in [("cls", "Blues"), ("sep", "Oranges"), ("punct", "Greens"),
                      ("entropy", "viridis")]:
        label = {"cls": "attention to [CLS]", "sep": "attention to [SEP]",
                 "punct": "attention to punctuation", "entropy": "mean attention entropy (nats)"}[col]
        figs[f"heads_{col}"] = head_metric_grid(stats, col, cmap=cmap, title=label)
    return figs


def _fig_ax(ax, size):
    if ax is None:
        fig, ax = plt.subplots(figsize=size)
    else:
        fig = ax.figure
    return fig, ax
