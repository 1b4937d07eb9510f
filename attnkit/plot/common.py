"""Display preparation shared by the matplotlib figures and the widgets.

Nothing here analyses attention: these helpers only reshape what a view is given into what
it draws (smaller thumbnails, a layer × head table, labels safe for matplotlib text).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError


def figure_axes(ax, size: tuple[float, float], *, pyplot: bool = False):
    """``(figure, axes)`` to draw on: ``ax`` and its figure, or a new figure of ``size`` inches.

    ``pyplot=False`` builds a :class:`matplotlib.figure.Figure` that pyplot does not track
    (nothing is shown or kept open as a side effect; return it to display it);
    ``pyplot=True`` opens it through pyplot, so a notebook shows it at the end of the cell.
    """
    if ax is not None:
        return ax.figure, ax
    if pyplot:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=size, layout="constrained")
        return fig, ax
    from matplotlib.figure import Figure

    shown_by_ipython(Figure)
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def shown_by_ipython(figure_type: type) -> None:
    """Make the running IPython kernel display ``figure_type`` objects as PNG images.

    A :class:`~matplotlib.figure.Figure` built without pyplot has no image of its own: IPython
    draws one only after matplotlib's inline backend has registered its formatter, which
    happens when pyplot is first used. Before that a returned figure showed as the text
    ``<Figure size 550x340 with 1 Axes>``. This registers the same PNG formatter the inline
    backend would (``bbox_inches="tight"``), unless some image formatter for figures is
    already there (the user's choice, e.g. SVG or retina, wins). Outside IPython: nothing.
    """
    import sys

    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    shell = get_ipython()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "image/png" not in formatters:
        return
    for mime in ("image/png", "image/svg+xml", "application/pdf", "image/jpeg"):
        if mime in formatters:
            try:
                formatters[mime].lookup_by_type(figure_type)
                return  # already shown as an image
            except KeyError:
                pass
    from IPython.core.pylabtools import print_figure

    formatters["image/png"].for_type(
        figure_type, lambda fig: print_figure(fig, "png", bbox_inches="tight"))


def downsample_max(maps: np.ndarray, size: int, *, rectangular: bool = False) -> np.ndarray:
    """Shrink the last two axes of ``maps`` ``[..., n, n]`` (with ``rectangular``, also
    ``[..., m, n]``: cross-attention) to at most ``size`` by max-pooling.

    Blocks of ``k × k`` cells (``k = ceil(max(m, n) / size)``) become one cell holding their
    maximum, so a single strong link (a diagonal, a column to [SEP]) stays visible at
    thumbnail size and each map's maximum is kept. Maps with ``m, n <= size`` are returned
    unchanged. Returns ``[..., ceil(m / k), ceil(n / k)]``.
    """
    maps = np.asarray(maps)
    if maps.ndim < 2:
        raise InputError(f"maps need two last axes (rows, columns); got shape {maps.shape}.")
    m, n = maps.shape[-2:]
    if m != n and not rectangular:
        raise InputError(f"maps must be square in their last two axes; got shape {maps.shape}.")
    if size < 1:
        raise InputError(f"thumbnail size must be at least 1; got {size}.")
    if max(m, n) <= size:
        return maps
    k = math.ceil(max(m, n) / size)
    t, tc = math.ceil(m / k), math.ceil(n / k)
    pad, pad_c = t * k - m, tc * k - n
    if pad or pad_c:
        width = [(0, 0)] * (maps.ndim - 2) + [(0, pad), (0, pad_c)]
        maps = np.pad(maps, width)  # padding is 0: never above a real attention weight
    lead = maps.shape[:-2]
    return maps.reshape(*lead, t, k, tc, k).max(axis=(-3, -1))


def mpl_text(s: str) -> str:
    """Text safe for a matplotlib label: ``$`` would start mathtext, so it is escaped."""
    return str(s).replace("$", r"\$")


def display_token(tok: str) -> str:
    """A token as the views show it: a leading ``Ġ``/``▁`` space marker becomes ``·``, control
    characters are escaped, and an empty label shows as ``∅`` (the widgets do the same)."""
    s = str(tok)
    if s[:1] in ("\u0120", "\u2581"):
        s = "\u00b7" + s[1:]
    s = s.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    s = "".join(c if ord(c) >= 32 and ord(c) != 127 else f"\\x{ord(c):02x}" for c in s)
    if s == "":
        return "\u2205"
    if s.isspace():
        return s.replace(" ", "\u2423")
    return s


def truncate(s: str, max_chars: int) -> str:
    """``s`` cut to ``max_chars`` characters with an ellipsis when cut."""
    return s if len(s) <= max_chars else s[: max(1, max_chars - 1)] + "\u2026"


def label_stride(n: int, max_labels: int) -> int:
    """Label every k-th of ``n`` positions so at most ``max_labels`` show; k is 1, 2, 5, 10, 20, ..."""
    if n <= max_labels:
        return 1
    raw = math.ceil(n / max_labels)
    p = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * p >= raw:
            return m * p
    return 10 * p


def row_ranks(values: np.ndarray, valid: np.ndarray | None = None,
              excluded: np.ndarray | None = None) -> np.ndarray:
    """Rank of each cell of ``values`` ``[r, m]`` among the valid, non-excluded cells of its
    row: ``(#smaller + (#equal - 1) / 2) / (count - 1)`` in [0, 1] (ties share the mean rank).

    ``valid`` (bool ``[r, m]``, default all) marks cells that hold a value: the others get
    NaN. Cells of ``excluded`` columns (bool ``[m]``, e.g. attention sinks) stay out of the
    ranking and get 1. The front end's ``rankRows`` (js/src/lib/scale.ts) is the same rule.
    """
    values = np.asarray(values)
    r, m = values.shape
    valid = np.ones((r, m), dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    excluded = np.zeros(m, dtype=bool) if excluded is None else np.asarray(excluded, dtype=bool)
    out = np.full((r, m), np.nan, dtype=np.float32)
    for i in range(r):
        ranked = valid[i] & ~excluded
        row = values[i, ranked]
        srt = np.sort(row)
        less = np.searchsorted(srt, row, side="left")
        leq = np.searchsorted(srt, row, side="right")
        out[i, ranked] = (less + (leq - less - 1) / 2) / (row.size - 1) if row.size > 1 else 1.0
        out[i, valid[i] & excluded] = 1.0
    return out
