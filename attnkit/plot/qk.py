"""Figures of :func:`attnkit.qk_embedding`: one head's queries and keys in one picture, or
every head as small multiples (AttentionViz's matrix view)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.labels import head_label
from ..errors import InputError
from .common import figure_axes, shown_by_ipython

#: Colours of queries and keys (colour-blind safe: Okabe–Ito orange and blue).
KIND_COLORS = {"query": "#E69F00", "key": "#0072B2"}


def _draw(ax: Any, points: Any, rows: np.ndarray, size: float) -> None:
    """The queries and keys of ``points`` at ``rows`` (read as columns: no table is made)."""
    x, y, kind = (points.column(c, rows) for c in ("x", "y", "kind"))
    for name, colour in KIND_COLORS.items():
        sel = kind == name
        ax.scatter(x[sel], y[sel], s=size, c=colour, linewidths=0, alpha=0.7,
                   label=name, rasterized=True)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal", adjustable="datalim")


def plot_qk_embedding(embedding: Any, ax: Any = None, layer: int | None = None,
                      head: int | None = None, **options: Any) -> Any:
    """Queries (orange) and keys (blue) of one head; with no head given and several heads in
    the embedding (and no ``ax``), a grid of every head, labelled "L-H" 1-indexed.

    Parameters
    ----------
    embedding : QKEmbedding or QKPoints
        What :func:`attnkit.qk_embedding` returned, or some of its points
        (:meth:`~attnkit.analysis.QKEmbedding.take`).
    ax : matplotlib Axes, optional
        Draw one head there.
    layer, head : int, optional
        0-indexed head to draw (default: the first of the embedding).
    **options
        ``size`` of a point (default from the number of points).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    InputError
        For a head the embedding does not hold.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot.qk import plot_qk_embedding
    >>> from attnkit.testing import tiny_model
    >>> emb = ak.qk_embedding(tiny_model("gpt2").attend("The cat sat on the mat."), method="pca")
    >>> len(plot_qk_embedding(emb).axes), len(plot_qk_embedding(emb, layer=1, head=0).axes)
    (4, 1)
    """
    from matplotlib.figure import Figure

    heads = [tuple(h) for h in embedding.meta["heads"]]
    one = ax is not None or layer is not None or len(heads) == 1
    if one:
        key = (layer, head) if layer is not None else heads[0]
        if key not in heads:
            raise InputError(f"Head {key} is not in this embedding ({heads}).")
        rows = embedding.head_rows(*key)
        fig, ax = figure_axes(ax, (4.0, 4.0))
        _draw(ax, embedding, rows, options.get("size", max(1.0, 30.0 / np.sqrt(max(len(rows), 1) / 100))))
        ax.set_title(f"head {key[0] + 1}-{key[1] + 1} (1-indexed)")
        ax.legend(loc="best", fontsize=8, markerscale=3)
        return fig
    layers = sorted({h[0] for h in heads})
    n_heads = max(h[1] for h in heads) + 1
    # a Figure pyplot does not track: nothing is left open (and shown under a live view) as a side effect
    shown_by_ipython(Figure)
    fig = Figure(figsize=(1.3 * n_heads + 0.5, 1.3 * len(layers) + 0.5))
    axes = fig.subplots(len(layers), n_heads, squeeze=False)
    for r, l in enumerate(layers):
        for c in range(n_heads):
            a = axes[r][c]
            if (l, c) in heads:
                _draw(a, embedding, embedding.head_rows(l, c), options.get("size", 1.0))
                a.set_title(head_label(l, c), fontsize=7)
            else:
                a.axis("off")
    fig.suptitle("queries (orange) and keys (blue) per head, L-H 1-indexed", fontsize=9)
    return fig
