"""The `Attention` of one input: position labels, roles, word alignment and maps.

Maps are float32 ``[layer, head, query, key]``: row ``q`` is the distribution of attention
*from* position ``q`` over the positions it attends *to*; every row sums to 1.
"""

from __future__ import annotations

import unicodedata
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from . import validate
from .._compat import renamed
from ..errors import InputError
from .qkstates import QKStates

#: Largest distance of a row sum from 1 that attention weights may have, and the roles a
#: position can play (defined with the other input checks in :mod:`attnkit.core.validate`).
ROW_SUM_TOL = validate.ROW_SUM_TOL
ROLES = validate.ROLES


def is_punct(text: str) -> bool:
    """True when ``text`` (tokenizer markers ``##``/``Ġ``/``▁`` removed) is all punctuation."""
    core = text
    if core.startswith("##"):
        core = core[2:]
    core = core.lstrip("Ġ▁ ")
    return bool(core) and all(unicodedata.category(c).startswith("P") for c in core)


class Positions:
    """Position queries shared by dense and lazy attention (they only read ``tokens``,
    ``roles``, ``word_ids`` and ``words``)."""

    tokens: list[str]
    roles: np.ndarray
    word_ids: np.ndarray
    words: list[str]

    def __len__(self) -> int:
        return len(self.tokens)

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


class QKReader:
    """``queries``/``keys`` of one layer, shared by dense and lazy attention (both read them
    from :meth:`qk_states`, the kept post-rotary queries and keys of every layer)."""

    @property
    def n_layers(self) -> int:  # pragma: no cover - each attention class defines it
        raise NotImplementedError

    def qk_states(self) -> QKStates:  # pragma: no cover - each attention class defines it
        raise NotImplementedError

    def queries(self, layer: int) -> np.ndarray:
        """Post-rotary queries of ``layer``, as the model scores them (copied to the CPU).

        Parameters
        ----------
        layer : int
            0-indexed layer (negative counts from the end).

        Returns
        -------
        ndarray
            Float32 ``[heads, n, d]`` (numpy, CPU).

        Raises
        ------
        InputError
            For a layer outside the model, or when no queries were kept (maps built by hand,
            word level, or a layer a store did not keep).

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("llama")
        >>> att = model.attend("The cat sat.")
        >>> att.queries(0).shape, att.keys(0).shape   # 2 query heads share 1 key head
        ((2, 7, 8), (1, 7, 8))
        >>> model.attend("The cat sat.", lazy=True).queries(-1).shape
        (2, 7, 8)
        """
        return self.qk_states().queries(validate.index(layer, self.n_layers, "layer"))

    def keys(self, layer: int) -> np.ndarray:
        """Post-rotary keys of ``layer`` (before grouped-query repetition: query head ``h``
        is scored against key head ``h // (heads // key heads)``).

        Parameters
        ----------
        layer : int
            0-indexed layer (negative counts from the end).

        Returns
        -------
        ndarray
            Float32 ``[key heads, n, d]`` (numpy, CPU).

        Raises
        ------
        InputError
            For a layer outside the model, or when no keys were kept.

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> tiny_model("bert").attend("The cat sat.").keys(1).shape
        (2, 6, 8)
        >>> tiny_model("gpt2").attend("The cat sat.", lazy=True).keys(0).shape
        (2, 7, 8)
        """
        return self.qk_states().keys(validate.index(layer, self.n_layers, "layer"))


