"""Hand-built treebanks and word-level attention with known answers (syntax and probe tests)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from attnkit.core.attention import Attention
from attnkit.data import Sentence


def skip_without(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)


def sentence(sid: str, rows: list[tuple[str, str, int, str]]) -> Sentence:
    """A Sentence from ``(word, upos, head (1-based, 0 = root), deprel)`` rows."""
    return Sentence(id=sid, words=[r[0] for r in rows], upos=[r[1] for r in rows],
                    heads=np.array([r[2] for r in rows]), deprels=[r[3] for r in rows])


def attention(sent: Sentence, maps: np.ndarray, embeddings: np.ndarray | None = None) -> Attention:
    """Word-level Attention over ``[CLS] + words + [SEP]`` with the given maps (rows are
    normalised to sum to 1)."""
    maps = np.asarray(maps, dtype=np.float64)
    maps = maps / maps.sum(-1, keepdims=True)
    m = len(sent)
    return Attention(
        maps=maps, tokens=["[CLS]", *sent.words, "[SEP]"],
        roles=np.array(["cls"] + ["word"] * m + ["sep"]),
        word_ids=np.array([-1, *range(m), -1]), words=list(sent.words), level="word",
        embeddings=embeddings, meta={"sent_id": sent.id},
    )


def pointing(targets: np.ndarray, n: int, *, weight: float = 5.0, rng=None) -> np.ndarray:
    """An ``[n, n]`` map whose row p puts the most attention on position ``targets[p]``
    (positions of the full map) over a noisy background."""
    rng = rng or np.random.default_rng(0)
    a = rng.uniform(0.05, 1.0, size=(n, n))
    a[np.arange(n), targets] += weight
    return a


#: Sentences of a tiny treebank: (word, upos, head, deprel).
SENTENCES = [
    [("the", "DET", 2, "det"), ("dog", "NOUN", 3, "nsubj"), ("chased", "VERB", 0, "root"),
     ("a", "DET", 5, "det"), ("cat", "NOUN", 3, "obj"), (".", "PUNCT", 3, "punct")],
    [("my", "PRON", 2, "nmod:poss"), ("sister", "NOUN", 3, "nsubj"), ("reads", "VERB", 0, "root"),
     ("the", "DET", 5, "det"), ("book", "NOUN", 3, "obj")],
    [("John", "PROPN", 3, "nmod:poss"), ("'s", "PART", 1, "case"), ("dog", "NOUN", 4, "nsubj"),
     ("barks", "VERB", 0, "root"), ("!", "PUNCT", 4, "punct")],
    [("a", "DET", 3, "det"), ("big", "ADJ", 3, "amod"), ("house", "NOUN", 4, "nsubj"),
     ("stood", "VERB", 0, "root"), ("there", "ADV", 4, "advmod")],
]


def treebank(sentences=SENTENCES, prefix: str = "s") -> list[Sentence]:
    return [sentence(f"{prefix}-{i}", rows) for i, rows in enumerate(sentences)]


def gold_positions(sent: Sentence) -> np.ndarray:
    """Map position of each word's gold head ([CLS] = 0 for the root)."""
    return np.where(sent.heads == 0, 0, sent.heads)  # words sit at 1..m, heads are 1-based
