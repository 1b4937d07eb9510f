"""The one reader of attention: dense, lazy and stored maps, band by band, in one pass.

Every analysis and view reads any :class:`~attnkit.core.types.AttentionLike` through this module:

- :func:`read`: a block of one or more heads. Dense :class:`~attnkit.Attention` hands back
  views of its maps; any other attention (:class:`~attnkit.runtime.lazy.LazyAttention` computes its
  blocks on demand from queries and keys) is read through its ``block`` reader.
- :func:`bands`: a head's map (or several heads' together, when they fit) a band of rows at a
  time, and only the columns the band can attend to (causal models: up to the band's last
  row; lazy attention: the span its mask lets through). Memory stays at one band
  (:data:`BAND_ELEMENTS` floats) plus what the reduction keeps. :func:`row_bands` and
  :func:`head_mean` are built on it.
- :func:`summarize`: every reduction a caller needs from a head — pooled levels
  (:class:`GridPool`), pooled overviews (:class:`EdgePool`), the extremes with and without
  sink columns (:class:`Extremes`), the head statistics (:class:`attnkit.core.headstats.HeadStats`)
  — computed in **one** pass over its bands (the products in torch, the reductions in
  numpy). Results are kept per ``(attention, layer, head)`` (up to :data:`CACHE_BYTES`), so
  two views of one attention read each head once. A long pass (:data:`PARALLEL_CELLS` and
  up) reads its bands in worker threads, torch on one thread in each, and folds them in band
  order: memory is then one band per worker.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .attention import Attention, pool_edges, row_shares
from ..errors import InputError
from .types import AttentionLike

#: Float32 elements of one band (16 MiB): bands of one head have ``max(1, BAND_ELEMENTS // n)``
#: rows; the heads of a layer are read together when all their rows fit in one band.
BAND_ELEMENTS = 1 << 22

#: Bytes of per-head results :func:`summarize` keeps for later callers (least recently used
#: dropped first).
CACHE_BYTES = 256 << 20

Rows = Any  # a slice, or a sorted int array of positions


def columns_of(att: Any, rows: slice, *, n: int | None = None) -> slice:
    """The columns outside which ``rows`` hold no attention: what the mask lets them see
    (``att.support`` where attention knows it), else up to the last row for causal attention,
    else all columns.

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input (or any source with ``block``).
    rows : slice
        Query positions (``rows.stop`` set).
    n : int, optional
        Positions of the map (default ``len(att)``).

    Returns
    -------
    slice
        Key positions; every entry of ``rows`` outside them is zero.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> causal = Attention.from_maps(np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None],
    ...                              ["<s>", "a", "b", "c"])
    >>> columns_of(causal, slice(1, 3))  # rows 1 and 2 see keys 0 to 2
    slice(0, 3, None)
    """
    support = getattr(att, "support", None)
    if callable(support):
        return support(rows)
    n = len(att) if n is None else int(n)
    return slice(0, min(n, rows.stop)) if getattr(att, "causal", False) else slice(0, n)


def read(att: Any, layer: int, heads: Sequence[int], rows: Rows, cols: slice) -> np.ndarray:
    """Float32 ``[len(heads), rows, cols]``: a block of several heads of one layer.

    Dense :class:`~attnkit.Attention` gives views of its maps (a copy only for rows given as
    positions or heads that are not a run); anything else is read with
    ``att.block(layer, head, rows, cols)``, one head at a time.

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention (or any source with ``block``).
    layer : int
        0-indexed layer.
    heads : sequence of int
        0-indexed heads.
    rows : slice or array of int
        Query positions (ascending).
    cols : slice
        Key positions.

    Returns
    -------
    ndarray
        Float32 ``[len(heads), len(rows), len(cols)]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.full((1, 3, 4, 4), 0.25), ["a", "b", "c", "d"])
    >>> read(att, 0, [0, 2], slice(1, 3), slice(0, 4)).shape
    (2, 2, 4)
    """
    heads = [int(h) for h in heads]
    if isinstance(att, Attention):
        maps = att.maps[layer]
        run = len(heads) > 0 and heads == list(range(heads[0], heads[0] + len(heads)))
        block = maps[heads[0]:heads[0] + len(heads)] if run else maps[heads]
        return np.asarray(block[:, rows][:, :, cols], dtype=np.float32)
    parts = [np.asarray(att.block(layer, h, rows, cols), dtype=np.float32) for h in heads]
    return parts[0][None] if len(parts) == 1 else np.stack(parts)


@dataclass(frozen=True)
class Band:
    """A band of rows of some heads of one layer: ``values[i]`` is head ``heads[i]``'s block
    ``[rows, cols]`` (float32); every entry of these rows outside ``cols`` is zero.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.full((1, 2, 3, 3), 1 / 3), ["a", "b", "c"])
    >>> band = next(bands(att, 0))
    >>> band.heads, band.span, band.values.shape
    ((0, 1), slice(0, 3, None), (2, 3, 3))
    """

    heads: tuple[int, ...]
    rows: Rows
    cols: slice
    values: np.ndarray
    #: what the reductions of one pass share about the band (see :func:`column_bins`)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def span(self) -> slice:
        """The rows from the band's first to its last (a slice)."""
        if isinstance(self.rows, slice):
            return self.rows
        return slice(int(self.rows[0]), int(self.rows[-1]) + 1)

    def tensor(self) -> Any:
        """``values`` as a float32 torch tensor ``[h, r, c]`` (the same memory when it is
        writable), made once per band."""
        if "tensor" not in self.memo:
            import torch

            values = self.values if self.values.flags.writeable else self.values.copy()
            self.memo["tensor"] = torch.from_numpy(values)  # torch refuses read-only memory
        return self.memo["tensor"]