@dataclass
class Attention(Positions, QKReader):
    """Attention of one model on one input.

    :meth:`Model.attend <attnkit.Model.attend>` builds it from a model, and
    :meth:`from_maps` from bare maps and tokens (roles and words inferred); the constructor
    takes every field. Each field is kept as an attribute of the same name.

    Parameters
    ----------
    maps : array_like
        Float32 ``[layer, head, n, n]`` (rows = from, columns = to; rows sum to 1).
    tokens : list of str
        ``n`` position labels (word-pieces at token level, words at word level).
    roles : array_like of str
        ``[n]``, one of :data:`ROLES` per position.
    word_ids : array_like of int
        ``[n]``: index into ``words`` of the word a position belongs to, ``-1`` for
        special positions.
    words : list of str
        The words of the input (for a pair, the words of both texts in order).
    level : {"token", "word"}
        Whether positions are word-pieces or pooled words.
    segments : array_like of int, optional
        ``[n]``: 0 or 1 for the first/second text of a pair, ``-1`` for special
        positions; default all 0 for a single text.
    embeddings : ndarray, optional
        Float ``[n, d]``: the model's input (static) embeddings, averaged per position.
    meta : dict
        Free-form metadata of the item (e.g. ``sent_id``). ``meta["sinks"]`` is True for
        models with learned sink logits (gpt-oss): their rows sum to at most 1, the rest
        being attention to the sink.
    truncated : bool
        True when the input was longer than the model's maximum and was cut.
    model : str
        Name of the model that produced the maps.
    causal : bool
        True for decoder-only models (rows attend only to earlier positions).
    measure : str
        What the maps hold: ``"weights"`` (attention probabilities; every row must sum to
        1) or another measure of :mod:`attnkit.runtime.measures` (rows need not sum to 1).
    input_ids : array_like of int, optional
        ``[n]``: the token ids (token level), for analyses that match repeated tokens
        (induction, duplicate-token heads).
    qk : QKStates, optional
        Post-rotary queries and keys of some layers (token level), read with
        :meth:`queries` and :meth:`keys`; :meth:`Model.attend <attnkit.Model.attend>` keeps
        every layer's, a store extracted with ``keep="qk"`` the layers it kept.

    Raises
    ------
    InputError
        When maps are not ``[layer, head, n, n]``, hold NaN or infinite values, or (for
        ``measure="weights"``) have a row that does not sum to 1 within :data:`ROW_SUM_TOL`,
        or when a per-position list does not have ``n`` entries.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> maps = np.array([[[[1.0, 0.0], [0.5, 0.5]]]])  # 1 layer, 1 head, 2 positions
    >>> att = Attention(maps, ["[CLS]", "hi"], ["cls", "word"], [-1, 0], ["hi"], causal=True)
    >>> att.n_layers, att.n_heads, len(att), att.cls_positions.tolist()
    (1, 1, 2, [0])
    >>> Attention(maps * 2, ["[CLS]", "hi"], ["cls", "word"], [-1, 0], ["hi"])
    Traceback (most recent call last):
    attnkit.errors.InputError: ...
    """

    maps: np.ndarray
    tokens: list[str]
    roles: np.ndarray
    word_ids: np.ndarray
    words: list[str]
    _: KW_ONLY
    level: str = "token"
    segments: np.ndarray | None = None
    embeddings: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    model: str = ""
    causal: bool = False
    measure: str = "weights"
    input_ids: np.ndarray | None = None
    qk: QKStates | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.maps = validate.maps_array(self.maps)
        if self.maps.ndim != 4 or self.maps.shape[2] != self.maps.shape[3]:
            raise InputError(
                f"Attention maps must have shape [layer, head, n, n]; got {self.maps.shape}."
            )
        validate.choice(self.measure, "measure", validate.MEASURES)
        check_maps(self.maps, weights=self.measure == "weights",
                   sinks=bool(self.meta.get("sinks", False)))
        n = self.maps.shape[2]
        self.tokens = list(self.tokens)
        self.roles = validate.roles(self.roles)
        self.words = list(self.words)
        self.word_ids = validate.word_ids(self.word_ids, len(self.words), len(self.word_ids))
        if self.segments is None:
            self.segments = np.where(self.roles == "word", 0, -1)
        self.segments = np.asarray(self.segments, dtype=np.int64)
        if self.input_ids is not None:
            self.input_ids = np.asarray(self.input_ids, dtype=np.int64)
        for name in ("tokens", "roles", "word_ids", "segments") + (
            ("input_ids",) if self.input_ids is not None else ()
        ):
            if len(getattr(self, name)) != n:
                raise InputError(
                    f"Attention.{name} has {len(getattr(self, name))} entries but maps have "
                    f"{n} positions."
                )
        validate.level(self.level)

    # ------------------------------------------------------------------ shape
    @property
    def n_layers(self) -> int:
        return self.maps.shape[0]

    @property
    def n_heads(self) -> int:
        return self.maps.shape[1]

    def __len__(self) -> int:
        return self.maps.shape[2]

    # -------------------------------------------------------- queries, keys
    def qk_states(self) -> QKStates:
        """The kept queries and keys of every layer (:class:`~attnkit.core.qkstates.QKStates`), as
        :meth:`attnkit.runtime.lazy.LazyAttention.qk_states` gives them.

        Returns
        -------
        QKStates

        Raises
        ------
        InputError
            When none were kept (maps built by hand, or word level).

        Examples
        --------
        >>> from attnkit.testing import tiny_model
        >>> tiny_model("llama").attend("The cat sat.").qk_states().layers
        [0, 1]
        """
        if self.qk is None:
            raise InputError(
                "This attention keeps no queries and keys"
                + (" (word level: queries and keys are per token)" if self.level == "word" else "")
                + ". Use model.attend(text) at token level, or a store extracted with "
                "keep='qk' and level='token'."
            )
        self.qk.causal = bool(self.causal)  # the mask the model applied, as a store records it
        return self.qk

    # -------------------------------------------------------------- selection
    def head(self, layer: int, head: int) -> np.ndarray:
        """The ``[n, n]`` map of one head (0-indexed layer and head); the same as :meth:`map`.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.

        Returns
        -------
        ndarray
            Float32 ``[n, n]``, a view of :attr:`maps`.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> att = ak.Attention.from_maps(np.full((2, 3, 4, 4), 0.25), ["a", "b", "c", "d"])
        >>> att.head(1, 2).shape
        (4, 4)
        """
        return self.map(layer, head)

    def map(self, layer: int, head: int) -> np.ndarray:
        """The float32 ``[n, n]`` map of one head (a view of :attr:`maps`).

        The reader every analysis uses (:class:`attnkit.core.types.AttentionLike`).

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.

        Returns
        -------
        ndarray
            Float32 ``[n, n]``: row ``q`` is attention from position ``q``.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> att = ak.Attention.from_maps(np.array([[[[1, 0], [0.25, 0.75]]]]), ["a", "b"])
        >>> att.map(0, 0)[1].tolist()
        [0.25, 0.75]
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        return self.maps[layer, head]

    def block(self, layer: int, head: int, rows: Any, cols: Any) -> np.ndarray:
        """The float32 block ``map(layer, head)[rows, cols]`` (a view for two slices).

        ``rows`` and ``cols`` are what :class:`LazyAttention.block` takes, with the same
        meaning (:func:`attnkit.core.validate.positions`): slices (any step), ints, sequences of
        ints or boolean masks of ``n`` entries; two sequences select their outer product,
        like ``map[np.ix_(rows, cols)]``.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.
        rows, cols : slice, int, sequence of int or boolean mask
            The query (from) and key (to) positions.

        Returns
        -------
        ndarray
            Float32 ``[len(rows), len(cols)]``.

        Raises
        ------
        InputError
            For a head outside the model or positions outside the input.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> att = ak.Attention.from_maps(np.array([[[[1, 0], [0.25, 0.75]]]]), ["a", "b"])
        >>> att.block(0, 0, slice(1, 2), slice(0, 2)).tolist()
        [[0.25, 0.75]]
        """
        a = self.map(layer, head)
        r = validate.positions(rows, len(self), "rows")
        c = validate.positions(cols, len(self), "cols")
        if isinstance(rows, slice) and isinstance(cols, slice):
            return a[rows, cols]
        return a[np.ix_(r, c)]

    def pooled(self, layer: int, head: int, size: int, reduce: str = "max") -> np.ndarray:
        """A ``[m, m]`` overview of one head, ``m = min(size, n)``.

        Rows and columns are cut into ``m`` contiguous bins whose sizes differ by at most
        one (:func:`pool_edges`); each cell is the max or the mean of its bin.

        Parameters
        ----------
        layer, head : int
            0-indexed layer and head.
        size : int
            The most bins per side.
        reduce : {"max", "mean"}
            How the cells of a bin are reduced.

        Returns
        -------
        ndarray
            Float32 ``[m, m]``.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> maps = np.array([[[[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1, 0], [0, 0, 0.5, 0.5]]]])
        >>> att = ak.Attention.from_maps(maps, ["a", "b", "c", "d"])
        >>> att.pooled(0, 0, 2).tolist(), att.pooled(0, 0, 2, "mean").tolist()
        ([[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.0], [0.0, 0.5]])
        """
        return pool_square(self.map(layer, head), validate.size(size), reduce)

    @classmethod
    def from_maps(
        cls,
        maps: np.ndarray,
        tokens: Sequence[str],
        roles: Sequence[str] | None = None,
        *,
        words: Sequence[str] | None = None,
        word_ids: Sequence[int] | None = None,
        causal: bool | None = None,
        model: str = "",
        measure: str = "weights",
    ) -> "Attention":
        """An Attention from bare maps and token strings (from any tool).

        Parameters
        ----------
        maps : array_like
            ``[layer, head, n, n]`` (or ``[head, n, n]`` for one layer, ``[n, n]`` for one
            head); rows are *from*, columns *to*.
        tokens : sequence of str
            The ``n`` token strings, as the tokenizer wrote them.
        roles : sequence of str, optional
            One of :data:`ROLES` per token; inferred from the tokens when omitted
            (:func:`infer_roles`).
        words, word_ids : optional
            The words and each token's word index (``-1`` for special tokens); inferred
            from word-piece markers (``##``, ``Ġ``, ``▁``) when omitted (:func:`infer_words`).
        causal : bool, optional
            Decoder attention; inferred when omitted (True when every map is zero above the
            diagonal).
        model : str
            Name of the model, for labels.
        measure : str
            What the maps hold (``"weights"`` rows must sum to 1).

        Returns
        -------
        Attention
            Token level.

        Raises
        ------
        InputError
            When shapes disagree, or maps are not finite or (weights) rows do not sum to 1.

        Examples
        --------
        >>> import numpy as np
        >>> from attnkit import Attention
        >>> maps = np.full((1, 1, 4, 4), 0.25)
        >>> att = Attention.from_maps(maps, ["[CLS]", "play", "##ing", "[SEP]"])
        >>> att.roles.tolist(), att.words
        (['cls', 'word', 'word', 'sep'], ['playing'])
        >>> att.to_words().maps.shape
        (1, 1, 3, 3)
        """
        arr = validate.maps_array(maps)
        while arr.ndim < 4:
            arr = arr[None]
        tokens = [str(t) for t in tokens]
        if arr.shape[-1] != len(tokens):
            raise InputError(
                f"maps have {arr.shape[-1]} positions but {len(tokens)} tokens were given."
            )
        roles_arr = validate.roles(roles if roles is not None else infer_roles(tokens))
        if word_ids is None or words is None:
            inferred_ids, inferred_words = infer_words(tokens, roles_arr.tolist())
            word_ids = inferred_ids if word_ids is None else word_ids
            words = inferred_words if words is None else words
        if causal is None:
            causal = bool(arr.shape[-1] > 1 and not np.triu(arr, k=1).any())
        return cls(maps=arr, tokens=tokens, roles=roles_arr, word_ids=np.asarray(word_ids),
                   words=list(words), causal=causal, model=model, measure=measure)

    @renamed(positional=("layers", "heads"))
    def select(
        self, *, layers: Sequence[int] | None = None, heads: Sequence[int] | None = None
    ) -> "Attention":
        """A new Attention keeping only the given layers and/or heads (0-indexed).

        Parameters
        ----------
        layers, heads : sequence of int, optional
            The layers and heads to keep, in this order; None keeps all.

        Returns
        -------
        Attention
            With ``maps[layers][:, heads]`` (a copy); everything else unchanged.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> att = ak.Attention.from_maps(np.full((6, 12, 3, 3), 1 / 3), ["a", "b", "c"])
        >>> att.select(layers=[0, 5], heads=[3]).maps.shape
        (2, 1, 3, 3)
        """
        maps = self.maps
        if layers is not None:
            maps = maps[validate.indices(layers, self.n_layers, "layer")]
        if heads is not None:
            maps = maps[:, validate.indices(heads, self.n_heads, "head")]
        return replace(self, maps=maps.copy(), qk=None)

    # ---------------------------------------------------------------- pooling
    def to_words(self) -> "Attention":
        """Pool word-pieces into words (Clark et al. 2019).

        Attention *to* a word is the sum of the attention to its pieces; attention *from*
        a word is the mean of its pieces' rows. Special positions stay as they are, so
        every row still sums to 1.

        Returns
        -------
        Attention
            A new Attention with ``level="word"`` (this one when it already is).

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> maps = np.array([[[[1, 0, 0], [0.2, 0.3, 0.5], [0.4, 0.4, 0.2]]]])
        >>> words = ak.Attention.from_maps(maps, ["[CLS]", "play", "##ing"]).to_words()
        >>> words.tokens, words.maps[0, 0].round(2).tolist()  # row: mean of 2; column: sum
        (['[CLS]', 'playing'], [[1.0, 0.0], [0.3, 0.7]])
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
            segments=None if self.segments is None else self.segments[keep],
            embeddings=emb,
            level="word",
            input_ids=None,
            qk=None,
        )


