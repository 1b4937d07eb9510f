"""Per-head statistics of one input (Clark et al. 2019, §3): where each head's attention goes.

The one computation of the eight numbers :func:`attnkit.head_stats` averages over a corpus and
a store keeps as its ``"stats"`` summary: read band by band through :mod:`attnkit.core.blocks`
(:class:`HeadStats` is a reduction of its one pass), so dense and lazy attention go the same
way and no ``[L, H, n, n]`` is built.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from .._compat import renamed
from .attention import Positions, is_punct, row_shares
from .blocks import Band, summarize
from ..errors import InputError
from .types import AttentionLike

#: The statistics, in the order of the last axis of :func:`item_stats`.
STAT_COLUMNS = ["cls", "sep", "punct", "self", "next", "prev", "entropy", "cls_entropy"]

_TINY = float(np.finfo(np.float32).tiny)


class HeadStats:
    """The reduction (:class:`attnkit.core.blocks.Reduction`) that gives one head's
    :data:`STAT_COLUMNS` (float64 ``[8]``) from its bands.

    Parameters
    ----------
    att : Attention or LazyAttention
        The attention whose token roles say where [CLS], [SEP] and punctuation are.

    Raises
    ------
    InputError
        When the attention has no token roles.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> from attnkit.core.blocks import summarize
    >>> att = Attention.from_maps(np.full((1, 1, 3, 3), 1 / 3), ["[CLS]", "a", "[SEP]"])
    >>> stats = HeadStats(att)
    >>> summarize(att, 0, [0], [stats])[0][stats.key][:2].round(3).tolist()  # to [CLS], [SEP]
    [0.333, 0.333]
    """

    key: Hashable = ("stats",)
    align = 1

    def __init__(self, att: AttentionLike) -> None:
        import torch

        if not isinstance(att, Positions):
            raise InputError(f"head statistics need the token roles of attnkit's Attention or "
                             f"LazyAttention; got {type(att).__name__}.")
        self.measure = getattr(att, "measure", "weights")
        # cross-attention (a rectangle): columns are the source's positions, and self, next
        # and previous position do not exist (NaN)
        source_roles = getattr(att, "source_roles", None)
        self.rect = source_roles is not None
        col_roles = np.asarray(source_roles) if self.rect else np.asarray(att.roles)
        col_punct = (np.array([r == "word" and is_punct(t) for t, r in
                               zip(getattr(att, "source_tokens", att.tokens), col_roles)], dtype=np.bool_)
                     if self.rect else att.punct)
        self.indicator = torch.zeros((len(col_roles), 3), dtype=torch.float32)  # to [CLS], [SEP], punct
        self.indicator[torch.as_tensor(np.flatnonzero(col_roles == "cls"), dtype=torch.long), 0] = 1.0
        self.indicator[torch.as_tensor(np.flatnonzero(col_roles == "sep"), dtype=torch.long), 1] = 1.0
        self.indicator[torch.as_tensor(np.flatnonzero(col_punct), dtype=torch.long), 2] = 1.0
        self.cls_row = int(att.cls_positions[0]) if len(att.cls_positions) else -1

    def edges(self, n: int) -> np.ndarray | None:
        return None

    def start(self, n: int, heads: int) -> Any:
        acc = np.zeros((heads, len(STAT_COLUMNS)))
        acc[:, 7] = np.nan if self.cls_row < 0 else 0.0
        return {"n": n, "acc": acc}

    def prepare(self, band: Band, n: int) -> Any:
        """The band's sums of the first seven statistics (float64 ``[h, 7]``) and its heads'
        [CLS]-row entropy (None when the band does not hold that row)."""
        import torch

        rows, cols = band.span, band.cols
        x = band.tensor()
        if self.measure != "weights":  # each row's shares (the band holds whole rows)
            x = torch.from_numpy(row_shares(band.values, self.measure))
        sums = np.zeros((len(band.heads), 7))
        sums[:, 0:3] = (x @ self.indicator[cols]).sum(1, dtype=torch.float64).numpy()
        diag = rows.start - cols.start  # x[:, i, i + diag] is position (q, q)
        for col, offset in ((3, 0), (4, 1), (5, -1)):  # self, next, previous
            sums[:, col] = torch.diagonal(x, diag + offset, dim1=1, dim2=2).sum(
                -1, dtype=torch.float64).numpy()
        # p log p with 0 log 0 = 0; clamping at the smallest normal float keeps log on its
        # fast path (zeros and denormals are slow) and adds 0 * log(tiny) = 0
        ent = -(x * torch.log(x.clamp_min(_TINY))).sum(-1)  # [h, r]
        sums[:, 6] = ent.sum(-1, dtype=torch.float64).numpy()
        cls = (ent[:, self.cls_row - rows.start].double().numpy()
               if rows.start <= self.cls_row < rows.stop else None)
        return sums, cls

    def add(self, state: Any, part: Any, index: list[int]) -> None:
        acc, (sums, cls) = state["acc"], part
        acc[index, :7] += sums
        if cls is not None:
            acc[index, 7] = cls

    def finish(self, state: Any) -> list[np.ndarray]:
        acc = state["acc"]
        acc[:, :7] /= max(1, state["n"])
        if self.rect:
            acc[:, 3:6] = np.nan
        return [acc[i] for i in range(len(acc))]


@renamed(att="attentions")
def item_stats(attentions: AttentionLike) -> np.ndarray:
    """Per-head statistics of one input, float64 ``[layer, head, 8]`` in the order of
    :data:`STAT_COLUMNS`.

    For every head, the attention *from* each position *to* [CLS], to [SEP], to
    punctuation, to itself, to the next and to the previous position, averaged over all
    from-positions; the mean row entropy (nats); and the entropy of the [CLS] row (NaN
    when the input has no [CLS]). A category absent from the input gives 0 attention
    (e.g. no punctuation), except [CLS]-row entropy which is NaN. Cross-attention
    (:class:`~attnkit.core.cross.CrossAttention`, target rows over source columns) counts
    attention to the source's [CLS], [SEP] and punctuation; self, next and previous are NaN.
    Maps of a measure other than weights are read as each row's shares
    (:func:`~attnkit.core.attention.row_shares`).

    Dense and lazy attention are read the same way, band by band
    (:func:`attnkit.core.blocks.summarize`; the heads of a layer together when they fit in one
    band): row sums run over float32 products (torch's cascaded sums), totals in float64.

    Parameters
    ----------
    attentions : Attention, LazyAttention or CrossAttention
        One input's attention.

    Returns
    -------
    ndarray
        Float64 ``[layer, head, 8]``.

    Raises
    ------
    InputError
        For attention without token roles (:class:`HeadStats`).

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> own = ak.Attention.from_maps(np.eye(3)[None, None], ["[CLS]", "a", "[SEP]"])
    >>> item_stats(own)[0, 0].round(3).tolist()  # each position attends to itself
    [0.333, 0.333, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    """
    stats = HeadStats(attentions)
    return np.stack([np.stack([got[stats.key] for got in
                               summarize(attentions, layer, range(attentions.n_heads), [stats], cache=False)])
                     for layer in range(attentions.n_layers)])