def bands(att: Any, layer: int, heads: Iterable[int] | None = None, *, rows: Any = None,
          elements: int | None = None, align: int = 1, edges: Sequence[np.ndarray] = (),
          shares: bool = False, n: int | None = None) -> Iterator[Band]:
    """Yield :class:`Band` s covering the maps of ``heads`` of one layer, band of rows by band
    of rows, each reading only the columns its rows can attend to.

    When all heads' rows fit in ``elements`` floats they come as one band; otherwise one
    head at a time, bands of ``max(align, elements // n)`` rows (a multiple of ``align``).

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input (or any source with ``block``; then give ``n``).
    layer : int
        0-indexed layer.
    heads : iterable of int, optional
        The heads (default all).
    rows : array of int, optional
        Only these query positions (ascending, unique); default all.
    elements : int, optional
        Largest number of floats a band holds (at least ``align`` rows); default
        :data:`BAND_ELEMENTS`.
    align : int
        Band starts are multiples of this (with ``rows`` None).
    edges : sequence of ndarray
        Column edges (ascending, from 0 to ``n``) each band's columns are widened out to.
    shares : bool
        Read maps of a measure other than weights as each row's shares
        (:func:`~attnkit.core.attention.row_shares`).
    n : int, optional
        Positions of the map (default ``len(att)``).

    Yields
    ------
    Band

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> att = tiny_model("gpt2", heads=2).attend("The cat sat.", lazy=True)  # causal
    >>> [(b.heads, b.rows, b.cols.stop) for b in bands(att, 1)]  # both heads fit in one band
    [((0, 1), slice(0, 7, None), 7)]
    >>> [(b.heads, b.rows.start, b.cols.stop) for b in bands(att, 1, [1], elements=21)]
    [((1,), 0, 3), ((1,), 3, 6), ((1,), 6, 7)]
    """
    measure = getattr(att, "measure", "weights")
    for group, r, cols in _plan(att, layer, heads, rows=rows, elements=elements, align=align,
                                edges=edges, n=n):
        values = read(att, layer, group, r, cols)
        if shares and measure != "weights":
            values = row_shares(values, measure)
        yield Band(group, r, cols, values)


