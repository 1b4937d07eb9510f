"""General head behaviour (Clark et al. 2019, §3–4): where each head's attention goes."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .._compat import renamed
from ..errors import InputError
from ..core.headstats import STAT_COLUMNS, item_stats
from ..core.results import HeadResult, head_frame
from ..core.types import AttentionLike, Attentions

__all__ = ["STAT_COLUMNS", "head_stats", "item_stats", "uniform_row_entropy"]


@renamed(att="attentions")
def uniform_row_entropy(attentions: AttentionLike) -> float:
    """Mean row entropy (nats) of uniform attention on this input: every row spreads over
    all ``n`` positions (ln n), or for a causal model over the ``q + 1`` it can see.

    Parameters
    ----------
    attentions : AttentionLike
        Attention of one input (only its length and ``causal`` are read).

    Returns
    -------
    float
        The mean over rows of the entropy of uniform attention, in nats.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> from attnkit.analysis import uniform_row_entropy
    >>> att = ak.Attention.from_maps(np.full((1, 1, 4, 4), 0.25), ["a", "b", "c", "d"])
    >>> round(uniform_row_entropy(att), 4)  # ln 4
    1.3863
    """
    return _uniform(getattr(attentions, "n_columns", len(attentions)), bool(attentions.causal))


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
    from ..storage.corpus import AttentionSet
    from ..storage.engine import map_blocks, sum_partials

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
    return HeadResult(head_frame(mean, STAT_COLUMNS),
                      {"n_items": count, "uniform_entropy": p["uniform"] / count},
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


