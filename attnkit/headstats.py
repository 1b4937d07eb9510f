"""The eight per-head statistics of one input (Clark et al. 2019, §3), in one pass over each
head's bands: what :func:`attnkit.head_stats` averages and what a store keeps as the
``"stats"`` summary (:mod:`attnkit.summaries`).

Dense, lazy and stored attention are read the same way, through :func:`attnkit.blocks.row_bands`.
"""

from __future__ import annotations

import numpy as np

from ._compat import renamed
from .attention import Positions, is_punct, row_shares
from .blocks import row_bands
from .errors import InputError
from .types import AttentionLike

#: The statistics, in the order of the last axis of :func:`item_stats`.
STAT_COLUMNS = ["cls", "sep", "punct", "self", "next", "prev", "entropy", "cls_entropy"]

# the smallest normal float32: clamping p at it keeps log on its fast path (zeros and
# denormals are slow) and adds 0 * log(tiny) = 0 to the entropy
_TINY = float(np.finfo(np.float32).tiny)


@renamed(att="attentions")
def item_stats(attentions: AttentionLike) -> np.ndarray:
    """Per-head statistics of one input, float64 ``[layer, head, 8]`` in the order of
    :data:`STAT_COLUMNS`, read band by band (:func:`attnkit.blocks.row_bands`): one band of
    one head at a time, never all maps.

    For every head, the attention *from* each position *to* [CLS], to [SEP], to
    punctuation, to itself, to the next and to the previous position, averaged over all
    from-positions; the mean row entropy (nats); and the entropy of the [CLS] row (NaN
    when the input has no [CLS]). A category absent from the input gives 0 attention
    (e.g. no punctuation), except [CLS]-row entropy which is NaN. Cross-attention
    (:class:`~attnkit.cross.CrossAttention`, target rows over source columns) counts
    attention to the source's [CLS], [SEP] and punctuation; self, next and previous are NaN. Maps of a measure other
    than weights are read as each row's shares (:func:`~attnkit.attention.row_shares`).
    Row sums run over float32 products (torch's cascaded sums), totals in float64.

    Parameters
    ----------
    attentions : AttentionLike
        Dense or lazy attention of one input (it must know its token roles).

    Returns
    -------
    ndarray
        float64 ``[layer, head, 8]``.

    Raises
    ------
    InputError
        For attention without token roles.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> maps = np.array([[[[1, 0, 0], [0.5, 0.5, 0], [1, 0, 0]]]])  # every row to [CLS] or itself
    >>> att = Attention.from_maps(maps, ["[CLS]", "hi", "[SEP]"])
    >>> item_stats(att)[0, 0, :4].round(4).tolist()   # to [CLS], [SEP], punctuation, self
    [0.8333, 0.0, 0.0, 0.5]
    """
    import torch

    att = attentions
    if not isinstance(att, Positions):
        raise InputError(f"head statistics need the token roles of attnkit's Attention or "
                         f"LazyAttention; got {type(att).__name__}.")
    L, H, n = att.n_layers, att.n_heads, len(att)
    measure = getattr(att, "measure", "weights")
    # cross-attention (a rectangle): columns are the source's positions, and self, next and
    # previous position do not exist (NaN)
    source_roles = getattr(att, "source_roles", None)
    rect = source_roles is not None
    col_roles = np.asarray(source_roles) if rect else att.roles
    col_punct = (np.array([r == "word" and is_punct(t) for t, r in
                           zip(getattr(att, "source_tokens", att.tokens), col_roles)], dtype=np.bool_)
                 if rect else att.punct)
    indicator = torch.zeros((len(col_roles), 3), dtype=torch.float32)  # to [CLS], [SEP], punct
    indicator[torch.as_tensor(np.flatnonzero(col_roles == "cls"), dtype=torch.long), 0] = 1.0
    indicator[torch.as_tensor(np.flatnonzero(col_roles == "sep"), dtype=torch.long), 1] = 1.0
    indicator[torch.as_tensor(np.flatnonzero(col_punct), dtype=torch.long), 2] = 1.0
    cls_row = int(att.cls_positions[0]) if len(att.cls_positions) else -1
    out = np.zeros((L, H, len(STAT_COLUMNS)))
    for layer in range(L):
        for head in range(H):
            acc = np.zeros(len(STAT_COLUMNS))
            acc[7] = np.nan if cls_row < 0 else 0.0
            for rows, cols, block in row_bands(att, layer, head):
                # a band holds whole rows (every key they can see), so shares are exact
                b = torch.from_numpy(np.ascontiguousarray(row_shares(block, measure), dtype=np.float32))
                acc[0:3] += (b @ indicator[cols]).sum(0, dtype=torch.float64).numpy()
                diag = rows.start - cols.start  # block[i, i + diag] is position (q, q)
                for col, offset in ((3, 0), (4, 1), (5, -1)):  # self, next, previous
                    acc[col] += float(torch.diagonal(b, diag + offset).sum(dtype=torch.float64))
                ent = -(b * torch.log(b.clamp_min(_TINY))).sum(-1)
                acc[6] += float(ent.sum(dtype=torch.float64))
                if rows.start <= cls_row < rows.stop:
                    acc[7] = float(ent[cls_row - rows.start])
            acc[:7] /= n
            if rect:
                acc[3:6] = np.nan
            out[layer, head] = acc
    return out
