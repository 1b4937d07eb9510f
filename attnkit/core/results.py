"""Result types: a table plus what its numbers mean.

:class:`Result` is any analysis table with its metadata; :class:`HeadResult` is the one
type of every per-head result: a DataFrame indexed by ``(layer, head)`` (0-indexed), with
``direction`` as a column where the analysis has one. Metadata that used to ride in
``DataFrame.attrs`` (which pandas drops on most operations) lives in ``.meta``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pandas as pd

from ..errors import InputError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..widgets._base import AttnkitWidget
    from ..widgets.headmap import HeadMap

_OWN = frozenset({"table", "meta", "_plot", "_widget"})

#: How results are drawn, filled by the view layer when it is imported (as pandas' plotting
#: backends are), so the core never imports a view: a figure name -> ``draw(result, ax=None,
#: **options) -> Figure`` (filled by :mod:`attnkit.plot.results`), a view name ->
#: ``make(result, **options) -> widget`` (filled by :mod:`attnkit.widgets`). Analyses name their
#: result's figure and view (``Result(table, meta, plot="head_stats", widget="composition")``).
FIGURES: dict[str, Callable[..., Any]] = {}
VIEWS: dict[str, Callable[..., Any]] = {}


def _drawer(registry: dict[str, Callable[..., Any]], name: str, what: str) -> Callable[..., Any]:
    if not registry:
        raise InputError(f"No {what} is registered: import attnkit (its views fill the registry).")
    if name not in registry:
        raise InputError(f"No {what} named {name!r}; known: {', '.join(sorted(registry))}.")
    return registry[name]


class Result:
    """A table of results and its metadata.

    Parameters
    ----------
    table : pandas.DataFrame
        The numbers.
    meta : dict, optional
        What they mean: items counted, baselines, what was chosen on which data.
    plot : str or callable, optional
        The figure of :meth:`plot`: a name of :data:`FIGURES`
        (how analyses name theirs), or ``plot(result, ax=None, **options) -> Figure``; the
        default draws the table's numeric columns as bars.
    widget : str, optional
        The widget of :meth:`widget`: a name of :data:`VIEWS`
        (``"composition"``); None when the result has none.

    Column access and DataFrame attributes are forwarded to :attr:`table`, so
    ``result["uas"]`` and ``result.loc[...]`` read the table.

    Examples
    --------
    >>> import pandas as pd
    >>> from attnkit.core.results import Result
    >>> r = Result(pd.DataFrame({"uas": [0.5, 0.7]}, index=["argmax", "mst"]), {"n_items": 2})
    >>> float(r["uas"].max()), r.meta["n_items"]
    (0.7, 2)
    """

    _widget: str | None = None

    def __init__(
        self,
        table: pd.DataFrame,
        meta: dict[str, Any] | None = None,
        *,
        plot: str | Callable[..., "Figure"] | None = None,
        widget: str | None = None,
    ) -> None:
        if not isinstance(table, pd.DataFrame):
            raise InputError(f"A result's table must be a pandas DataFrame, not {type(table).__name__}.")
        self.table = table
        self.meta: dict[str, Any] = dict(meta or {})
        self._plot = plot
        self._widget = widget

    # ------------------------------------------------------------ DataFrame-like reading
    def __getattr__(self, name: str) -> Any:
        if name in _OWN or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.table, name)

    def __getitem__(self, key: Any) -> Any:
        return self.table[key]

    def __len__(self) -> int:
        return len(self.table)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.table)

    def __contains__(self, key: Any) -> bool:
        return key in self.table

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return type(self) is type(other) and self.table.equals(other.table) and _meta_equal(self.meta, other.meta)

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        # every attribute, so a subclass's own (Comparison's graphs) survive a pickle too
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        meta = ", ".join(f"{k}={_short(v)}" for k, v in self.meta.items())
        return f"{type(self).__name__}({meta})\n{self.table!r}"

    def _repr_html_(self) -> str:
        import html

        meta = "".join(
            f"<li><b>{html.escape(str(k))}</b>: {html.escape(_short(v))}</li>" for k, v in self.meta.items()
        )
        return f"<div><ul style='margin:0 0 4px'>{meta}</ul>{self._html_rows()}</div>"

    def _html_rows(self) -> str:
        """The table as HTML (at most 40 rows) for :meth:`_repr_html_`; results whose table
        is made on demand show their rows without making all of it."""
        return self.table.to_html(max_rows=40)

    @property
    def attrs(self) -> dict[str, Any]:
        """Deprecated: the metadata that results used to keep in ``DataFrame.attrs``; use
        :attr:`meta`."""
        warnings.warn("result.attrs is deprecated; use result.meta (pandas drops DataFrame.attrs).",
                      DeprecationWarning, stacklevel=2)
        return self.meta

    # ------------------------------------------------------------------------- views
    def plot(self, ax: "Axes | None" = None, **options: Any) -> "Figure":
        """A matplotlib figure of the result (see the producing function for what it draws).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Draw into these axes (else a new figure).
        **options
            Passed on to the figure (:data:`FIGURES`).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.

        Examples
        --------
        >>> import pandas as pd
        >>> fig = Result(pd.DataFrame({"uas": [0.7, 0.5]})).plot()
        >>> len(fig.axes)
        1
        """
        return self._draw("table", ax=ax, **options)

    def widget(self, **options: Any) -> "AttnkitWidget":
        """The interactive view of the result, where its analysis names one
        (:func:`~attnkit.composition`: a source × target :class:`~attnkit.HeadMap`).

        Parameters
        ----------
        **options
            Passed on to the widget (:data:`VIEWS`).

        Returns
        -------
        AttnkitWidget
            The widget.

        Raises
        ------
        InputError
            When the result names no widget.

        Examples
        --------
        >>> import pandas as pd
        >>> Result(pd.DataFrame({"uas": [0.7]})).widget()
        Traceback (most recent call last):
        ...
        attnkit.errors.InputError: This result has no widget; its figure is result.plot().
        """
        kind = self._widget  # results pickled before widgets were named: the class's None
        if kind is None:
            raise InputError("This result has no widget; its figure is result.plot().")
        return _drawer(VIEWS, kind, "view")(self, **options)

    def _draw(self, default: str, **options: Any) -> "Figure":
        if callable(self._plot):
            return self._plot(self, **options)
        return _drawer(FIGURES, self._plot or default, "figure")(self, **options)


class HeadResult(Result):
    """A per-head result: ``table`` indexed by ``(layer, head)``, 0-indexed.

    Parameters
    ----------
    table : pandas.DataFrame
        Indexed by a ``(layer, head)`` MultiIndex; a ``direction`` column where it applies.
    meta : dict, optional
        What the numbers mean.
    value : str, optional
        The column :meth:`plot` and :meth:`widget` show by default (else the first numeric).
    plot : str or callable, optional
        As in :class:`Result`; the default draws a layer × head map of ``value``.

    Examples
    --------
    >>> import pandas as pd
    >>> from attnkit.core.results import HeadResult
    >>> from attnkit.core.results import head_index
    >>> r = HeadResult(pd.DataFrame({"cls": range(6)}, index=head_index(2, 3), dtype=float), {"n_items": 4})
    >>> r.n_layers, r.n_heads, float(r.loc[(1, 2), "cls"])
    (2, 3, 5.0)
    >>> r.best("cls")
    (1, 2)
    """

    def __init__(
        self,
        table: pd.DataFrame,
        meta: dict[str, Any] | None = None,
        *,
        value: str | None = None,
        plot: str | Callable[..., "Figure"] | None = None,
    ) -> None:
        super().__init__(table, meta, plot=plot)
        if list(table.index.names) != ["layer", "head"]:
            raise InputError(
                f"A per-head table is indexed by (layer, head); this one by {list(table.index.names)}."
            )
        self.meta.setdefault("value", value)

    @property
    def n_layers(self) -> int:
        """Number of layers the table reaches (largest layer index + 1)."""
        return int(self.table.index.get_level_values("layer").max()) + 1 if len(self.table) else 0

    @property
    def n_heads(self) -> int:
        """Number of heads per layer the table reaches (largest head index + 1)."""
        return int(self.table.index.get_level_values("head").max()) + 1 if len(self.table) else 0

    def value_column(self, value: str | None = None) -> str:
        """The column shown for ``value``: itself, else ``meta["value"]``, else the first
        numeric column.

        Parameters
        ----------
        value : str, optional
            A column name.

        Returns
        -------
        str
            A column of :attr:`table`.

        Raises
        ------
        InputError
            When the table has no such (or no numeric) column.

        Examples
        --------
        >>> import pandas as pd
        >>> idx = pd.MultiIndex.from_product([[0], [0, 1]], names=["layer", "head"])
        >>> HeadResult(pd.DataFrame({"cls": [0.5, 0.25]}, index=idx)).value_column()
        'cls'
        """
        value = value or self.meta.get("value")
        if value is None:
            numeric = self.table.select_dtypes("number").columns
            if not len(numeric):
                raise InputError("This result has no numeric column to show.")
            value = str(numeric[0])
        if value not in self.table.columns:
            raise InputError(f"No column {value!r}; the columns are {list(self.table.columns)}.")
        return value

    def grid(self, value: str | None = None) -> np.ndarray:
        """float64 ``[layer, head]`` array of one column (NaN where a head has no row).

        Parameters
        ----------
        value : str, optional
            The column (default :meth:`value_column`).

        Returns
        -------
        ndarray
            float64 ``[layer, head]``; with a ``direction`` column, the larger of the two.

        Examples
        --------
        >>> import pandas as pd
        >>> idx = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
        >>> r = HeadResult(pd.DataFrame({"cls": [0.1, 0.7, 0.2, 0.4]}, index=idx))
        >>> r.grid("cls").tolist()
        [[0.1, 0.7], [0.2, 0.4]]
        """
        value = self.value_column(value)
        table = self.table[[value]]
        if "direction" in self.table.columns:
            table = table.groupby(level=["layer", "head"]).max()
        return head_table(table, value, shape=(self.n_layers, self.n_heads))[0]

    def best(self, value: str | None = None, *, largest: bool = True) -> tuple[int, int]:
        """The ``(layer, head)`` with the largest (or smallest) ``value``.

        Parameters
        ----------
        value : str, optional
            The column (default :meth:`value_column`).
        largest : bool
            The largest (default) or the smallest value.

        Returns
        -------
        tuple of int
            ``(layer, head)``, 0-indexed.

        Examples
        --------
        >>> import pandas as pd
        >>> idx = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
        >>> r = HeadResult(pd.DataFrame({"cls": [0.1, 0.7, 0.2, 0.4]}, index=idx))
        >>> r.best("cls"), r.best("cls", largest=False)
        ((0, 1), (0, 0))
        """
        g = self.grid(value)
        flat = np.nanargmax(g) if largest else np.nanargmin(g)
        layer, head = np.unravel_index(flat, g.shape)
        return int(layer), int(head)

    def plot(self, ax: "Axes | None" = None, value: str | None = None, **options: Any) -> "Figure":
        """A layer × head map of ``value`` (1-indexed "L-H" labels, as in the papers), or
        the figure the producing analysis names.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Draw into these axes (else a new figure).
        value : str, optional
            The column (default :meth:`value_column`).
        **options
            Passed on to the figure.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.

        Examples
        --------
        >>> import pandas as pd
        >>> idx = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
        >>> r = HeadResult(pd.DataFrame({"cls": [0.1, 0.7, 0.2, 0.4]}, index=idx))
        >>> len(r.plot().axes) >= 1
        True
        """
        return self._draw("head_map", ax=ax, value=value, **options)

    def widget(self, value: str | None = None, **options: Any) -> "HeadMap":
        """A :class:`~attnkit.HeadMap` of ``value``: hover for numbers, click to select.

        Parameters
        ----------
        value : str, optional
            The column (default :meth:`value_column`).
        **options
            Passed on to :class:`~attnkit.HeadMap`.

        Returns
        -------
        HeadMap
            The widget.

        Examples
        --------
        >>> import pandas as pd
        >>> idx = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
        >>> r = HeadResult(pd.DataFrame({"cls": [0.1, 0.7, 0.2, 0.4]}, index=idx))
        >>> r.widget("cls").title
        'cls'
        """
        return _drawer(VIEWS, "head_map", "view")(self, value=value, **options)


def head_index(n_layers: int, n_heads: int) -> pd.MultiIndex:
    """The index of a per-head table: every ``(layer, head)`` (0-indexed), layer by layer.

    Parameters
    ----------
    n_layers, n_heads : int
        Layers and heads per layer.

    Returns
    -------
    pandas.MultiIndex
        Levels named ``layer`` and ``head``; head ``h`` of layer ``l`` is row ``l * n_heads + h``.

    Examples
    --------
    >>> from attnkit.core.results import head_index
    >>> head_index(2, 2).tolist()
    [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    return pd.MultiIndex.from_product([range(int(n_layers)), range(int(n_heads))],
                                      names=["layer", "head"])


def head_frame(values: Mapping[str, Any] | np.ndarray,
               columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The table of a per-head result (:class:`HeadResult`) from ``[layer, head]`` arrays.

    Parameters
    ----------
    values : mapping of str to array, or array
        Column name -> ``[layer, head]`` array; or one ``[layer, head, column]`` array.
    columns : sequence of str, optional
        The column names of an array ``values`` (default 0, 1, ...).

    Returns
    -------
    pandas.DataFrame
        Indexed by :func:`head_index`.

    Raises
    ------
    InputError
        When the arrays are not ``[layer, head]`` of one shape.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.results import head_frame
    >>> t = head_frame(np.arange(8.0).reshape(2, 2, 2), ["cls", "sep"])
    >>> t.loc[(1, 0)].tolist()
    [4.0, 5.0]
    >>> head_frame({"edges": np.array([[3, 0], [1, 2]])})["edges"].tolist()
    [3, 0, 1, 2]
    """
    if isinstance(values, Mapping):
        arrays = {str(k): np.asarray(v) for k, v in values.items()}
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise InputError(f"per-head columns must be [layer, head] arrays of one shape; "
                             f"got {sorted(shapes)}.")
        (shape,) = shapes
        return pd.DataFrame({k: a.ravel() for k, a in arrays.items()}, index=head_index(*shape))
    arr = np.asarray(values)
    if arr.ndim == 2:
        arr = arr[..., None]
    if arr.ndim != 3:
        raise InputError(f"per-head values must be [layer, head, column]; got shape {arr.shape}.")
    L, H, K = arr.shape
    return pd.DataFrame(arr.reshape(L * H, K), index=head_index(L, H),
                        columns=list(columns) if columns is not None else None)


def _short(v: Any) -> str:
    text = repr(v) if not isinstance(v, float) else f"{v:.4g}"
    return text if len(text) <= 80 else text[:77] + "..."


def _meta_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, (pd.DataFrame, pd.Series)):
            if not (isinstance(y, type(x)) and x.equals(y)):
                return False
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True):
                return False
        elif isinstance(x, float) and isinstance(y, float) and np.isnan(x) and np.isnan(y):
            continue
        elif x != y:
            return False
    return True


def table_and_meta(obj: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(table, meta)`` of a :class:`Result`, or of a DataFrame (its ``attrs``) from code
    written before results carried their metadata."""
    if isinstance(obj, Result):
        return obj.table, obj.meta
    if isinstance(obj, pd.DataFrame):
        return obj, dict(obj.attrs)
    if isinstance(obj, pd.Series):
        return obj.to_frame(), dict(obj.attrs)
    raise InputError(f"Expected an attnkit result or a DataFrame, not {type(obj).__name__}.")


def head_table(
    data: pd.DataFrame | pd.Series | np.ndarray,
    value: str | None = None,
    shape: tuple[int, int] | None = None,
) -> tuple[np.ndarray, str]:
    """A per-head metric as a float array ``[layer, head]`` (NaN where a head has no value).

    ``data`` is a DataFrame or Series indexed by ``(layer, head)`` (0-indexed; a DataFrame
    may instead have ``layer`` and ``head`` columns), or an array ``[layer, head]``. ``value`` names the DataFrame column; it may be omitted when the
    DataFrame has exactly one numeric column. ``shape`` ``(L, H)`` fixes the table size
    (default: one more than the largest layer and head in the index).
    Returns the table and the metric's name.
    """
    if isinstance(data, HeadResult) and "direction" in data.columns:
        return data.grid(value), data.value_column(value)
    if isinstance(data, Result):
        data = data.table
    if isinstance(data, np.ndarray):
        arr = np.asarray(data, dtype=np.float64)
        if arr.ndim != 2:
            raise InputError(f"a per-head array must be [layer, head]; got shape {arr.shape}.")
        if shape is not None and arr.shape != tuple(shape):
            raise InputError(f"per-head array has shape {arr.shape} but the attention has {tuple(shape)}.")
        return arr, value or "value"
    if isinstance(data, pd.DataFrame):
        if not isinstance(data.index, pd.MultiIndex) and {"layer", "head"} <= set(data.columns):
            data = data.set_index(["layer", "head"])
        numeric = [c for c in data.columns if pd.api.types.is_numeric_dtype(data[c])]
        if value is None:
            if len(numeric) != 1:
                raise InputError(
                    "the DataFrame has several numeric columns "
                    f"({', '.join(map(str, numeric)) or 'none'}); pass value=<column name>."
                )
            value = str(numeric[0])
        if value not in data.columns:
            raise InputError(f"column {value!r} not in the DataFrame; columns are {list(data.columns)}.")
        series = data[value]
    elif isinstance(data, pd.Series):
        series = data
        value = value or (str(data.name) if data.name is not None else "value")
    else:
        raise InputError(
            f"expected a DataFrame/Series indexed by (layer, head) or an array [layer, head]; "
            f"got {type(data).__name__}."
        )
    index = series.index
    if not isinstance(index, pd.MultiIndex) or index.nlevels != 2:
        raise InputError(
            "the per-head table must be indexed by (layer, head), e.g. df.set_index(['layer', 'head'])."
        )
    if not pd.api.types.is_numeric_dtype(series):
        raise InputError(f"column {value!r} is not numeric.")
    layers = np.asarray(index.get_level_values(0))
    heads = np.asarray(index.get_level_values(1))
    if not (np.issubdtype(layers.dtype, np.integer) and np.issubdtype(heads.dtype, np.integer)):
        raise InputError("the (layer, head) index must hold integers (0-indexed).")
    if len(layers) and (layers.min() < 0 or heads.min() < 0):
        raise InputError("layers and heads are 0-indexed and cannot be negative.")
    if shape is None:
        shape = (int(layers.max()) + 1, int(heads.max()) + 1) if len(layers) else (0, 0)
    elif len(layers) and (layers.max() >= shape[0] or heads.max() >= shape[1]):
        raise InputError(
            f"the table names layer {layers.max()} / head {heads.max()} but the attention has "
            f"{shape[0]} layers × {shape[1]} heads (0-indexed)."
        )
    arr = np.full(shape, np.nan)
    arr[layers, heads] = series.to_numpy(dtype=np.float64)
    return arr, str(value)
