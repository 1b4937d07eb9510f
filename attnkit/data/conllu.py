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

from ..errors import ConllError, DataNotFoundError
from ._text import text_lines

_INT_ID = re.compile(r"^[1-9][0-9]*$")
_RANGE_ID = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_EMPTY_ID = re.compile(r"^[0-9]+\.[1-9][0-9]*$")


@dataclass
class Sentence:
    """One treebank sentence.

    ``heads[i]`` is the 1-based ID of word i's head, 0 for the root (as in CoNLL-U);
    :attr:`head_index` gives 0-based indices with -1 for the root.
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
    """Multiword tokens as (first word, last word, surface form), 0-based, inclusive."""

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
    """A list of :class:`Sentence` read from one CoNLL-U file (``path``)."""

    def __init__(self, sentences=(), path: str | Path | None = None):
        super().__init__(sentences)
        self.path = Path(path) if path else None

    def __repr__(self) -> str:
        return f"Treebank({len(self)} sentences, {sum(map(len, self))} words, {self.path})"


def read_conllu(path: str | Path, *, limit: int | None = None) -> Treebank:
    """Read a CoNLL-U file into a :class:`Treebank` (at most ``limit`` sentences).

    Raises :class:`~attnkit.errors.ConllError` naming the file and line of the first
    malformed line.
    """
    import conllu

    path = Path(path)
    if not path.exists():
        raise DataNotFoundError(f"No CoNLL-U file at {path}.")
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
        sentences.append(_sentence(parsed[0], path, start, doc_id, len(sentences)))
    return sentences


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
    words, upos, heads, deprels, lemmas, xpos, feats, misc = [], [], [], [], [], [], [], []
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