def check_maps(maps: np.ndarray, *, weights: bool = True, sinks: bool = False) -> None:
    """Refuse maps that are empty, hold NaN or infinite values, or (``weights``) negative
    values, rows that do not sum to 1 within :data:`ROW_SUM_TOL` (all-zero rows, padding,
    are allowed) or an all-zero head (:func:`attnkit.core.validate.weights`)."""
    validate.weights(maps, probabilities=weights, sinks=sinks)


#: Measures whose maps may be negative (no distribution can be made of them).
SIGNED_MEASURES = ("grad×attn",)


def row_shares(maps: np.ndarray, measure: str = "weights") -> np.ndarray:
    """Maps as distributions over the keys of each row, for analyses that need probabilities.

    Attention weights are returned as they are. For another non-negative measure
    (:mod:`attnkit.runtime.measures`: norm, norm+residual, ALTI) each row is divided by its sum, so
    an entry is the share of the row's total that goes to that key (rows that are all zero
    stay zero): thresholds, entropies and "attention to [CLS]" then read the same way for
    every measure.

    Raises
    ------
    InputError
        For a signed measure (``grad×attn``) or negative values.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.core.attention import row_shares
    >>> row_shares(np.array([[[[2.0, 6.0], [0.0, 0.0]]]]), "norm").tolist()
    [[[[0.25, 0.75], [0.0, 0.0]]]]
    """
    if measure == "weights":
        return maps
    if measure in SIGNED_MEASURES or (np.asarray(maps) < 0).any():
        raise InputError(
            f"{measure} maps are signed (values can be negative), so they are not a "
            "distribution over keys; take "
            "np.clip(att.maps, 0, None) (the positive part) or np.abs(att.maps) into "
            "Attention.from_maps(..., measure='norm') first, or use another measure."
        )
    sums = maps.sum(-1, keepdims=True)
    return np.divide(maps, sums, out=np.zeros_like(maps), where=sums > 0)


