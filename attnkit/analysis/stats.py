"""General head behaviour (Clark et al. 2019, §3–4): where each head's attention goes."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from ..attention import Attention, Positions, row_shares
from ..errors import InputError
from ..results import HeadResult
from ..types import AttentionLike, Attentions

_TINY = float(np.finfo(np.float32).tiny)

STAT_COLUMNS = ["cls", "sep", "punct", "self", "next", "prev", "entropy", "cls_entropy"]


def item_stats(att: AttentionLike) -> np.ndarray:
    """Per-head statistics of one input, float64 ``[layer, head, 8]`` in the order of
    :data:`STAT_COLUMNS`.

    Dense :class:`Attention` is reduced all at once; any other attention (e.g.
    :class:`~attnkit.lazy.LazyAttention`) is streamed band by band, one head at a time
    (:func:`streamed_stats`), holding one band of rows, never all maps.

    For every head, the attention *from* each position *to* [CLS], to [SEP], to
    punctuation, to itself, to the next and to the previous position, averaged over all
    from-positions; the mean row entropy (nats); and the entropy of the [CLS] row (NaN
    when the input has no [CLS]). A category absent from the input gives 0 attention
    (e.g. no punctuation), except [CLS]-row entropy which is NaN. Maps of a measure other
    than weights are read as each row's shares (:func:`~attnkit.attention.row_shares`).
    """
    if not isinstance(att, Attention):
        return streamed_stats(att)
    maps = row_shares(att.maps.astype(np.float64), att.measure)
    L, H, n, _ = maps.shape
    out = np.zeros((L, H, len(STAT_COLUMNS)))

    def to(mask: np.ndarray) -> np.ndarray:
        return maps[..., mask].sum(-1).mean(-1)  # [L, H]

    cls = np.zeros(n, bool)
    cls[att.cls_positions] = True
    sep = np.zeros(n, bool)
    sep[att.sep_positions] = True
    out[..., 0] = to(cls)
    out[..., 1] = to(sep)
    out[..., 2] = to(att.punct)
    diag = np.arange(n)
    out[..., 3] = maps[..., diag, diag].mean(-1)
    if n > 1:
        # the mean runs over all n rows; the last row has no next, the first no previous
        out[..., 4] = maps[..., diag[:-1], diag[:-1] + 1].sum(-1) / n
        out[..., 5] = maps[..., diag[1:], diag[1:] - 1].sum(-1) / n
    ent = -(maps * np.log(np.where(maps > 0, maps, 1.0))).sum(-1)  # [L, H, n]
    out[..., 6] = ent.mean(-1)
    out[..., 7] = ent[..., att.cls_positions[0]] if len(att.cls_positions) else np.nan
    return out


def streamed_stats(att: AttentionLike) -> np.ndarray:
    """:func:`item_stats` of any :class:`~attnkit.types.AttentionLike`, read band by band
    (:func:`attnkit.blocks.row_bands`): materialises one band of one head at a time.

    Row sums run over float32 products (torch's cascaded sums), totals in float64, so the
    result equals :func:`item_stats`'s to float32 rounding.
    """
    import torch

    from ..blocks import row_bands

    if not isinstance(att, Positions):
        raise InputError(f"head statistics need the token roles of attnkit's Attention or "
                         f"LazyAttention; got {type(att).__name__}.")
    L, H, n = att.n_layers, att.n_heads, len(att)
    indicator = torch.zeros((n, 3), dtype=torch.float32)  # columns: to [CLS], [SEP], punct
    indicator[torch.as_tensor(att.cls_positions, dtype=torch.long), 0] = 1.0
    indicator[torch.as_tensor(att.sep_positions, dtype=torch.long), 1] = 1.0
    indicator[torch.as_tensor(np.flatnonzero(att.punct), dtype=torch.long), 2] = 1.0
    cls_row = int(att.cls_positions[0]) if len(att.cls_positions) else -1
    out = np.zeros((L, H, len(STAT_COLUMNS)))
    for layer in range(L):
        for head in range(H):
            acc = np.zeros(len(STAT_COLUMNS))
            acc[7] = np.nan if cls_row < 0 else 0.0
            for rows, cols, block in row_bands(att, layer, head):
                b = torch.from_numpy(block)
                acc[0:3] += (b @ indicator[cols]).sum(0, dtype=torch.float64).numpy()
                diag = rows.start - cols.start  # block[i, i + diag] is position (q, q)
                for col, offset in ((3, 0), (4, 1), (5, -1)):  # self, next, previous
                    acc[col] += float(torch.diagonal(b, diag + offset).sum(dtype=torch.float64))
                # p log p with 0 log 0 = 0; clamping at the smallest normal float keeps log
                # on its fast path (zeros and denormals are slow) and adds 0 * log(tiny) = 0
                ent = -(b * torch.log(b.clamp_min(_TINY))).sum(-1)
                acc[6] += float(ent.sum(dtype=torch.float64))
                if rows.start <= cls_row < rows.stop:
                    acc[7] = float(ent[cls_row - rows.start])
            acc[:7] /= n
            out[layer, head] = acc
    return out


def uniform_row_entropy(att: AttentionLike) -> float:
    """Mean row entropy (nats) of uniform attention on this input: every row spreads over
    all ``n`` positions (ln n), or for a causal model over the ``q + 1`` it can see."""
    return _uniform(len(att), bool(att.causal))


def head_stats(attentions: Attentions, *, progress: bool = True, client: Any = None) -> HeadResult:
    """Average head behaviour over a corpus (Clark et al. 2019, §3).

    Parameters
    ----------
    attentions : AttentionSet, Attention or iterable of Attention
        The inputs; all with the same number of layers and heads. One input counts as a
        corpus of one. A store that keeps the per-item ``"stats"`` summary
        (``extract(..., keep="stats")``) is read from it, without the maps.
    progress : bool
        Show a progress bar over the inputs.
    client : dask.distributed.Client, optional
        Compute the per-batch sums on this Dask cluster (workers read a stored set
        themselves); ``None`` computes them here. The result is the same to the bit.

    Returns
    -------
    HeadResult
        ``table`` indexed by ``(layer, head)`` (0-indexed) with columns
        :data:`STAT_COLUMNS`: average attention to [CLS], [SEP], punctuation, self, next
        and previous position, mean row entropy and [CLS]-row entropy (nats); each is
        computed per item, then averaged over items (NaN-aware for ``cls_entropy``).
        ``meta["n_items"]`` counts the items and ``meta["uniform_entropy"]`` is the mean
        row entropy uniform attention would have on the same items (the baseline of Clark
        et al.'s Fig. 4). ``plot()`` draws the paper's Fig. 2 (attention to [CLS], [SEP]
        and punctuation per layer).

    Raises
    ------
    InputError
        When there is no input, or inputs disagree on layers and heads.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert", layers=2, heads=2)
    >>> stats = ak.head_stats([model.attend("The cat sat on the mat.")], progress=False)
    >>> stats.table.shape, stats.meta["n_items"]
    ((4, 8), 1)
    >>> bool(((stats["cls"] >= 0) & (stats["cls"] <= 1)).all())
    True
    """
    from ..corpus import AttentionSet
    from ..engine import map_blocks, sum_partials

    stored = isinstance(attentions, AttentionSet) and "stats" in attentions.summaries
    causal = bool(attentions.causal) if isinstance(attentions, AttentionSet) else None
    if isinstance(attentions, AttentionSet) and not stored and not attentions.has_maps:
        raise InputError("This set keeps neither maps nor the 'stats' summary; extract with "
                         "keep='maps' or keep='stats' for head_stats.")
    parts = map_blocks(attentions, functools.partial(_stats_partial, causal=causal),
                       client=client, summaries=("stats",) if stored else (), progress=progress,
                       desc="head stats")
    if not parts:
        raise InputError("head_stats() got no attention to average.")
    p = sum_partials(parts)
    total, count, cls_count = p["total"], int(p["count"]), int(p["cls"])
    mean = total / count
    mean[..., 7] = total[..., 7] / cls_count if cls_count else np.nan
    L, H, _ = mean.shape
    index = pd.MultiIndex.from_product([range(L), range(H)], names=["layer", "head"])
    df = pd.DataFrame(mean.reshape(L * H, -1), index=index, columns=STAT_COLUMNS)
    return HeadResult(df, {"n_items": count, "uniform_entropy": p["uniform"] / count},
                      value="cls", plot="head_stats")


def _stats_partial(block: Any, causal: bool | None = None) -> dict:
    """Sums over one block of items: statistics (``cls_entropy`` counted where there is a
    [CLS]), items, items with a [CLS], and uniform-attention entropy."""
    if block.attentions is None or "stats" in block.summaries:  # stored per-item statistics
        rows = [np.array(r, dtype=np.float64) for r in block.summaries["stats"]]
        uniform = sum(_uniform(int(n), bool(causal)) for n in block.summaries["n"])
    else:
        rows = [item_stats(att) for att in block.attentions]
        uniform = sum(uniform_row_entropy(att) for att in block.attentions)
    total = np.zeros_like(rows[0])
    cls_count = 0
    for s in rows:
        if s.shape != total.shape:
            raise InputError(
                f"All attentions must have the same layers and heads; got {s.shape[:2]} after "
                f"{total.shape[:2]}."
            )
        cls_count += not np.isnan(s[0, 0, 7])
        s[..., 7] = np.nan_to_num(s[..., 7])
        total += s
    return {"total": total, "count": len(rows), "cls": cls_count, "uniform": uniform}


def _uniform(n: int, causal: bool) -> float:
    return float(np.log(np.arange(1, n + 1)).mean()) if causal else float(np.log(n))


