"""Read Universal Dependencies treebanks (CoNLL-U) with the ``conllu`` package.

Sentences keep their syntactic words (integer IDs); multiword-token ranges (``3-4``) are
kept as surface spans and empty nodes (``5.1``) are skipped, the UD way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core import validate
from ..errors import ConllError, DataNotFoundError
from ._text import text_lines

_INT_ID = re.compile(r"^[1-9][0-9]*$")
_RANGE_ID = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_EMPTY_ID = re.compile(r"^[0-9]+\.[1-9][0-9]*$")


@dataclass
class Sentence:
    """One treebank sentence: its syntactic words and their annotation.

    Parameters
    ----------
    id : str
        The ``sent_id`` of the sentence.
    words : list of str
        The syntactic words (multiword tokens split, empty nodes left out).
    upos : list of str
        Universal POS tag of each word.
    heads : numpy.ndarray
        Int ``[n]``: the 1-based ID of each word's head, 0 for the root (as in CoNLL-U);
        :attr:`head_index` gives 0-based indices with -1 for the root.
    deprels : list of str
        Dependency relation of each word to its head (``nsubj``, ``nmod:poss``, ...).
    text : str
        The sentence text (``# text``), else the words joined by spaces.
    lemmas, xpos, feats, misc : lists
        The other CoNLL-U columns, one entry per word (``feats`` and ``misc`` as dicts).
    doc_id : str, optional
        The document the sentence belongs to (``# newdoc id``).
    multiword : list of (int, int, str)
        Multiword tokens as (first word, last word, surface form), 0-based, inclusive.

    Examples
    --------
    >>> import attnkit as ak
    >>> s = ak.read_conllu(ak.data.sample_treebank())[0]
    >>> s.words
    ['The', 'cat', 'sat', 'on', 'the', 'mat', '.']
    >>> s.heads.tolist(), s.head_index.tolist()
    ([2, 3, 0, 6, 6, 3, 3], [1, 2, -1, 5, 5, 2, 2])
    """

    id: str
    words: list[str]
    upos: list[str]
    heads: np.ndarray
    deprels: list[str]
    text: str = ""
    lemmas: list[str] = field(default_factory=list)
    xpos: list[str] = field(default_factory=list)
    feats: list[dict[str, str]] = field(default_factory=list)
    misc: list[dict[str, str]] = field(default_factory=list)
    doc_id: str | None = None
    multiword: list[tuple[int, int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def deprels_base(self) -> list[str]:
        """Relations without their UD subtype (``nmod:poss`` → ``nmod``)."""
        return [r.split(":")[0] for r in self.deprels]

    @property
    def head_index(self) -> np.ndarray:
        """Int ``[n]``: 0-based index of each word's head, -1 for the root."""
        return self.heads - 1


class Treebank(list):
    """A list of :class:`Sentence` read from one CoNLL-U file.

    Parameters
    ----------
    sentences : iterable of Sentence
        The sentences, in file order.
    path : str or Path, optional
        The file they were read from (kept as :attr:`path`).

    Examples
    --------
    >>> import attnkit as ak
    >>> tb = ak.read_conllu(ak.data.sample_treebank())
    >>> len(tb), sum(map(len, tb)), tb.path.name
    (12, 124, 'sample.conllu')
    """

    def __init__(self, sentences: Any = (), path: str | Path | None = None) -> None:
        super().__init__(sentences)
        self.path = Path(path) if path else None

    def __repr__(self) -> str:
        return f"Treebank({len(self)} sentences, {sum(map(len, self))} words, {self.path})"


def read_conllu(path: str | Path, *, limit: int | None = None) -> Treebank:
    """Read a CoNLL-U file (a Universal Dependencies treebank) into a :class:`Treebank`.

    Parameters
    ----------
    path : str or Path
        The ``.conllu`` file (UTF-8, with or without a byte-order mark).
    limit : int, optional
        Read at most this many sentences.

    Returns
    -------
    Treebank
        The sentences in file order; each keeps its syntactic words (integer IDs);
        multiword-token ranges (``3-4``) are kept as surface spans and empty nodes
        (``5.1``) are skipped, the UD way.

    Raises
    ------
    DataNotFoundError
        When there is no file at ``path``.
    ConllError
        Naming the file and line of the first malformed line (not 10 columns, a HEAD that
        is not an integer or points past the sentence, non-consecutive IDs), or of the first
        line that is not UTF-8 text (a binary file).

    Examples
    --------
    >>> import attnkit as ak
    >>> tb = ak.read_conllu(ak.data.sample_treebank(), limit=2)
    >>> [s.id for s in tb], tb[1].deprels[:3]
    (['sample-1', 'sample-2'], ['det', 'nsubj', 'root'])
    """
    validate.path(path)
    import conllu

    path = Path(path)
    if not path.exists():
        raise DataNotFoundError(f"No CoNLL-U file at {path}.")
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.conllu"))[:4]
        raise DataNotFoundError(
            f"{path} is a folder; read_conllu reads one .conllu file"
            + (f" (this folder has {', '.join(inside)})." if inside else ".")
        )
    if limit is not None:
        limit = validate.integer(limit, "limit", minimum=1)
    sentences = Treebank(path=path)
    doc_id = None
    for start, lines in _blocks(path):
        if limit is not None and len(sentences) >= limit:
            break
        for offset, line in enumerate(lines):
            if line.startswith("# newdoc id"):
                doc_id = line.split("=", 1)[1].strip() if "=" in line else None
            elif not line.startswith("#"):
                _check_line(path, start + offset, line)
        if all(line.startswith("#") for line in lines):
            continue  # a comment-only block (file header, newdoc marker)
        try:
            parsed = conllu.parse("\n".join(lines) + "\n\n")
        except Exception as exc:  # conllu raises its own ParseException and ValueError
            raise ConllError(f"{path}:{start}: cannot parse the sentence starting here: {exc}") from exc
        if not parsed:
            continue
        sentence = _sentence(parsed[0], path, start, doc_id, len(sentences))
        _check_tree(sentence, path, start, lines)
        sentences.append(sentence)
    if not sentences:
        raise ConllError(f"{path} holds no sentences (it is empty or only comments); pass a "
                         "CoNLL-U treebank.")
    return sentences


def _check_tree(sentence: Sentence, path: Path, start: int, lines: list[str]) -> None:
    """Refuse a basic dependency tree that is not a tree: not exactly one root (HEAD 0), a
    word that heads itself, or a cycle (UD requires one rooted tree per sentence)."""

    def fail(word: int, what: str) -> None:
        line = next((start + k for k, text in enumerate(lines)
                     if text.split("\t", 1)[0] == str(word)), start)
        raise ConllError(f"{path}:{line}: sentence {sentence.id!r}: {what}")

    heads = sentence.heads
    roots = (np.flatnonzero(heads == 0) + 1).tolist()
    if len(roots) != 1:
        fail(roots[1] if roots else 1, f"{len(roots)} roots (words with HEAD 0: {roots[:6]}); a "
             "dependency tree has exactly one.")
    for w, h in enumerate(heads.tolist(), 1):
        if w == h:
            fail(w, f"word {w} is its own head.")
    reaches = np.zeros(len(heads) + 1, dtype=bool)  # index 0 is the root
    reaches[0] = True
    for w in range(1, len(heads) + 1):
        chain: list[int] = []
        seen: set[int] = set()
        v = w
        while not reaches[v] and v not in seen:
            chain.append(v)
            seen.add(v)
            v = int(heads[v - 1])
        if not reaches[v]:
            fail(v, f"words {chain[chain.index(v):]} form a cycle of heads (they never reach "
                 "the root).")
        reaches[chain] = True


def _blocks(path: Path):
    """Yield (first line number, lines) for each blank-line separated block."""
    block: list[str] = []
    start = 1
    for lineno, raw in enumerate(text_lines(path, ConllError, "a CoNLL-U treebank"), 1):
        line = raw.rstrip("\n").rstrip("\r")
        if line.strip():
            if not block:
                start = lineno
            block.append(line)
        elif block:
            yield start, block
            block = []
    if block:
        yield start, block


def _check_line(path: Path, lineno: int, line: str) -> None:
    cols = line.split("\t")
    if len(cols) != 10:
        raise ConllError(
            f"{path}:{lineno}: expected 10 tab-separated columns, found {len(cols)}: {line[:60]!r}"
        )
    wid, head = cols[0], cols[6]
    if _INT_ID.match(wid):
        if not head.isdigit():
            raise ConllError(f"{path}:{lineno}: word {wid} has HEAD {head!r}, not an integer.")
    elif not (_RANGE_ID.match(wid) or _EMPTY_ID.match(wid)):
        raise ConllError(f"{path}:{lineno}: {wid!r} is not a CoNLL-U word ID.")


def _sentence(tl: Any, path: Path, start: int, doc_id: str | None, index: int) -> Sentence:
    words: list[str] = []
    upos: list[str] = []
    heads: list[int] = []
    deprels: list[str] = []
    lemmas: list[str] = []
    xpos: list[str] = []
    feats: list[dict[str, str]] = []
    misc: list[dict[str, str]] = []
    multiword = []
    for tok in tl:
        tid = tok["id"]
        if isinstance(tid, tuple):
            if len(tid) == 3 and tid[1] == "-":
                multiword.append((tid[0] - 1, tid[2] - 1, tok["form"]))
            continue  # empty nodes (5.1) belong to the enhanced graph only
        if tid != len(words) + 1:
            raise ConllError(f"{path}:{start}: word IDs are not consecutive (found {tid} after {len(words)}).")
        words.append(tok["form"])
        upos.append(tok["upos"] or "_")
        heads.append(int(tok["head"]) if tok["head"] is not None else 0)
        deprels.append(tok["deprel"] or "_")
        lemmas.append(tok["lemma"] or "_")
        xpos.append(tok["xpos"] or "_")
        feats.append(dict(tok["feats"] or {}))
        misc.append(dict(tok["misc"] or {}))
    if not words:
        raise ConllError(f"{path}:{start}: sentence without words.")
    heads_arr = np.array(heads, dtype=np.int64)
    if heads_arr.max() > len(words):
        raise ConllError(f"{path}:{start}: a HEAD points past the sentence's {len(words)} words.")
    meta = tl.metadata
    return Sentence(
        id=meta.get("sent_id", f"{path.stem}-{index + 1}"),
        words=words, upos=upos, heads=heads_arr, deprels=deprels,
        text=meta.get("text", " ".join(words)), lemmas=lemmas, xpos=xpos, feats=feats,
        misc=misc, doc_id=doc_id, multiword=multiword,
    )