_SPECIAL_FIRST = ("[CLS]", "<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>", "<|im_start|>")
_SPECIAL_LAST = ("[SEP]", "</s>", "<|endoftext|>", "<eos>", "<|end_of_text|>", "<|eot_id|>",
                 "<|im_end|>")


def infer_roles(tokens: Sequence[str]) -> list[str]:
    """Roles (:data:`ROLES`) of token strings: a leading [CLS]/<s>/BOS is "cls", [SEP]/</s>/EOS
    tokens are "sep", other bracketed specials (``[PAD]``, ``<pad>``, ``<|…|>``) "special", the rest "word".

    A leading ``<|endoftext|>`` (GPT-2's BOS) is "cls".
    """
    roles = []
    for pos, tok in enumerate(tokens):
        if pos == 0 and (tok in _SPECIAL_FIRST or tok == "<|endoftext|>"):
            roles.append("cls")
        elif tok in _SPECIAL_LAST:
            roles.append("sep")
        elif (tok.startswith("[") and tok.endswith("]") and tok[1:-1].isupper() and len(tok) > 2) or (
            tok.startswith("<") and tok.endswith(">") and len(tok) > 2 and " " not in tok
            and (tok.startswith("<|") or tok[1:-1].strip("/").isalpha())
        ) or tok in _SPECIAL_FIRST:
            roles.append("special")
        else:
            roles.append("word")
    return roles


