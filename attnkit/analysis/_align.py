"""Pair the items of an attention set with the sentences of the treebank they came from."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ..attention import Attention
from ..data.conllu import Sentence
from ..errors import InputError


def aligned(attentions: Any, treebank: Any) -> Iterator[tuple[Attention, Sentence, np.ndarray]]:
    """Yield ``(word-level Attention, Sentence, positions)`` for every sentence.

    ``positions[j]`` is the map position of treebank word ``j`` (``-1`` when truncation cut
    it away). Items must come in treebank order with the same words; a mismatch raises
    :class:`~attnkit.errors.InputError` naming the first item that differs.
    """
    n_att = len(attentions) if hasattr(attentions, "__len__") else None
    if n_att is not None and n_att != len(treebank):
        raise InputError(
            f"The attention set has {n_att} items but the treebank has {len(treebank)} "
            "sentences; extract the set from this treebank (attnkit.extract(model, treebank))."
        )
    count = 0
    for i, (att, sent) in enumerate(zip(attentions, treebank)):
        count += 1
        sid = att.meta.get("sent_id")
        if (sid is not None and sid != sent.id) or len(att.words) != len(sent.words):
            raise InputError(
                f"Attention item {i} (sent_id {sid!r}, {len(att.words)} words) does not match "
                f"treebank sentence {i} (sent_id {sent.id!r}, {len(sent.words)} words). Pass the "
                "set extracted from this treebank, in the same order."
            )
        if att.level != "word":
            att = att.to_words()
        yield att, sent, att.word_positions
    if n_att is None and count != len(treebank):
        raise InputError(
            f"The attentions ran out after {count} items but the treebank has {len(treebank)} "
            "sentences."
        )


def check_pair(pair, name: str):
    """Unpack an ``(attention_set, treebank)`` pair or raise a clear error."""
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise InputError(
            f"{name} must be a pair (attention_set, treebank), e.g. "
            f"{name}=(attnkit.AttentionSet.open('runs/ewt-dev'), attnkit.read_conllu(dev_path)); "
            f"got {type(pair).__name__}."
        )
    return pair
