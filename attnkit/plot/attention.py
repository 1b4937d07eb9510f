"""Matplotlib figures of attention: heatmap, head grid, head map, head-embedding scatter.

These are the static twins of the widgets (``attnkit.widgets``): the same colour maps and
labels, for papers, PDF export and notebooks rendered without a kernel. Every function
returns a :class:`matplotlib.figure.Figure` built without pyplot, so nothing is shown or
kept open as a side effect.

Conventions: attention matrices are ``[query, key]`` (rows = from, columns = to); layers and
heads are 0-indexed in arguments and shown 1-indexed as "L-H".
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Iterable, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PatchCollection
from matplotlib.colors import LogNorm, Normalize, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .._compat import renamed
from ..core import validate
from ..errors import InputError
from ..core.results import head_table
from ..core.labels import head_label
from .common import (
    display_token,
    downsample_max,
    figure_axes,
    label_stride,
    mpl_text,
    row_ranks,
    shown_by_ipython,
    truncate,
)

SEQUENTIAL = "Blues"
DIVERGING = "RdBu_r"
METRIC = "viridis"
CATEGORICAL = "tab10"


@renamed(matrix="data")
def plot_heatmap(
    data: np.ndarray,
    tokens: Sequence[str],
    *,
    ax: Axes | None = None,
    diverging: bool | None = None,
    vmax: float | None = None,
    cmap: str | None = None,
    title: str | None = None,
    value_label: str = "attention",
    max_labels: int = 64,
    bin_size: int = 1,
    scale: str = "linear",
    decades: float = 3.0,
    causal: bool = False,
    col_tokens: Sequence[str] | None = None,
) -> Figure:
    """One attention matrix ``[n, n]`` (rows = from/query, columns = to/key) with token labels,
    or a rectangle ``[target, source]`` (cross-attention) with ``col_tokens``.

    Sequential colours from 0 to ``vmax`` (default: the matrix maximum); with
    ``diverging=True`` (default: when the matrix has negative values, e.g. a difference of
    two maps) a diverging scale symmetric about 0. ``scale="log"`` colours ``decades``
    decades below ``vmax`` on a log axis; ``"rank"`` each cell's rank within its row. With
    more than ``max_labels`` tokens every k-th token is labelled (k = 2, 5, 10, ...).

    A pooled overview of a long map (``bin_size`` tokens per cell, the last bin partial) is
    drawn on token axes: ``tokens`` are then the ``n`` tokens of the whole map. ``causal``
    leaves the cells above the diagonal blank.

    Parameters
    ----------
    data : ndarray
        ``[n, n]`` (or ``[bins, bins]`` with ``bin_size``): rows are *from*, columns *to*.
    tokens : sequence of str
        One label per position.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    diverging : bool, optional
        A scale symmetric about 0 (default: when ``data`` has negative values).
    vmax : float, optional
        Top of the colour scale (default: the largest value).
    cmap : str, optional
        A matplotlib colour map (default ``"Blues"``, or ``"RdBu_r"`` when diverging).
    title : str, optional
        Drawn above the map, left-aligned.
    value_label : str
        The colour bar's label.
    max_labels : int
        Label every k-th token beyond this many.
    bin_size : int
        Tokens per cell of a pooled overview.
    scale : {"linear", "log", "rank"}
        How values map to colours.
    decades : float
        Decades below ``vmax`` that ``scale="log"`` shows.
    causal : bool
        Leave the cells above the diagonal blank.
    col_tokens : sequence of str, optional
        One label per column of a rectangular map (``tokens`` then label its rows).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For a map that is not square, a token count that does not match it, or an unknown
        ``scale``.

    Examples
    --------
    >>> from attnkit.plot import plot_heatmap
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("bert").attend("The cat sat on the mat.")
    >>> fig = plot_heatmap(att.map(1, 0), att.tokens, title="2-1")
    >>> fig.axes[0].get_title(loc="left"), fig.axes[0].get_ylabel()
    ('2-1', 'from (query)')
    """
    max_labels = validate.size(max_labels, "max_labels")
    bin_size = validate.size(bin_size, "bin_size")
    m = np.asarray(data, dtype=np.float64)
    rect = col_tokens is not None
    if m.ndim != 2 or (m.shape[0] != m.shape[1] and not rect):
        raise InputError(f"heatmap needs a square [n, n] matrix (or col_tokens for a "
                         f"rectangle); got shape {m.shape}.")
    if scale not in ("linear", "log", "rank"):
        raise InputError(f"scale must be 'linear', 'log' or 'rank', not {scale!r}.")
    bins, bins_c = m.shape
    n = len(tokens)
    n_c = len(col_tokens) if col_tokens is not None else n
    if -(-n // max(1, bin_size)) != bins or -(-n_c // max(1, bin_size)) != bins_c:
        raise InputError(f"{n} x {n_c} tokens for a {bins}×{bins_c} matrix of {bin_size}-token "
                         "bins; pass one label per position.")
    if causal:
        m = np.where(np.triu(np.ones_like(m, dtype=bool), k=1), np.nan, m)
    finite = m[np.isfinite(m)]
    if diverging is None:
        diverging = bool(finite.size and finite.min() < 0)
    side = float(np.clip(2.5 + 0.16 * min(max(bins, bins_c), 64), 4.0, 10.0))
    tall = side * min(1.0, max(0.35, n / max(n, n_c)))  # a wide rectangle: a shorter figure
    fig, ax = figure_axes(ax, (side + 1.2, tall if rect else side))
    norm: Normalize
    if diverging:
        top = vmax if vmax is not None else (float(np.abs(finite).max()) if finite.size else 1.0)
        top = top if top > 0 else 1.0
        norm = TwoSlopeNorm(vcenter=0.0, vmin=-top, vmax=top)
        cmap = cmap or DIVERGING
    elif scale == "rank":
        m = row_ranks(m, valid=np.isfinite(m))
        norm = Normalize(vmin=0.0, vmax=1.0)
        cmap = cmap or SEQUENTIAL
        value_label = f"{value_label} (rank in its row)"
    else:
        top = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
        top = top if top > 0 else 1.0
        if scale == "log":
            norm = LogNorm(vmin=top * 10.0 ** -decades, vmax=top, clip=True)
            m = np.where(np.isfinite(m), np.maximum(m, top * 10.0 ** -decades), m)
        else:
            norm = Normalize(vmin=0.0, vmax=top)
        cmap = cmap or SEQUENTIAL
    extent = (0, bins_c * bin_size, bins * bin_size, 0)
    im = ax.imshow(m, cmap=cmap, norm=norm, interpolation="nearest", aspect="equal", extent=extent)
    ax.set_xlim(0, n_c)
    ax.set_ylim(n, 0)
    fontsize = 8 if max(n, n_c) <= 40 else 6.5

    def ticks(labels_of: Sequence[str], count: int) -> tuple[np.ndarray, list[str]]:
        at = np.arange(0, count, label_stride(count, max_labels))
        return at + 0.5, [mpl_text(truncate(display_token(labels_of[int(i)]), 16)) for i in at]

    ax.set_xticks(*ticks(col_tokens if col_tokens is not None else tokens, n_c), rotation=90,
                  fontsize=fontsize)
    ax.set_yticks(*ticks(tokens, n), fontsize=fontsize)
    ax.xaxis.tick_top()
    ax.set_xlabel("to (source)" if rect else "to (key)")
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("from (target)" if rect else "from (query)")
    ax.tick_params(length=0)
    fig.colorbar(im, ax=ax, shrink=0.6, label=mpl_text(value_label))
    if title:
        ax.set_title(mpl_text(title), fontsize=10, pad=6, loc="left")
    return fig


def plot_head_grid(
    maps: np.ndarray,
    *,
    metric: np.ndarray | None = None,
    metric_name: str = "metric",
    scale: str = "head",
    size: int = 128,
    cmap: str = SEQUENTIAL,
    title: str | None = None,
    thumb_labels: bool = True,
    color_scale: str = "linear",
    decades: float = 3.0,
) -> Figure:
    """Every head's map of ``maps`` ``[layer, head, n, n]`` as a thumbnail labelled "L-H".

    ``color_scale="log"`` colours ``decades`` decades below each top on a log axis, ``"rank"``
    each cell's rank within its thumbnail row (as the HeadGrid widget does).

    Thumbnails larger than ``size`` cells are max-pooled down (see
    :func:`attnkit.plot.common.downsample_max`), so a thin pattern survives. ``scale="head"``
    colours each head from 0 to its own maximum, ``"global"`` uses 0–1 for all heads.
    ``metric`` ``[layer, head]`` (NaN = no value) is drawn as a coloured bar under each
    thumbnail. ``thumb_labels=False`` numbers rows and columns only (faster to draw).
    The figure is about 0.56 in per thumbnail whatever ``size`` is.

    Parameters
    ----------
    maps : ndarray
        ``[layer, head, n, n]``: rows are *from*, columns *to*.
    metric : ndarray, optional
        ``[layer, head]`` values drawn as a coloured bar under each thumbnail.
    metric_name : str
        The metric's colour-bar label.
    scale : {"head", "global"}
        Each head from 0 to its own maximum, or one 0–1 scale for all.
    size : int
        Largest thumbnail side in cells (larger maps are max-pooled).
    cmap : str
        A matplotlib colour map.
    title : str, optional
        The figure's title (default: the layer and head counts).
    thumb_labels : bool
        Write "L-H" under each thumbnail.
    color_scale : {"linear", "log", "rank"}
        How values map to colours.
    decades : float
        Decades below the top that ``color_scale="log"`` shows.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not registered with pyplot.

    Raises
    ------
    InputError
        For maps that are not ``[layer, head, n, n]``, a metric of another shape or an
        unknown scale.

    Examples
    --------
    >>> from attnkit.plot import plot_head_grid
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("bert").attend("The cat sat on the mat.")
    >>> fig = plot_head_grid(att.maps, title="tiny")
    >>> len(fig.axes)
    1
    """
    size = validate.size(size, "size")
    maps = np.asarray(maps)
    if maps.dtype.kind in "fc" and not np.isfinite(maps).all():
        raise InputError("maps hold NaN or infinite values; a picture of them would hide where. "
                         "Check how they were computed (attnkit.load(..., dtype='float32')).")
    if maps.ndim != 4:
        raise InputError(f"head_grid needs maps [layer, head, n, n] (or [layer, head, target, "
                         f"source]); got shape {maps.shape}.")
    if scale not in ("head", "global"):
        raise InputError(f"scale must be 'head' or 'global', not {scale!r}.")
    L, H = maps.shape[:2]
    thumbs: np.ndarray = downsample_max(maps, size, rectangular=True).astype(np.float32)
    tr, tc = thumbs.shape[-2:]
    t = max(tr, tc)  # a rectangle (cross-attention) sits in a t x t cell, top left
    if color_scale not in ("linear", "log", "rank"):
        raise InputError(f"color_scale must be 'linear', 'log' or 'rank', not {color_scale!r}.")
    if scale == "head" or color_scale == "log":
        top = thumbs.reshape(L, H, -1).max(axis=2) if scale == "head" else np.full((L, H), thumbs.max())
        thumbs = thumbs / np.where(top > 0, top, 1.0)[:, :, None, None]
    if color_scale == "log":
        with np.errstate(divide="ignore"):
            thumbs = np.clip(1.0 + np.log10(np.maximum(thumbs, 0)) / decades, 0.0, 1.0).astype(np.float32)
    elif color_scale == "rank":
        thumbs = np.stack([np.stack([row_ranks(thumbs[l, h]) for h in range(H)]) for l in range(L)])
    if metric is not None:
        metric = np.asarray(metric, dtype=np.float64)
        if metric.shape != (L, H):
            raise InputError(f"metric has shape {metric.shape}; expected [layer, head] = {(L, H)}.")
    gap_x = max(1, round(t * 0.12))
    below = 0.0
    if thumb_labels:
        below += 0.26
    if metric is not None:
        below += 0.14
    gap_y = max(1, round(t * (0.12 + below)))
    W = H * (t + gap_x)
    Hh = L * (t + gap_y)
    mosaic = np.full((Hh, W), np.nan, dtype=np.float32)
    for l in range(L):
        for h in range(H):
            y, x = l * (t + gap_y), h * (t + gap_x)
            mosaic[y : y + tr, x : x + tc] = thumbs[l, h]

    # Fixed margins in inches (no constrained layout: it would draw the mosaic twice).
    cell_in = 0.56
    left, right, top_in, bottom = 0.45, 0.15 + (0.9 if metric is not None else 0.0), 0.45, 0.1
    ax_w = cell_in * W / (t + gap_x)
    ax_h = ax_w * Hh / W
    fig_w, fig_h = left + ax_w + right, top_in + ax_h + bottom
    shown_by_ipython(Figure)
    fig = Figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((left / fig_w, bottom / fig_h, ax_w / fig_w, ax_h / fig_h))
    cm = matplotlib.colormaps[cmap].with_extremes(bad=(1, 1, 1, 0))
    ax.imshow(mosaic, cmap=cm, vmin=0.0, vmax=1.0, interpolation="antialiased", aspect="auto")
    fs = 6.0
    if metric is not None:
        finite = metric[np.isfinite(metric)]
        mnorm = Normalize(*(finite.min(), finite.max()) if finite.size else (0.0, 1.0))
        mcm = matplotlib.colormaps[METRIC]
        colors = mcm(mnorm(np.nan_to_num(metric, nan=0.0)))
        colors[~np.isfinite(metric)] = matplotlib.colors.to_rgba("#eeeeee")
    frames = []
    bars = []
    for l in range(L):
        for h in range(H):
            y, x = l * (t + gap_y), h * (t + gap_x)
            frames.append(Rectangle((x - 0.5, y - 0.5), tc, tr))
            ly = y + t + 0.5
            if metric is not None:
                bars.append(Rectangle((x - 0.5, ly), t, t * 0.1))
                ly += t * 0.14
            if thumb_labels:
                ax.text(x - 0.5, ly, head_label(l, h), fontsize=fs, va="top", ha="left", color="#222")
    ax.add_collection(PatchCollection(frames, facecolor="none", edgecolor="#c8c8c8", linewidth=0.4))
    if bars:
        ax.add_collection(PatchCollection(bars, facecolor=colors.reshape(-1, 4), edgecolor="none"))
    ax.set_xlim(-0.5 - gap_x / 2, W - gap_x / 2)
    ax.set_ylim(Hh - 0.5, -0.5 - gap_x)
    ax.set_xticks([x + t / 2 for x in range(0, W, t + gap_x)], [str(h + 1) for h in range(H)], fontsize=fs)
    ax.set_yticks([y + t / 2 for y in range(0, Hh, t + gap_y)], [str(l + 1) for l in range(L)], fontsize=fs)
    ax.xaxis.tick_top()
    ax.tick_params(length=0, pad=2, colors="#666")
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_ylabel("layer", fontsize=7, color="#666", labelpad=2)
    note = "each head scaled to its own max" if scale == "head" else "one scale 0–1"
    if color_scale == "log":
        note = f"log, {decades:g} decades below {'each head' if scale == 'head' else 'the'} max"
    elif color_scale == "rank":
        note = "rank within each row"
    head = mpl_text(title) if title else f"Attention, {L} layers × {H} heads"
    fig.text(left / fig_w, 1 - 0.08 / fig_h, f"{head}   (head →; rows = from, cols = to; {note})",
             fontsize=7.5, va="top", ha="left")
    if metric is not None:
        cax = fig.add_axes(((left + ax_w + 0.25) / fig_w, 0.3, 0.12 / fig_w, 0.4))
        fig.colorbar(ScalarMappable(mnorm, mcm), cax=cax, label=mpl_text(metric_name))
        cax.tick_params(labelsize=fs)
        cax.yaxis.label.set_fontsize(7)
    return fig


def plot_head_map(
    data: pd.DataFrame | pd.Series | np.ndarray,
    value: str | None = None,
    *,
    diverging: bool | None = None,
    cmap: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    ax: Axes | None = None,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    row_title: str = "layer",
    col_title: str = "head",
) -> Figure:
    """A layer × head grid of one per-head metric.

    ``data``: DataFrame/Series indexed by ``(layer, head)`` (0-indexed) or an array
    ``[layer, head]``; ``value`` names the DataFrame column. Missing heads are left blank.
    ``diverging`` (default: values on both sides of 0) centres the colours on 0. Values are
    written in the cells when ``annotate`` (default: at most 16 × 16 heads).

    Parameters
    ----------
    data : DataFrame, Series, HeadResult or ndarray
        Per-head values: indexed by ``(layer, head)`` (0-indexed), or ``[layer, head]``.
    value : str, optional
        The column of a table to show (default: its value column or first numeric one).
    diverging : bool, optional
        Centre the colours on 0 (default: when values lie on both sides of 0).
    cmap : str, optional
        A matplotlib colour map (default ``"viridis"``, or ``"RdBu_r"`` when diverging).
    vmin, vmax : float, optional
        Ends of the colour scale (default: the data's range).
    title : str, optional
        Drawn above the grid (default: "<value> per head").
    annotate : bool, optional
        Write the values in the cells.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    row_labels, col_labels : sequence of str, optional
        Tick text of each row and column (default numbers from 1; at most about 32 shown).
    row_title, col_title : str
        Axis titles.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot import plot_head_map
    >>> from attnkit.testing import tiny_model
    >>> stats = ak.head_stats([tiny_model("bert").attend("The cat sat on the mat.")], progress=False)
    >>> fig = plot_head_map(stats, "cls")
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('head', 'layer')
    """
    table, name = head_table(data, value)
    L, H = table.shape
    finite = table[np.isfinite(table)]
    lo = vmin if vmin is not None else (float(finite.min()) if finite.size else 0.0)
    hi = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    if diverging is None:
        diverging = bool(finite.size and finite.min() < 0 < finite.max())
    if diverging:
        a = max(abs(lo), abs(hi)) or 1.0
        norm: Normalize = TwoSlopeNorm(vcenter=0.0, vmin=-a, vmax=a)
        cmap = cmap or DIVERGING
    else:
        norm = Normalize(lo, hi if hi > lo else lo + 1.0)
        cmap = cmap or METRIC
    fig, ax = figure_axes(ax, (float(np.clip(0.45 * H + 2.2, 4, 12)), float(np.clip(0.4 * L + 1.2, 3, 12))))
    cm = matplotlib.colormaps[cmap].with_extremes(bad="#f2f2f2")
    im = ax.imshow(np.ma.masked_invalid(table), cmap=cm, norm=norm, aspect="equal", interpolation="nearest")
    if annotate is None:
        annotate = L <= 16 and H <= 16
    if annotate:
        for l in range(L):
            for h in range(H):
                v = table[l, h]
                if np.isfinite(v):
                    r, g, b, _ = cm(norm(v))
                    dark = 0.2126 * r**2.2 + 0.7152 * g**2.2 + 0.0722 * b**2.2 < 0.22
                    ax.text(h, l, f"{v:.2g}", ha="center", va="center", fontsize=6.5, color="white" if dark else "#111")
    for n, labels, ticks in ((H, col_labels, ax.set_xticks), (L, row_labels, ax.set_yticks)):
        text = [mpl_text(str(x)) for x in labels] if labels is not None else [str(i + 1) for i in range(n)]
        step = max(1, -(-n // 32))
        ticks(range(0, n, step), text[::step], fontsize=7)
    ax.set_xlabel(mpl_text(col_title))
    ax.set_ylabel(mpl_text(row_title))
    ax.tick_params(length=0)
    fig.colorbar(im, ax=ax, shrink=0.7, label=mpl_text(name))
    # a long title (the composition map's names its colour scale) wraps to the figure's width
    # instead of running off it: about 10 characters an inch at this size
    width = max(20, int(fig.get_figwidth() * 10))
    ax.set_title(textwrap.fill(mpl_text(title or f"{name} per head"), width), fontsize=10, loc="left")
    return fig


@renamed(positional=("layers", "heads"))
def plot_cluster_scatter(
    embedding: np.ndarray | pd.DataFrame,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    labels: Sequence[str] | None = None,
    label_name: str | None = None,
    n_layers: int | None = None,
    title: str | None = None,
    ax: Axes | None = None,
    layers: Sequence[int] | None = None,
) -> Figure:
    """Heads as points of a 2-D embedding; point i is head ``heads[i]``.

    Coloured by layer (sequential, the default) or by ``labels`` (one string per point,
    categorical colours in sorted order). Axes keep equal units.

    Parameters
    ----------
    embedding : ndarray or DataFrame
        ``[N, 2]`` points, or a table with columns ``x`` and ``y`` indexed by
        ``(layer, head)`` (:func:`attnkit.embed_heads` output), which also gives ``heads``.
    heads : sequence of (int, int), optional
        The ``(layer, head)`` of each point (0-indexed); needed for an array.
    labels : sequence of str, optional
        One category per point, to colour by instead of the layer.
    label_name : str, optional
        The legend's title for ``labels``.
    n_layers : int, optional
        Layers of the colour scale (default: the largest layer + 1).
    title : str, optional
        Drawn above the scatter.
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).
    layers : sequence of int, optional
        Deprecated: the layer of each point, with ``heads`` the head of each point; pass
        ``heads=list(zip(layers, heads))``.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    InputError
        For an embedding that is not ``[N, 2]``, or heads or labels not one per point.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.plot import plot_cluster_scatter
    >>> emb = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> fig = plot_cluster_scatter(emb, heads=[(0, 0), (0, 1), (1, 0)], title="heads")
    >>> fig.axes[0].get_title(loc="left")
    'heads'
    """
    n_layers = None if n_layers is None else validate.size(n_layers, "n_layers")
    if layers is not None:
        if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence):
            raise InputError(f"layers (deprecated) must be a sequence of ints; got {layers!r}.")
        if heads is None or len(heads) != len(layers):
            raise InputError("layers= (deprecated) needs as many heads; pass "
                             "heads=[(layer, head), ...] instead.")
        warnings.warn("plot_cluster_scatter(): layers= is deprecated, pass "
                      "heads=list(zip(layers, heads)) (it will be removed in the next release).",
                      DeprecationWarning, stacklevel=3)
        heads = list(zip(layers, heads))  # type: ignore[arg-type]
    if isinstance(embedding, pd.DataFrame):
        if heads is None and isinstance(embedding.index, pd.MultiIndex):
            heads = [(int(l), int(h)) for l, h in embedding.index]
        embedding = embedding[["x", "y"]].to_numpy() if {"x", "y"} <= set(embedding.columns) else embedding.to_numpy()
    if heads is None:
        raise InputError("plot_cluster_scatter() needs heads=[(layer, head), ...], one per point "
                         "(or an embedding indexed by (layer, head)).")
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Iterable):
        raise InputError(f"heads must be (layer, head) pairs, one per point; got {heads!r}.")
    pairs = []
    for item in heads:
        if isinstance(item, (str, bytes)) or not isinstance(item, Iterable) or len(tuple(item)) != 2:
            raise InputError(f"heads must be (layer, head) pairs, one per point; got {item!r}.")
        l, h = tuple(item)
        pairs.append((validate.integer(l, "heads: layer", minimum=0),
                      validate.integer(h, "heads: head", minimum=0)))
    layers = [l for l, _ in pairs]
    head_ids = [h for _, h in pairs]
    emb = np.asarray(embedding, dtype=np.float64)
    if emb.ndim != 2 or emb.shape[1] != 2:
        raise InputError(f"the embedding must be [n_heads, 2]; got shape {emb.shape}.")
    N = emb.shape[0]
    if len(head_ids) != N:
        raise InputError(f"{N} points but {len(head_ids)} heads given.")
    fig, ax = figure_axes(ax, (6.4, 5.2))
    layer_arr = np.asarray(layers)
    if labels is None:
        L = n_layers or (int(layer_arr.max()) + 1 if N else 1)
        norm = Normalize(0, max(L - 1, 1))
        sc = ax.scatter(emb[:, 0], emb[:, 1], c=layer_arr, cmap=METRIC, norm=norm, s=28, edgecolors="#00000059", linewidths=0.5)
        cb = fig.colorbar(sc, ax=ax, shrink=0.7, label="layer")
        ticks = np.unique(np.linspace(0, L - 1, min(L, 7)).round().astype(int))
        cb.set_ticks(ticks, labels=[str(t + 1) for t in ticks])
    else:
        if len(labels) != N:
            raise InputError(f"{len(labels)} labels for {N} points.")
        cats = sorted({str(x) for x in labels})
        cm = matplotlib.colormaps[CATEGORICAL]
        for i, cat in enumerate(cats):
            mask = np.array([str(x) == cat for x in labels])
            ax.scatter(emb[mask, 0], emb[mask, 1], color=cm(i % 10), s=28, label=mpl_text(cat), edgecolors="#00000059", linewidths=0.5)
        ax.legend(title=mpl_text(label_name or "label"), fontsize=7, title_fontsize=8, loc="best", frameon=False)
    if N <= 48:
        for i in range(N):
            ax.annotate(head_label(layers[i], head_ids[i]), emb[i], fontsize=6, xytext=(3, 2), textcoords="offset points", color="#555")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(mpl_text(title or "Heads in 2-D"), fontsize=10, loc="left")
    return fig


plot_cluster_scatter.__attnkit_deprecated__ = ("layers",)  # type: ignore[attr-defined]
