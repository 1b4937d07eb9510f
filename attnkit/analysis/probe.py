"""Attention-based dependency probes (Clark et al. 2019, §5).

The probe gives every word ``j`` a distribution over its possible heads: ROOT or another
word ``i``. Its features are the ``K = layers × heads`` word-level maps read both ways,
``α_k(j→i)`` (the dependent attends to the candidate) and ``α_k(i→j)`` (the candidate
attends to the dependent): ``2K`` numbers per pair. ROOT is scored from the [CLS] and [SEP]
columns of the maps and of their transposes (the attention of ``j`` to [CLS] and to [SEP],
and from them to ``j``: ``4K`` numbers), with weights of its own.

* ``kind="attn"`` (Attn-Only): ``score(i | j) = Σ_f w_f x_f(i, j)``: one weight per map and
  direction.
* ``kind="attn+emb"`` (Attn + embeddings): the weights are a linear function of the pair's
  word embeddings, ``w(i, j) = W_h v_i + W_d v_j + b``. The paper uses fixed GloVe
  vectors; offline we use the model's own input (static) embeddings pooled per word, which
  the stores keep (``attnkit.extract(..., embeddings=True)``).
* ``kind="dist+emb"``: the paper's "Distances + GloVe" baseline, no attention at all: a
  one-hidden-layer MLP on ``[v_i, v_j]`` and the clipped signed distance ``i − j``.

Training minimises the cross-entropy of the gold head of every word (punctuation
included) with AdamW, on padded batches of length-sorted sentences, with dropout on the
embeddings; with a ``dev`` split it keeps the epoch with the best dev UAS. The attention
values enter raw, as in the paper (rescaling each feature by its RMS trained faster but
generalised worse: 74 vs 76.5 dev UAS for Attn+emb). Decoding is independent argmax or the maximum
spanning tree (:func:`attnkit.analysis.tree.max_spanning_tree`). UAS leaves out
punctuation (UPOS ``PUNCT``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._compat import renamed
from ..data.conllu import Treebank
from ..errors import InputError
from ..results import Result
from ._align import aligned, check_pair
from .tree import max_spanning_tree

KINDS = ("attn", "attn+emb", "dist+emb")
DECODERS = ("argmax", "mst")
_IGNORE = -100


@dataclass
class _Item:
    """One sentence, restricted to the words that survived truncation (``k`` of ``m``).

    A : float16 ``[k, k, K]`` word-to-word maps: ``A[j, i, f]`` = attention of map f from
        word j to word i.
    R : float16 ``[k, 4K]`` ROOT features of each word: its attention to [CLS], to [SEP],
        and the attention from [CLS] and from [SEP] to it (K maps each, in that order).
    V : float16 ``[k, d]`` input embeddings, or None.
    gold : int ``[k]``: 0 = ROOT, ``1 + r`` = kept word r, ``-100`` = unknown/cut away.
    scored : bool ``[k]``: counts in UAS (gold known, not punctuation).
    kidx : int ``[k]``: treebank index of each kept word; ``m`` the sentence length.
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

    items: list[_Item]
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
               attention: bool = True) -> ProbeData:
    """Read the probe features of ``attentions`` (an attention set, word level) once.

    ``gold`` is the treebank ``attentions`` was extracted from (needed to fit or score).
    Pass the result in place of ``attentions`` (and without ``gold``) to
    :meth:`AttentionProbe.fit`, ``score``, ``evaluate`` or ``predict``. Float16 storage:
    about ``2 · L · H`` bytes per word pair.
    """
    X, y = attentions, gold
    items = _items(X, y, need_emb=embeddings, need_attn=attention)
    return ProbeData(items, embeddings, attention, y is not None)


def _items(X, y=None, need_emb: bool = True, need_attn: bool = True) -> list[_Item]:
    pairs = aligned(X, y) if y is not None else ((a if a.level == "word" else a.to_words(), None,
                                                   None) for a in X)
    out = []
    for att, sent, pos in pairs:
        if pos is None:
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
        gold = np.full(k, _IGNORE, np.int64)
        scored = np.zeros(k, bool)
        m = len(att.words)
        if sent is not None:
            rank = np.full(len(sent), -1)
            rank[kidx] = np.arange(k)
            h = np.asarray(sent.head_index)[kidx]
            gold = np.where(h < 0, 0, np.where(rank[np.maximum(h, 0)] >= 0,
                                               1 + rank[np.maximum(h, 0)], _IGNORE))
            punct = np.array([sent.upos[x] == "PUNCT" for x in kidx], bool)
            scored = (gold != _IGNORE) & ~punct
            m = len(sent)
        out.append(_Item(A, R, V, gold, scored, kidx, m))
    if not out:
        raise InputError("The probe got no sentences.")
    return out


