"""The probe's features: word-to-word attention read both ways, the ROOT features and the
word embeddings of every sentence, read once (:func:`probe_data`), and their padded batches."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._compat import renamed
from ...data.conllu import Treebank
from ...errors import InputError
from .._align import align_item, check_length

#: Gold label of a word whose head is unknown or was cut away (ignored by the loss).
IGNORE = -100


@dataclass
class ProbeItem:
    """One sentence's features, restricted to the words that survived truncation (``k`` of
    ``m``).

    Parameters
    ----------
    A : numpy.ndarray
        Float16 ``[k, k, K]`` word-to-word maps: ``A[j, i, f]`` = attention of map f from
        word j to word i.
    R : numpy.ndarray
        Float16 ``[k, 4K]`` ROOT features of each word: its attention to [CLS], to [SEP],
        and the attention from [CLS] and from [SEP] to it (K maps each, in that order).
    V : numpy.ndarray or None
        Float16 ``[k, d]`` input embeddings.
    gold : numpy.ndarray
        Int ``[k]``: 0 = ROOT, ``1 + r`` = kept word r, :data:`IGNORE` = unknown/cut away.
    scored : numpy.ndarray
        Bool ``[k]``: counts in UAS (gold known, not punctuation).
    kidx : numpy.ndarray
        Int ``[k]``: treebank index of each kept word.
    m : int
        The sentence length.
    """

    A: np.ndarray
    R: np.ndarray
    V: np.ndarray | None
    gold: np.ndarray
    scored: np.ndarray
    kidx: np.ndarray
    m: int


@dataclass
class ProbeData:
    """Probe inputs read once from an attention set (and its treebank), to train or score
    several probes without reading the store again. Make it with :func:`probe_data`."""

    items: list[ProbeItem]
    embeddings: bool
    attention: bool
    labelled: bool

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return (f"ProbeData({len(self.items)} sentences, attention={self.attention}, "
                f"embeddings={self.embeddings}, labelled={self.labelled})")


@renamed(X="attentions", y="gold")
def probe_data(attentions: Any, gold: Treebank | None = None, *, embeddings: bool = True,
               attention: bool = True, client: Any = None) -> ProbeData:
    """Read the probe features of ``attentions`` (an attention set, word level) once.

    ``gold`` is the treebank ``attentions`` was extracted from (needed to fit or score).
    Pass the result in place of ``attentions`` (and without ``gold``) to
    :meth:`AttentionProbe.fit`, ``score``, ``evaluate`` or ``predict``. Float16 storage:
    about ``2 · L · H`` bytes per word pair.

    Parameters
    ----------
    attentions : AttentionSet or iterable of Attention
        Word-level attention (token level is pooled), with input embeddings when
        ``embeddings``.
    gold : Treebank, optional
        The trees ``attentions`` was extracted from.
    embeddings, attention : bool
        Which features to read (the ``"attn"`` probe needs no embeddings, ``"dist+emb"`` no
        attention).
    client : dask.distributed.Client, optional
        Compute the features on this Dask cluster's workers (a stored set is read by them);
        ``None``: here. The arrays are the same.

    Returns
    -------
    ProbeData

    Raises
    ------
    InputError
        When embeddings are asked for but the set has none, or there are no sentences.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import probe_data
    >>> from attnkit.testing import tiny_model
    >>> tb = ak.read_conllu(ak.data.sample_treebank())
    >>> sset = ak.extract(tiny_model("bert"), tb, level="word", progress=False)
    >>> probe_data(sset, tb, embeddings=False)
    ProbeData(12 sentences, attention=True, embeddings=False, labelled=True)
    """
    X, y = attentions, gold
    items = read_items(X, y, need_emb=embeddings, need_attn=attention, client=client)
    return ProbeData(items, embeddings, attention, y is not None)


def read_items(X: Any, y: Treebank | None = None, need_emb: bool = True,
               need_attn: bool = True, client: Any = None) -> list[ProbeItem]:
    """The features of every sentence of ``X`` (word level), with gold heads from ``y``;
    with ``client``, computed on that Dask cluster (same arrays, input order)."""
    from ...storage.engine import map_items

    if y is not None:
        check_length(X, y)
    out = map_items(X, functools.partial(item_features, treebank=y, need_emb=need_emb,
                                         need_attn=need_attn), client=client)
    if y is not None and len(out) != len(y):
        raise InputError(f"The attentions ran out after {len(out)} items but the treebank has "
                         f"{len(y)} sentences.")
    if not out:
        raise InputError("The probe got no sentences.")
    return out


def item_features(i: int, att: Any, treebank: Treebank | None, need_emb: bool,
                  need_attn: bool) -> ProbeItem:
    """The probe's features of item ``i`` (and its gold tree when ``treebank`` is given)."""
    sent = None
    if treebank is not None:
        sent = treebank[i]
        att, pos = align_item(i, att, sent)
    else:
        att = att if att.level == "word" else att.to_words()
        pos = att.word_positions
    kept = pos >= 0
    kpos = pos[kept]
    kidx = np.flatnonzero(kept)
    k = len(kpos)
    L, H = att.n_layers, att.n_heads
    K = L * H
    if need_attn:
        if k and kpos[-1] - kpos[0] == k - 1:  # contiguous words: slice, don't gather
            rows = att.maps[:, :, kpos[0]: kpos[-1] + 1]
            words = rows[..., kpos[0]: kpos[-1] + 1]
        else:
            rows = att.maps[:, :, kpos]  # [L, H, k, n]
            words = rows[..., kpos]
        A = np.ascontiguousarray(words.reshape(K, k, k).transpose(1, 2, 0), dtype=np.float16)
        # the [CLS] and [SEP] columns of the maps and of their transposes
        to_cls = rows[..., att.cls_positions].sum(-1).reshape(K, k)
        to_sep = rows[..., att.sep_positions].sum(-1).reshape(K, k)
        from_cls = att.maps[:, :, att.cls_positions][..., kpos].sum(2).reshape(K, k)
        from_sep = att.maps[:, :, att.sep_positions][..., kpos].sum(2).reshape(K, k)
        R = np.concatenate([to_cls, to_sep, from_cls, from_sep]).T.astype(np.float16)
    else:
        A = np.zeros((k, k, 0), np.float16)
        R = np.zeros((k, 0), np.float16)
    V = None
    if need_emb:
        if att.embeddings is None:
            raise InputError(
                "This probe needs the model's input embeddings per word, but the attention "
                "set has none. Extract it with attnkit.extract(model, treebank, "
                "embeddings=True)."
            )
        V = np.asarray(att.embeddings[kpos], dtype=np.float16)
    gold = np.full(k, IGNORE, np.int64)
    scored = np.zeros(k, bool)
    m = len(att.words)
    if sent is not None:
        rank = np.full(len(sent), -1)
        rank[kidx] = np.arange(k)
        h = np.asarray(sent.head_index)[kidx]
        gold = np.where(h < 0, 0, np.where(rank[np.maximum(h, 0)] >= 0,
                                           1 + rank[np.maximum(h, 0)], IGNORE))
        punct = np.array([sent.upos[x] == "PUNCT" for x in kidx], dtype=bool)
        scored = (gold != IGNORE) & ~punct
        m = len(sent)
    return ProbeItem(A, R, V, gold, scored, kidx, m)


