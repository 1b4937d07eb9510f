"""Reading attention band by band: how streaming reductions avoid holding ``[L, H, n, n]``.

Functions that reduce whole maps (head statistics, the attention graph, rollout) read any
:class:`~attnkit.types.AttentionLike` through :func:`row_bands`: one head, a band of rows at a
time, and only the columns the band can attend to (causal models: up to the band's last row;
lazy attention: the span its mask lets through). With dense :class:`~attnkit.Attention` the
bands are views of its maps; with :class:`~attnkit.lazy.LazyAttention` they are computed on
demand, so memory stays at one band (``BAND_ELEMENTS`` floats) plus what the reduction keeps.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .types import AttentionLike

#: Float32 elements of one band (16 MiB): bands have ``max(1, BAND_ELEMENTS // n)`` rows.
BAND_ELEMENTS = 1 << 22


def columns_of(att: AttentionLike, rows: slice) -> slice:
    """The columns outside which ``rows`` hold no attention: what the mask lets them see
    (``att.support`` where attention knows it), else up to the last row for causal attention,
    else all columns.

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input.
    rows : slice
        Query positions (``rows.stop`` set).

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
    n = len(att)
    return slice(0, min(n, rows.stop)) if att.causal else slice(0, n)


def row_bands(att: AttentionLike, layer: int, head: int, *,
              elements: int | None = None) -> Iterator[tuple[slice, slice, np.ndarray]]:
    """Yield ``(rows, cols, block)`` covering the map of one head, band of rows by band of
    rows: ``block = att.block(layer, head, rows, cols)`` (float32), and every entry of those
    rows outside ``cols`` is zero.

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
    n = len(att)
    step = max(1, int(elements or BAND_ELEMENTS) // max(1, n))
    for r0 in range(0, n, step):
        rows = slice(r0, min(n, r0 + step))
        cols = columns_of(att, rows)
        yield rows, cols, np.asarray(att.block(layer, head, rows, cols), dtype=np.float32)


def head_mean(att: AttentionLike, layer: int, heads: list[int] | None = None) -> np.ndarray:
    """Float64 ``[n, n]``: the mean map over ``heads`` (all heads by default) of one layer,
    accumulated band by band, one head at a time (materialises that one ``[n, n]`` matrix).

    Parameters
    ----------
    att : AttentionLike
        Dense or lazy attention of one input.
    layer : int
        0-indexed layer.
    heads : list of int, optional
        The heads averaged (default all).

    Returns
    -------
    ndarray
        Float64 ``[n, n]``.

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
    out = np.zeros((n, n), dtype=np.float64)
    for head in heads:
        for rows, cols, block in row_bands(att, layer, head):
            out[rows, cols] += block
    out /= max(1, len(heads))
    return out
