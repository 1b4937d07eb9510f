"""HeadMap widget: a layer × head grid of any per-head metric, click to select a head; and
the views of per-head results and of composition (:data:`attnkit.core.results.VIEWS`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from ..core.labels import head_label
from .._compat import renamed
from ..core import validate
from ..errors import InputError
from ..plot import attention as plots
from ..core.results import HeadResult, Result, head_table
from ._base import SelectsHead
from ._codec import wire


class HeadMap(SelectsHead):
    """One per-head metric as a layer × head grid of coloured cells.

    Hover shows the head and value; a click sets ``selected`` to ``[layer, head]``. Values
    travel as float32 bytes (L×H numbers; exact read-out on hover).

    Parameters
    ----------
    data : HeadResult, DataFrame, Series or ndarray
        A per-head result (``head_stats``, ``head_scores``, relation accuracy …), a
        table indexed by ``(layer, head)`` (0-indexed), or an array ``[layer, head]``.
        Heads without a value stay blank.
    value : str, optional
        The column to show (may be omitted when there is one numeric column).
    diverging : bool, optional
        Centre the colours on 0 (default: when values lie on both sides of 0).
    vmin, vmax : float, optional
        Colour range (default: the values' range).
    cmap : str
        Colour map name (default: one for the scale).
    n_layers, n_heads : int, optional
        Table size when the index does not reach the last layer/head.
    title : str, optional
        Title (default: "<value> per head").
    row_labels, col_labels : sequence of str, optional
        Text of each row and column (default: numbers from 1), for a grid whose rows and
        columns are not layers and heads (a source × target map); hover then names the cell
        by its labels, and ``selected`` is ``[row, column]``.
    row_title, col_title : str, optional
        Axis titles (default "layer" and "head").

    Raises
    ------
    InputError
        When ``data`` is not per-head, ``value`` is missing or ambiguous, or labels do not
        match the grid.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> view = ak.HeadMap(np.array([[0.1, -0.2], [0.3, 0.0]]))
    >>> view.table.tolist(), view.diverging
    ([[0.1, -0.2], [0.3, 0.0]], True)
    """

    _bundle_name = "headmap"

    values = traitlets.Dict().tag(sync=True)
    value_name = traitlets.Unicode("").tag(sync=True)
    cmap = traitlets.Unicode("").tag(sync=True)
    diverging = traitlets.Bool(False).tag(sync=True)
    vmin = traitlets.Float(None, allow_none=True).tag(sync=True)
    vmax = traitlets.Float(None, allow_none=True).tag(sync=True)
    row_labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    col_labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    row_title = traitlets.Unicode("layer").tag(sync=True)
    col_title = traitlets.Unicode("head").tag(sync=True)

    @renamed(positional=("value",), df="data")
    def __init__(
        self,
        data: HeadResult | pd.DataFrame | pd.Series | np.ndarray,
        *,
        value: str | None = None,
        diverging: bool | None = None,
        vmin: float | None = None,
        vmax: float | None = None,
        cmap: str = "",
        n_layers: int | None = None,
        n_heads: int | None = None,
        title: str | None = None,
        row_labels: Sequence[str] | None = None,
        col_labels: Sequence[str] | None = None,
        row_title: str = "layer",
        col_title: str = "head",
    ) -> None:
        n_layers = None if n_layers is None else validate.size(n_layers, "n_layers")
        n_heads = None if n_heads is None else validate.size(n_heads, "n_heads")
        shape = None
        if n_layers is not None or n_heads is not None:
            base, _ = head_table(data, value)
            shape = (n_layers or base.shape[0], n_heads or base.shape[1])
        table, name = head_table(data, value, shape=shape)
        finite = table[np.isfinite(table)]
        if diverging is None:
            diverging = bool(finite.size and finite.min() < 0 < finite.max())
        labels = []
        for side, got, n in (("row", row_labels, table.shape[0]), ("col", col_labels, table.shape[1])):
            got = [str(x) for x in got] if got is not None else []
            if got and len(got) != n:
                raise InputError(f"{side}_labels has {len(got)} labels for {n} {side}s.")
            labels.append(got)
        self._table = table
        super().__init__(
            n_layers=table.shape[0], n_heads=table.shape[1], values=wire(table, "float32"),
            value_name=name, diverging=diverging, vmin=vmin, vmax=vmax, cmap=cmap,
            title=title or f"{name} per head", row_labels=labels[0], col_labels=labels[1],
            row_title=row_title, col_title=col_title,
        )

    @property
    def table(self) -> np.ndarray:
        """The values as ``[layer, head]`` (NaN where a head has none)."""
        return self._table

    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of the layer × head grid (what reports and saved files show).

        Parameters
        ----------
        preview : bool
            Accepted for every widget; the grid has no detail to trade.

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot (nothing is shown or kept open).

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> fig = ak.HeadMap(np.arange(6.0).reshape(2, 3), title="demo").figure()
        >>> fig.axes[0].get_title(loc="left"), fig.axes[0].get_xlabel()
        ('demo', 'head')
        """
        return plots.plot_head_map(
            self._table, self.value_name, diverging=self.diverging, cmap=self.cmap or None,
            vmin=self.vmin, vmax=self.vmax, title=self.title,
            row_labels=self.row_labels or None, col_labels=self.col_labels or None,
            row_title=self.row_title, col_title=self.col_title,
        )

    def _alt_text(self) -> str:
        finite = self._table[np.isfinite(self._table)]
        if finite.size == 0:
            return f"{self.title}: no values"
        l, h = np.unravel_index(np.nanargmax(self._table), self._table.shape)
        if self.row_labels or self.col_labels:
            row = self.row_labels[l] if self.row_labels else str(l + 1)
            col = self.col_labels[h] if self.col_labels else str(h + 1)
            return (
                f"{self.title}: {self.n_layers} {self.row_title}s × {self.n_heads} "
                f"{self.col_title}s, values {finite.min():.3g} to {finite.max():.3g}, highest at "
                f"{self.row_title} {row}, {self.col_title} {col}."
            )
        return (
            f"{self.title}: {self.n_layers} layers × {self.n_heads} heads, values "
            f"{finite.min():.3g} to {finite.max():.3g}, highest at head {head_label(int(l), int(h))}."
        )


# ------------------------------------------------------------------ results' widgets
def composition_map(data: Result, *, kind: str = "k", **options: Any) -> HeadMap:
    """A :func:`~attnkit.composition` result as a source head × target head map of one kind
    of composition: rows the heads that write (layers 1 to L-1), columns the heads that read
    (layers 2 to L), blank where the source is not in an earlier layer.

    Parameters
    ----------
    data : Result
        The result of :func:`attnkit.composition`.
    kind : {"q", "k", "v"}
        Which composition.
    **options
        Passed on to :class:`HeadMap` (``cmap``, ``vmin``, ``vmax``, ``title``). ``vmin``
        defaults to the random baseline's mean (chance) when some value is above it.

    Returns
    -------
    HeadMap
        ``table[s, t]``: source ``s = layer · H + head`` (0-indexed), target ``t`` likewise
        from layer 1; labels read ``"L-H"`` (1-indexed).

    Raises
    ------
    InputError
        For an unknown kind.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> view = ak.composition(tiny_model("llama", layers=3), samples=4, progress=False).widget()
    >>> view.table.shape, view.row_labels[:3], view.col_labels[0]
    ((4, 4), ['1-1', '1-2', '2-1'], '2-1')
    """
    if kind not in ("q", "k", "v"):
        raise InputError(f"kind must be 'q', 'k' or 'v'; got {kind!r}.")
    L, H = int(data.meta["n_layers"]), int(data.meta["n_heads"])
    t = data.table
    grid = np.full(((L - 1) * H, (L - 1) * H), np.nan)
    sl, sh, tl, th = (t.index.get_level_values(n).to_numpy() for n in t.index.names)
    grid[sl * H + sh, (tl - 1) * H + th] = t[kind].to_numpy()
    heads = [head_label(layer, head) for layer in range(L) for head in range(H)]
    base = data.meta.get("baseline", {}).get(kind, {})
    note = f" (random baseline p99 {base['p99']:.2f})" if "p99" in base else ""
    if "mean" in base and np.nanmax(grid) > float(base["mean"]):
        # colours from chance up: the baseline's mean is the cold end, so a value above its
        # 99th percentile reads warm, not cold beside the largest one (values at or below the
        # mean, no more than random matrices give, all take the cold end)
        options.setdefault("vmin", float(base["mean"]))
        note = f" (colour from the random baseline's mean {base['mean']:.2f}; its p99 {base['p99']:.2f})"
    options.setdefault("title", f"{kind.upper()}-composition, source head × target head{note}")
    return HeadMap(grid, value=f"{kind}-composition", row_labels=heads[:-H],
                   col_labels=heads[H:], row_title="source", col_title="target", **options)


def head_result_map(data: HeadResult, *, value: str | None = None, **options: Any) -> HeadMap:
    """A per-head result as a :class:`HeadMap` of one column (what ``HeadResult.widget()``
    shows).

    Parameters
    ----------
    data : HeadResult
        Indexed by ``(layer, head)``.
    value : str, optional
        The column (default the result's :meth:`~attnkit.HeadResult.value_column`).
    **options
        Passed on to :class:`HeadMap`.

    Returns
    -------
    HeadMap
        Titled with the column's name unless ``title`` is given.

    Examples
    --------
    >>> import pandas as pd
    >>> from attnkit.core.results import HeadResult, head_index
    >>> r = HeadResult(pd.DataFrame({"cls": [0.1, 0.7, 0.2, 0.4]}, index=head_index(2, 2)))
    >>> head_result_map(r).title
    'cls'
    """
    value = data.value_column(value)
    options.setdefault("title", value)
    return HeadMap(data.grid(value), value=value, **options)