def _batches(order: list[int], items: list[_Item], budget: int) -> list[list[int]]:
    """Cut length-sorted item indices into batches of at most ``budget`` padded pairs."""
    out, cur, width = [], [], 0
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


def _tensors(batch: list[_Item], emb_norm, attention: bool = True) -> dict:
    """Padded torch tensors of a batch; maps and embeddings stay float16 until used."""
    import torch

    B = len(batch)
    M = max(len(it.gold) for it in batch)
    K = batch[0].A.shape[-1] if attention else 0
    A = np.zeros((B, M, M, K), np.float16)
    R = np.zeros((B, M, 4 * K), np.float32)
    gold = np.full((B, M), _IGNORE, np.int64)
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
        if V is not None:
            V[b, :k] = (it.V.astype(np.float32) - emb_norm[0]) / emb_norm[1]
    t = {"A": torch.from_numpy(A), "R": torch.from_numpy(R), "gold": torch.from_numpy(gold),
         "scored": torch.from_numpy(scored), "valid": torch.from_numpy(valid)}
    t["V"] = torch.from_numpy(V) if V is not None else None
    return t


def _module(kind: str, n_maps: int, dim: int, hidden: int, max_distance: int,
            dropout: float = 0.0):
    import torch
    from torch import nn

    class Scorer(nn.Module):
        """Logits ``[B, M (dependent), 1 + M (ROOT, candidates)]`` from maps ``A [B, M, M, K]``
        (float16, ``A[b, j, i]`` = attention from j to i), ``R [B, M, 4K]`` and embeddings
        ``V [B, M, d]``."""

        def __init__(self):
            super().__init__()
            F = 2 * n_maps
            if kind == "attn":
                self.w = nn.Parameter(torch.zeros(F))
                self.w_root = nn.Parameter(torch.zeros(2 * F))
            elif kind == "attn+emb":
                self.head_w = nn.Linear(dim, F)
                self.dep_w = nn.Linear(dim, F, bias=False)
                self.root_w = nn.Linear(dim, 2 * F)
                for lin in (self.head_w, self.dep_w, self.root_w):
                    nn.init.normal_(lin.weight, std=0.01)
                    if lin.bias is not None:
                        nn.init.zeros_(lin.bias)
            else:
                self.head_h = nn.Linear(dim, hidden)
                self.dep_h = nn.Linear(dim, hidden, bias=False)
                self.dist = nn.Embedding(2 * max_distance + 1, hidden)
                self.root_h = nn.Linear(dim, hidden)
                self.out = nn.Linear(hidden, 1)
                self.root_out = nn.Linear(hidden, 1)
            self.root_bias = nn.Parameter(torch.zeros(1))
            self.drop = nn.Dropout(dropout)

        def forward(self, A, R, V):
            V = self.drop(V.float()) if V is not None else None
            if kind == "dist+emb":
                M = V.shape[1]
                idx = torch.arange(M)
                d = (idx[None, :] - idx[:, None]).clamp(-max_distance, max_distance) + max_distance
                h = torch.relu(self.head_h(V)[:, None, :, :] + self.dep_h(V)[:, :, None, :]
                               + self.dist(d)[None])  # [B, j, i, hidden]
                pair = self.out(h).squeeze(-1)
                root = self.root_out(torch.relu(self.root_h(V))).squeeze(-1)
            else:
                B, M = A.shape[:2]
                At = A.transpose(1, 2)
                # x[b, j, i, f]: first K features α(j→i), last K α(i→j)
                x = torch.cat([A, At], dim=-1).float()
                if kind == "attn":
                    pair = x @ self.w
                    root = R @ self.w_root
                else:
                    # Σ_f x[b,j,i,f] (P[b,i,f] + Q[b,j,f]) as two batched mat-vec products:
                    # the dependent's term batches over (b, j) on x, the candidate's over
                    # (b, i) on xs[b, i, j] = x[b, j, i] (the two halves swapped).
                    F = x.shape[-1]
                    P = self.head_w(V)
                    Q = self.dep_w(V)
                    dep = torch.bmm(x.reshape(B * M, M, F), Q.reshape(B * M, F, 1))
                    xs = torch.cat([At, A], dim=-1).float()
                    cand = torch.bmm(xs.reshape(B * M, M, F), P.reshape(B * M, F, 1))
                    pair = dep.view(B, M, M) + cand.view(B, M, M).transpose(1, 2)
                    root = (R * self.root_w(V)).sum(-1)
            return torch.cat([(root + self.root_bias)[..., None], pair], dim=-1)

    return Scorer()


