"""Decoder head taxonomy: attention sinks, previous-token, induction and duplicate-token heads.

The decoder-era counterpart of Clark et al.'s general head behaviour: for every head, the share
of attention that goes to the first position (attention sinks, Xiao et al. 2024), to the previous
position, to the token right after an earlier occurrence of the current token (induction heads,
Olsson et al. 2022) and to that earlier occurrence itself (duplicate-token heads).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._compat import renamed
from ..core.blocks import bands
from ..errors import InputError
from ..core.results import HeadResult, head_frame
from ..core.types import AttentionLike, Attentions, as_collection

#: The kinds of head :func:`head_scores` measures, in its default column order.
HEAD_KINDS = ("sink", "previous", "induction", "duplicate")


@dataclass(frozen=True)
class _Plan:
    """What one input contributes: the (query, key) cells each kind sums, and its rows."""

    cells: dict[str, tuple[np.ndarray, np.ndarray]]  # kind -> (rows, cols), sorted by row
    rows: dict[str, int]  # kind -> number of query rows counted
    uniform: dict[str, float]  # kind -> sum over counted rows of the share uniform attention gives


@renamed(att="attentions")
def token_identity(attentions: AttentionLike) -> tuple[np.ndarray, str]:
    """Int ``[n]`` labels equal exactly where two positions hold the same token, and their
    source: the token ids (``"input_ids"``) when the attention has them, else the token
    strings (``"tokens"``; at word level these are the words).

    Parameters
    ----------
    attentions : AttentionLike
        Attention of one input.

    Returns
    -------
    tuple of (ndarray, str)
        The labels and ``"input_ids"`` or ``"tokens"``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> from attnkit.analysis.heads import token_identity
    >>> att = ak.Attention.from_maps(np.full((1, 1, 4, 4), 0.25), ["a", "b", "a", "c"])
    >>> labels, source = token_identity(att)
    >>> labels.tolist(), source
    ([0, 1, 0, 2], 'tokens')
    """
    att = attentions
    ids = getattr(att, "input_ids", None)
    if ids is not None and getattr(att, "level", "token") == "token":
        return np.asarray(ids, dtype=np.int64), "input_ids"
    return np.unique(np.asarray(att.tokens, dtype=object).astype(str), return_inverse=True)[1], "tokens"


def earlier_occurrences(ids: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All pairs ``(q, j)`` with ``j < q`` and ``ids[j] == ids[q]``, sorted by ``q`` then ``j``.

    Parameters
    ----------
    ids : ndarray
        Int ``[n]`` token labels (:func:`token_identity`).
    rows : ndarray, optional
        Bool ``[n]``: keep only the pairs whose query ``q`` is True there.

    Returns
    -------
    tuple of ndarray
        ``(q, j)``: two int arrays of the same length.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.heads import earlier_occurrences
    >>> q, j = earlier_occurrences(np.array([5, 7, 5, 7, 5]))
    >>> list(zip(q.tolist(), j.tolist()))  # position 4 repeats positions 0 and 2
    [(2, 0), (3, 1), (4, 0), (4, 2)]
    """
    ids = np.asarray(ids)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    bounds = np.flatnonzero(np.diff(sorted_ids)) + 1
    qs, js = [], []
    for group in np.split(order, bounds):
        if len(group) < 2:
            continue
        a, b = np.triu_indices(len(group), 1)  # group is ascending: group[a] < group[b]
        qs.append(group[b])
        js.append(group[a])
    if not qs:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    q, j = np.concatenate(qs), np.concatenate(js)
    if rows is not None:
        keep = np.asarray(rows, dtype=bool)[q]
        q, j = q[keep], j[keep]
    order = np.lexsort((j, q))
    return q[order].astype(np.int64), j[order].astype(np.int64)


