"""Word alignments read from cross-attention, scored against gold alignments.

A cross-attention head of an encoder–decoder aligns every target word to the source word it
attends to most when the decoder predicts that word (the row before it; at word level: attention *to* a source word sums over its pieces, *from* a
target word averages its pieces). Against gold alignments the heads are scored with the
alignment error rate of Och & Ney (2003)::

    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

where ``A`` is the predicted set of (source word, target word) links, ``S`` the sure and
``P ⊇ S`` the possible gold links (only sure links given: ``P = S``), with precision
``|A ∩ P| / |A|``, recall ``|A ∩ S| / |S|`` and accuracy: the share of target words with a
sure link whose predicted source word is one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress as _bar
from ..core.cross import CrossAttention
from ..core import validate
from ..errors import InputError
from ..core.results import HeadResult

Links = set[tuple[int, int]]


def cross_of(attentions: Any) -> CrossAttention:
    """The cross-attention of one input: a :class:`~attnkit.core.cross.CrossAttention` as it is,
    or the ``.cross`` of a :class:`~attnkit.core.cross.Seq2SeqAttention`.

    Parameters
    ----------
    attentions : CrossAttention or Seq2SeqAttention
        Attention of one (source, target) pair.

    Returns
    -------
    CrossAttention

    Raises
    ------
    InputError
        For anything else (self-attention has no source to align to).

    Examples
    --------
    >>> from attnkit.testing import tiny_seq2seq
    >>> s2s = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    >>> cross_of(s2s) is s2s.cross
    True
    """
    cross = getattr(attentions, "cross", attentions)
    if not isinstance(cross, CrossAttention):
        raise InputError(f"Alignments are read from cross-attention (an encoder-decoder's "
                         f".cross, Seq2SeqModel.attend); got {type(attentions).__name__}, whose "
                         "rows and columns are the same tokens.")
    return cross


def word_alignment(attentions: Any, *, layer: int, head: int, rows: str = "predicting") -> Links:
    """The links one head predicts: every target word to the source word it attends to most.

    Parameters
    ----------
    attentions : CrossAttention or Seq2SeqAttention
        One pair (pooled to words here when at token level).
    layer, head : int
        The head (0-indexed).
    rows : {"predicting", "input"}
        Which decoder row speaks for a target word: the row that *predicts* it (the one
        before it, whose output is that word: the default, as in Garg et al. 2019), or the
        row that reads it as input.

    Returns
    -------
    set of (int, int)
        ``(source word, target word)`` indices into ``source_words`` and ``words``.

    Raises
    ------
    InputError
        For attention that is not cross-attention.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.cross import CrossAttention
    >>> maps = np.array([[[[0.0, 0.1, 0.9], [0.8, 0.2, 0.0]]]])
    >>> cross = CrossAttention(maps, ["x", "y"], ["word", "word"], [0, 1], ["x", "y"],
    ...                        ["a", "b", "</s>"], ["word", "word", "sep"], [0, 1, -1], ["a", "b"])
    >>> sorted(word_alignment(cross, layer=0, head=0, rows="input"))  # </s> is no word
    [(0, 1), (1, 0)]
    >>> sorted(word_alignment(cross, layer=0, head=0))  # row 0 predicts y, the word at row 1
    [(1, 1)]
    """
    cross = cross_of(attentions)
    layer, head = validate.head_index(layer, head, cross.n_layers, cross.n_heads)
    return _links(cross.to_words(), layer, [head], rows)[head]


def _links(cross: CrossAttention, layer: int, heads: Sequence[int], rows: str) -> dict[int, Links]:
    """Each head's links; with ``rows="predicting"`` the row of position ``p`` speaks for the
    word at ``p + 1`` (the token it predicts), else for its own word."""
    if rows not in ("predicting", "input"):
        raise InputError(f"rows must be 'predicting' or 'input', not {rows!r}.")
    shift = 1 if rows == "predicting" else 0
    n = len(cross.roles)
    reading = np.arange(n - shift)  # rows that read for a word
    target = reading + shift  # the position of that word
    keep = cross.roles[target] == "word"
    reading, target = reading[keep], target[keep]
    cols = np.flatnonzero(cross.source_roles == "word")
    out: dict[int, Links] = {}
    for h in heads:
        if not len(reading) or not len(cols):
            out[h] = set()
            continue
        best = cols[np.argmax(cross.maps[layer, h][np.ix_(reading, cols)], axis=1)]
        out[h] = {(int(cross.source_word_ids[c]), int(cross.word_ids[t]))
                  for t, c in zip(target, best)}
    return out


def _gold_links(links: Any, n_src: int, n_tgt: int, name: str) -> set[tuple[int, int]]:
    """``(source word, target word)`` links as a set of whole-number pairs in range (negative
    counts from the end, as everywhere)."""
    if isinstance(links, (str, bytes)) or not isinstance(links, Iterable):
        raise InputError(f"{name} must hold, per pair, (source word, target word) links; got "
                         f"{links!r}.")
    out = set()
    for link in links:
        if isinstance(link, (str, bytes)) or not isinstance(link, Iterable) or len(tuple(link)) != 2:
            raise InputError(f"{name} links must be (source word, target word) pairs; got {link!r}.")
        a, b = tuple(link)
        try:
            out.add((validate.index(a, n_src, "source word"), validate.index(b, n_tgt, "target word")))
        except InputError as exc:
            raise InputError(f"{name} link {link!r}: {exc} The pair has {n_src} source and "
                             f"{n_tgt} target words.") from None
    return out


def alignment_error_rate(attentions: Iterable[Any], gold: Sequence[Iterable[tuple[int, int]]], *,
                         possible: Sequence[Iterable[tuple[int, int]]] | None = None,
                         heads: Sequence[tuple[int, int]] | None = None,
                         rows: str = "predicting", progress: bool = True) -> HeadResult:
    """Alignment error rate, precision, recall and accuracy of every cross-attention head.

    Parameters
    ----------
    attentions : iterable of CrossAttention or Seq2SeqAttention
        One per pair (a single one is a corpus of one).
    gold : sequence of sets of (int, int)
        Sure links ``(source word, target word)`` of each pair (word indices into the
        pair's ``source_words`` and ``words``).
    possible : sequence of sets of (int, int), optional
        Possible links of each pair (the sure ones are added); default: the sure ones.
    heads : sequence of (int, int), optional
        ``(layer, head)`` pairs to score; default all.
    rows : {"predicting", "input"}
        Which decoder row speaks for a target word (:func:`word_alignment`).
    progress : bool
        Show a progress bar.

    Returns
    -------
    HeadResult
        Columns ``aer``, ``precision``, ``recall``, ``accuracy``; ``meta["best"]`` is the
        ``(layer, head)`` of the lowest AER, ``meta["n_items"]`` the pairs counted.

    Raises
    ------
    InputError
        When gold and attentions differ in length, or an item is not cross-attention.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.cross import CrossAttention
    >>> anti = np.array([[0.0, 0.1, 0.9], [0.8, 0.2, 0.0]])
    >>> maps = np.stack([anti, anti[:, [1, 0, 2]]])[None]  # head 0 reverses, head 1 does not
    >>> cross = CrossAttention(maps, ["x", "y"], ["word", "word"], [0, 1], ["x", "y"],
    ...                        ["a", "b", "</s>"], ["word", "word", "sep"], [0, 1, -1], ["a", "b"])
    >>> result = alignment_error_rate([cross], [{(1, 0), (0, 1)}], rows="input", progress=False)
    >>> result["aer"].round(2).tolist(), result.meta["best"]
    ([0.0, 1.0], (0, 0))
    """
    items = [attentions] if isinstance(attentions, CrossAttention) or hasattr(
        attentions, "cross") else list(attentions)
    gold = list(gold)
    if len(gold) != len(items):
        raise InputError(f"gold has {len(gold)} alignments but there are {len(items)} "
                         "attentions; give one set of links per pair.")
    poss = list(possible) if possible is not None else [set() for _ in items]
    if len(poss) != len(items):
        raise InputError(f"possible has {len(poss)} entries but there are {len(items)} pairs.")
    first = cross_of(items[0]) if items else None
    if first is None:
        raise InputError("No attentions to score.")
    pairs = validate.head_pairs(heads, first.n_layers, first.n_heads) if heads is not None else [
        (layer, h) for layer in range(first.n_layers) for h in range(first.n_heads)]
    if not pairs:
        raise InputError("heads is empty; pass (layer, head) pairs or None for every head.")
    counts = {p: np.zeros(6) for p in pairs}  # |A|, |S|, |A∩S|, |A∩P|, words with S, hits
    for item, sure_links, poss_links in _bar(zip(items, gold, poss), show=progress,
                                             total=len(items), desc="alignment"):
        cross = cross_of(item).to_words()
        n_src, n_tgt = len(cross.source_words), len(cross.words)
        sure = _gold_links(sure_links, n_src, n_tgt, "gold")
        maybe = sure | _gold_links(poss_links, n_src, n_tgt, "possible")
        by_target: dict[int, set[int]] = {}
        for src, tgt in sure:
            by_target.setdefault(tgt, set()).add(src)
        for layer in sorted({p[0] for p in pairs}):
            layer_heads = [h for (lay, h) in pairs if lay == layer]
            for h, links in _links(cross, layer, layer_heads, rows).items():
                c = counts[(layer, h)]
                c[0] += len(links)
                c[1] += len(sure)
                c[2] += len(links & sure)
                c[3] += len(links & maybe)
                c[4] += len(by_target)
                c[5] += sum(1 for src, tgt in links if src in by_target.get(tgt, ()))
    records: list[dict[str, Any]] = []
    for (layer, h), c in counts.items():
        a, s, a_s, a_p, words, hits = (float(x) for x in c)
        records.append(dict(layer=layer, head=h,
                         aer=1.0 - (a_s + a_p) / (a + s) if a + s else np.nan,
                         precision=a_p / a if a else np.nan, recall=a_s / s if s else np.nan,
                         accuracy=hits / words if words else np.nan))
    table = pd.DataFrame(records).set_index(["layer", "head"])
    best = table["aer"].idxmin() if table["aer"].notna().any() else None
    meta = {"n_items": len(items), "level": "word",
            "best": tuple(int(x) for x in best) if best is not None else None,
            "aer": "Och & Ney (2003); lower is better"}
    return HeadResult(table, meta, value="aer")
