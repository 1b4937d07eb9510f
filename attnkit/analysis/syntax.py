"""Syntax heads (Clark et al. 2019, §4.2): which single head predicts each dependency relation.

For every (layer, head) and both directions, each word's predicted partner is the word
that receives the most attention in its row, with the diagonal zeroed and the special
positions ([CLS], [SEP], ...) excluded:

* ``"dep->head"`` reads the map as is: row = the dependent, attending to its head;
* ``"head->dep"`` reads its transpose: the word that attends most *to* the dependent.

A prediction is correct when it is the word's gold head. Accuracy of a relation is the
fraction of its words (the root excluded) predicted correctly. Beside every head stands the
fixed-offset baseline: "the head is the word ``k`` positions away" for ``k`` in −3…+3
except 0 (a word with no word at that offset is counted wrong).

**Possessive rule** (``poss_rule=True``). Clark et al. note that their best ``poss`` head
"marks 's as the dependent for the poss relation, while gold-standard labels mark the
complement of an 's as the dependent (the accuracy in Table 1 counts 's as correct)". We
read this as their evaluation did: for a word whose relation is the possessive (UD
``nmod:poss``) and whose next word is a possessive clitic (``'s``, ``'``, ``’s``, ``’``),
the prediction made *for the clitic* is compared with the possessor's gold head. The rule
touches only possessors followed by a clitic ("John 's dog"), not possessive pronouns
("his dog"), and applies to heads and offset baselines alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .._compat import renamed
from ..data.conllu import Treebank
from ..core import validate
from ..errors import InputError
from ..core.labels import head_label
from ..core.results import HeadResult, Result, head_frame
from ..core.types import Attentions
from ._align import align_item, check_length, check_pair

#: The two ways a map is read; see the module docstring.
DIRECTIONS = ("dep->head", "head->dep")
#: Offsets of the fixed-offset baseline (signed: +1 = the next word is the head).
OFFSETS = (-3, -2, -1, 1, 2, 3)
#: Relation names (full UD labels) that the possessive rule applies to.
POSSESSIVE_RELATIONS = frozenset({"nmod:poss", "poss"})
#: Word forms of the possessive clitic.
POSSESSIVE_MARKERS = frozenset({"'s", "'", "’s", "’", "s'", "'S"})


@dataclass
class WordHits:
    """Per-word correctness of every head and every offset on one treebank
    (:func:`word_hits` makes it).

    Parameters
    ----------
    hits : numpy.ndarray
        Bool ``[n_words, 2, layer, head]`` (direction in :data:`DIRECTIONS` order).
    offset_hits : numpy.ndarray
        Bool ``[n_words, len(OFFSETS)]``.
    deprels : list of str
        Full UD relation of each evaluated word (root and truncated words left out).
    upos : list of str
        UPOS tag of each evaluated word.
    n_skipped : int
        Words left out because truncation cut them or their head away.
    poss_rule : bool
        Whether the possessive rule was applied.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.analysis.syntax import WordHits
    >>> h = WordHits(np.ones((2, 2, 1, 1), bool), np.zeros((2, 6), bool), ["nmod:poss", "det"], ["PRON", "DET"])
    >>> h.relations(subtypes=False).tolist()
    ['nmod', 'det']
    """

    hits: np.ndarray
    offset_hits: np.ndarray
    deprels: list[str]
    upos: list[str]
    n_skipped: int = 0
    poss_rule: bool = False

    def relations(self, subtypes: bool = True) -> np.ndarray:
        """Relation label of each evaluated word, with or without its UD subtype."""
        if subtypes:
            return np.asarray(self.deprels, dtype=object)
        return np.asarray([r.split(":")[0] for r in self.deprels], dtype=object)


def _predict(maps: np.ndarray, transpose: bool) -> np.ndarray:
    """Argmax partner of every row of ``maps [L, H, m, m]`` (diagonal zeroed) → ``[L, H, m]``."""
    a = np.swapaxes(maps, -1, -2) if transpose else maps
    a = a.copy()
    m = a.shape[-1]
    a[..., np.arange(m), np.arange(m)] = -1.0
    return a.argmax(-1)


@renamed(attention_set="attentions", treebank="gold")
def word_hits(attentions: Attentions, gold: Treebank, *, poss_rule: bool = False,
              client: Any = None) -> WordHits:
    """Score every head (both directions) and every fixed offset on every word.

    Parameters
    ----------
    attentions : AttentionSet or iterable of Attention
        Extracted from ``gold``, in its order. Token-level items are pooled to words first.
    gold : Treebank
        The gold trees.
    poss_rule : bool
        Apply the paper's possessive rule (see the module docstring).
    client : dask.distributed.Client, optional
        Score the items on this Dask cluster (workers read a stored set themselves);
        ``None`` scores them here. Same result.

    Returns
    -------
    WordHits
        Per-word correctness of every head and offset.

    Raises
    ------
    InputError
        When the items do not match the treebank's sentences, or there are none.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> tb = ak.read_conllu(ak.data.sample_treebank(), limit=1)  # The cat sat on the mat .
    >>> s = tb[0]; n = len(s) + 2  # [CLS] + words + [SEP]; heads are 1-based: map positions
    >>> maps = np.full((1, 2, n, n), 0.01)
    >>> maps[0, 0, np.arange(1, n - 1), s.heads] = 1  # head 0: every word -> its gold head
    >>> maps[0, 1, np.arange(1, n - 1), np.arange(2, n)] = 1  # head 1: the next position
    >>> att = ak.Attention.from_maps(maps / maps.sum(-1, keepdims=True), ["[CLS]", *s.words, "[SEP]"])
    >>> hits = ak.analysis.word_hits([att], tb)
    >>> hits.deprels  # the root is left out
    ['det', 'nsubj', 'case', 'det', 'obl', 'punct']
    >>> hits.hits[:, 0, 0, 0].tolist(), hits.hits[:, 0, 0, 1].tolist()  # dep->head, heads 0 and 1
    ([True, True, True, True, True, True], [True, True, False, True, False, False])
    """
    from ..storage.engine import map_items

    check_length(attentions, gold)
    per_item = map_items(attentions, functools.partial(_item_hits, gold=gold, poss_rule=poss_rule),
                         client=client)
    if len(per_item) != len(gold):
        raise InputError(
            f"The attentions ran out after {len(per_item)} items but the treebank has "
            f"{len(gold)} sentences."
        )
    if not per_item:
        raise InputError("The treebank is empty: there is nothing to score.")
    hits, offs, deprels, upos, skipped = zip(*per_item)
    return WordHits(np.concatenate(hits), np.concatenate(offs),
                    [r for rs in deprels for r in rs], [u for us in upos for u in us],
                    int(sum(skipped)), poss_rule)


def _item_hits(i: int, att: Any, gold: Treebank, poss_rule: bool) -> tuple:
    """Hits of every head and offset on the words of item ``i`` (see :func:`word_hits`)."""
    sent = gold[i]
    att, pos = align_item(i, att, sent)
    m = len(sent)
    heads = np.asarray(sent.head_index)
    kept = pos >= 0
    kpos = pos[kept]
    kidx = np.flatnonzero(kept)  # treebank index of each kept word
    sub = att.maps[:, :, kpos][:, :, :, kpos]
    preds = np.stack([kidx[_predict(sub, t)] for t in (False, True)])  # [2, L, H, k]
    pred_of = np.full((2, att.n_layers, att.n_heads, m), -2, dtype=np.int64)
    pred_of[..., kidx] = preds
    # the word whose prediction stands for word j (itself, or its clitic by the rule)
    proxy = np.arange(m)
    if poss_rule:
        for j in range(m - 1):
            if (sent.deprels[j] in POSSESSIVE_RELATIONS
                    and sent.words[j + 1] in POSSESSIVE_MARKERS):
                proxy[j] = j + 1
    ok = (heads >= 0) & kept & kept[np.maximum(heads, 0)] & kept[proxy]
    scored = np.flatnonzero(ok)
    offsets = np.array(OFFSETS)
    return (np.moveaxis(pred_of[..., proxy[scored]] == heads[scored], -1, 0),
            (proxy[scored][:, None] + offsets[None, :]) == heads[scored][:, None],
            [sent.deprels[x] for x in scored], [sent.upos[x] for x in scored],
            int(((heads >= 0) & ~ok).sum()))


def _hits_of(attentions: Attentions | None, gold: Treebank | None, hits: WordHits | None,
             poss_rule: bool, client: Any = None) -> WordHits:
    """``hits``, or the :func:`word_hits` of ``(attentions, gold)``."""
    if hits is not None:
        return hits
    if attentions is None or gold is None:
        raise InputError("Pass the attention set and its treebank, or hits=word_hits(...).")
    return word_hits(attentions, gold, poss_rule=poss_rule, client=client)


def _ordered(rel: np.ndarray) -> list[str]:
    """Relations by descending frequency (ties by name)."""
    names, counts = np.unique(rel.astype(str), return_counts=True)
    return [str(n) for _, n in sorted(zip(-counts, names))]


def _skipped(rel: str, skip: Sequence[str]) -> bool:
    return rel in skip or rel.split(":")[0] in skip


def _group(hits: WordHits, subtypes: bool, skip: Sequence[str] = ("punct",)):
    """Per-relation correct counts: ``(relations, n [R], heads [R, 2, L, H], offsets [R, 6])``
    with "all" first; "all" counts the words whose relation is not in ``skip``."""
    rel = hits.relations(subtypes)
    names = _ordered(rel)
    base = hits.relations(False)
    all_mask = ~np.isin(rel.astype(str), list(skip)) & ~np.isin(base.astype(str), list(skip))
    names = [r for r in names if not _skipped(r, skip)]
    masks = [all_mask] + [rel == r for r in names]
    n = np.array([mk.sum() for mk in masks])
    head_c = np.stack([hits.hits[mk].sum(0) for mk in masks])
    off_c = np.stack([hits.offset_hits[mk].sum(0) for mk in masks])
    return ["all"] + names, n, head_c, off_c


@renamed(attention_set="attentions", treebank="gold")
def head_accuracy(attentions: Attentions | None = None, gold: Treebank | None = None, *,
                  subtypes: bool = True, poss_rule: bool = False,
                  skip: Sequence[str] = ("punct",), hits: WordHits | None = None,
                  client: Any = None) -> HeadResult:
    """Accuracy of every head, in both directions, at every relation.

    Parameters
    ----------
    attentions, gold : AttentionSet and Treebank
        As in :func:`word_hits` (omit both when ``hits`` is given).
    subtypes, poss_rule, skip : as in :func:`relation_heads`.
    hits : WordHits, optional
        From :func:`word_hits`, to skip recomputing them.
    client : dask.distributed.Client, optional
        Score the words on this Dask cluster (:func:`word_hits`); same result.

    Returns
    -------
    HeadResult
        ``table`` indexed by ``(layer, head)`` (0-indexed), two rows per head (column
        ``direction``: "dep->head" then "head->dep"), one column per relation ("all" first,
        then by frequency) holding accuracies in [0, 1]. ``meta["n"]`` maps each relation to
        its number of words. The "all" column counts every word except those of the
        ``skip`` relations (punctuation by default, as in the paper's numbers).
        ``plot()`` draws every head at every relation; ``grid(relation)`` the better
        direction per head.

    Raises
    ------
    InputError
        As :func:`word_hits`.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> tb = ak.read_conllu(ak.data.sample_treebank(), limit=1)  # The cat sat on the mat .
    >>> s = tb[0]; n = len(s) + 2  # [CLS] + words + [SEP]; heads are 1-based: map positions
    >>> maps = np.full((1, 2, n, n), 0.01)
    >>> maps[0, 0, np.arange(1, n - 1), s.heads] = 1  # head 0: every word -> its gold head
    >>> maps[0, 1, np.arange(1, n - 1), np.arange(2, n)] = 1  # head 1: the next position
    >>> att = ak.Attention.from_maps(maps / maps.sum(-1, keepdims=True), ["[CLS]", *s.words, "[SEP]"])
    >>> acc = ak.analysis.head_accuracy([att], tb)
    >>> acc.table.loc[(0, 1), ["direction", "all", "det"]]  # head 1 is right on 3 of 5 words
              direction  all  det
    layer head
    0     1     dep->head  0.6  1.0
          1     head->dep  0.2  0.5
    """
    hits = _hits_of(attentions, gold, hits, poss_rule, client=client)
    names, n, head_c, _ = _group(hits, subtypes, skip)
    acc = head_c / np.maximum(n, 1)[:, None, None, None]  # [R, 2, L, H]
    parts = []
    for d, direction in enumerate(DIRECTIONS):
        part = head_frame(np.moveaxis(acc[:, d], 0, -1), names)  # [L, H, relation]
        part.insert(0, "direction", direction)
        parts.append(part)
    table = pd.concat(parts).sort_index(kind="stable")
    return HeadResult(table, {"n": dict(zip(names, n.tolist())), "poss_rule": hits.poss_rule},
                      value="all", plot="relation_grid")


@renamed(attention_set="attentions", treebank="gold")
def offset_accuracy(attentions: Attentions | None = None, gold: Treebank | None = None, *,
                    subtypes: bool = True, poss_rule: bool = False,
                    skip: Sequence[str] = ("punct",), hits: WordHits | None = None,
                    client: Any = None) -> Result:
    """Accuracy of each fixed offset at every relation: "the head is the word ``k`` positions
    away".

    Parameters
    ----------
    attentions, gold : AttentionSet and Treebank
        As in :func:`word_hits` (omit both when ``hits`` is given; offsets need only the
        trees, but the words scored are those the attention kept).
    subtypes, poss_rule, skip : as in :func:`relation_heads`.
    hits : WordHits, optional
        From :func:`word_hits`.
    client : dask.distributed.Client, optional
        Score the words on this Dask cluster (see :func:`word_hits`); ``None``: here.

    Returns
    -------
    Result
        ``table`` with one row per relation ("all" first, then by frequency) and one
        column per offset of :data:`OFFSETS`; ``meta["n"]`` words per relation.

    Raises
    ------
    InputError
        As :func:`word_hits`.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> tb = ak.read_conllu(ak.data.sample_treebank(), limit=1)  # The cat sat on the mat .
    >>> s = tb[0]; n = len(s) + 2  # [CLS] + words + [SEP]; heads are 1-based: map positions
    >>> maps = np.full((1, 2, n, n), 0.01)
    >>> maps[0, 0, np.arange(1, n - 1), s.heads] = 1  # head 0: every word -> its gold head
    >>> maps[0, 1, np.arange(1, n - 1), np.arange(2, n)] = 1  # head 1: the next position
    >>> att = ak.Attention.from_maps(maps / maps.sum(-1, keepdims=True), ["[CLS]", *s.words, "[SEP]"])
    >>> off = ak.analysis.offset_accuracy([att], tb)
    >>> off.table.loc["all"].tolist()  # +1 is right for The, cat, the (3 of 5 words)
    [0.2, 0.0, 0.0, 0.6, 0.2, 0.0]
    """
    hits = _hits_of(attentions, gold, hits, poss_rule, client=client)
    names, n, _, off_c = _group(hits, subtypes, skip)
    acc = off_c / np.maximum(n, 1)[:, None]
    df = pd.DataFrame(acc, index=pd.Index(names, name="relation"),
                      columns=pd.Index(OFFSETS, name="offset"))
    return Result(df, {"n": dict(zip(names, n.tolist())), "poss_rule": hits.poss_rule})


@renamed(attention_set="attentions", treebank="gold")
def relation_heads(
    attentions: Attentions | WordHits,
    gold: Treebank | None = None,
    *,
    select_on: tuple[Any, Any] | WordHits | None = None,
    subtypes: bool = True,
    poss_rule: bool = False,
    min_count: int = 100,
    skip: Sequence[str] = ("punct",),
    client: Any = None,
) -> Result:
    """The best single head for every frequent relation, beside the best fixed offset.

    ``(attentions, gold)`` is the split the accuracies are *reported* on (e.g. EWT test).
    The head and the offset of each row are *chosen* on ``select_on``, a pair
    ``(attentions, gold)`` of another split (e.g. EWT dev); without it they are chosen on
    the reported split itself (``meta["selected_on_report"]`` says so), which overstates
    accuracy. Either side may also be a :class:`WordHits` from :func:`word_hits`
    (``relation_heads(test_hits, select_on=dev_hits)``) to reuse one pass over the data;
    ``poss_rule`` is then the one the hits were computed with.

    Parameters
    ----------
    attentions : AttentionSet, iterable of Attention, or WordHits
        Attention extracted from ``gold``, in its order (pooled to words when needed).
    gold : Treebank
        The gold trees of the reported split.
    select_on : (attentions, gold) pair or WordHits, optional
        The split heads and offsets are chosen on.
    subtypes : keep UD subtypes (``nmod:poss``) or fold them into the base relation (``nmod``).
    poss_rule : the paper's possessive rule (module docstring).
    min_count : keep relations with at least this many words in the reported split.
    skip : relations left out of the table and of the "all" row (the paper leaves out
        punctuation); a base name (``nmod``) also skips its subtypes. The root never counts
        (it has no head word).
    client : dask.distributed.Client, optional
        Score every word of both splits on this Dask cluster (workers read stored sets
        themselves); the per-head hit counts, and so the table, are the same as without.

    Returns
    -------
    Result
        ``table`` indexed by ``relation`` ("all" first, then by frequency) with columns
        ``n`` (words in the reported split), ``layer``, ``head`` (0-indexed),
        ``direction``, ``label`` (1-indexed "L-H"), ``accuracy``, ``offset``,
        ``offset_accuracy`` (reported split, in [0, 1]), ``n_select``,
        ``select_accuracy``, ``offset_select_accuracy`` (the choosing split's scores of the
        chosen head and offset). ``meta``: ``selected_on_report``, ``subtypes``,
        ``poss_rule``, ``n_skipped``. ``plot()`` draws the paper's Fig. 5 bars.

    Raises
    ------
    InputError
        When the treebank is missing or does not match the attention, or the two splits
        come from different models or possessive rules.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.data.paths import sample_treebank
    >>> from attnkit.testing import tiny_model
    >>> tb = ak.read_conllu(sample_treebank())
    >>> dev, test = tb[:6], tb[6:]
    >>> model = tiny_model("bert")
    >>> table = ak.relation_heads(ak.extract(model, test, progress=False), test,
    ...                           select_on=(ak.extract(model, dev, progress=False), dev),
    ...                           min_count=1)
    >>> table.meta["selected_on_report"], "all" in table.index
    (False, True)
    """
    min_count = validate.integer(min_count, "min_count", minimum=0)
    if isinstance(attentions, WordHits):
        report_hits = attentions
        poss_rule = report_hits.poss_rule
    else:
        if gold is None:
            raise InputError("relation_heads needs the treebank the attention was extracted "
                             "from: relation_heads(attentions, treebank, ...).")
        report_hits = word_hits(attentions, gold, poss_rule=poss_rule, client=client)
    if isinstance(select_on, WordHits):
        select_hits = select_on
        if select_hits.poss_rule != poss_rule:
            raise InputError("select_on was scored with a different poss_rule than the "
                             "reported split; compute both with the same word_hits settings.")
    elif select_on is not None:
        sel_set, sel_tb = check_pair(select_on, "select_on")
        select_hits = word_hits(sel_set, sel_tb, poss_rule=poss_rule, client=client)
    else:
        select_hits = report_hits
    names, n, head_c, off_c = _group(report_hits, subtypes, skip)
    s_names, s_n, s_head_c, s_off_c = _group(select_hits, subtypes, skip)
    if head_c.shape[1:] != s_head_c.shape[1:]:
        raise InputError(
            f"select_on has {s_head_c.shape[2]}x{s_head_c.shape[3]} heads but the reported set "
            f"has {head_c.shape[2]}x{head_c.shape[3]}; both must come from the same model."
        )
    s_index = {r: i for i, r in enumerate(s_names)}

    rows = []
    for i, rel in enumerate(names):
        if rel != "all" and (n[i] < min_count or _skipped(rel, skip) or rel == "root"):
            continue
        row = {"relation": rel, "n": int(n[i])}
        si = s_index.get(rel)
        if si is None or s_n[si] == 0:
            row.update(layer=-1, head=-1, direction="", label="", accuracy=np.nan, offset=0,
                       offset_accuracy=np.nan, n_select=0, select_accuracy=np.nan,
                       offset_select_accuracy=np.nan)
            rows.append(row)
            continue
        s_acc = s_head_c[si] / s_n[si]
        d, layer, head = np.unravel_index(int(np.argmax(s_acc)), s_acc.shape)
        k = int(np.argmax(s_off_c[si]))
        row.update(
            layer=int(layer), head=int(head), direction=DIRECTIONS[d],
            label=head_label(int(layer), int(head)),
            accuracy=head_c[i, d, layer, head] / n[i],
            offset=OFFSETS[k], offset_accuracy=off_c[i, k] / n[i],
            n_select=int(s_n[si]), select_accuracy=float(s_acc[d, layer, head]),
            offset_select_accuracy=s_off_c[si, k] / s_n[si],
        )
        rows.append(row)
    df = pd.DataFrame(rows).set_index("relation")
    return Result(df, {"selected_on_report": select_on is None, "subtypes": subtypes,
                       "poss_rule": poss_rule, "n_skipped": report_hits.n_skipped},
                  plot="relation_heads")


@renamed(treebank="gold")
def right_branching_uas(gold: Treebank, *, punct: bool = False) -> float:
    """UAS of the right-branching baseline.

    Each word's head is the next word and the last word is the root.

    Parameters
    ----------
    gold : Treebank
        The gold trees.
    punct : bool
        Count punctuation (UPOS ``PUNCT``) too; the paper leaves it out.

    Returns
    -------
    float
        Unlabelled attachment score in [0, 1].

    Raises
    ------
    InputError
        When the treebank has no scorable word.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.data.paths import sample_treebank
    >>> round(ak.right_branching_uas(ak.read_conllu(sample_treebank())), 3)
    0.391
    """
    correct = total = 0
    for sent in gold:
        m = len(sent)
        pred = np.arange(1, m + 1)
        pred[-1] = -1
        head = np.asarray(sent.head_index)
        use = np.ones(m, bool) if punct else np.array([u != "PUNCT" for u in sent.upos])
        correct += int((pred == head)[use].sum())
        total += int(use.sum())
    if total == 0:
        raise InputError("The treebank has no scorable words.")
    return correct / total
