"""Coreference from CoNLL-U MISC ``Entity=`` brackets (CorefUD / GUM style).

Each word's MISC may hold ``Entity=`` with CoNLL-2012-style brackets: ``(7-person-...``
opens a mention of entity 7 on this word (its fields named by the document's
``# global.Entity = GRP-etype-infstat-...`` comment), ``7)`` closes the innermost open
mention of entity 7, and ``(7-...)`` is a one-word mention. :func:`read_coref` turns a
treebank into :class:`Document` objects holding :class:`Mention` spans and their
clusters; each mention's head word is found in the UD tree (see :func:`mention_head`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np

from .._compat import renamed
from ..core import validate
from ..errors import ConllError, InputError
from ._text import text_lines
from .conllu import Sentence, Treebank, read_conllu

#: Field names used when a file has no ``# global.Entity`` comment (GUM's layout).
DEFAULT_ENTITY_FIELDS = ("GRP", "etype", "infstat", "salience", "centering", "minspan", "link",
                         "identity")

#: Mention types, from the UPOS of the head word: PRON → pronoun, PROPN → proper, else nominal.
MENTION_TYPES = ("pronoun", "proper", "nominal")

_PART = re.compile(r"^(?P<eid>[^\[\]]+)(?:\[(?P<i>[0-9]+)/(?P<n>[0-9]+)\])?$")


@dataclass
class Mention:
    """One mention: ``words[start:end]`` of sentence ``sentence`` of its document.

    Parameters
    ----------
    entity : str
        The id of the entity (cluster) the mention refers to.
    sentence : int
        Index of its sentence in the document.
    start, end, head : int
        Words of the sentence (0-based, ``end`` exclusive); ``head`` is the span's syntactic
        head (:func:`mention_head`).
    doc_start, doc_end, doc_head : int
        The same positions in the document's flat word list (:attr:`Document.words`).
    text, head_word : str
        The span's words joined by spaces, and its head word.
    upos : str
        The UPOS tag of the head word.
    type : str
        One of :data:`MENTION_TYPES`, from ``upos``.
    fields : dict
        The opening bracket's named fields (``etype``, ``infstat``, ``minspan``, ``link``,
        ...) as strings.
    feats : dict
        The morphological features of the head word.

    Examples
    --------
    >>> import attnkit as ak
    >>> m = ak.read_coref(ak.data.sample_coref())[0].mentions[1]
    >>> m.text, m.head_word, m.type, (m.doc_start, m.doc_end, m.doc_head), m.link
    ('his old friend Mary', 'friend', 'nominal', (2, 6, 4), 'coref')
    """

    entity: str
    sentence: int
    start: int
    end: int
    head: int
    doc_start: int
    doc_end: int
    doc_head: int
    text: str
    head_word: str
    upos: str
    type: str
    fields: dict[str, str] = field(default_factory=dict)
    feats: dict[str, str] = field(default_factory=dict)

    @property
    def link(self) -> str:
        """The coreference link type of the mention (GUM: coref, ana, cata, appos, pred,
        disc, sgl), or "" when the file has no ``link`` field."""
        return self.fields.get("link", "")

    def __len__(self) -> int:
        return self.end - self.start


@dataclass
class Document:
    """A document: its sentences, their words in one list, and its mentions.

    A Document can be passed to :func:`attnkit.extract` and :meth:`attnkit.Model.encode`
    as one word list (its ``id`` becomes ``sent_id``).

    Parameters
    ----------
    id : str
        The document id (``# newdoc id``).
    sentences : list of Sentence
        Its sentences, in order.
    mentions : list of Mention
        Sorted by ``(doc_start, -doc_end)``: outer mentions before the ones nested at the
        same start.
    offsets : numpy.ndarray
        Int ``[n_sentences]``: ``offsets[s]`` is the position of sentence s's first word in
        :attr:`words`.
    path : Path, optional
        The file it was read from.

    Examples
    --------
    >>> import attnkit as ak
    >>> doc = ak.read_coref(ak.data.sample_coref())[0]
    >>> doc.n_words, doc.offsets.tolist(), doc.clusters
    (11, [0, 7], {'1': [0, 2, 4], '2': [1, 3]})
    >>> doc.cut(7).n_words, len(doc.cut(7).mentions)  # the first sentence
    (7, 3)
    """

    id: str
    sentences: list[Sentence]
    mentions: list[Mention]
    offsets: np.ndarray
    path: Path | None = None

    @property
    def words(self) -> list[str]:
        """The words of every sentence, in one list."""
        return [w for s in self.sentences for w in s.words]

    @property
    def n_words(self) -> int:
        """The number of words of the document."""
        return int(sum(len(s) for s in self.sentences))

    @property
    def genre(self) -> str:
        """The genre in a GUM document id (``GUM_<genre>_<name>``), else ""."""
        parts = self.id.split("_")
        return parts[1] if len(parts) >= 3 and parts[0] == "GUM" else ""

    @property
    def clusters(self) -> dict[str, list[int]]:
        """Entity id → indices into :attr:`mentions`, in document order."""
        out: dict[str, list[int]] = {}
        for i, m in enumerate(self.mentions):
            out.setdefault(m.entity, []).append(i)
        return out

    def cut(self, n_words: int) -> Document:
        """The first ``n_words`` words as a new Document, to feed a model a shorter prefix.

        Parameters
        ----------
        n_words : int
            Words to keep (at least 1). The last sentence kept is cut; heads cut away
            become roots; mentions that do not fit are dropped.

        Returns
        -------
        Document

        Raises
        ------
        InputError
            When ``n_words`` is less than 1.

        Examples
        --------
        >>> from attnkit.data import read_coref, sample_coref
        >>> doc = read_coref(sample_coref())[0]
        >>> short = doc.cut(5)
        >>> sum(len(s.words) for s in short.sentences)
        5
        """
        n_words = validate.size(n_words, "n_words")
        if n_words < 1:
            raise InputError(f"cut() needs at least one word, not {n_words}.")
        sents: list[Sentence] = []
        left = n_words
        for s in self.sentences:
            if left <= 0:
                break
            if len(s) <= left:
                sents.append(s)
            else:
                sents.append(_prefix(s, left))
            left -= len(s)
        mentions = [m for m in self.mentions if m.doc_end <= n_words]
        return Document(self.id, sents, mentions, self.offsets[: len(sents)].copy(), self.path)

    def __repr__(self) -> str:
        return (f"Document({self.id!r}, {len(self.sentences)} sentences, {self.n_words} words, "
                f"{len(self.mentions)} mentions, {len(self.clusters)} entities)")


def _prefix(s: Sentence, n: int) -> Sentence:
    from dataclasses import replace

    heads = np.where(s.heads[:n] > n, 0, s.heads[:n])  # heads cut away become roots
    return replace(
        s, words=s.words[:n], upos=s.upos[:n], heads=heads, deprels=s.deprels[:n],
        lemmas=s.lemmas[:n], xpos=s.xpos[:n], feats=s.feats[:n], misc=s.misc[:n],
        multiword=[mw for mw in s.multiword if mw[1] < n],
    )


# --------------------------------------------------------------------- reading
@renamed(source="path")
def read_coref(path: str | Path | Treebank | Sequence[Sentence], *,
               fields: Sequence[str] | None = None) -> list[Document]:
    """Read the coreference annotation of a CoNLL-U file (or an already read treebank).

    Parameters
    ----------
    path : str, Path, Treebank or sequence of Sentence
        The path of a CoNLL-U file, or sentences already read (grouped into documents by
        ``Sentence.doc_id``).
    fields : sequence of str, optional
        Names of the hyphen-separated fields of an opening bracket. Default: those of the
        file's ``# global.Entity`` comment, else :data:`DEFAULT_ENTITY_FIELDS`.

    Returns
    -------
    list of Document
        In file order. A mention is a contiguous span inside one sentence; a discontinuous
        mention (``(7[1/2]-...``) becomes one span from its first to its last part.

    Raises
    ------
    ConllError
        Naming the file, line (when the file is at hand) and sentence for unbalanced or
        malformed brackets, or a file that is not CoNLL-U text.
    DataNotFoundError
        When there is no file at ``path``.

    Examples
    --------
    >>> import attnkit as ak
    >>> doc = ak.read_coref(ak.data.sample_coref())[0]
    >>> [(m.entity, m.text, m.type) for m in doc.mentions[:3]]
    [('1', 'John', 'proper'), ('2', 'his old friend Mary', 'nominal'), ('1', 'his', 'pronoun')]
    """
    if path is None or isinstance(path, (int, float, bytes)):
        validate.path(path)
    source = path
    treebank: Sequence[Sentence]
    file: Path | None
    if isinstance(source, (str, Path)):
        file = Path(source)
        treebank = read_conllu(file)
    else:
        treebank = source
        file = getattr(source, "path", None)
    if fields is None:
        fields = _global_fields(file) if file is not None else None
        fields = tuple(fields or DEFAULT_ENTITY_FIELDS)
    else:
        fields = tuple(fields)
    docs: list[Document] = []
    groups: list[tuple[str, list[Sentence]]] = []
    for s in treebank:
        did = s.doc_id or (file.stem if file else "doc")
        if not groups or groups[-1][0] != did:
            groups.append((did, []))
        groups[-1][1].append(s)
    for did, sents in groups:
        docs.append(_document(did, sents, fields, file))
    return docs


def _global_fields(path: Path | None) -> tuple[str, ...] | None:
    if path is None or not Path(path).exists():
        return None
    for line in text_lines(path, ConllError, "a CoNLL-U treebank"):
        if line.startswith("# global.Entity"):
            value = line.split("=", 1)[1].strip() if "=" in line else ""
            names = tuple(v.strip() for v in value.split("-") if v.strip())
            if names:
                return names
    return None


def _document(did: str, sents: list[Sentence], fields: tuple[str, ...],
              path: Path | None) -> Document:
    offsets = np.cumsum([0] + [len(s) for s in sents[:-1]]).astype(np.int64)
    mentions: list[Mention] = []
    for si, s in enumerate(sents):
        for ent, start, end, fvals in _spans(s, fields, path):
            head = mention_head(s, start=start, end=end,
                                minspan=_minspan(fvals.get("minspan", ""), start, end))
            off = int(offsets[si])
            upos = s.upos[head]
            mentions.append(Mention(
                entity=ent, sentence=si, start=start, end=end, head=head,
                doc_start=off + start, doc_end=off + end, doc_head=off + head,
                text=" ".join(s.words[start:end]), head_word=s.words[head], upos=upos,
                type=mention_type(upos), fields=fvals,
                feats=dict(s.feats[head]) if s.feats else {},
            ))
    mentions.sort(key=lambda m: (m.doc_start, -m.doc_end, m.entity))
    return Document(did, sents, mentions, offsets, path)


def _spans(s: Sentence, fields: tuple[str, ...], path: Path | None):
    """Yield (entity, start, end, fields) for every mention of one sentence."""
    open_: list[tuple[str, int, dict[str, str], str]] = []  # (entity, start, fields, part key)
    parts: dict[str, list] = {}  # discontinuous mentions: key → [entity, start, end, fields]
    out = []
    for w, misc in enumerate(s.misc or [{}] * len(s)):
        value = (misc or {}).get("Entity")
        if not value:
            continue
        for kind, text in _tokens(value, s, w, path):
            if kind == "open":
                vals = text.split("-")
                if len(vals) > len(fields) or not vals[0]:
                    _fail(s, w, path, f"the bracket '({text}' has {len(vals)} fields but "
                          f"global.Entity names {len(fields)} ({'-'.join(fields)})")
                fvals = dict(zip(fields, vals))
                eid, key = _entity_id(vals[0], s, w, path)
                open_.append((eid, w, fvals, key))
            else:  # close
                eid, key = _entity_id(text, s, w, path)
                for k in range(len(open_) - 1, -1, -1):
                    if open_[k][3] == key:
                        ent, start, fvals, _ = open_.pop(k)
                        break
                else:
                    _fail(s, w, path, f"'{text})' closes a mention of entity {eid} that is "
                          "not open in this sentence")
                if key != eid:  # one part of a discontinuous mention
                    total = key.rsplit("/", 1)[1]
                    p = parts.setdefault(eid + "/" + total, [eid, start, w + 1, fvals])
                    p[1], p[2] = min(p[1], start), max(p[2], w + 1)
                else:
                    out.append((ent, start, w + 1, fvals))
    if open_:
        ent, start, _, _ = open_[-1]
        _fail(s, start, path, f"the mention of entity {ent} opened here is never closed in this "
              "sentence (mentions must not cross sentence boundaries)")
    out.extend(tuple(p) for p in parts.values())
    return out


def _tokens(value: str, s: Sentence, w: int, path: Path | None):
    """Split an Entity= value into ("open", fields) and ("close", id) tokens, in order; a
    one-word mention ``(x-...)`` gives an open then a close."""
    i, n = 0, len(value)
    while i < n:
        if value[i] == "(":
            j = i + 1
            while j < n and value[j] not in "()":
                j += 1
            text = value[i + 1 : j]
            if not text:
                _fail(s, w, path, f"empty bracket in Entity={value}")
            yield "open", text
            if j < n and value[j] == ")":
                yield "close", text.split("-", 1)[0]
                j += 1
            i = j
        elif value[i] == ")":
            _fail(s, w, path, f"')' without an entity id in Entity={value}")
        else:
            j = i
            while j < n and value[j] not in "()":
                j += 1
            if j >= n or value[j] != ")":
                _fail(s, w, path, f"'{value[i:]}' in Entity={value} is neither '(id-...' nor 'id)'")
            yield "close", value[i:j]
            i = j + 1


def _entity_id(text: str, s: Sentence, w: int, path: Path | None) -> tuple[str, str]:
    """(entity id, key) of a bracket id; the key tells parts of a discontinuous mention apart."""
    m = _PART.match(text)
    if not m:
        _fail(s, w, path, f"{text!r} is not an entity id")
    eid = m.group("eid")
    if m.group("i"):
        return eid, f"{eid}[{m.group('i')}/{m.group('n')}"
    return eid, eid


def _minspan(value: str, start: int, end: int) -> list[int]:
    """Words of the minimal span: 1-based offsets inside the mention, comma separated."""
    out = []
    for part in value.split(","):
        if part.isdigit() and 1 <= int(part) <= end - start:
            out.append(start + int(part) - 1)
    return out


def _fail(s: Sentence, w: int, path: Path | None, what: str) -> NoReturn:
    where = f"{path}:{_line_of(path, s.id, w)}" if path is not None else "<treebank>"
    raise ConllError(
        f"{where}: sentence {s.id}, word {w + 1} ({s.words[w]!r}): {what}. Fix the Entity= "
        "annotation in the MISC column (CoNLL-2012 brackets: '(id-fields' opens, 'id)' closes)."
    )


def _line_of(path: Path | None, sent_id: str, w: int) -> str:
    """Line number of word ``w`` (0-based) of sentence ``sent_id`` in ``path``, or '?'."""
    if path is None:
        return "?"
    try:
        with open(path, encoding="utf-8-sig") as fh:
            found = False
            for lineno, line in enumerate(fh, 1):
                if not found:
                    if line.startswith("# sent_id") and line.split("=", 1)[-1].strip() == sent_id:
                        found = True
                elif line.split("\t", 1)[0] == str(w + 1):
                    return str(lineno)
                elif not line.strip():
                    break
    except OSError:
        pass
    return "?"


# ------------------------------------------------------------------ mention heads
@renamed(positional=("start", "end", "minspan"), s="item")
def mention_head(item: Sentence, *, start: int, end: int, minspan: Iterable[int] = ()) -> int:
    """The head word of the span ``item.words[start:end]``.

    The head is the span word whose UD head lies outside the span (the span's syntactic
    root). When several words qualify (the span is not one subtree), non-punctuation words
    are preferred, then words of the annotated ``minspan``, then the one highest in the
    tree (fewest steps to the root), then the leftmost.

    Parameters
    ----------
    item : Sentence
        The sentence.
    start, end : int
        The span, 0-based, ``end`` exclusive.
    minspan : iterable of int
        Words (0-based indices in ``item``) of the annotated minimal span, if any.

    Returns
    -------
    int
        The 0-based index of the head word in ``item``.

    Examples
    --------
    >>> import attnkit as ak
    >>> s = ak.read_conllu(ak.data.sample_treebank())[0]  # The cat sat on the mat .
    >>> s.words[mention_head(s, start=3, end=6)]  # "on the mat"
    'mat'
    """
    n = len(item.words)
    start = validate.index(start, n, "start")
    end = validate.integer(end, "end")
    end = end + n if end < 0 else end
    if not start < end <= n:
        raise InputError(f"end {end} must lie in {start + 1}..{n} (after start {start}; the sentence has {n} words).")
    s = item
    heads = s.head_index
    idx = range(start, end)
    roots = [i for i in idx if not start <= heads[i] < end]
    if not roots:  # a cycle inside the span cannot happen in a tree; guard anyway
        roots = list(idx)
    if len(roots) > 1:
        non_punct = [i for i in roots if s.upos[i] != "PUNCT"]
        roots = non_punct or roots
    if len(roots) > 1:
        ms = set(minspan)
        in_min = [i for i in roots if i in ms]
        roots = in_min or roots
    if len(roots) > 1:
        depth = {i: _depth(heads, i) for i in roots}
        best = min(depth.values())
        roots = [i for i in roots if depth[i] == best]
    return int(min(roots))


def _depth(heads: np.ndarray, i: int) -> int:
    d = 0
    while heads[i] >= 0 and d <= len(heads):
        i = int(heads[i])
        d += 1
    return d


def mention_type(upos: str) -> str:
    """The mention type (:data:`MENTION_TYPES`) of a head word's UPOS tag.

    Parameters
    ----------
    upos : str
        A UPOS tag.

    Returns
    -------
    str
        ``"pronoun"`` for PRON, ``"proper"`` for PROPN, else ``"nominal"``.

    Examples
    --------
    >>> [mention_type(u) for u in ("PRON", "PROPN", "NOUN")]
    ['pronoun', 'proper', 'nominal']
    """
    if upos == "PRON":
        return "pronoun"
    if upos == "PROPN":
        return "proper"
    return "nominal"
