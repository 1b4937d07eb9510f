"""Attention of an encoder–decoder model: `CrossAttention` (a rectangle of target rows over
source columns) and `Seq2SeqAttention` (encoder, decoder and cross-attention of one pair).

Cross-attention maps are float32 ``[layer, head, target, source]``: row ``t`` is the
distribution of attention *from* decoder position ``t`` over the encoder positions it attends
*to*; every row sums to 1 over the source. The rows carry the decoder's tokens (``tokens``,
``roles``, ``word_ids``, ``words``, as on :class:`~attnkit.Attention`), the columns the
encoder's (``source_tokens``, ``source_roles``, ``source_word_ids``, ``source_words``).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from .attention import Attention, Positions, check_maps, pool_cells, pool_edges, word_pooling
from . import validate
from ..errors import InputError


@dataclass
class CrossAttention(Positions):
    """Cross-attention of an encoder–decoder model on one (source, target) pair.

    :meth:`Seq2SeqModel.attend <attnkit.runtime.seq2seq.Seq2SeqModel.attend>` builds it; the
    constructor takes every field. Rows are the decoder's positions (``tokens`` ... ``words``,
    also reachable as :attr:`row_tokens`), columns the encoder's (``source_*``, also
    :attr:`col_tokens`).

    Parameters
    ----------
    maps : array_like
        Float32 ``[layer, head, target, source]`` (rows = from, columns = to; rows sum to 1).
    tokens, roles, word_ids, words : sequences
        The target (row) positions: labels, roles (:data:`attnkit.core.attention.ROLES`), word ids
        (``-1`` for specials) and words.
    source_tokens, source_roles, source_word_ids, source_words : sequences
        The source (column) positions, the same way.
    level : {"token", "word"}
        Word-pieces or pooled words (:meth:`to_words`).
    meta : dict
        Free-form metadata.
    model : str
        Name of the model.
    measure : str
        ``"weights"`` (rows must sum to 1).

    Raises
    ------
    InputError
        When maps are not 4-D, hold NaN or rows that do not sum to 1, or a per-position
        list does not match its axis.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.cross import CrossAttention
    >>> maps = np.array([[[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]]])  # 2 target rows, 3 source columns
    >>> cross = CrossAttention(maps, ["<pad>", "Hallo"], ["cls", "word"], [-1, 0], ["Hallo"],
    ...                        ["▁Hello", "▁you", "</s>"], ["word", "word", "sep"], [0, 1, -1],
    ...                        ["Hello", "you"])
    >>> cross.shape, cross.row_tokens, cross.col_tokens[-1]
    ((1, 1, 2, 3), ['<pad>', 'Hallo'], '</s>')
    """

    maps: np.ndarray
    tokens: list[str]
    roles: np.ndarray
    word_ids: np.ndarray
    words: list[str]
    source_tokens: list[str]
    source_roles: np.ndarray
    source_word_ids: np.ndarray
    source_words: list[str]
    _: KW_ONLY
    level: str = "token"
    meta: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    measure: str = "weights"
    #: Cross-attention rows see every source position.
    causal: bool = False

    def __post_init__(self) -> None:
        self.maps = np.asarray(self.maps, dtype=np.float32)
        if self.maps.ndim != 4:
            raise InputError(f"Cross-attention maps must have shape [layer, head, target, "
                             f"source]; got {self.maps.shape}.")
        check_maps(self.maps, weights=self.measure == "weights")
        self.tokens = [str(t) for t in self.tokens]
        self.source_tokens = [str(t) for t in self.source_tokens]
        self.roles = np.asarray(self.roles, dtype="<U7")
        self.source_roles = np.asarray(self.source_roles, dtype="<U7")
        self.word_ids = np.asarray(self.word_ids, dtype=np.int64)
        self.source_word_ids = np.asarray(self.source_word_ids, dtype=np.int64)
        self.words, self.source_words = list(self.words), list(self.source_words)
        t, s = self.maps.shape[2:]
        for name, n in (("tokens", t), ("roles", t), ("word_ids", t), ("source_tokens", s),
                        ("source_roles", s), ("source_word_ids", s)):
            if len(getattr(self, name)) != n:
                raise InputError(f"CrossAttention.{name} has {len(getattr(self, name))} entries "
                                 f"but the maps have {n} {'target' if t == n else 'source'} "
                                 "positions.")
        if self.level not in ("token", "word"):
            raise InputError(f"level must be 'token' or 'word', not {self.level!r}.")

    # ------------------------------------------------------------------ shape
    @property
    def n_layers(self) -> int:
        return self.maps.shape[0]

    @property
    def n_heads(self) -> int:
        return self.maps.shape[1]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(layers, heads, target, source)``."""
        L, H, t, s = self.maps.shape
        return L, H, t, s

    def __len__(self) -> int:
        return self.maps.shape[2]

    @property
    def row_tokens(self) -> list[str]:
        """The target (decoder) tokens: one per row."""
        return self.tokens

    @property
    def col_tokens(self) -> list[str]:
        """The source (encoder) tokens: one per column."""
        return self.source_tokens

    @property
    def n_columns(self) -> int:
        """Source positions (columns)."""
        return self.maps.shape[3]

    @property
    def source_special(self) -> np.ndarray:
        """Bool ``[source]``: True where a column is not part of a source word."""
        return self.source_roles != "word"

    # ------------------------------------------------------------------ readers
    def map(self, layer: int, head: int) -> np.ndarray:
        """The float32 ``[target, source]`` map of one head (a view of :attr:`maps`).

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.

        Returns
        -------
        ndarray
            Float32 ``[target, source]``: row ``t`` is attention from target position ``t``.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> cross = tiny_seq2seq("bart").attend("The cat sat.", "A cat.").cross
        >>> cross.map(0, 1).shape == (len(cross.row_tokens), len(cross.col_tokens))
        True
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        return self.maps[layer, head]

    def block(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        """The float32 block ``maps[layer, head, rows, cols]`` (a view).

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.
        rows, cols : slice
            Target (from) and source (to) positions.

        Returns
        -------
        ndarray
            Float32 ``[len(rows), len(cols)]``.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> cross = tiny_seq2seq("bart").attend("The cat sat.", "A cat.").cross
        >>> cross.block(0, 0, slice(0, 2), slice(0, 3)).shape
        (2, 3)
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        rows, cols = validate.span(rows, "rows"), validate.span(cols, "cols")
        return self.maps[layer, head, rows, cols]

    def support(self, rows: slice) -> slice:
        """The source columns ``rows`` can attend to: all of them.

        Parameters
        ----------
        rows : slice
            Target positions.

        Returns
        -------
        slice
            ``slice(0, source)``.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> cross = tiny_seq2seq("bart").attend("The cat sat.", "A cat.").cross
        >>> cross.support(slice(0, 1)) == slice(0, cross.n_columns)
        True
        """
        return slice(0, self.n_columns)

    def pooled(self, layer: int, head: int, size: int, reduce: str = "max") -> np.ndarray:
        """An overview of one head, ``[min(size, target), min(size, source)]``: rows and
        columns each cut into contiguous bins whose sizes differ by at most one.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.
        size : int
            The most bins per side.
        reduce : {"max", "mean"}
            How a bin's cells are reduced.

        Returns
        -------
        ndarray
            Float32.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> cross = tiny_seq2seq("bart").attend("The cat sat on the mat.", "A cat.").cross
        >>> cross.pooled(0, 0, 3).shape
        (3, 3)
        """
        t, s = self.maps.shape[2:]
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        return pool_cells(self.maps[layer, head], pool_edges(t, size), pool_edges(s, size), reduce)

    def to_words(self) -> CrossAttention:
        """Pool word-pieces into words on both sides (Clark et al. 2019): attention *to* a
        source word sums over its pieces, attention *from* a target word averages its
        pieces' rows; special positions stay. Rows still sum to 1.

        Returns
        -------
        CrossAttention
            ``level="word"`` (this one when it already is).

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit.core.cross import CrossAttention
        >>> maps = np.array([[[[0.2, 0.3, 0.5], [0.4, 0.4, 0.2]]]])
        >>> cross = CrossAttention(maps, ["▁Spiel", "en"], ["word", "word"], [0, 0], ["Spielen"],
        ...                        ["▁play", "ing", "</s>"], ["word", "word", "sep"], [0, 0, -1],
        ...                        ["playing"])
        >>> words = cross.to_words()
        >>> words.tokens, words.col_tokens, words.maps[0, 0].round(2).tolist()
        (['Spielen'], ['playing', '</s>'], [[0.65, 0.35]])
        """
        if self.level == "word":
            return self
        rows = word_pooling(self.word_ids, self.roles)
        cols = word_pooling(self.source_word_ids, self.source_roles)
        maps = np.einsum("rt,lhts,sc->lhrc", rows.mean_from, self.maps, cols.sum_to,
                         optimize=True).astype(np.float32)

        def labels(tokens: list[str], roles: np.ndarray, wids: np.ndarray, words: list[str],
                   keep: np.ndarray) -> list[str]:
            return [words[wids[p]] if roles[p] == "word" else tokens[p] for p in keep]

        return replace(
            self, maps=maps,
            tokens=labels(self.tokens, self.roles, self.word_ids, self.words, rows.first),
            roles=self.roles[rows.first], word_ids=self.word_ids[rows.first],
            source_tokens=labels(self.source_tokens, self.source_roles, self.source_word_ids,
                                 self.source_words, cols.first),
            source_roles=self.source_roles[cols.first],
            source_word_ids=self.source_word_ids[cols.first], level="word")

    def select(self, *, layers: Sequence[int] | None = None,
               heads: Sequence[int] | None = None) -> CrossAttention:
        """A new CrossAttention keeping only the given layers and/or heads (0-indexed).

        Parameters
        ----------
        layers, heads : sequence of int, optional
            What to keep, in this order; None keeps all.

        Returns
        -------
        CrossAttention
            With ``maps[layers][:, heads]`` (a copy).

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> cross = tiny_seq2seq("bart").attend("The cat sat.", "A cat.").cross
        >>> cross.select(layers=[1], heads=[0]).shape[:2]
        (1, 1)
        """
        maps = self.maps
        if layers is not None:
            maps = maps[list(layers)]
        if heads is not None:
            maps = maps[:, list(heads)]
        return replace(self, maps=maps.copy())


