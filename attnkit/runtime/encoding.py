"""One tokenized input aligned to words: what every forward pass of attnkit reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Encoding:
    """One tokenized input, aligned to words, ready for a forward pass.

    All per-position lists have the (possibly truncated) token length ``n``.
    """

    input_ids: list[int]
    tokens: list[str]
    roles: list[str]
    word_ids: list[int]
    segments: list[int]
    words: list[str]
    type_ids: list[int] | None = None
    truncated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    full_length: int | None = None  #: tokens before truncation

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class PairEncoding:
    """One (source, target) pair of an encoder–decoder model, ready for a forward pass.

    What :meth:`Seq2SeqModel.encode_pair <attnkit.runtime.seq2seq.Seq2SeqModel.encode_pair>` returns
    and :func:`attnkit.extract` runs over pairs. A store lays the pair out target first, then
    source: :attr:`input_ids` and :attr:`words` are the two sides concatenated that way.

    Parameters
    ----------
    source : Encoding
        The encoder's input.
    target : Encoding
        The decoder's input (the decoder start token first).
    meta : dict
        Free-form metadata kept with the item.

    Examples
    --------
    >>> src = Encoding([5, 1], ["▁a", "</s>"], ["word", "sep"], [0, -1], [0, -1], ["a"])
    >>> tgt = Encoding([0, 7, 1], ["<pad>", "▁b", "</s>"], ["cls", "word", "sep"], [-1, 0, -1],
    ...                [-1, 0, -1], ["b"])
    >>> pair = PairEncoding(src, tgt)
    >>> len(pair), pair.input_ids, pair.words
    (5, [0, 7, 1, 5, 1], ['b', 'a'])
    """

    source: Encoding
    target: Encoding
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.source) + len(self.target)

    @property
    def input_ids(self) -> list[int]:
        """The target's token ids, then the source's."""
        return [*self.target.input_ids, *self.source.input_ids]

    @property
    def words(self) -> list[str]:
        """The target's words, then the source's."""
        return [*self.target.words, *self.source.words]

    @property
    def truncated(self) -> bool:
        """True when the source or the target was cut to the model's maximum length."""
        return bool(self.source.truncated or self.target.truncated)
