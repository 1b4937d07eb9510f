"""Figures of interventions: the share of the gap each patched component restores."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..core.labels import head_label
from ..core.results import table_and_meta
from ..errors import InputError
from .attention import plot_head_map


def plot_patching(data: Any, *, value: str | None = None, ax: Axes | None = None) -> Figure:
    """The result of :func:`attnkit.patch` or :func:`attnkit.attribution_patching` at its grain.

    ``"head"``: a layer × head map; ``"head×position"``: one row per head (labelled "L-H",
    1-indexed) and one column per token position (0-indexed, as in the table);
    ``"residual×position"``: one row per layer; ``"layer"``: one cell per layer. Colours are
    centred on 0 (a share can be negative).

    Parameters
    ----------
    data : Result or HeadResult
        The patching result (its ``meta["grain"]`` says how to draw it).
    value : str, optional
        The column (default ``"restored"``).
    ax : matplotlib Axes, optional
        Draw into these axes (else a new figure, not registered with pyplot).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    InputError
        For a table without the column or a grain.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.plot.interventions import plot_patching
    >>> from attnkit.testing import tiny_model
    >>> r = ak.patch(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], grain="head×position",
    ...              progress=False)
    >>> [t.get_text() for t in plot_patching(r).axes[0].get_yticklabels()]
    ['1-1', '1-2', '2-1', '2-2']
    """
    table, meta = table_and_meta(data)
    col = value or "restored"
    grain = meta.get("grain")
    if col not in table.columns or grain is None:
        raise InputError(f"plot_patching draws a patching result with a {col!r} column and a "
                         f"grain in its meta; got columns {list(table.columns)}, grain {grain!r}.")
    what = "estimated share" if meta.get("method") == "attribution patching" else "share"
    title = f"{what} of the gap restored ({meta.get('metric', 'metric')})"
    series = table[col]
    if grain == "head":
        return plot_head_map(series, value=col, diverging=True, title=title, ax=ax)
    if grain == "layer":
        grid = series.to_numpy()[:, None]
        return plot_head_map(grid, col, diverging=True, title=title, ax=ax,
                             row_labels=[str(int(l) + 1) for l in series.index],
                             col_labels=[col], col_title="")
    wide = series.unstack("position")
    if grain == "head×position":
        rows = [head_label(l, h) for l, h in wide.index]
        row_title = "head"
    else:
        rows = [str(int(l) + 1) for l in wide.index]
        row_title = "layer (stream entering it)"
    return plot_head_map(np.asarray(wide.to_numpy(), dtype=float), col, diverging=True, title=title,
                         ax=ax, row_labels=rows, col_labels=[str(p) for p in wide.columns],
                         row_title=row_title, col_title="position", annotate=False)