def infer_words(tokens: Sequence[str], roles: Sequence[str]) -> tuple[list[int], list[str]]:
    """Group word pieces into words from their markers.

    BERT's ``##`` continues the previous word; byte-level BPE's ``Ġ`` and SentencePiece's
    ``▁`` start a new one (so a piece without them continues the word before it). Tokens of
    a tokenizer without markers are one word each. Returns ``(word_ids, words)`` with
    ``-1`` for non-word roles.
    """
    kinds = {"##" if t.startswith("##") else t[0] if t[:1] in ("Ġ", "▁") else ""
             for t, r in zip(tokens, roles) if r == "word"}
    starts_mark = bool(kinds & {"Ġ", "▁"})
    word_ids: list[int] = []
    words: list[str] = []
    prev_word = False
    for tok, role in zip(tokens, roles):
        if role != "word":
            word_ids.append(-1)
            prev_word = False
            continue
        if tok.startswith("##"):
            new, text = not prev_word, tok[2:]
        elif starts_mark:
            new = tok[:1] in ("Ġ", "▁") or not prev_word
            text = tok.lstrip("Ġ▁")
        else:
            new, text = True, tok
        if new or not words:
            words.append(text)
        else:
            words[-1] += text
        word_ids.append(len(words) - 1)
        prev_word = True
    return word_ids, words


