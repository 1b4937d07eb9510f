"""The tile pyramid of one head's map, computed from blocks (front end: ``js/src/lib/tiles.ts``).

Level ``k`` pools bins of ``2**k × 2**k`` cells, so it has ``ceil(n / 2**k)`` bins on a
side; level 0 holds the exact weights. The coarsest level with at most ``overview`` bins
(:func:`top_level`) is the overview a view receives up front; the others are served as
tiles of ``size × size`` bins when the view zooms in. Everything is read through
:mod:`attnkit.core.blocks` one band of rows at a time, so a lazy map (computed from Q/K on demand)
is never held whole: memory stays at one band (``blocks.BAND_ELEMENTS`` floats). A head's
overview, its thumbnail and its scale tops come from one pass over its bands
(:func:`view_reductions`), kept for the next view of the same attention.

Pooled values are the max (for signed maps, the value of largest magnitude, sign kept) or
the mean of the bin's cells. Row ranks (the ``rank`` colour scale) follow ``scale.ts``:
``(#smaller + (#equal - 1) / 2) / (count - 1)`` over the valid cells of the level's row
(the causal upper triangle is not valid), sink bins left out (rank 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..core.blocks import (BAND_ELEMENTS, Band, EdgePool, Extremes, GridPool, Reduction, kept_columns, read,
                           summarize_bands)
from ..errors import InputError
from ..plot.common import row_ranks

OVERVIEW = 512
TILE = 256
#: bytes of thumbnails a grid sends at most (the rest of its state is a few kB)
THUMB_BYTES = 1_600_000
#: cells per thumbnail side at most, by default
THUMB_SIZE = 128


class BlockSource(Protocol):
    """What the pyramid reads: ``block(layer, head, rows, cols)`` of an ``[n, n]`` map."""

    def block(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray: ...


def top_level(n: int, overview: int = OVERVIEW) -> int:
    """The smallest ``k`` with ``ceil(n / 2**k) <= overview``."""
    k = 0
    while -(-n // (1 << k)) > overview:
        k += 1
    return k


def thumb_side(n: int, n_heads_total: int, size: int = THUMB_SIZE) -> int:
    """Thumbnail side: at most ``size`` and ``n``, and all thumbnails within ``THUMB_BYTES``."""
    fit = math.isqrt(THUMB_BYTES // max(1, n_heads_total))
    return max(1, min(int(size), n, fit))


def view_reductions(n: int, n_heads_total: int, sinks: Sequence[int], *, level: int | None = None,
                    thumb: int | None = None, overview: bool = True) -> list[Reduction]:
    """What a Heatmap and a HeadGrid read from one head, in one pass: the overview level
    (default :func:`top_level`; left out with ``overview=False``), the max-pooled thumbnail
    (default :func:`thumb_side`) and the extremes without ``sinks``. Either view asks for the
    other's defaults too, so the second view of an attention reads no head again."""
    out: list[Reduction] = [EdgePool(thumb_side(n, n_heads_total) if thumb is None else int(thumb)),
                            Extremes(tuple(int(s) for s in sinks))]
    if overview:
        out.append(GridPool(top_level(n) if level is None else int(level)))
    return out


