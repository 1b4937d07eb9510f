"""The probe estimator, scikit-learn style: fit, predict heads, score UAS."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd

from ..._compat import renamed
from ..._progress import progress as progress_bar
from ...data.conllu import Treebank
from ...core import validate
from ...errors import InputError
from ...core.results import Result
from .._align import check_pair
from ..tree import max_spanning_tree
from .features import (
    IGNORE,
    ProbeData,
    ProbeItem,
    embedding_norm,
    length_batches,
    padded_tensors,
    read_items,
)
from .scorers import KINDS, masked_logits, scorer

#: Decoders: each word its best head, or the maximum spanning tree with a single root.
DECODERS = ("argmax", "mst")


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
    Inputs are an :class:`~attnkit.storage.corpus.AttentionSet` ``X`` (word level, with input
    embeddings for the ``*+emb`` kinds) and the :class:`~attnkit.data.Treebank` ``y`` it
    was extracted from. Call ``torch.set_num_threads`` yourself to bound CPU use.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> tb = ak.read_conllu(ak.data.sample_treebank())
    >>> sset = ak.extract(tiny_model("bert"), tb, level="word", embeddings=True, progress=False)
    >>> probe = ak.AttentionProbe(kind="attn", epochs=2, progress=False).fit(sset, tb)
    >>> result = probe.evaluate(sset, tb)
    >>> list(result.table.index), int(result["n_words"].iloc[0])  # punctuation left out
    (['argmax', 'mst'], 110)
    >>> heads = probe.predict(sset)[0]  # CoNLL-U convention: 0 = root, i + 1 = word i
    >>> len(heads) == len(tb[0]), bool(0.0 <= probe.score(sset, tb) <= 1.0)
    (True, True)
    """

    def __init__(self, kind: str = "attn+emb", *, decode: str = "argmax", epochs: int = 8,
                 lr: float | None = None, weight_decay: float = 0.0, dropout: float = 0.3,
                 budget: int = 40000,
                 hidden: int = 256, max_distance: int = 20, seed: int = 0,
                 progress: bool = True):
        budget = validate.size(budget, "budget")
        max_distance = validate.size(max_distance, "max_distance")
        seed = validate.seed(seed)
        epochs = validate.size(epochs, "epochs")
        hidden = validate.size(hidden, "hidden")
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

    def _prepare(self, X, y=None, labelled: bool = True) -> list[ProbeItem]:
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
            items = read_items(X, y, need_emb=emb, need_attn=attn)
        if hasattr(self, "n_maps_") and attn and items[0].A.shape[-1] != self.n_maps_:
            raise InputError(
                f"The probe was fitted on {self.n_maps_} maps but this set has "
                f"{items[0].A.shape[-1]}; use attention of the same model."
            )
        return items

    # --------------------------------------------------------------- training
    @renamed(X="attentions", y="gold", dev="select_on")
    def fit(self, attentions: Any, gold: Treebank | None = None, *,
            select_on: tuple[Any, Any] | ProbeData | None = None) -> AttentionProbe:
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

        Raises
        ------
        InputError
            When the probe's settings are invalid, ``gold`` is missing or does not match
            ``attentions``, or the attention is not word level (or lacks the embeddings a
            ``+emb`` kind needs).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> tb = ak.read_conllu(ak.data.sample_treebank())[:4]
        >>> sset = ak.extract(tiny_model("bert"), tb, level="word", progress=False)
        >>> probe = ak.AttentionProbe(kind="attn", epochs=1, progress=False).fit(sset, tb)
        >>> probe.n_maps_, len(probe.history_)  # K = 2 layers x 2 heads maps; one epoch
        (4, 1)
        """
        X, y, dev = attentions, gold, select_on
        import torch

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
        first = items[0].V
        self.embedding_dim_ = first.shape[1] if emb and first is not None else 0
        self.emb_norm_ = embedding_norm(items) if emb else None
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        module = scorer(self.kind, self.n_maps_, self.embedding_dim_, self.hidden,
                         self.max_distance, self.dropout)
        lr = self.lr if self.lr is not None else (0.02 if self.kind == "attn" else 0.002)
        opt = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=self.weight_decay)
        batches = self._batched(items)
        del items  # the padded batches hold all training needs; free the unpadded copy
        dev_batches = self._batched(dev_items) if dev_items is not None else None
        history, best, best_state = [], -1.0, None
        bar = progress_bar(range(1, self.epochs + 1), show=self.progress,
                           desc=f"probe {self.kind}", unit="epoch")
        for epoch in bar:
            module.train()
            total, count = 0.0, 0
            for bi in rng.permutation(len(batches)):
                t = batches[bi][1]
                logits = masked_logits(module(t["A"], t["R"], t["V"]), t["valid"])
                n = int((t["gold"] != IGNORE).sum())
                if n == 0:
                    continue
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), t["gold"].reshape(-1),
                    ignore_index=IGNORE, reduction="sum") / n
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
    def _batched(self, items: list[ProbeItem]) -> list[tuple[list[int], dict]]:
        """Length-sorted batches of ``items`` as (indices, padded tensors)."""
        order = sorted(range(len(items)), key=lambda i: len(items[i].gold))
        return [(b, padded_tensors([items[i] for i in b], self.emb_norm_, self._needs[1]))
                for b in length_batches(order, items, self.budget)]

    def _log_probs(self, items: list[ProbeItem], batches=None) -> list[np.ndarray]:
        """Per item, float64 ``[k, 1 + k]`` log-probabilities of ROOT and each kept word."""
        import torch

        out: list[np.ndarray | None] = [None] * len(items)
        self.module_.eval()
        with torch.no_grad():
            for batch, t in batches if batches is not None else self._batched(items):
                logits = masked_logits(self.module_(t["A"], t["R"], t["V"]), t["valid"])
                lp = torch.log_softmax(logits.double(), dim=-1).numpy()
                for b, i in enumerate(batch):
                    k = len(items[i].gold)
                    out[i] = lp[b, :k, : k + 1]
        return out  # type: ignore[return-value]

    def _decode(self, items: list[ProbeItem], decode: str, batches=None) -> list[np.ndarray]:
        """Per item, int ``[k]``: 0 = ROOT, ``1 + r`` = kept word r."""
        preds = []
        for lp in self._log_probs(items, batches):
            if decode == "mst":
                # masked entries are ~-1e9: clip so the tree search sees finite scores
                preds.append(max_spanning_tree(np.maximum(lp, -1e4)))
            else:
                preds.append(lp.argmax(-1))
        return preds

    def _uas(self, items: list[ProbeItem], decode: str, batches=None) -> tuple[float, int]:
        correct = total = 0
        for it, p in zip(items, self._decode(items, decode, batches)):
            correct += int((p == it.gold)[it.scored].sum())
            total += int(it.scored.sum())
        return (correct / total if total else float("nan")), total

    @renamed(X="attentions")
    def predict(self, attentions: Any, *, decode: str | None = None) -> list[np.ndarray]:
        """Predicted heads of every sentence of ``attentions``.

        Parameters
        ----------
        attentions : AttentionSet or ProbeData
            Word-level attention (as in :meth:`fit`); no trees needed.
        decode : {"argmax", "mst"}, optional
            Each word its best head, or a maximum spanning tree with one root; default the
            probe's ``decode``.

        Returns
        -------
        list of ndarray
            Per sentence, int ``[m]`` in the CoNLL-U convention (0 = root, ``i + 1`` = word
            i); ``-1`` for words cut away by truncation.

        Raises
        ------
        InputError
            When the probe is not fitted or ``decode`` is unknown.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> tb = ak.read_conllu(ak.data.sample_treebank())[:4]
        >>> sset = ak.extract(tiny_model("bert"), tb, level="word", progress=False)
        >>> probe = ak.AttentionProbe(kind="attn", epochs=1, progress=False).fit(sset, tb)
        >>> heads = probe.predict(sset, decode="mst")[0]
        >>> len(heads) == len(tb[0]), int((heads == 0).sum())  # a tree has one root
        (True, 1)
        """
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
        ``(attentions, gold)``.

        Parameters
        ----------
        attentions : AttentionSet or ProbeData
            Word-level attention (as in :meth:`fit`).
        gold : Treebank
            The trees of those sentences.
        decode : {"argmax", "mst"}, optional
            Default the probe's ``decode``.

        Returns
        -------
        float
            In [0, 1]; NaN when no word is scored.

        Raises
        ------
        InputError
            When the probe is not fitted, ``decode`` is unknown or ``gold`` does not match.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> tb = ak.read_conllu(ak.data.sample_treebank())[:4]
        >>> sset = ak.extract(tiny_model("bert"), tb, level="word", progress=False)
        >>> probe = ak.AttentionProbe(kind="attn", epochs=1, progress=False).fit(sset, tb)
        >>> bool(0.0 <= probe.score(sset, tb) <= 1.0)
        True
        """
        X, y = attentions, gold
        self._fitted()
        decode = decode or self.decode
        if decode not in DECODERS:
            raise InputError(f"decode must be one of {DECODERS}, not {decode!r}.")
        return self._uas(self._prepare(X, y), decode)[0]

    @renamed(X="attentions", y="gold")
    def evaluate(self, attentions: Any, gold: Treebank | None = None) -> Result:
        """UAS with both decoders.

        Parameters
        ----------
        attentions : AttentionSet or ProbeData
            Word-level attention (as in :meth:`fit`).
        gold : Treebank
            The trees of those sentences.

        Returns
        -------
        Result
            Table indexed by ``decode`` (``"argmax"``, ``"mst"``) with ``uas`` and
            ``n_words`` (scored words: punctuation and truncated words left out); ``meta``
            holds the probe's ``kind``.

        Raises
        ------
        InputError
            When the probe is not fitted or ``gold`` does not match.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> tb = ak.read_conllu(ak.data.sample_treebank())[:4]
        >>> sset = ak.extract(tiny_model("bert"), tb, level="word", progress=False)
        >>> probe = ak.AttentionProbe(kind="attn", epochs=1, progress=False).fit(sset, tb)
        >>> result = probe.evaluate(sset, tb)
        >>> list(result.table.columns), result.meta["kind"]
        (['uas', 'n_words'], 'attn')
        """
        X, y = attentions, gold
        self._fitted()
        items = self._prepare(X, y)
        rows = []
        for decode in DECODERS:
            uas, n = self._uas(items, decode)
            rows.append({"decode": decode, "uas": uas, "n_words": n})
        return Result(pd.DataFrame(rows).set_index("decode"), {"kind": self.kind})