def _masked_logits(logits, valid):
    import torch

    B, M, _ = logits.shape
    bad = ~valid[:, None, :] | torch.eye(M, dtype=torch.bool)[None]
    bad = torch.cat([torch.zeros(B, M, 1, dtype=torch.bool), bad], dim=-1)
    return logits.masked_fill(bad, -1e9)


class AttentionProbe:
    """A dependency probe over attention maps, scikit-learn style.

    Parameters
    ----------
    kind : ``"attn"`` (Attn-Only), ``"attn+emb"`` (Attn + embeddings) or ``"dist+emb"``
        (distances + embeddings baseline, no attention); see the module docstring.
    decode : ``"argmax"`` (each word its best head) or ``"mst"`` (maximum spanning tree
        with a single root): the default of :meth:`predict` and :meth:`score`.
    epochs : passes over the training set (the best dev epoch is kept when ``fit`` gets
        ``dev``).
    lr, weight_decay : AdamW settings; ``lr=None`` picks 0.02 for ``"attn"`` and 0.002
        otherwise (chosen on EWT dev with the bundled model).
    dropout : dropout on the word embeddings while training (the ``*+emb`` kinds overfit
        without it: 84 % train vs 73 % dev UAS on EWT).
    budget : padded (dependent, candidate) pairs per batch (memory bound).
    hidden, max_distance : size of the ``"dist+emb"`` MLP and its distance clip.
    seed : torch seed for initialisation and batch order.
    progress : show a tqdm bar over epochs.

    Nothing happens in ``__init__``; :meth:`fit` sets ``module_``, ``history_`` (one row
    per epoch: loss, dev UAS), ``best_epoch_``, ``n_maps_`` and ``embedding_dim_``.
    Inputs are an :class:`~attnkit.corpus.AttentionSet` ``X`` (word level, with input
    embeddings for the ``*+emb`` kinds) and the :class:`~attnkit.data.Treebank` ``y`` it
    was extracted from. Call ``torch.set_num_threads`` yourself to bound CPU use.
    """

    def __init__(self, kind: str = "attn+emb", *, decode: str = "argmax", epochs: int = 8,
                 lr: float | None = None, weight_decay: float = 0.0, dropout: float = 0.3,
                 budget: int = 40000,
                 hidden: int = 256, max_distance: int = 20, seed: int = 0,
                 progress: bool = True):
        self.kind = kind
        self.decode = decode
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.dropout = dropout
        self.budget = budget
        self.hidden = hidden
        self.max_distance = max_distance
        self.seed = seed
        self.progress = progress

    def __repr__(self) -> str:
        return f"AttentionProbe(kind={self.kind!r}, decode={self.decode!r}, epochs={self.epochs})"

    # ------------------------------------------------------------------ checks
    def _check(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"kind must be one of {KINDS}, not {self.kind!r}.")
        if self.decode not in DECODERS:
            raise InputError(f"decode must be one of {DECODERS}, not {self.decode!r}.")
        if self.epochs < 1:
            raise InputError(f"epochs must be at least 1, not {self.epochs}.")

    def _fitted(self) -> None:
        if not hasattr(self, "module_"):
            raise InputError("This AttentionProbe is not fitted yet; call fit(attentions, gold) first.")

    @property
    def _needs(self) -> tuple[bool, bool]:
        return self.kind != "attn", self.kind != "dist+emb"  # embeddings, attention

    def _prepare(self, X, y=None, labelled: bool = True) -> list[_Item]:
        emb, attn = self._needs
        if isinstance(X, ProbeData):
            if y is not None:
                raise InputError("Pass ProbeData alone: its gold trees are already inside "
                                 "(probe_data(X, treebank)).")
            missing = [n for n, need, has in (("embeddings", emb, X.embeddings),
                                              ("attention", attn, X.attention)) if need and not has]
            if missing:
                raise InputError(f"This ProbeData has no {' or '.join(missing)}; build it with "
                                 f"probe_data(X, y, embeddings=True, attention=True).")
            if labelled and not X.labelled:
                raise InputError("This ProbeData has no gold trees; build it with "
                                 "probe_data(X, treebank).")
            items = X.items
        else:
            if labelled and y is None:
                raise InputError("Give the treebank the attention set was extracted from: "
                                 "fit(X, y) / score(X, y).")
            items = _items(X, y, need_emb=emb, need_attn=attn)
        if hasattr(self, "n_maps_") and attn and items[0].A.shape[-1] != self.n_maps_:
            raise InputError(
                f"The probe was fitted on {self.n_maps_} maps but this set has "
                f"{items[0].A.shape[-1]}; use attention of the same model."
            )
        return items

    # --------------------------------------------------------------- training
    @renamed(X="attentions", y="gold", dev="select_on")
    def fit(self, attentions: Any, gold: Treebank | None = None, *,
            select_on: tuple[Any, Any] | ProbeData | None = None) -> "AttentionProbe":
        """Train on ``(attentions, gold)``.

        Parameters
        ----------
        attentions : AttentionSet or ProbeData
            Word-level attention of the training treebank (with input embeddings for the
            ``+emb`` kinds), or features from :func:`probe_data` (then without ``gold``).
        gold : Treebank
            The training trees.
        select_on : (attentions, gold) pair or ProbeData, optional
            A held-out split: the epoch with its best UAS (argmax decoding) is kept.

        Returns
        -------
        AttentionProbe
            ``self``, fitted.
        """
        X, y, dev = attentions, gold, select_on
        import torch
        from tqdm.auto import tqdm

        self._check()
        for name in ("module_", "n_maps_", "embedding_dim_", "emb_norm_", "history_",
                     "best_epoch_"):
            self.__dict__.pop(name, None)
        items = self._prepare(X, y)
        if dev is None or isinstance(dev, ProbeData):
            dev_items = self._prepare(dev) if dev is not None else None
        else:
            dev_items = self._prepare(*check_pair(dev, "select_on"))
        emb, _ = self._needs
        self.n_maps_ = items[0].A.shape[-1]
        self.embedding_dim_ = items[0].V.shape[1] if emb else 0
        if emb:
            total = sum(len(it.V) for it in items)
            mean = sum(it.V.astype(np.float64).sum(0) for it in items) / total
            var = sum(((it.V.astype(np.float64) - mean) ** 2).sum(0) for it in items) / total
            self.emb_norm_ = (mean.astype(np.float32), (np.sqrt(var) + 1e-6).astype(np.float32))
        else:
            self.emb_norm_ = None
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        module = _module(self.kind, self.n_maps_, self.embedding_dim_, self.hidden,
                         self.max_distance, self.dropout)
        lr = self.lr if self.lr is not None else (0.02 if self.kind == "attn" else 0.002)
        opt = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=self.weight_decay)
        batches = self._batched(items)
        del items  # the padded batches hold all training needs; free the unpadded copy
        dev_batches = self._batched(dev_items) if dev_items is not None else None
        history, best, best_state = [], -1.0, None
        bar = tqdm(range(1, self.epochs + 1), desc=f"probe {self.kind}", unit="epoch",
                   disable=not self.progress, dynamic_ncols=True)
        for epoch in bar:
            module.train()
            total, count = 0.0, 0
            for bi in rng.permutation(len(batches)):
                t = batches[bi][1]
                logits = _masked_logits(module(t["A"], t["R"], t["V"]), t["valid"])
                n = int((t["gold"] != _IGNORE).sum())
                if n == 0:
                    continue
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), t["gold"].reshape(-1),
                    ignore_index=_IGNORE, reduction="sum") / n
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * n
                count += n
            row = {"epoch": epoch, "loss": total / max(count, 1)}
            self.module_ = module
            if dev_items is not None:
                row["dev_uas"] = self._uas(dev_items, "argmax", dev_batches)[0]
                if row["dev_uas"] >= best:  # ties go to the later, better-fitted epoch
                    best, best_state = row["dev_uas"], copy.deepcopy(module.state_dict())
                    self.best_epoch_ = epoch
            history.append(row)
            bar.set_postfix({k: round(v, 4) for k, v in row.items() if k != "epoch"})
        bar.close()
        if best_state is not None:
            module.load_state_dict(best_state)
        else:
            self.best_epoch_ = self.epochs
        module.eval()
        self.module_ = module
        self.history_ = pd.DataFrame(history).set_index("epoch")
        return self

    # -------------------------------------------------------------- inference
    def _batched(self, items: list[_Item]) -> list[tuple[list[int], dict]]:
        """Length-sorted batches of ``items`` as (indices, padded tensors)."""
        order = sorted(range(len(items)), key=lambda i: len(items[i].gold))
        return [(b, _tensors([items[i] for i in b], self.emb_norm_, self._needs[1]))
                for b in _batches(order, items, self.budget)]

    def _log_probs(self, items: list[_Item], batches=None) -> list[np.ndarray]:
        """Per item, float64 ``[k, 1 + k]`` log-probabilities of ROOT and each kept word."""
        import torch

        out: list[np.ndarray | None] = [None] * len(items)
        self.module_.eval()
        with torch.no_grad():
            for batch, t in batches if batches is not None else self._batched(items):
                logits = _masked_logits(self.module_(t["A"], t["R"], t["V"]), t["valid"])
                lp = torch.log_softmax(logits.double(), dim=-1).numpy()
                for b, i in enumerate(batch):
                    k = len(items[i].gold)
                    out[i] = lp[b, :k, : k + 1]
        return out  # type: ignore[return-value]

    def _decode(self, items: list[_Item], decode: str, batches=None) -> list[np.ndarray]:
        """Per item, int ``[k]``: 0 = ROOT, ``1 + r`` = kept word r."""
        preds = []
        for lp in self._log_probs(items, batches):
            if decode == "mst":
                # masked entries are ~-1e9: clip so the tree search sees finite scores
                preds.append(max_spanning_tree(np.maximum(lp, -1e4)))
            else:
                preds.append(lp.argmax(-1))
        return preds

    def _uas(self, items: list[_Item], decode: str, batches=None) -> tuple[float, int]:
        correct = total = 0
        for it, p in zip(items, self._decode(items, decode, batches)):
            correct += int((p == it.gold)[it.scored].sum())
            total += int(it.scored.sum())
        return (correct / total if total else float("nan")), total

    @renamed(X="attentions")
    def predict(self, attentions: Any, *, decode: str | None = None) -> list[np.ndarray]:
        """Predicted heads of every sentence of ``attentions``: int ``[m]`` arrays in the
        CoNLL-U convention (0 = root, ``i + 1`` = word i); ``-1`` for words cut away by
        truncation."""
        X = attentions
        self._fitted()
        decode = decode or self.decode
        if decode not in DECODERS:
            raise InputError(f"decode must be one of {DECODERS}, not {decode!r}.")
        items = self._prepare(X, labelled=False)
        out = []
        for it, p in zip(items, self._decode(items, decode)):
            heads = np.full(it.m, -1, np.int64)
            heads[it.kidx] = np.where(p == 0, 0, it.kidx[np.maximum(p - 1, 0)] + 1)
            out.append(heads)
        return out

    @renamed(X="attentions", y="gold")
    def score(self, attentions: Any, gold: Treebank | None = None, *,
              decode: str | None = None) -> float:
        """UAS (fraction of non-punctuation words given their gold head) on
        ``(attentions, gold)``."""
        X, y = attentions, gold
        self._fitted()
        decode = decode or self.decode
        if decode not in DECODERS:
            raise InputError(f"decode must be one of {DECODERS}, not {decode!r}.")
        return self._uas(self._prepare(X, y), decode)[0]

    @renamed(X="attentions", y="gold")
    def evaluate(self, attentions: Any, gold: Treebank | None = None) -> Result:
        """UAS with both decoders: a :class:`~attnkit.results.Result` whose table is
        indexed by ``decode`` with ``uas`` and ``n_words`` (scored words: punctuation and
        truncated words left out); ``meta`` holds the probe's ``kind``."""
        X, y = attentions, gold
        self._fitted()
        items = self._prepare(X, y)
        rows = []
        for decode in DECODERS:
            uas, n = self._uas(items, decode)
            rows.append({"decode": decode, "uas": uas, "n_words": n})
        return Result(pd.DataFrame(rows).set_index("decode"), {"kind": self.kind})