def _plan(att: Any, layer: int, heads: Iterable[int] | None = None, *, rows: Any = None,
          elements: int | None = None, align: int = 1, edges: Sequence[np.ndarray] = (),
          n: int | None = None) -> Iterator[tuple[tuple[int, ...], Rows, slice]]:
    """The ``(heads, rows, cols)`` of each band :func:`bands` reads, in its order (reads nothing)."""
    n = len(att) if n is None else int(n)
    heads = tuple(range(att.n_heads)) if heads is None else tuple(int(h) for h in heads)
    budget = max(1, int(elements or BAND_ELEMENTS))
    positions = None if rows is None else np.asarray(rows, dtype=np.int64)
    count = n if positions is None else len(positions)
    if count == 0 or not heads:
        return
    if len(heads) * count * n <= budget:
        groups, step = [heads], count
    else:
        align = max(1, int(align))
        groups, step = [(h,) for h in heads], max(align, budget // max(1, n) // align * align)
    for group in groups:
        for a in range(0, count, step):
            if positions is None:
                r: Rows = slice(a, min(n, a + step))
                span = r
            else:
                sub = positions[a:a + step]
                span = slice(int(sub[0]), int(sub[-1]) + 1)
                r = span if span.stop - span.start == len(sub) else sub
            yield group, r, _widen(columns_of(att, span, n=n), edges)


def _widen(cols: slice, edges: Sequence[np.ndarray]) -> slice:
    """``cols`` widened out to the nearest of each array of edges."""
    lo, hi = cols.start, cols.stop
    if hi <= lo:
        return cols
    for e in edges:
        lo = min(lo, int(e[np.searchsorted(e, cols.start, side="right") - 1]))
        hi = max(hi, int(e[np.searchsorted(e, cols.stop, side="left")]))
    return slice(lo, hi)


def row_bands(att: AttentionLike, layer: int, head: int, *,
              elements: int | None = None) -> Iterator[tuple[slice, slice, np.ndarray]]:
    """Yield ``(rows, cols, block)`` covering the map of one head, band of rows by band
    of rows: ``block = att.block(layer, head, rows, cols)`` (float32), and every entry of those
    rows outside ``cols`` is zero (:func:`bands` of one head).

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input.
    layer, head : int
        The head (0-indexed).
    elements : int, optional
        Largest number of floats a band holds (rows are cut to fit; at least one row);
        default :data:`BAND_ELEMENTS`.

    Yields
    ------
    tuple
        ``(rows, cols, block)``: two slices and a ``[rows, cols]`` float32 array.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None],
    ...                           ["<s>", "a", "b", "c"], causal=True)
    >>> [(r.start, r.stop, c.stop) for r, c, _ in row_bands(att, 0, 0, elements=8)]
    [(0, 2, 2), (2, 4, 4)]
    """
    for band in bands(att, layer, (head,), elements=elements):
        yield band.rows, band.cols, band.values[0]


def head_mean(att: AttentionLike, layer: int, heads: list[int] | None = None, *,
              shares: bool = False) -> np.ndarray:
    """Float64 ``[n, n]``: the mean map over ``heads`` (all heads by default) of one layer,
    accumulated band by band (materialises that one ``[n, n]`` matrix; ``[target, source]``
    for cross-attention, whose ``n_columns`` are its source positions).

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input.
    layer : int
        0-indexed layer.
    heads : list of int, optional
        The heads averaged (default all).
    shares : bool
        Average each row's shares (:func:`~attnkit.core.attention.row_shares`) of maps of another
        measure than weights, and refuse negative or non-finite values: the mean of
        distributions.

    Returns
    -------
    ndarray
        Float64 ``[n, n]``.

    Raises
    ------
    InputError
        With ``shares``, for negative or non-finite values.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> maps = np.stack([np.eye(3), np.full((3, 3), 1 / 3)])[None]
    >>> att = Attention.from_maps(maps, ["[CLS]", "a", "[SEP]"])
    >>> head_mean(att, 0).round(4)[0].tolist()   # (1 + 1/3) / 2 and (0 + 1/3) / 2
    [0.6667, 0.1667, 0.1667]
    """
    n = len(att)
    heads = list(range(att.n_heads)) if heads is None else list(heads)
    out = np.zeros((n, int(getattr(att, "n_columns", n))), dtype=np.float64)
    for band in bands(att, layer, heads, shares=shares):
        if shares and not (np.isfinite(band.values).all() and (band.values >= 0).all()):
            raise InputError("Attention maps contain negative or non-finite values; "
                             "pass probabilities (rows of softmax outputs).")
        out[band.rows, band.cols] += band.values.sum(0, dtype=np.float64)
    out /= max(1, len(heads))
    return out


# --------------------------------------------------------------------- one pass per head
@runtime_checkable
class Reduction(Protocol):
    """One reduction of a head's map that :func:`summarize` computes from every band.

    ``key`` names the result (heads' results are kept under it); ``align`` is what band
    starts must be a multiple of; ``edges(n)`` the column edges bands are widened out to
    (or None); ``start(n, heads)`` makes the running state of ``heads`` heads.
    ``prepare(band, n)`` is the band's part of the result, computed from the band alone
    (the bulk of the work: it may run in a worker thread, beside other bands' parts; it may
    share work with the other reductions of the pass through ``band.memo``); ``add``
    folds that part into the state (``index``: the positions of the band's heads in it), in
    band order, and ``finish`` gives one result per head.

    Examples
    --------
    >>> isinstance(GridPool(2), Reduction), GridPool(2).align
    (True, 4)
    """

    @property
    def key(self) -> Hashable: ...

    @property
    def align(self) -> int: ...

    def edges(self, n: int) -> np.ndarray | None: ...

    def start(self, n: int, heads: int) -> Any: ...

    def prepare(self, band: Band, n: int) -> Any: ...

    def add(self, state: Any, part: Any, index: list[int]) -> None: ...

    def finish(self, state: Any) -> list[Any]: ...


@dataclass(frozen=True)
class Pooled:
    """One level of a head's map pooled into bins: float32 ``[m, m]`` each of the bins'
    largest, smallest and mean value.

    Examples
    --------
    >>> import numpy as np
    >>> p = Pooled(np.array([[0.5]]), np.array([[-0.75]]), np.array([[0.0]]))
    >>> p.signed().tolist()  # the value of largest magnitude
    [[-0.75]]
    """

    max: np.ndarray
    min: np.ndarray
    mean: np.ndarray

    def signed(self) -> np.ndarray:
        """Per bin the value of largest magnitude, sign kept (the max for weights)."""
        return np.where(-self.min > self.max, self.min, self.max).astype(np.float32)


@dataclass(frozen=True)
class ColumnBins:
    """Per row of a band, the largest and smallest value of each bin of ``width`` columns
    (bins from column 0, the last one partial at ``n``): ``max``/``min`` float32
    ``[h, r, bins]`` over columns ``start:stop``, the whole bins inside the band's columns
    (the band's other columns lie outside the mask: zeros). Made by :func:`column_bins`.

    Examples
    --------
    >>> import numpy as np
    >>> bins = ColumnBins(2, 0, 4, np.ones((1, 1, 2)), np.zeros((1, 1, 2)))
    >>> bins.max.shape[2] * bins.width == bins.stop - bins.start
    True
    """

    width: int
    start: int
    stop: int
    max: np.ndarray
    min: np.ndarray


def column_bins(band: Band, width: int, n: int) -> ColumnBins:
    """The :class:`ColumnBins` of ``band``, kept in ``band.memo``: one computation for all
    the reductions of a pass that use them.

    Parameters
    ----------
    band : Band
        A band of :func:`bands`.
    width : int
        Columns per bin.
    n : int
        Positions of the map.

    Returns
    -------
    ColumnBins

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.array([[[[0.5, 0.25, 0.25], [0.2, 0.2, 0.6], [0, 0.5, 0.5]]]]),
    ...                           ["a", "b", "c"])
    >>> band = next(bands(att, 0))
    >>> column_bins(band, 2, 3).max[0].tolist()  # columns 0-1 and 2
    [[0.5, 0.25], [0.2, 0.6], [0.5, 0.5]]
    """
    key = ("columns", width)
    if key not in band.memo:
        c0, c1 = band.cols.start, band.cols.stop
        a0 = -(-c0 // width) * width
        a1 = c1 if c1 == n else c1 // width * width
        if a1 <= a0:  # no whole bin among the columns (a sliding window's narrow band)
            a0 = a1 = c0
        v = band.values[:, :, a0 - c0:a1 - c0]
        if width == 1 or a1 == a0:
            hi = lo = v
        else:
            hi, lo = (np.concatenate(parts, axis=2) if len(parts) > 1 else parts[0]
                      for parts in zip(*(_extremes_of_bins(p, w) for p, w in _whole(v, width))))
        band.memo[key] = ColumnBins(width, a0, a1, hi, lo)
    return band.memo[key]


def _whole(v: np.ndarray, width: int) -> list[tuple[np.ndarray, int]]:
    """``v [h, r, c]`` as its columns in whole bins of ``width`` and the partial rest."""
    full = v.shape[2] // width * width
    out = [(v[:, :, :full], width)] if full else []
    return out + ([(v[:, :, full:], v.shape[2] - full)] if full < v.shape[2] else [])


def _extremes_of_bins(v: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the max and min of each bin of ``width`` columns of ``v [h, r, c]`` (``c`` a
    multiple of ``width``): torch's reductions (numpy's reduceat is several times slower on
    short bins)."""
    import torch

    x = torch.from_numpy(v if v.flags.writeable else v.copy()).unflatten(2, (-1, width))
    return x.amax(-1).numpy(), x.amin(-1).numpy()


@dataclass(frozen=True)
class GridPool:
    """Pool level ``level``: bins of ``2**level x 2**level`` cells from the origin (edge bins
    partial), ``ceil(n / 2**level)`` a side; the result is a :class:`Pooled`.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.full((1, 1, 3, 3), 0.25), ["a", "b", "c"], measure="norm")
    >>> p = summarize(att, 0, [0], [GridPool(1)])[0][GridPool(1).key]
    >>> p.max.tolist(), p.mean.tolist()
    ([[0.25, 0.25], [0.25, 0.25]], [[0.25, 0.25], [0.25, 0.25]])
    """

    level: int

    @property
    def key(self) -> Hashable:
        return ("grid", self.level)

    @property
    def align(self) -> int:
        return 1 << self.level

    def edges(self, n: int) -> np.ndarray | None:
        return None if self.level == 0 else np.r_[np.arange(0, n, 1 << self.level), n]

    def start(self, n: int, heads: int) -> Any:
        m = -(-n // (1 << self.level))
        return {"n": n, "max": np.zeros((heads, m, m), dtype=np.float32),
                "min": np.zeros((heads, m, m), dtype=np.float32), "sum": np.zeros((heads, m, m))}

    def prepare(self, band: Band, n: int) -> Any:
        b = 1 << self.level
        bins = column_bins(band, b, n)
        if bins.stop <= bins.start:  # no whole bin read: all zeros
            return None
        v = band.values[:, :, bins.start - band.cols.start:bins.stop - band.cols.start]
        hi, lo = bins.max, bins.min
        total = v if b == 1 else np.add.reduceat(v, np.arange(0, v.shape[2], b), axis=2)  # fast
        if b > 1:  # band rows start on the grid: whole row bins but the last
            starts = np.arange(0, v.shape[1], b)
            hi, lo = np.maximum.reduceat(hi, starts, axis=1), np.minimum.reduceat(lo, starts, axis=1)
            total = np.add.reduceat(total.astype(np.float64), starts, axis=1)
        rows = slice(band.span.start // b, band.span.start // b + hi.shape[1])
        cols = slice(bins.start // b, bins.start // b + hi.shape[2])
        return rows, cols, {"max": hi, "min": lo, "sum": total}

    def add(self, state: Any, part: Any, index: list[int]) -> None:
        if part is None:
            return
        rows, cols, values = part
        for name, value in values.items():
            state[name][index, rows, cols] = value

    def finish(self, state: Any) -> list[Pooled]:
        n, b = state["n"], 1 << self.level
        sizes = np.diff(np.r_[np.arange(0, n, b), n]).astype(np.float64)
        mean = (state["sum"] / sizes[:, None] / sizes[None, :]).astype(np.float32)
        return [Pooled(state["max"][i], state["min"][i], mean[i]) for i in range(len(mean))]


@dataclass(frozen=True)
class EdgePool:
    """A ``[m, m]`` overview, ``m = min(size, n)``: rows and columns cut into ``m`` bins
    (:func:`~attnkit.core.attention.pool_edges`), each the max or the mean of its bin — the
    numbers ``Attention.pooled(layer, head, size, reduce)`` gives. The result is float32
    ``[m, m]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> maps = np.array([[[[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]]])
    >>> att = Attention.from_maps(maps, ["a", "b", "c"])
    >>> pool = EdgePool(2, "max")
    >>> summarize(att, 0, [0], [pool])[0][pool.key].tolist() == att.pooled(0, 0, 2).tolist()
    True
    """

    size: int
    reduce: str = "max"

    def __post_init__(self) -> None:
        if self.reduce not in ("max", "mean"):
            raise InputError(f"reduce must be 'max' or 'mean', not {self.reduce!r}.")

    @property
    def key(self) -> Hashable:
        return ("pool", int(self.size), self.reduce)

    align = 1

    def edges(self, n: int) -> np.ndarray | None:
        return pool_edges(n, self.size)

    def start(self, n: int, heads: int) -> Any:
        e = pool_edges(n, self.size)
        m = len(e) - 1
        if self.reduce == "max":
            return {"edges": e, "acc": np.full((heads, m, m), -np.inf, dtype=np.float32)}
        return {"edges": e, "acc": np.zeros((heads, m, m))}

    def prepare(self, band: Band, n: int) -> Any:
        e = _pass_edges(n, self.size)
        dtype = np.float32 if self.reduce == "max" else np.float64
        ufunc = np.maximum if self.reduce == "max" else np.add
        rows = band.span
        ids = np.searchsorted(e, np.arange(rows.start, rows.stop), side="right") - 1
        i0, i1 = int(ids[0]), int(ids[-1]) + 1
        part = np.zeros((len(band.heads), i1 - i0, len(e) - 1), dtype=dtype)  # unread: 0
        c0, c1 = band.cols.start, band.cols.stop
        # the bins wholly read; the columns outside them lie outside the mask: zeros
        j0, j1 = int(np.searchsorted(e, c0)), int(np.searchsorted(e, c1, side="right")) - 1
        if j1 > j0:
            values = band.values[:, :, :e[j1] - c0].astype(dtype, copy=False)
            cols = ufunc.reduceat(values, e[j0:j1] - c0, axis=2)  # [h, r, j1 - j0]
            firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])  # each row bin's first
            part[:, :, j0:j1] = ufunc.reduceat(cols, firsts, axis=1)
        return slice(i0, i1), part

    def add(self, state: Any, part: Any, index: list[int]) -> None:
        acc, (rows, values) = state["acc"], part
        ufunc = np.maximum if self.reduce == "max" else np.add
        acc[index, rows] = ufunc(acc[index, rows], values)

    def finish(self, state: Any) -> list[np.ndarray]:
        acc = state["acc"]
        if self.reduce == "mean":
            sizes = np.diff(state["edges"]).astype(np.float64)
            acc = acc / sizes[:, None] / sizes[None, :]
        acc = acc.astype(np.float32)
        return [acc[i] for i in range(len(acc))]


@dataclass(frozen=True)
class Bounds:
    """A head's largest and smallest value (the zeros a mask leaves included), and the same
    without the sink columns (0 when every column is a sink).

    Examples
    --------
    >>> b = Bounds(max=0.9, min=-0.2, max_nosink=0.1, min_nosink=-0.2)
    >>> b.top(), b.top(sinks=False), b.top(signed=True, sinks=False)
    (0.9, 0.1, 0.2)
    """

    max: float
    min: float
    max_nosink: float
    min_nosink: float

    def top(self, *, signed: bool = False, sinks: bool = True) -> float:
        """The top of a colour scale: the largest value (``signed``: magnitude), at least
        0, with or without the sink columns."""
        hi, lo = (self.max, self.min) if sinks else (self.max_nosink, self.min_nosink)
        return max(0.0, hi, -lo if signed else 0.0)


@functools.lru_cache(maxsize=64)
def kept_columns(n: int, sinks: tuple[int, ...]) -> np.ndarray:
    """Bool ``[n]``, read-only: the columns that are not ``sinks`` (cached per ``(n, sinks)``:
    every band's :meth:`Extremes.prepare` and a rectangle's overview read it).

    Examples
    --------
    >>> kept_columns(4, (0, 2)).tolist()
    [False, True, False, True]
    """
    keep = np.ones(n, dtype=bool)
    keep[np.asarray(sinks, dtype=np.int64)] = False
    keep.flags.writeable = False
    return keep


@functools.lru_cache(maxsize=64)
def _pass_edges(n: int, size: int) -> np.ndarray:
    """:func:`~attnkit.core.attention.pool_edges`, read-only and made once per ``(n, size)``
    (every band's :meth:`EdgePool.prepare` reads it)."""
    e = pool_edges(n, size)
    e.flags.writeable = False
    return e


@dataclass(frozen=True)
class Extremes:
    """A head's :class:`Bounds`, the columns ``sinks`` left out of its ``*_nosink`` values.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.array([[[[0.9, 0.1], [0.7, 0.3]]]]), ["<s>", "a"])
    >>> b = summarize(att, 0, [0], [Extremes((0,))])[0][Extremes((0,)).key]
    >>> round(b.max, 2), round(b.max_nosink, 2)
    (0.9, 0.3)
    """

    sinks: tuple[int, ...] = ()

    @property
    def key(self) -> Hashable:
        return ("extremes", tuple(sorted(int(s) for s in self.sinks)))

    align = 1

    def edges(self, n: int) -> np.ndarray | None:
        return None

    def start(self, n: int, heads: int) -> Any:
        return {"acc": np.full((heads, 4), np.nan)}  # max, min, max without sinks, min without

    def prepare(self, band: Band, n: int) -> Any:
        keep = kept_columns(n, tuple(int(s) for s in self.sinks))
        c0, c1 = band.cols.start, band.cols.stop
        # from the column bins another reduction of the pass made, else bins of 64 columns
        made = [v for k, v in band.memo.items() if k[0] == "columns"]
        bins = made[0] if made else column_bins(band, 64, n)
        found = np.full((len(band.heads), 4), np.nan)  # max, min, max without sinks, min without

        def fold(hi: np.ndarray, lo: np.ndarray, col: int) -> None:
            if hi.size:
                found[:, col] = np.fmax(found[:, col], hi.max(axis=(1, 2)))
                found[:, col + 1] = np.fmin(found[:, col + 1], lo.min(axis=(1, 2)))

        w, nb = bins.width, bins.max.shape[2]
        sinks = np.flatnonzero(~keep)
        sinks = sinks[(sinks >= bins.start) & (sinks < bins.stop)]
        dirty = np.zeros(nb, dtype=bool)  # bins that hold a sink column
        dirty[(sinks - bins.start) // w] = True
        fold(bins.max, bins.min, 0)
        fold(bins.max[:, :, ~dirty], bins.min[:, :, ~dirty], 2)
        edge = np.r_[np.arange(c0, bins.start), np.arange(bins.stop, c1)].astype(np.int64)
        if edge.size:  # columns read outside the whole bins
            part = band.values[:, :, edge - c0]
            fold(part, part, 0)
        loose = np.concatenate([edge] + [np.arange(bins.start + j * w, min(n, bins.start + (j + 1) * w))
                                         for j in np.flatnonzero(dirty)]).astype(np.int64)
        loose = loose[keep[loose]]
        if loose.size:  # kept columns outside the bins without a sink
            part = band.values[:, :, loose - c0]
            fold(part, part, 2)
        if c1 - c0 < n:  # zeros outside the columns read
            found[:, 0], found[:, 1] = np.fmax(found[:, 0], 0.0), np.fmin(found[:, 1], 0.0)
            if keep[:c0].any() or keep[c1:].any():
                found[:, 2], found[:, 3] = np.fmax(found[:, 2], 0.0), np.fmin(found[:, 3], 0.0)
        return found

    def add(self, state: Any, part: Any, index: list[int]) -> None:
        acc, found = state["acc"], part
        acc[index, 0::2] = np.fmax(acc[index, 0::2], found[:, 0::2])
        acc[index, 1::2] = np.fmin(acc[index, 1::2], found[:, 1::2])

    def finish(self, state: Any) -> list[Bounds]:
        acc = np.nan_to_num(state["acc"], nan=0.0)
        return [Bounds(*(float(v) for v in row)) for row in acc]


#: what :func:`summarize` tells ``each_band`` after every band: the band, and the results so far
#: of a reduction (by its key: one per head, the rows not read yet as at the start)
BandSeen = Callable[["Band", Callable[[Hashable], list[Any]]], bool]


def summarize(att: Any, layer: int, heads: Iterable[int], reductions: Sequence[Reduction], *,
              n: int | None = None, cache: bool = True) -> list[dict[Hashable, Any]]:
    """Per head, the results of ``reductions``, all computed in one pass over its bands.

    Results already computed for this attention and head (by an earlier call with
    ``cache=True``) are not recomputed: two views of one attention read each head once.

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input, or any source with ``block`` (give ``n``).
    layer : int
        0-indexed layer.
    heads : iterable of int
        0-indexed heads.
    reductions : sequence of Reduction
        What to compute (:class:`GridPool`, :class:`EdgePool`, :class:`Extremes`,
        :class:`attnkit.core.headstats.HeadStats`).
    n : int, optional
        Positions of the map (default ``len(att)``).
    cache : bool
        Keep the results for later calls (up to :data:`CACHE_BYTES` in all).

    Returns
    -------
    list of dict
        One per head: each reduction's ``key`` -> its result.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.full((1, 2, 4, 4), 0.25), ["a", "b", "c", "d"])
    >>> out = summarize(att, 0, [0, 1], [EdgePool(2), Extremes()])
    >>> len(out), out[1][EdgePool(2).key].tolist(), out[0][Extremes().key].max
    (2, [[0.25, 0.25], [0.25, 0.25]], 0.25)
    """
    out = summarize_bands(att, layer, heads, reductions, lambda _band, _so_far: True, n=n, cache=cache)
    assert out is not None  # nothing stops the pass
    return out


def summarize_bands(att: Any, layer: int, heads: Iterable[int], reductions: Sequence[Reduction],
                    each_band: BandSeen, *, n: int | None = None,
                    cache: bool = True) -> list[dict[Hashable, Any]] | None:
    """:func:`summarize`, telling ``each_band`` after every band what is read so far: a view
    fills in band by band (the results kept as by :func:`summarize`, for every view).

    Parameters
    ----------
    att, layer, heads, reductions, n, cache
        As for :func:`summarize`.
    each_band : callable
        Called after every band read as ``each_band(band, so_far)``, where ``so_far(key)``
        gives that reduction's results for the rows read until now (one per head; rows not
        read yet as at the start). Returning False stops the pass: nothing is kept.

    Returns
    -------
    list of dict or None
        As :func:`summarize`; None when ``each_band`` stopped the pass. Heads already
        summarized are not read again (``each_band`` is then not called).

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.full((1, 1, 4, 4), 0.25), ["a", "b", "c", "d"])
    >>> seen = []
    >>> out = summarize_bands(att, 0, [0], [Extremes()], lambda band, so_far: seen.append(band.span) or True,
    ...                       cache=False)
    >>> seen, out[0][Extremes().key].max
    ([slice(0, 4, None)], 0.25)
    >>> summarize_bands(att, 0, [0], [Extremes()], lambda band, so_far: False, cache=False) is None
    True
    """
    import torch

    heads = [int(h) for h in heads]
    n = len(att) if n is None else int(n)
    reductions = list({r.key: r for r in reductions}.values())
    found = [_cached(att, layer, h) for h in heads]
    todo = [i for i, have in enumerate(found) if any(r.key not in have for r in reductions)]
    if todo:
        missing = [r for r in reductions if any(r.key not in found[i] for i in todo)]
        missing.sort(key=lambda r: not isinstance(r, GridPool))  # their column bins serve others
        align = max(r.align for r in missing)
        edges = [e for e in (r.edges(n) for r in missing) if e is not None]
        states = [r.start(n, len(todo)) for r in missing]
        where = {heads[i]: j for j, i in enumerate(todo)}
        by_key = dict(zip((r.key for r in missing), zip(missing, states)))

        def so_far(key: Hashable) -> list[Any]:
            r, state = by_key[key]
            return r.finish(state)

        plan = list(_plan(att, layer, [heads[i] for i in todo], align=align, edges=edges, n=n))

        def part(spec: tuple[tuple[int, ...], Rows, slice]) -> tuple[Band, list[Any]]:
            """One band read and each reduction's part of it (in a worker thread, or here)."""
            group, rows, cols = spec
            with torch.inference_mode():
                band = Band(group, rows, cols, read(att, layer, group, rows, cols))
                return band, [r.prepare(band, n) for r in missing]

        parts = _in_order(part, plan, workers=_band_workers(sum(_cells(spec) for spec in plan)))
        try:
            for band, got in parts:
                index = [where[h] for h in band.heads]
                for r, state, p in zip(missing, states, got):
                    r.add(state, p, index)
                if each_band(band, so_far) is False:
                    return None
        finally:
            parts.close()  # a stopped pass: the bands not taken yet are dropped
        for r, state in zip(missing, states):
            for j, result in enumerate(r.finish(state)):
                found[todo[j]][r.key] = result
        if cache:
            for i in todo:
                _remember(att, layer, heads[i], found[i])
    return [{r.key: have[r.key] for r in reductions} for have in found]


# ------------------------------------------------------------------- bands in worker threads
#: cells (band rows x columns, summed over the bands) from which :func:`summarize` reads the
#: bands of a pass in worker threads; below, in the caller's thread
PARALLEL_CELLS = 1 << 24

_POOL: Any = None  # (pid, ThreadPoolExecutor): worker threads, each running torch on one thread
_POOL_LOCK = threading.Lock()
_HERE = threading.local()  # .worker: this thread is one of the pool's


def _cells(spec: tuple[tuple[int, ...], Rows, slice]) -> int:
    group, rows, cols = spec
    count = rows.stop - rows.start if isinstance(rows, slice) else len(rows)
    return len(group) * count * (cols.stop - cols.start)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _band_workers(cells: int) -> int:
    """Threads that read the bands of a pass of ``cells`` cells: one (the caller's) for small
    passes, else as many as the caller's torch threads and the cores allow.

    Why: reading a band is a few medium-sized operations (a matrix product, an exponential, the
    reductions). Run on torch's OpenMP threads, each operation ends at a barrier where the
    threads wait for the slowest: on a machine whose cores other processes also use, that
    thread is often off its core, and threads spinning at the barrier take the cores the
    others need (14x the forward at a load of 4 on 2 cores). Bands read whole, each in its own
    thread with torch on one thread, never wait for one another."""
    if cells < PARALLEL_CELLS or getattr(_HERE, "worker", False):  # no pass inside a band's
        return 1
    import torch

    if "OpenMP" not in _parallel_backend():  # torch's thread count is per thread only there
        return 1
    return max(1, min(torch.get_num_threads(), _cores()))


def _parallel_backend() -> str:
    import torch

    info = torch.__config__.parallel_info()
    return next((line for line in info.splitlines() if "parallel backend" in line), "")


def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)  # OpenMP: this thread's own count (and the default of new threads)
    _HERE.worker = True


def _pool() -> Any:
    """The process's band readers: a thread per core, each running torch on one thread."""
    global _POOL
    from concurrent.futures import ThreadPoolExecutor

    with _POOL_LOCK:
        if _POOL is not None and _POOL[0] == os.getpid():
            return _POOL[1]
        import torch

        size = _cores()
        pool = ThreadPoolExecutor(size, thread_name_prefix="attnkit-bands", initializer=_one_torch_thread)
        started = threading.Barrier(size + 1)
        for _ in range(size):  # every thread started now, so the default below is set after theirs
            pool.submit(started.wait)
        started.wait()
        # set_num_threads also sets the count new threads start with: back to this thread's
        torch.set_num_threads(torch.get_num_threads())
        _POOL = (os.getpid(), pool)  # a forked child makes its own (the threads stay behind)
        return pool


def _in_order(fn: Callable[[Any], Any], items: Sequence[Any], *, workers: int) -> Generator[Any, None, None]:
    """``fn`` of each item, in order: here, or in ``workers`` of :func:`_pool`'s threads with
    at most ``workers`` items in flight (memory: that many bands)."""
    if workers <= 1:
        yield from map(fn, items)
        return
    from collections import deque

    pool = _pool()
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


# ------------------------------------------------------------------------------ cache
_CACHE: OrderedDict[tuple[int, int, int], dict] = OrderedDict()
_SIZES: dict[tuple[int, int, int], int] = {}
_WATCHED: dict[int, Any] = {}
#: views fill in from worker threads: one at a time in the cache
_LOCK = threading.RLock()


def _cached(att: Any, layer: int, head: int) -> dict:
    key = (id(att), layer, head)
    with _LOCK:
        if key in _CACHE and id(att) in _WATCHED:
            _CACHE.move_to_end(key)
            return dict(_CACHE[key])
    return {}


def _remember(att: Any, layer: int, head: int, results: dict) -> None:
    with _LOCK:
        _keep(att, layer, head, results)


def _keep(att: Any, layer: int, head: int, results: dict) -> None:
    if id(att) not in _WATCHED:
        try:
            _WATCHED[id(att)] = weakref.finalize(att, _forget, id(att))
        except TypeError:  # no weak references: nothing is kept
            return
    key = (id(att), layer, head)
    size = sum(_nbytes(v) for v in results.values())
    if size > CACHE_BYTES:
        return
    _drop(key)
    _CACHE[key] = results
    _SIZES[key] = size
    while sum(_SIZES.values()) > CACHE_BYTES:
        _drop(next(iter(_CACHE)))


def _drop(key: tuple[int, int, int]) -> None:
    _CACHE.pop(key, None)
    _SIZES.pop(key, None)


def _forget(ident: int) -> None:
    """Drop what is kept of an attention that is gone."""
    with _LOCK:
        _WATCHED.pop(ident, None)
        for key in [k for k in _CACHE if k[0] == ident]:
            _drop(key)


def _nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if hasattr(value, "__dataclass_fields__"):
        return sum(_nbytes(getattr(value, f)) for f in value.__dataclass_fields__)
    return 8


def forget(att: Any) -> None:
    """Drop the per-head results :func:`summarize` keeps for ``att`` (e.g. after changing
    its maps in place).

    Parameters
    ----------
    att : AttentionLike
        The attention.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> att = Attention.from_maps(np.full((1, 1, 2, 2), 0.5), ["a", "b"])
    >>> _ = summarize(att, 0, [0], [Extremes()])
    >>> att.maps[0, 0] = [[1.0, 0.0], [1.0, 0.0]]
    >>> forget(att)
    >>> summarize(att, 0, [0], [Extremes()])[0][Extremes().key].max
    1.0
    """
    with _LOCK:
        for key in [k for k in _CACHE if k[0] == id(att)]:
            _drop(key)


__all__ = [
    "BAND_ELEMENTS",
    "PARALLEL_CELLS",
    "Band",
    "Bounds",
    "ColumnBins",
    "EdgePool",
    "Extremes",
    "GridPool",
    "Pooled",
    "Reduction",
    "bands",
    "column_bins",
    "columns_of",
    "forget",
    "head_mean",
    "read",
    "row_bands",
    "summarize",
    "summarize_bands",
]
