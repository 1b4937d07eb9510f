"""The `Attention` of one input: position labels, roles, word alignment and maps.

Maps are float32 ``[layer, head, query, key]``: row ``q`` is the distribution of attention
*from* position ``q`` over the positions it attends *to*; every row sums to 1.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from .errors import InputError

#: Roles a position can play. "cls" is a leading [CLS]/<s>/BOS, "sep" a [SEP]/</s>/EOS,
#: "word" a piece (or, at word level, a whole word) of the text, "special" any other
#: special token.
ROLES = ("cls", "sep", "word", "special")


def is_punct(text: str) -> bool:
    """True when ``text`` (tokenizer markers ``##``/``Ġ``/``▁`` removed) is all punctuation."""
    core = text
    if core.startswith("##"):
        core = core[2:]
    core = core.lstrip("Ġ▁ ")
    return bool(core) and all(unicodedata.category(c).startswith("P") for c in core)


@dataclass
class Attention:
    """Attention of one model on one input.

    Attributes
    ----------
    maps : float32 array ``[layer, head, n, n]`` (rows = from, columns = to; rows sum to 1).
    tokens : ``n`` position labels (word-pieces at token level, words at word level).
    roles : str array ``[n]``, one of :data:`ROLES` per position.
    word_ids : int array ``[n]``: index into ``words`` of the word a position belongs to,
        ``-1`` for special positions.
    words : the words of the input (for a pair, the words of both texts in order).
    level : ``"token"`` or ``"word"``.
    segments : int array ``[n]``: 0 or 1 for the first/second text of a pair, ``-1`` for
        special positions; all 0 for a single text.
    embeddings : optional float array ``[n, d]``: the model's input (static) embeddings,
        averaged per position.
    meta : free-form metadata of the item (e.g. ``sent_id``).
    truncated : True when the input was longer than the model's maximum and was cut.
    model : name of the model that produced the maps.
    causal : True for decoder-only models (rows attend only to earlier positions).
    """

    maps: np.ndarray
    tokens: list[str]
    roles: np.ndarray
    word_ids: np.ndarray
    words: list[str]
    level: str = "token"
    segments: np.ndarray | None = None
    embeddings: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    model: str = ""
    causal: bool = False

    def __post_init__(self) -> None:
        self.maps = np.asarray(self.maps, dtype=np.float32)
        if self.maps.ndim != 4 or self.maps.shape[2] != self.maps.shape[3]:
            raise InputError(
                f"Attention maps must have shape [layer, head, n, n]; got {self.maps.shape}."
            )
        n = self.maps.shape[2]
        self.tokens = list(self.tokens)
        self.roles = np.asarray(self.roles, dtype="<U7")
        self.word_ids = np.asarray(self.word_ids, dtype=np.int64)
        if self.segments is None:
            self.segments = np.where(self.roles == "word", 0, -1)
        self.segments = np.asarray(self.segments, dtype=np.int64)
        for name in ("tokens", "roles", "word_ids", "segments"):
            if len(getattr(self, name)) != n:
                raise InputError(
                    f"Attention.{name} has {len(getattr(self, name))} entries but maps have "
                    f"{n} positions."
                )
        if self.level not in ("token", "word"):
            raise InputError(f"level must be 'token' or 'word', not {self.level!r}.")

    # ------------------------------------------------------------------ shape
    @property
    def n_layers(self) -> int:
        return self.maps.shape[0]

    @property
    def n_heads(self) -> int:
        return self.maps.shape[1]

    def __len__(self) -> int:
        return self.maps.shape[2]

    # -------------------------------------------------------------- positions
    @property
    def cls_positions(self) -> np.ndarray:
        """Positions whose role is "cls" (int array)."""
        return np.flatnonzero(self.roles == "cls")

    @property
    def sep_positions(self) -> np.ndarray:
        """Positions whose role is "sep" (int array)."""
        return np.flatnonzero(self.roles == "sep")

    @property
    def special(self) -> np.ndarray:
        """Bool ``[n]``: True where the position is not part of a word."""
        return self.roles != "word"

    @property
    def punct(self) -> np.ndarray:
        """Bool ``[n]``: True where a word position's label is all punctuation."""
        return np.array(
            [r == "word" and is_punct(t) for t, r in zip(self.tokens, self.roles)], dtype=bool
        )

    @property
    def word_positions(self) -> np.ndarray:
        """Int ``[len(words)]``: the position of each word (its first piece at token
        level), ``-1`` for words cut away by truncation."""
        out = np.full(len(self.words), -1, dtype=np.int64)
        for pos in range(len(self) - 1, -1, -1):
            w = self.word_ids[pos]
            if w >= 0:
                out[w] = pos
        return out

    # -------------------------------------------------------------- selection
    def head(self, layer: int, head: int) -> np.ndarray:
        """The ``[n, n]`` map of one head (0-indexed layer and head)."""
        return self.maps[layer, head]

    def select(
        self, layers: Sequence[int] | None = None, heads: Sequence[int] | None = None
    ) -> "Attention":
        """A new Attention keeping only the given layers and/or heads (0-indexed)."""
        maps = self.maps
        if layers is not None:
            maps = maps[list(layers)]
        if heads is not None:
            maps = maps[:, list(heads)]
        return replace(self, maps=maps.copy())

    # ---------------------------------------------------------------- pooling
    def to_words(self) -> "Attention":
        """Pool word-pieces into words (Clark et al. 2019).

        Attention *to* a word is the sum of the attention to its pieces; attention *from*
        a word is the mean of its pieces' rows. Special positions stay as they are, so
        every row still sums to 1. Returns a new Attention with ``level="word"``.
        """
        if self.level == "word":
            return self
        pool = word_pooling(self.word_ids, self.roles)
        maps = pool_maps(self.maps, pool)
        emb = None if self.embeddings is None else pool.mean_from @ self.embeddings
        keep = pool.first
        tokens = [
            self.words[self.word_ids[p]] if self.roles[p] == "word" else self.tokens[p]
            for p in keep
        ]
        return replace(
            self,
            maps=maps,
            tokens=tokens,
            roles=self.roles[keep],
            word_ids=self.word_ids[keep],
            segments=self.segments[keep],
            embeddings=emb,
            level="word",
        )


@dataclass(frozen=True)
class WordPooling:
    """Matrices that pool ``n`` token positions into ``m`` word-level positions.

    mean_from : float32 ``[m, n]``; row p averages the pieces of position p.
    sum_to : float32 ``[n, m]``; column p sums the pieces of position p.
    first : int ``[m]``; the first token position of each word-level position.
    """

    mean_from: np.ndarray
    sum_to: np.ndarray
    first: np.ndarray


def word_pooling(word_ids: np.ndarray, roles: np.ndarray) -> WordPooling:
    """Group token positions by word: special positions alone, word pieces by word id.

    Groups are ordered by their first token position.
    """
    word_ids = np.asarray(word_ids)
    n = len(word_ids)
    group_of: dict[Any, int] = {}
    groups: list[list[int]] = []
    for pos in range(n):
        key = ("w", int(word_ids[pos])) if roles[pos] == "word" else ("s", pos)
        if key not in group_of:
            group_of[key] = len(groups)
            groups.append([])
        groups[group_of[key]].append(pos)
    m = len(groups)
    sum_to = np.zeros((n, m), dtype=np.float32)
    mean_from = np.zeros((m, n), dtype=np.float32)
    for g, members in enumerate(groups):
        sum_to[members, g] = 1.0
        mean_from[g, members] = 1.0 / len(members)
    first = np.array([members[0] for members in groups], dtype=np.int64)
    return WordPooling(mean_from=mean_from, sum_to=sum_to, first=first)


def pool_maps(maps: np.ndarray, pool: WordPooling) -> np.ndarray:
    """Apply a :class:`WordPooling` to maps ``[..., n, n]`` → ``[..., m, m]``.

    The products ``mean_from @ maps @ sum_to`` in torch (faster than numpy's stacked matmul
    on small matrices), in numpy's result dtype: float32, or float64 for float64 maps.
    """
    import torch

    maps = np.ascontiguousarray(maps)
    if not maps.flags.writeable:  # torch.from_numpy warns on read-only arrays
        maps = maps.copy()
    t = torch.from_numpy(maps)
    dtype = torch.promote_types(t.dtype, torch.float32)
    mean_from = torch.from_numpy(pool.mean_from).to(dtype)
    sum_to = torch.from_numpy(pool.sum_to).to(dtype)
    return torch.matmul(torch.matmul(mean_from, t.to(dtype)), sum_to).numpy()