def pool_edges(n: int, size: int) -> np.ndarray:
    """Bin edges ``[m + 1]`` cutting ``n`` positions into ``m = min(size, n)`` contiguous bins
    whose sizes differ by at most one."""
    m = max(1, min(int(size), n))
    return (np.arange(m + 1) * n) // m


def pool_square(a: np.ndarray, size: int, reduce: str = "max") -> np.ndarray:
    """Pool an ``[n, n]`` (or ``[..., n, n]``) array into ``[..., m, m]`` bins
    (:func:`pool_edges`), each the max or the mean of its cells."""
    edges = pool_edges(a.shape[-1], size)
    return pool_cells(a, edges, edges, reduce)


def pool_cells(a: np.ndarray, row_edges: np.ndarray, col_edges: np.ndarray,
               reduce: str = "max") -> np.ndarray:
    """Pool ``[..., r, c]`` into bins: rows cut at ``row_edges`` (``[mr + 1]``, from 0 to
    ``r``), columns at ``col_edges``; each cell the max or the mean of its bin (float32)."""
    validate.choice(reduce, "reduce", ("max", "mean"))
    r_starts, c_starts = row_edges[:-1], col_edges[:-1]
    if len(r_starts) == a.shape[-2] and len(c_starts) == a.shape[-1]:
        return np.array(a, dtype=np.float32)
    if reduce == "max":
        out = np.maximum.reduceat(np.maximum.reduceat(a, r_starts, axis=-2), c_starts, axis=-1)
    else:
        r_sizes = np.diff(row_edges).astype(np.float64)
        c_sizes = np.diff(col_edges).astype(np.float64)
        out = np.add.reduceat(np.add.reduceat(a.astype(np.float64), r_starts, axis=-2),
                              c_starts, axis=-1)
        out = out / r_sizes[:, None] / c_sizes[None, :]
    return out.astype(np.float32)


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


def word_groups(word_ids: np.ndarray, roles: np.ndarray) -> np.ndarray:
    """Int ``[n]``: the word-level position of each token position: special positions alone,
    word pieces by word id; groups numbered in the order of their first token position."""
    word_ids = np.asarray(word_ids)
    group_of: dict[Any, int] = {}
    out = np.empty(len(word_ids), dtype=np.int64)
    for pos in range(len(word_ids)):
        key = ("w", int(word_ids[pos])) if roles[pos] == "word" else ("s", pos)
        out[pos] = group_of.setdefault(key, len(group_of))
    return out


def word_pooling(word_ids: np.ndarray, roles: np.ndarray) -> WordPooling:
    """Group token positions by word (:func:`word_groups`) as pooling matrices.

    Groups are ordered by their first token position.
    """
    group = word_groups(word_ids, roles)
    n = len(group)
    m = int(group.max()) + 1 if n else 0
    groups: list[list[int]] = [[] for _ in range(m)]
    for pos, g in enumerate(group.tolist()):
        groups[g].append(pos)
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
