"""Coreference heads (Clark et al. 2019, §4.3): does a mention's head word attend to the head
word of one of its antecedents?

Each document is one attention item (its words fed to the model as one list, cut at the
model's maximum length). For every *coreferent* mention — one with an earlier mention of the
same entity inside the kept text — the prediction of head (layer, head) is the word the
mention's head word attends to most: the argmax of its word-level row
(``maps[layer, head, from=mention head, to=:]``) with the diagonal and every non-word
position ([CLS], [SEP], other special tokens) excluded. It is correct when that word is the
head word of one of the mention's antecedents. Three baselines pick an antecedent among the
earlier mentions: the nearest one; the nearest with the same head word; a four-sieve rule
system (exact string → head word → number/gender/person agreement → nearest).

Choices where the paper is silent (all recorded in the returned results' ``meta``):

- Mentions: GUM marks appositions (``link=appos``) and copular predicates (``link=pred``) as
  links of an entity; CoNLL-2012 (the paper's data) annotates neither as coreference, so by
  default those mentions are dropped (``exclude_links``). CoNLL-2012 has no singletons, so
  by default singleton entities are not candidate antecedents of the baselines
  (``singletons=False``).
- "Earlier": an antecedent candidate ends before the mention starts (nested and overlapping
  mentions are never antecedents of each other). "Nearest": the candidate whose head word is
  closest before the mention (ties → the later start).
- The head-match baseline has no fallback: with no earlier mention with the same head word
  (lower-cased form) it picks nothing and is wrong.
- Mention type comes from the UPOS of the mention's head word (PRON, PROPN, anything else).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from ..core.labels import head_label
from .._compat import renamed
from ..core.attention import Attention
from ..data.coref import MENTION_TYPES, Document, Mention
from ..errors import InputError
from ..core.results import HeadResult, Result
from ..core.types import Attentions
from ._align import check_pair

BASELINES = ("nearest", "head_match", "sieve")
#: Display names of the baselines (Clark et al. Table 2).
BASELINE_NAMES = {"nearest": "Nearest", "head_match": "Head match", "sieve": "Rule-based sieve"}
DEFAULT_EXCLUDED_LINKS = ("appos", "pred")
ACCURACY_COLUMNS = ("all",) + MENTION_TYPES


@dataclass
class CorefEvaluation:
    """Per-mention results of the coreference-head analysis (:func:`coref_predictions`
    makes it).

    Parameters
    ----------
    mentions : pandas.DataFrame
        One row per evaluated mention (a coreferent mention whose words all lie in the
        kept text): ``doc``, ``sentence``, ``start``, ``end`` (sentence word indices, end
        exclusive), ``head`` (index in the document's word list), ``text``, ``head_word``,
        ``type``, ``link``, ``entity``, ``n_antecedents``, ``distance`` (words from the
        nearest antecedent's head to this head), and the baselines' correctness
        ``nearest``, ``head_match``, ``sieve`` (bool) and ``sieve_stage`` (1–4: which sieve
        chose, 0 when there was no candidate).
    hits : numpy.ndarray
        Bool ``[mention, layer, head]``: True where the head's argmax word is the head word
        of one of the mention's antecedents (rows line up with ``mentions``).
    predicted : numpy.ndarray
        Int ``[mention, layer, head]``: the document word index each head's argmax falls on.
    documents : pandas.DataFrame
        One row per document: ``doc``, ``genre``, ``words``, ``kept_words``, ``truncated``,
        ``coreferent`` (coreferent mentions in the whole document), ``evaluated`` and
        ``lost`` (coreferent mentions cut away by truncation).
    n_layers, n_heads : int
        Shape of the model's attention.
    settings : dict
        The options used (``exclude_links``, ``singletons``).

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import coref_predictions
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(ak.data.sample_coref())  # two hand-annotated documents
    >>> ev = coref_predictions(ak.extract(tiny_model("bert"), docs, progress=False), docs)
    >>> ev.mentions[["doc", "text", "type", "nearest", "sieve"]].values.tolist()[:2]
    [['doc_a', 'his', 'pronoun', True, True], ['doc_a', 'She', 'pronoun', True, True]]
    >>> ev.hits.shape, len(ev.subset(["doc_b"]).mentions)
    ((5, 2, 2), 2)
    """

    mentions: pd.DataFrame
    hits: np.ndarray
    predicted: np.ndarray
    documents: pd.DataFrame
    n_layers: int
    n_heads: int
    settings: dict[str, Any]

    @renamed(docs="gold")
    def subset(self, gold: Iterable[str | Document] | None) -> "CorefEvaluation":
        """Only the given documents (ids or Documents); ``None`` keeps all.

        Parameters
        ----------
        gold : iterable of str or Document, or None
            The documents to keep, or their ids.

        Returns
        -------
        CorefEvaluation
            The mentions, hits and predictions of those documents.

        Raises
        ------
        InputError
            For an id that is not one of the evaluated documents.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.analysis import coref_predictions
        >>> from attnkit.testing import tiny_model
        >>> docs = ak.read_coref(ak.data.sample_coref())
        >>> ev = coref_predictions(ak.extract(tiny_model("bert"), docs, progress=False), docs)
        >>> ev.subset(["doc_b"]).documents["doc"].tolist()
        ['doc_b']
        """
        docs = gold
        if docs is None:
            return self
        ids = _doc_ids(docs)
        unknown = sorted(set(ids) - set(self.documents["doc"]))
        if unknown:
            raise InputError(f"Unknown document ids {unknown[:5]}; known ids are those of the "
                             "documents given to coref_predictions.")
        keep = self.mentions["doc"].isin(ids).to_numpy()
        return CorefEvaluation(
            mentions=self.mentions[keep].reset_index(drop=True),
            hits=self.hits[keep], predicted=self.predicted[keep],
            documents=self.documents[self.documents["doc"].isin(ids)].reset_index(drop=True),
            n_layers=self.n_layers, n_heads=self.n_heads, settings=dict(self.settings),
        )


# ------------------------------------------------------------------ per mention
@renamed(docs="gold")
def coref_predictions(
    attentions: Iterable[Attention],
    gold: Sequence[Document],
    *,
    exclude_links: Sequence[str] = DEFAULT_EXCLUDED_LINKS,
    singletons: bool = False,
) -> CorefEvaluation:
    """Predictions of every attention head and of the three baselines for every coreferent
    mention of every document.

    Parameters
    ----------
    attentions : one :class:`Attention` per document, in the order of ``gold`` (e.g. the
        :class:`~attnkit.AttentionSet` of ``attnkit.extract(model, docs)``); its words must be
        the document's words (or a prefix of them, when the document was cut before the
        model saw it). Token-level attention is pooled to words first (Clark pooling).
    gold : documents from :func:`attnkit.data.read_coref`.
    exclude_links : mentions with these link types are dropped altogether (see the module
        docstring; ``()`` keeps every mention).
    singletons : whether mentions of single-mention entities are candidate antecedents for
        the baselines (they are never correct ones).

    Returns
    -------
    CorefEvaluation

    Raises
    ------
    InputError
        When there are no documents, not one attention per document, the words differ, or
        items disagree on layers and heads.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import coref_predictions
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(ak.data.sample_coref())  # two hand-annotated documents
    >>> ev = coref_predictions(ak.extract(tiny_model("bert"), docs, progress=False), docs)
    >>> ev.documents[["doc", "words", "coreferent", "evaluated", "lost"]].values.tolist()
    [['doc_a', 11, 3, 3, 0], ['doc_b', 18, 2, 2, 0]]
    """
    docs = list(gold)
    if not docs:
        raise InputError("coref_predictions() got no documents.")
    exclude = set(exclude_links)
    rows: list[dict[str, Any]] = []
    hits: list[np.ndarray] = []
    preds: list[np.ndarray] = []
    doc_rows = []
    shape = None
    n_att = 0
    for k, att in enumerate(attentions):
        n_att += 1
        if k >= len(docs):
            continue
        doc = docs[k]
        if att.level != "word":
            att = att.to_words()
        if shape is None:
            shape = att.maps.shape[:2]
        elif att.maps.shape[:2] != shape:
            raise InputError(f"All attentions must have the same layers and heads; item {k} "
                             f"has {att.maps.shape[:2]}, the first had {shape}.")
        pos = _word_positions(att, doc, k)
        r, h, p, drow = _evaluate_doc(att, doc, pos, exclude, singletons)
        rows.extend(r)
        hits.append(h)
        preds.append(p)
        doc_rows.append(drow)
    if n_att != len(docs):
        raise InputError(f"Got {n_att} attention items for {len(docs)} documents; give one "
                         "item per document, in the same order (extract(model, docs)).")
    if shape is None:
        raise InputError("coref_predictions() got no attention; give one item per document.")
    L, H = shape
    cols = ["doc", "sentence", "start", "end", "head", "text", "head_word", "type", "link",
            "entity", "n_antecedents", "distance", *BASELINES, "sieve_stage"]
    return CorefEvaluation(
        mentions=pd.DataFrame(rows, columns=cols),
        hits=np.concatenate(hits) if hits else np.zeros((0, L, H), bool),
        predicted=np.concatenate(preds) if preds else np.zeros((0, L, H), np.int64),
        documents=pd.DataFrame(doc_rows),
        n_layers=int(L), n_heads=int(H),
        settings={"exclude_links": tuple(exclude_links), "singletons": singletons},
    )


def _word_positions(att: Attention, doc: Document, k: int) -> np.ndarray:
    """Position of each document word in ``att`` (``-1`` where cut away)."""
    words = doc.words
    if list(att.words) != words[: len(att.words)]:
        first = next((i for i, (a, b) in enumerate(zip(att.words, words)) if a != b),
                     min(len(att.words), len(words)))
        raise InputError(
            f"Attention item {k} does not hold the words of document {doc.id!r} (they differ "
            f"at word {first}). Give one item per document, in the order of the documents."
        )
    sid = att.meta.get("sent_id") if att.meta else None
    if sid is not None and sid != doc.id:
        raise InputError(f"Attention item {k} is of {sid!r}, not of document {doc.id!r}.")
    pos = np.full(len(words), -1, dtype=np.int64)
    pos[: len(att.words)] = att.word_positions
    return pos


def _evaluate_doc(att: Attention, doc: Document, pos: np.ndarray, exclude: set[str],
                  singletons: bool):
    mentions = [m for m in doc.mentions if m.link not in exclude]
    size: dict[str, int] = {}
    for m in mentions:
        size[m.entity] = size.get(m.entity, 0) + 1
    kept = [bool((pos[m.doc_start : m.doc_end] >= 0).all()) for m in mentions]
    # candidates for the baselines, in the kept text, sorted nearest-last
    cand = [i for i, m in enumerate(mentions) if kept[i] and (singletons or size[m.entity] > 1)]
    cand.sort(key=lambda i: (mentions[i].doc_head, mentions[i].doc_start))
    coreferent = evaluated = 0
    rows, targets, heads_pos = [], [], []
    for i, m in enumerate(mentions):
        antecedents = [a for a in mentions if a.entity == m.entity and a.doc_end <= m.doc_start]
        if not antecedents:
            continue
        coreferent += 1
        if not kept[i]:
            continue
        evaluated += 1
        earlier = [mentions[j] for j in cand if mentions[j].doc_end <= m.doc_start]
        earlier.reverse()  # nearest first
        pick = {
            "nearest": earlier[0] if earlier else None,
            "head_match": _first(earlier, lambda a: _same_head(a, m)),  # noqa: B023 (called now)
        }
        stage, chosen = _sieve(m, earlier)
        pick["sieve"] = chosen
        ante_heads = {a.doc_head for a in antecedents}
        rows.append({
            "doc": doc.id, "sentence": m.sentence, "start": m.start, "end": m.end,
            "head": m.doc_head, "text": m.text, "head_word": m.head_word, "type": m.type,
            "link": m.link, "entity": m.entity, "n_antecedents": len(antecedents),
            "distance": int(m.doc_head - max(a.doc_head for a in antecedents)),
            **{b: bool(pick[b] is not None and pick[b].entity == m.entity) for b in BASELINES},
            "sieve_stage": stage,
        })
        targets.append(ante_heads)
        heads_pos.append(pos[m.doc_head])
    L, H = att.maps.shape[:2]
    predicted = np.zeros((len(rows), L, H), dtype=np.int64)
    hit = np.zeros((len(rows), L, H), dtype=bool)
    if rows:
        # doc word of each position; non-word positions get -1 and are masked out
        word_of = np.full(len(att), -1, dtype=np.int64)
        word_of[att.word_positions[att.word_positions >= 0]] = np.flatnonzero(pos >= 0)
        q = np.array(heads_pos)
        scores = att.maps[:, :, q, :].astype(np.float64)  # [L, H, k, n]
        scores[..., word_of < 0] = -np.inf
        scores[:, :, np.arange(len(q)), q] = -np.inf
        best = scores.argmax(-1)  # [L, H, k]
        predicted = np.moveaxis(word_of[best], -1, 0)  # [k, L, H]
        for r, t in enumerate(targets):
            hit[r] = np.isin(predicted[r], list(t))
    kept_words = int((pos >= 0).sum())
    drow = {"doc": doc.id, "genre": doc.genre, "words": doc.n_words, "kept_words": kept_words,
            "truncated": kept_words < doc.n_words, "coreferent": coreferent,
            "evaluated": evaluated, "lost": coreferent - evaluated}
    return rows, hit, predicted, drow


def _first(items, cond):
    return next((a for a in items if cond(a)), None)


def _same_head(a: Mention, m: Mention) -> bool:
    return a.head_word.lower() == m.head_word.lower()


def _agreement(m: Mention) -> tuple[str | None, str | None, str | None]:
    """(number, gender, person) of a mention from its head word's FEATS; None = unknown.
    Non-pronouns are third person."""
    f = m.feats or {}
    number = f.get("Number") if f.get("Number") in ("Sing", "Plur") else None
    gender = f.get("Gender") if f.get("Gender") in ("Masc", "Fem", "Neut") else None
    person = f.get("Person") if m.upos == "PRON" else "3"
    return number, gender, person


def _agrees(a: Mention, m: Mention) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(_agreement(a), _agreement(m)))


def _sieve(m: Mention, earlier: list[Mention]) -> tuple[int, Mention | None]:
    """(stage, choice) of the rule-based baseline: the nearest candidate passing the first
    sieve that any candidate passes."""
    text = m.text.lower()
    sieves = (
        lambda a: a.text.lower() == text,
        lambda a: _same_head(a, m),
        lambda a: _agrees(a, m),
        lambda a: True,
    )
    for stage, cond in enumerate(sieves, 1):
        chosen = _first(earlier, cond)
        if chosen is not None:
            return stage, chosen
    return 0, None


# ------------------------------------------------------------------ accuracy tables
def _doc_ids(docs: Iterable[str | Document]) -> list[str]:
    return [d.id if isinstance(d, Document) else str(d) for d in docs]


def _accuracy(ok: np.ndarray, types: np.ndarray) -> dict[str, float]:
    """Mean of ``ok`` (``[k, ...]``) overall and per mention type; NaN where no mention."""
    out = {"all": ok.mean(0) if len(ok) else np.nan}
    for t in MENTION_TYPES:
        sel = types == t
        out[t] = ok[sel].mean(0) if sel.any() else np.nan
    return out


def coref_heads(
    attentions: Attentions | CorefEvaluation,
    gold: Sequence[Document] | None = None,
    *,
    select_on: tuple[Any, Any] | CorefEvaluation | None = None,
    exclude_links: Sequence[str] = DEFAULT_EXCLUDED_LINKS,
    singletons: bool = False,
    report_on: Iterable[str | Document] | None = None,
) -> HeadResult:
    """Antecedent-selection accuracy of every attention head beside the three baselines.

    Parameters
    ----------
    attentions : AttentionSet, iterable of Attention, or CorefEvaluation
        One attention per document (an AttentionSet from ``attnkit.extract(model, docs)``),
        or a :class:`CorefEvaluation` from :func:`coref_predictions` (then ``gold`` may be
        omitted). Accuracies are *reported* on these documents.
    gold : sequence of Document
        The documents, from :func:`attnkit.read_coref`.
    select_on : (attentions, documents) pair or CorefEvaluation, optional
        Other documents on which the best head is *chosen* (highest overall accuracy; ties
        → lowest layer, then head). ``None`` chooses on the reported documents, which
        flatters the chosen head (``meta["same_split"]`` says so). :func:`split_documents`
        and :meth:`CorefEvaluation.subset` give two disjoint halves of one evaluation.
    exclude_links, singletons : see :func:`coref_predictions`.
    report_on : deprecated
        Document ids of ``attentions`` to report on (old spelling; pass
        ``evaluation.subset(ids)`` instead). A list of ids as ``select_on`` is likewise
        deprecated.

    Returns
    -------
    HeadResult
        ``table`` indexed by ``(layer, head)`` (0-indexed) with columns ``name`` ("L-H",
        1-indexed), the accuracies ``all``, ``pronoun``, ``proper``, ``nominal`` (fractions
        on the reported documents), ``selected`` (the head chosen on ``select_on``), ``n``
        (mentions evaluated) and ``lost`` (coreferent mentions lost because the document was
        cut at the model's maximum length). ``meta["baselines"]`` holds the same columns for
        the nearest, head-match and sieve baselines (indexed by name); ``meta`` also holds
        ``select_on`` and ``report_on`` (document ids), ``n`` per type, ``lost``,
        ``documents``, ``truncated`` (documents cut), ``same_split``, ``selected`` ("L-H"),
        ``selection_accuracy`` and ``settings``. ``plot()`` draws the accuracy of every
        head; :func:`coref_summary` gives the paper's Table 2.

    Raises
    ------
    InputError
        When documents are missing, no coreferent mention is left to choose on, or the
        two splits come from different models.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import coref_predictions, split_documents
    >>> from attnkit.data.paths import sample_coref
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(sample_coref())  # two hand-annotated documents
    >>> atts = ak.extract(tiny_model("bert"), docs, progress=False)
    >>> ev = coref_predictions(atts, docs)
    >>> first, second = split_documents(docs)
    >>> table = ak.coref_heads(ev.subset(second), select_on=ev.subset(first))
    >>> table.meta["report_on"], table.meta["same_split"]
    (['doc_b'], False)
    >>> list(table.meta["baselines"].index)
    ['nearest', 'head_match', 'sieve']
    """
    ev = _evaluation(attentions, gold, exclude_links, singletons)
    if select_on is not None and not isinstance(select_on, (tuple, CorefEvaluation)):
        warnings.warn("coref_heads(): select_on= as a list of document ids is deprecated; pass "
                      "select_on=evaluation.subset(ids) (or an (attentions, documents) pair).",
                      DeprecationWarning, stacklevel=2)
        sel = ev.subset(select_on)
    elif select_on is None:
        sel = None
    elif isinstance(select_on, CorefEvaluation):
        sel = select_on
    else:
        sel_att, sel_docs = check_pair(select_on, "select_on")
        sel = _evaluation(sel_att, sel_docs, exclude_links, singletons)
    if report_on is not None:
        warnings.warn("coref_heads(): report_on= is deprecated; pass evaluation.subset(ids) as "
                      "the first argument.", DeprecationWarning, stacklevel=2)
    rep = ev.subset(report_on)
    if sel is None:
        sel = rep
    L, H = rep.n_layers, rep.n_heads
    if (sel.n_layers, sel.n_heads) != (L, H):
        raise InputError(f"select_on has {sel.n_layers}x{sel.n_heads} heads but the reported "
                         f"documents {L}x{H}; both must come from the same model.")
    if len(sel.mentions) == 0:
        raise InputError("No coreferent mention in the selection documents; cannot choose a head.")
    sel_acc = sel.hits.mean(0)  # [L, H]
    best = np.unravel_index(int(np.argmax(sel_acc)), sel_acc.shape)
    types = rep.mentions["type"].to_numpy()
    n = {"all": int(len(types)), **{t: int((types == t).sum()) for t in MENTION_TYPES}}
    lost = int(rep.documents["lost"].sum())
    base_rows = []
    for b in BASELINES:
        acc = _accuracy(rep.mentions[b].to_numpy(dtype=float), types)
        base_rows.append({"name": b, **acc, "n": n["all"], "lost": lost})
    head_acc = _accuracy(rep.hits.astype(float), types)
    rows = []
    for layer in range(L):
        for head in range(H):
            rows.append({
                "layer": layer, "head": head, "name": head_label(layer, head),
                **{c: (float(np.asarray(v)[layer, head]) if np.ndim(v) else np.nan)
                   for c, v in head_acc.items()},
                "selected": (layer, head) == tuple(int(x) for x in best),
            })
    out = pd.DataFrame(rows).set_index(["layer", "head"])
    out["n"] = n["all"]
    out["lost"] = lost
    sel_ids = list(sel.documents["doc"])
    rep_ids = list(rep.documents["doc"])
    meta = {
        "baselines": pd.DataFrame(base_rows).set_index("name"),
        "select_on": sel_ids, "report_on": rep_ids, "n": n, "lost": lost,
        "documents": len(rep_ids), "truncated": int(rep.documents["truncated"].sum()),
        "same_split": bool(set(sel_ids) & set(rep_ids)),
        "selected": f"{best[0] + 1}-{best[1] + 1}",
        "selection_accuracy": float(sel_acc[best]),
        "settings": dict(ev.settings),
    }
    return HeadResult(out, meta, value="all", plot="coref_heads")


coref_heads.__attnkit_deprecated__ = ("report_on",)  # type: ignore[attr-defined]


def _evaluation(attentions: Any, gold: Any, exclude_links: Sequence[str],
                singletons: bool) -> CorefEvaluation:
    if isinstance(attentions, CorefEvaluation):
        return attentions
    if gold is None:
        raise InputError("coref_heads() needs the documents (attnkit.read_coref) with the "
                         "attentions: coref_heads(attentions, documents).")
    return coref_predictions(attentions, gold, exclude_links=exclude_links, singletons=singletons)


def coref_rows(table: HeadResult) -> pd.DataFrame:
    """A :func:`coref_heads` result as one flat table, baselines first.

    Parameters
    ----------
    table : HeadResult
        From :func:`coref_heads`.

    Returns
    -------
    pandas.DataFrame
        Columns ``kind`` ("baseline" / "head"), ``name``, ``layer``, ``head`` (-1 for
        baselines), the accuracies, ``selected``, ``n`` and ``lost`` (the layout of the CSV
        files :func:`attnkit.apps.pipeline.run_coref` writes).

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import coref_predictions
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(ak.data.sample_coref())  # two hand-annotated documents
    >>> ev = coref_predictions(ak.extract(tiny_model("bert"), docs, progress=False), docs)
    >>> rows = ak.analysis.coref.coref_rows(ak.coref_heads(ev))
    >>> rows["kind"].tolist(), rows["name"].tolist()[:4]
    (['baseline', 'baseline', 'baseline', 'head', 'head', 'head', 'head'], ['nearest', 'head_match', 'sieve', '1-1'])
    """
    base = table.meta["baselines"].reset_index().assign(kind="baseline", layer=-1, head=-1,
                                                         selected=False)
    heads = table.table.reset_index().assign(kind="head")
    cols = ["kind", "name", "layer", "head", *ACCURACY_COLUMNS, "selected", "n", "lost"]
    return pd.concat([base[cols], heads[cols]], ignore_index=True)


def coref_summary(table: HeadResult) -> Result:
    """The paper's Table 2 view of a :func:`coref_heads` result.

    Parameters
    ----------
    table : HeadResult
        From :func:`coref_heads`.

    Returns
    -------
    Result
        The three baselines and the selected head, accuracies in percent and ``n``, indexed
        by display name; ``meta`` as the result's (without the baselines table).

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.analysis import coref_predictions
    >>> from attnkit.testing import tiny_model
    >>> docs = ak.read_coref(ak.data.sample_coref())  # two hand-annotated documents
    >>> ev = coref_predictions(ak.extract(tiny_model("bert"), docs, progress=False), docs)
    >>> summary = ak.analysis.coref_summary(ak.coref_heads(ev))
    >>> summary.table.index.tolist()[:3], float(summary.table.loc["Nearest", "all"])
    (['Nearest', 'Head match', 'Rule-based sieve'], 80.0)
    """
    heads = table.table
    chosen = heads[heads["selected"]].set_index("name")
    rows = pd.concat([table.meta["baselines"], chosen])
    rows.index = [BASELINE_NAMES.get(nm, f"Head {nm}") for nm in rows.index]
    rows.index.name = "model"
    out = rows[list(ACCURACY_COLUMNS)] * 100
    out["n"] = rows["n"].to_numpy()
    meta = {k: v for k, v in table.meta.items() if k != "baselines"}
    return Result(out, meta)


@renamed(docs="gold")
def split_documents(gold: Sequence[Document | str]) -> tuple[list[str], list[str]]:
    """Two disjoint halves of the documents, balanced by genre.

    Documents are grouped by genre (:attr:`Document.genre`, e.g. GUM's ``academic``; ids
    given as strings have none), genres in order of first appearance and documents in the
    given order inside each genre; the grouped list is then dealt alternately to the first
    and the second half. So each genre is split evenly, and genres with an odd count take
    turns giving the extra document.

    Parameters
    ----------
    gold : sequence of Document or str
        Documents or their ids.

    Returns
    -------
    (list of str, list of str)
        The document ids of the two halves.

    Examples
    --------
    >>> from attnkit.analysis import split_documents
    >>> split_documents(["a", "b", "c"])
    (['a', 'c'], ['b'])
    """
    groups: dict[str, list[str]] = {}
    for d in gold:
        genre = d.genre if isinstance(d, Document) else ""
        groups.setdefault(genre, []).append(d.id if isinstance(d, Document) else str(d))
    ordered = [did for ids in groups.values() for did in ids]
    return ordered[0::2], ordered[1::2]