@dataclass
class Seq2SeqAttention:
    """Attention of an encoder–decoder model on one (source, target) pair.

    Parameters
    ----------
    encoder : Attention or LazyAttention
        The encoder's self-attention over the source ``[L_enc, H, source, source]`` (None
        when a store of pairs does not keep it).
    decoder : Attention
        The decoder's causal self-attention over the target ``[L_dec, H, target, target]``
        (None when a store of pairs does not keep it).
    cross : CrossAttention
        The decoder's attention over the encoder's output ``[L_dec, H, target, source]``.
    model : str
        Name of the model.
    meta : dict
        Free-form metadata (``generated`` is True when the target is the model's own output).

    Examples
    --------
    >>> from attnkit.testing import tiny_seq2seq
    >>> s2s = tiny_seq2seq("t5").attend("The cat sat.", "A cat.")
    >>> s2s.encoder.tokens == s2s.cross.col_tokens, s2s.decoder.tokens == s2s.cross.row_tokens
    (True, True)
    """

    encoder: Any
    decoder: Attention
    cross: CrossAttention
    model: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        L, H, t, s = self.cross.shape
        enc = f"{self.encoder.n_layers} layers" if self.encoder is not None else "not kept"
        return (f"Seq2SeqAttention({self.model!r}: encoder {enc} over "
                f"{s} source {self.cross.level}s, decoder and cross {L} layers x {H} heads over "
                f"{t} target {self.cross.level}s)")

    @property
    def source_tokens(self) -> list[str]:
        """The encoder's tokens (the cross-attention's columns)."""
        return self.cross.source_tokens

    @property
    def target_tokens(self) -> list[str]:
        """The decoder's tokens (the cross-attention's rows)."""
        return self.cross.tokens

    def to_words(self) -> Seq2SeqAttention:
        """All three attentions pooled to words (:meth:`CrossAttention.to_words`,
        :meth:`Attention.to_words <attnkit.Attention.to_words>`).

        Returns
        -------
        Seq2SeqAttention
            Word level on both sides.

        Examples
        --------
        >>> from attnkit.testing import tiny_seq2seq
        >>> words = tiny_seq2seq("t5").attend("The cat sat.", "A cat.").to_words()
        >>> words.cross.level, words.encoder.tokens == words.cross.col_tokens
        ('word', True)
        """
        return Seq2SeqAttention(None if self.encoder is None else self.encoder.to_words(),
                                None if self.decoder is None else self.decoder.to_words(),
                                self.cross.to_words(), model=self.model, meta=dict(self.meta))
