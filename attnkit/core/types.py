"""Types shared by the public API: the attention protocol and the aliases of the contract.

Every function that reads attention takes an :class:`AttentionLike` (one input) or
:data:`Attentions` (one input or many). :class:`~attnkit.Attention`,
:class:`~attnkit.LazyAttention` and the results of other measures all satisfy the protocol;
see CONTRIBUTING.md for the argument names that go with these types.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Protocol, Sequence, Union, runtime_checkable

import numpy as np

#: How a pooled overview reduces the cells of a bin.
Reduce = Literal["max", "mean"]
#: A ``(layer, head)`` pair, 0-indexed.
HeadId = tuple[int, int]
#: Token positions, a node list, or ``"all"``: where graphs and flows start.
Sources = Union[int, Sequence[int], Sequence[tuple[int, int]], str, None]


@runtime_checkable
class AttentionLike(Protocol):
    """What every attention of one input offers, dense or lazy.

    Maps are ``[layer, head, query, key]``: row ``q`` is attention *from* position ``q``,
    column ``k`` attention *to* position ``k``.
    """

    tokens: list[str]
    roles: np.ndarray
    word_ids: np.ndarray
    words: list[str]
    level: str
    causal: bool
    meta: dict[str, Any]

    @property
    def n_layers(self) -> int: ...

    @property
    def n_heads(self) -> int: ...

    def __len__(self) -> int: ...

    def map(self, layer: int, head: int) -> np.ndarray:
        """The float32 ``[n, n]`` map of one head."""
        ...

    def block(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        """The float32 block ``map(layer, head)[rows, cols]``, computed without the rest."""
        ...

    def pooled(self, layer: int, head: int, size: int, reduce: Reduce = "max") -> np.ndarray:
        """A ``[m, m]`` overview (``m = min(size, n)``) of one head, bins reduced by ``reduce``."""
        ...


#: One input's attention or many: an AttentionSet, a list, or any iterable of AttentionLike.
Attentions = Union[AttentionLike, Iterable[AttentionLike]]
#: What a model reads: a text, a ``(text_a, text_b)`` pair, a word list, or a Sentence.
Input = Any


def dense_maps(attention: AttentionLike) -> np.ndarray:
    """The ``[layer, head, n, n]`` maps of one input: ``attention.maps`` when it holds them
    (dense :class:`~attnkit.Attention`, kept in its dtype), else every head read with
    ``map(layer, head)`` and stacked (float32; materialises ``L·H·n²`` values)."""
    maps = getattr(attention, "maps", None)
    if isinstance(maps, np.ndarray) and maps.ndim == 4:
        return maps
    return np.stack([np.stack([np.asarray(attention.map(layer, head), dtype=np.float32)
                               for head in range(attention.n_heads)])
                     for layer in range(attention.n_layers)])


def as_collection(attentions: Attentions) -> Iterable[AttentionLike]:
    """``attentions`` as an iterable of inputs: one attention becomes a collection of one."""
    if isinstance(attentions, AttentionLike):
        return [attentions]
    return attentions