def _plan(att: AttentionLike, kinds: Sequence[str]) -> tuple[_Plan, str]:
    n = len(att)
    ids, identity = token_identity(att)
    causal = bool(getattr(att, "causal", False))
    # the share uniform attention gives one cell of row q: 1 / (visible positions)
    visible = np.arange(1, n + 1, dtype=np.float64) if causal else np.full(n, float(n))
    cells: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    rows: dict[str, int] = {}
    uniform: dict[str, float] = {}
    after = np.arange(1, n, dtype=np.int64)
    if getattr(att, "source_roles", None) is not None:  # cross-attention: a rectangle
        other = [k for k in kinds if k != "sink"]
        if other:
            raise InputError(
                f"head_scores kinds {other} compare positions of one sequence, but the rows "
                "(target) and columns (source) of cross-attention are different sequences; "
                "only kinds=['sink'] (attention to the first source position) applies. Score "
                "the decoder's self-attention (.decoder) for the others.")
        visible = np.full(n, float(getattr(att, "n_columns", n)))
        after = np.arange(n, dtype=np.int64)
    if "sink" in kinds:
        cells["sink"] = (after, np.zeros(len(after), dtype=np.int64))
    if "previous" in kinds:
        cells["previous"] = (after, after - 1)
    if "induction" in kinds or "duplicate" in kinds:
        q, j = earlier_occurrences(ids, np.asarray(att.roles) == "word")
        if "induction" in kinds:
            cells["induction"] = (q, j + 1)
        if "duplicate" in kinds:
            cells["duplicate"] = (q, j)
    for kind in kinds:
        q, _ = cells[kind]
        rows[kind] = len(np.unique(q))
        uniform[kind] = float((1.0 / visible[q]).sum())
    return _Plan(cells, rows, uniform), identity


def _item_sums(att: AttentionLike, plan: _Plan, kinds: Sequence[str]) -> np.ndarray:
    """float64 ``[layer, head, kind]``: each kind's attention summed over its cells, read
    through :func:`attnkit.core.blocks.bands` (only the rows that have cells; all heads of a layer
    together when they fit in one band, else one head and a band of rows at a time)."""
    L, H, n = att.n_layers, att.n_heads, len(att)
    out = np.zeros((L, H, len(kinds)))
    needed = np.unique(np.concatenate([plan.cells[k][0] for k in kinds]))
    if n == 0 or needed.size == 0:
        return out
    for layer in range(L):
        for band in bands(att, layer, rows=needed, shares=True):
            span, cols = band.span, band.cols
            for i, kind in enumerate(kinds):
                q, k = plan.cells[kind]
                a, b = np.searchsorted(q, [span.start, span.stop])
                inside = (k[a:b] >= cols.start) & (k[a:b] < cols.stop)  # else outside the mask: 0
                if not inside.any():
                    continue
                qs, ks = q[a:b][inside], k[a:b][inside]
                local = qs - span.start if isinstance(band.rows, slice) else np.searchsorted(band.rows, qs)
                out[layer, list(band.heads), i] += band.values[:, local, ks - cols.start].sum(
                    -1, dtype=np.float64)
    return out


def _scores_partial(block: Any, kinds: tuple[str, ...]) -> dict[str, Any]:
    """One block's contribution to :func:`head_scores`: per-kind sums ``[layer, head, kind]``
    added over its items in order, rows and uniform baselines counted, and what the items
    are (identity, level, measure, causality)."""
    if block.attentions is None:
        raise InputError("This set keeps per-item summaries only; head_scores needs the maps "
                         "(extract with keep='maps').")
    out: dict[str, Any] = {
        "sums": None, "rows": dict.fromkeys(kinds, 0), "uniform": dict.fromkeys(kinds, 0.0),
        "identities": [], "levels": [], "measures": [], "causal": [], "count": 0,
        "first": int(block.items[0]) if len(block.items) else 0,
    }
    for i, att in zip(block.items, block.attentions):
        plan, identity = _plan(att, kinds)
        s = _item_sums(att, plan, kinds)
        if out["sums"] is None:
            out["sums"] = s
        elif s.shape != out["sums"].shape:
            raise InputError(
                f"All attentions must have the same layers and heads; input {int(i)} has "
                f"{s.shape[:2]} after {out['sums'].shape[:2]}."
            )
        else:
            out["sums"] += s
        for k in kinds:
            out["rows"][k] += plan.rows[k]
            out["uniform"][k] += plan.uniform[k]
        for key, value in (("identities", identity),
                           ("levels", str(getattr(att, "level", "token"))),
                           ("measures", str(getattr(att, "measure", "weights"))),
                           ("causal", bool(getattr(att, "causal", False)))):
            if value not in out[key]:
                out[key].append(value)
        out["count"] += 1
    return out


