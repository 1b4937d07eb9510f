"""Pair the items of an attention set with the sentences of the treebank they came from."""

from __future__ import annotations


import numpy as np

from ..core.attention import Attention
from ..errors import InputError


def align_item(i: int, att: Attention, sent) -> tuple[Attention, np.ndarray]:
    """Item ``i``'s word-level attention and the map position of each of ``sent``'s words
    (``-1`` where truncation cut a word away), or an InputError when they do not match."""
    sid = att.meta.get("sent_id")
    if (sid is not None and sid != sent.id) or len(att.words) != len(sent.words):
        raise InputError(
            f"Attention item {i} (sent_id {sid!r}, {len(att.words)} words) does not match "
            f"treebank sentence {i} (sent_id {sent.id!r}, {len(sent.words)} words). Pass the "
            "set extracted from this treebank, in the same order."
        )
    if att.level != "word":
        att = att.to_words()
    return att, att.word_positions


def check_length(attentions, treebank) -> None:
    """Refuse a collection whose length is known and differs from the treebank's."""
    n_att = len(attentions) if hasattr(attentions, "__len__") else None
    if n_att is not None and n_att != len(treebank):
        raise InputError(
            f"The attention set has {n_att} items but the treebank has {len(treebank)} "
            "sentences; extract the set from this treebank (attnkit.extract(model, treebank))."
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