def embedding_norm(items: list[ProbeItem]) -> tuple[np.ndarray, np.ndarray]:
    """Float32 mean and standard deviation (+1e-6) of every word embedding of ``items``,
    per dimension (accumulated in float64, one sentence at a time)."""
    vs = [it.V for it in items if it.V is not None]
    if not vs:
        raise InputError("No word embeddings to normalise; extract with embeddings=True.")
    n = sum(len(v) for v in vs)
    mean = np.zeros(vs[0].shape[1])
    for v in vs:
        mean += v.astype(np.float64).sum(0)
    mean /= n
    var = np.zeros_like(mean)
    for v in vs:
        var += ((v.astype(np.float64) - mean) ** 2).sum(0)
    var /= n
    return mean.astype(np.float32), (np.sqrt(var) + 1e-6).astype(np.float32)


def length_batches(order: list[int], items: list[ProbeItem], budget: int) -> list[list[int]]:
    """Cut length-sorted item indices into batches of at most ``budget`` padded pairs."""
    out: list[list[int]] = []
    cur: list[int] = []
    width = 0
    for i in order:
        k = len(items[i].gold)
        w = max(width, k)
        if cur and (len(cur) + 1) * w * w > budget:
            out.append(cur)
            cur, w = [], k
        cur.append(i)
        width = w
    if cur:
        out.append(cur)
    return out


def padded_tensors(batch: list[ProbeItem], emb_norm: tuple[np.ndarray, np.ndarray] | None,
                   attention: bool = True) -> dict[str, Any]:
    """Padded torch tensors of a batch; maps and embeddings stay float16 until used."""
    import torch

    B = len(batch)
    M = max(len(it.gold) for it in batch)
    K = batch[0].A.shape[-1] if attention else 0
    A = np.zeros((B, M, M, K), np.float16)
    R = np.zeros((B, M, 4 * K), np.float32)
    gold = np.full((B, M), IGNORE, np.int64)
    scored = np.zeros((B, M), bool)
    valid = np.zeros((B, M), bool)
    V = None
    if batch[0].V is not None and emb_norm is not None:
        V = np.zeros((B, M, batch[0].V.shape[1]), np.float16)
    for b, it in enumerate(batch):
        k = len(it.gold)
        if K:
            A[b, :k, :k] = it.A
            R[b, :k] = it.R
        gold[b, :k] = it.gold
        scored[b, :k] = it.scored
        valid[b, :k] = True
        if V is not None and it.V is not None and emb_norm is not None:
            V[b, :k] = (it.V.astype(np.float32) - emb_norm[0]) / emb_norm[1]
    t: dict[str, Any] = {"A": torch.from_numpy(A), "R": torch.from_numpy(R), "gold": torch.from_numpy(gold),
         "scored": torch.from_numpy(scored), "valid": torch.from_numpy(valid)}
    t["V"] = torch.from_numpy(V) if V is not None else None
    return t