def head_scores(
    attentions: Attentions,
    *,
    kinds: Sequence[str] | str = HEAD_KINDS,
    progress: bool = True,
    client: Any = None,
) -> HeadResult:
    """Share of each head's attention that goes to the first token, the previous token, the
    token after an earlier occurrence of the current token, and that earlier occurrence.

    For one query row ``q`` of a head's map ``A`` (rows are *from*, columns *to*, rows sum
    to 1), with ``t`` the token at each position:

    - ``sink``: ``A[q, 0]``, attention to the first position (an attention sink, Xiao et al.
      2024; with a BOS token, attention to the BOS). Rows ``q >= 1`` count (row 0 of a causal
      model can only attend to itself).
    - ``previous``: ``A[q, q - 1]``. Rows ``q >= 1`` count; in row 1 the previous token is the
      first one, so it counts as ``sink`` too.
    - ``induction``: ``sum of A[q, j + 1]`` over every earlier occurrence ``j < q`` of the
      current token (``t[j] == t[q]``): attention to the tokens that followed the current
      token before (Olsson et al. 2022). With several earlier occurrences the row scores the
      attention to all their successors together (one of which may be ``q`` itself when the
      token repeats immediately).
    - ``duplicate``: ``sum of A[q, j]`` over the same earlier occurrences ``j``.

    ``induction`` and ``duplicate`` count only rows of word tokens (role "word") whose token
    occurred before; rows with no earlier occurrence and special tokens (BOS, [SEP]) are left
    out. Token identity is ``Attention.input_ids`` where the attention has it (token level,
    made by ``model.attend``), else the token strings (an :class:`~attnkit.AttentionSet`'s
    items; at word level, the words). Each score averages over all counted rows of all
    inputs (rows pooled, so long inputs weigh more). :func:`attnkit.induction_inputs` makes
    inputs in which every row of the second half counts for ``induction``.

    Maps of another measure than attention weights (``Attention.measure``: norm, ALTI) are
    read as shares of each row's total, so the scores stay shares; signed measures
    (grad×attn) are refused.

    Parameters
    ----------
    attentions : AttentionLike or iterable of AttentionLike
        One input's attention (dense :class:`~attnkit.Attention` or lazy), or many (an
        ``AttentionSet``, a list), all with the same layers and heads, read through
        :func:`attnkit.core.blocks.bands`: the heads of a layer together when they fit in one
        band, else one head and a band of rows at a time (at most about 4 M cells), so no
        input's full ``[L, H, n, n]`` is ever built.
    kinds : sequence of str or str
        Which scores to compute, any of :data:`HEAD_KINDS`; the columns come in this order.
    progress : bool
        Show a progress bar (over a set's stored batches, or blocks of inputs).
    client : dask.distributed.Client, optional
        Compute the per-batch sums on this Dask cluster (workers read a stored set
        themselves; other inputs are sent to them in blocks); ``None``: in this process.
        The sums are added in the same order either way, so the scores are the same to
        the bit.

    Returns
    -------
    HeadResult
        Table indexed by ``(layer, head)`` (0-indexed) with one column per kind, each a share
        of attention in ``[0, 1]`` (NaN, with a warning, for a kind no row counts for).
        ``meta``: ``n_items``; ``n_rows`` (rows counted per kind); ``uniform`` (the score
        attention spread evenly over the visible positions would get, per kind: the
        baseline); ``identity`` (``"input_ids"``, ``"tokens"`` or both joined by ``+``);
        ``level``, ``causal`` and ``measure`` of the attention.

    Raises
    ------
    InputError
        When ``kinds`` is empty or holds an unknown kind, when there is no input, when
        inputs differ in layers or heads, when maps of a measure have negative values, or
        when a stored set keeps summaries only (no maps).
    ClusterError
        When ``client`` is given and the cluster cannot be reached or its workers fail.

    Examples
    --------
    A head that always attends to the previous token, on "a b a b":

    >>> import numpy as np
    >>> import attnkit as ak
    >>> prev = np.eye(4, k=-1); prev[0, 0] = 1
    >>> att = ak.Attention.from_maps(prev, ["a", "b", "a", "b"], causal=True)
    >>> r = ak.head_scores(att, progress=False)
    >>> r.loc[(0, 0)].round(3).tolist(), r.meta["n_rows"]
    ([0.333, 1.0, 1.0, 0.0], {'sink': 3, 'previous': 3, 'induction': 2, 'duplicate': 2})

    On a tiny random decoder and repeated random tokens:

    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> atts = [model.attend(ids) for ids in ak.induction_inputs(model, 2, 8, seed=0)]
    >>> scores = ak.head_scores(atts, progress=False)
    >>> scores.meta["n_rows"]["induction"], list(scores.columns)
    (16, ['sink', 'previous', 'induction', 'duplicate'])
    """
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    unknown = [k for k in kinds if k not in HEAD_KINDS]
    if not kinds or unknown:
        raise InputError(
            f"kinds must name some of {', '.join(HEAD_KINDS)}; got {list(kinds)!r}."
        )
    if len(set(kinds)) != len(kinds):
        raise InputError(f"kinds names a kind twice: {list(kinds)!r}.")
    from ..storage.engine import map_blocks

    parts = map_blocks(as_collection(attentions), functools.partial(_scores_partial, kinds=kinds), client=client,
                       progress=progress, desc="head scores")
    sums: np.ndarray | None = None
    rows = dict.fromkeys(kinds, 0)
    uniform = dict.fromkeys(kinds, 0.0)
    identities: dict[str, None] = {}
    levels: dict[str, None] = {}
    measures: dict[str, None] = {}
    causal: set[bool] = set()
    count = 0
    for part in parts:  # in block order: the same sums in process and on a cluster
        if part["sums"] is None:
            continue
        if sums is None:
            sums = part["sums"]
        elif part["sums"].shape != sums.shape:
            raise InputError(
                f"All attentions must have the same layers and heads; input {part['first']} has "
                f"{part['sums'].shape[:2]} after {sums.shape[:2]}."
            )
        else:
            sums = sums + part["sums"]
        for k in kinds:
            rows[k] += part["rows"][k]
            uniform[k] += part["uniform"][k]
        identities.update(dict.fromkeys(part["identities"]))
        levels.update(dict.fromkeys(part["levels"]))
        measures.update(dict.fromkeys(part["measures"]))
        causal.update(part["causal"])
        count += part["count"]
    if sums is None:
        raise InputError("head_scores() got no attention; give an Attention or a collection of them.")
    empty = [k for k in kinds if rows[k] == 0]
    if empty:
        hint = (" No token occurs twice: repeat text, or use attnkit.induction_inputs."
                if {"induction", "duplicate"} & set(empty) else "")
        warnings.warn(
            f"No query row counts for {', '.join(empty)}, so {'its' if len(empty) == 1 else 'their'} "
            f"scores are NaN.{hint}",
            UserWarning,
            stacklevel=2,
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = np.array([rows[k] for k in kinds], dtype=np.float64)
        means = np.where(denom > 0, sums / np.maximum(denom, 1), np.nan)
    table = head_frame(means, kinds)
    meta = {
        "n_items": count,
        "n_rows": rows,
        "uniform": {k: (uniform[k] / rows[k] if rows[k] else float("nan")) for k in kinds},
        "identity": "+".join(identities),
        "level": "+".join(levels),
        "causal": causal.pop() if len(causal) == 1 else None,
        "measure": "+".join(measures),
    }
    return HeadResult(table, meta, value=kinds[0])