def side(n: int, k: int) -> int:
    """Bins per side of level ``k``."""
    return -(-n // (1 << k))


def pool(block: np.ndarray, k: int, reduce: str, signed: bool = False) -> np.ndarray:
    """Pool a block whose origin lies on the ``2**k`` grid into bins (edge bins partial)."""
    if k == 0:
        return np.asarray(block, dtype=np.float32)
    b = 1 << k
    r, c = block.shape
    starts_r = np.arange(0, r, b)
    starts_c = np.arange(0, c, b)
    a = np.asarray(block, dtype=np.float64 if reduce == "mean" else np.float32)
    if reduce == "mean":
        s = np.add.reduceat(np.add.reduceat(a, starts_r, axis=0), starts_c, axis=1)
        counts_r = np.diff(np.r_[starts_r, r])
        counts_c = np.diff(np.r_[starts_c, c])
        return (s / counts_r[:, None] / counts_c[None, :]).astype(np.float32)
    if reduce != "max":
        raise InputError(f"reduce must be 'max' or 'mean', not {reduce!r}.")
    hi = np.maximum.reduceat(np.maximum.reduceat(a, starts_r, axis=0), starts_c, axis=1)
    if not signed:
        return hi.astype(np.float32)
    lo = np.minimum.reduceat(np.minimum.reduceat(a, starts_r, axis=0), starts_c, axis=1)
    return np.where(-lo > hi, lo, hi).astype(np.float32)


def strip_rows(n: int, k: int) -> int:
    """Rows per strip: a multiple of ``2**k`` with about ``BAND_ELEMENTS`` cells."""
    b = 1 << k
    return max(b, (BAND_ELEMENTS // max(1, n)) // b * b)


@dataclass
class Overview:
    """The overview level of one head and the scale tops of the whole map."""

    level: int
    max: np.ndarray
    mean: np.ndarray
    top: float  # largest |value| of the map
    top_nosink: float  # the same without the sink columns
    low: float  # smallest value (negative for differences)


#: told after each band of an overview's pass: ``(row0, row1, so_far)`` with the bins of rows
#: ``row0:row1`` of the level complete in ``so_far``; False stops the pass
RowsSeen = Callable[[int, int, Overview], bool]


def overview_bands(source: BlockSource, layer: int, head: int, n: int, sinks: np.ndarray,
                   *, level: int, signed: bool = False, reductions: Sequence[Reduction] = (),
                   each_rows: RowsSeen | None = None) -> Overview | None:
    """Level ``level`` max- and mean-pooled, and the scale tops, from one pass of bands
    (together with ``reductions``, kept for later callers: :func:`view_reductions`), telling
    ``each_rows`` after every band which rows of bins are done (a view fills in band by
    band); None when ``each_rows`` stopped the pass."""
    grid, bounds = GridPool(level), Extremes(tuple(int(s) for s in np.asarray(sinks)))

    def made(pooled: Any, b: Any) -> Overview:
        return Overview(level, pooled.signed() if signed else pooled.max, pooled.mean,
                        b.top(signed=signed), b.top(signed=signed, sinks=False), b.min)

    def seen(band: Band, so_far: Callable[[Any], list[Any]]) -> bool:
        if each_rows is None:
            return True
        span, bin_ = band.span, 1 << level
        return each_rows(span.start // bin_, -(-span.stop // bin_), made(so_far(grid.key)[0], so_far(bounds.key)[0]))

    got = summarize_bands(source, layer, [head], [grid, bounds, *reductions], seen, n=n)
    return None if got is None else made(got[0][grid.key], got[0][bounds.key])


def block(source: Any, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
    """Float32 ``[rows, cols]`` of one head (:func:`attnkit.core.blocks.read`)."""
    return read(source, layer, [head], rows, cols)[0]


def extent(att: Any) -> tuple[int, int]:
    """Rows and columns of an attention's maps: ``(n, n)``, or ``(target, source)`` for
    cross-attention (:class:`~attnkit.core.cross.CrossAttention`)."""
    n = len(att)
    return n, int(getattr(att, "n_columns", n))


def _outside(ti: int, tj: int, k: int, n: int, cols: int, size: int) -> None:
    m, mc = side(n, k), side(cols, k)
    if not (0 <= ti * size < m and 0 <= tj * size < mc):
        what = f"{m} bins a side" if m == mc else f"{m} x {mc} bins"
        raise InputError(f"tile ({ti}, {tj}) of level {k} is outside the map ({what}).")


def rect_overview(source: BlockSource, layer: int, head: int, n: int, cols: int,
                  sinks: np.ndarray, *, level: int, signed: bool = False) -> Overview:
    """:func:`overview_bands` of a rectangular map ``[n, cols]`` (cross-attention, dense): one
    read of the head, pooled at ``level``; ``sinks`` are columns."""
    full = block(source, layer, head, slice(0, n), slice(0, cols))
    rest = full[:, kept_columns(cols, tuple(int(s) for s in np.asarray(sinks).ravel()))]

    def top(v: np.ndarray) -> float:
        if not v.size:
            return 0.0
        return max(0.0, float(v.max()), -float(v.min()) if signed else 0.0)

    return Overview(level, pool(full, level, "max", signed), pool(full, level, "mean"),
                    top(full), top(rest), float(full.min()))


def tile(source: BlockSource, layer: int, head: int, n: int, k: int, ti: int, tj: int,
         *, size: int = TILE, reduce: str = "max", signed: bool = False,
         cols: int | None = None) -> np.ndarray:
    """Bins ``[ti*size, (ti+1)*size) × [tj*size, (tj+1)*size)`` of level ``k`` (edge tiles
    smaller) of an ``[n, n]`` map, or ``[n, cols]`` (cross-attention)."""
    cols = n if cols is None else int(cols)
    _outside(ti, tj, k, n, cols, size)
    span = size << k
    r0, c0 = ti * span, tj * span
    r1, c1 = min(n, r0 + span), min(cols, c0 + span)
    if k == 0:
        return block(source, layer, head, slice(r0, r1), slice(c0, c1))
    rows = []
    step = strip_rows(c1 - c0, k)
    for s0 in range(r0, r1, step):
        s1 = min(r1, s0 + step)
        rows.append(pool(block(source, layer, head, slice(s0, s1), slice(c0, c1)), k, reduce, signed))
    return np.concatenate(rows, axis=0)


def sink_bins(n: int, k: int, sinks: np.ndarray) -> np.ndarray:
    """Bool ``[side(n, k)]``: bins that contain a sink column."""
    out = np.zeros(side(n, k), dtype=bool)
    out[np.asarray(sinks, dtype=np.int64) >> k] = True
    return out


def rank_tile(source: BlockSource, layer: int, head: int, n: int, k: int, ti: int, tj: int,
              *, sinks: np.ndarray, causal: bool, exclude_sinks: bool, size: int = TILE,
              reduce: str = "max", cols: int | None = None) -> np.ndarray:
    """Row ranks of tile ``(ti, tj)`` of level ``k`` (of ``[n, cols]`` for cross-attention):
    ranks need whole rows of the level, read strip by strip."""
    cols = n if cols is None else int(cols)
    _outside(ti, tj, k, n, cols, size)
    m = side(cols, k)
    span = size << k
    r0, r1 = ti * span, min(n, (ti + 1) * span)
    excluded = sink_bins(cols, k, sinks) if exclude_sinks else np.zeros(m, dtype=bool)
    out = []
    step = strip_rows(cols, k)
    for s0 in range(r0, r1, step):
        s1 = min(r1, s0 + step)
        level_rows = pool(block(source, layer, head, slice(s0, s1), slice(0, cols)), k, reduce)
        valid = None
        if causal:  # a bin holds values when it reaches the diagonal
            rows_at = np.arange(s0 >> k, (s0 >> k) + level_rows.shape[0])
            valid = np.arange(m)[None, :] <= rows_at[:, None]
        ranks = row_ranks(level_rows, valid, excluded)
        out.append(ranks[:, tj * size:(tj + 1) * size])
    return np.concatenate(out, axis=0)
