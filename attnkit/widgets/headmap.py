"""HeadMap widget: a layer × head grid of any per-head metric, click to select a head."""

from __future__ import annotations

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from .._compat import renamed
from ..plot import attention as plots
from ..results import head_table
from ..results import HeadResult
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

    Raises
    ------
    InputError
        When ``data`` is not per-head, or ``value`` is missing or ambiguous.

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
    ) -> None:
        shape = None
        if n_layers is not None or n_heads is not None:
            base, _ = head_table(data, value)
            shape = (n_layers or base.shape[0], n_heads or base.shape[1])
        table, name = head_table(data, value, shape=shape)
        finite = table[np.isfinite(table)]
        if diverging is None:
            diverging = bool(finite.size and finite.min() < 0 < finite.max())
        self._table = table
        super().__init__(
            n_layers=table.shape[0], n_heads=table.shape[1], values=wire(table, "float32"),
            value_name=name, diverging=diverging, vmin=vmin, vmax=vmax, cmap=cmap,
            title=title or f"{name} per head",
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
        )

    def _alt_text(self) -> str:
        finite = self._table[np.isfinite(self._table)]
        if finite.size == 0:
            return f"{self.title}: no values"
        l, h = np.unravel_index(np.nanargmax(self._table), self._table.shape)
        return (
            f"{self.title}: {self.n_layers} layers × {self.n_heads} heads, values "
            f"{finite.min():.3g} to {finite.max():.3g}, highest at head {l + 1}-{h + 1}."
        )
