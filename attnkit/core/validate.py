"""The checks every public function runs on what a user hands it.

One module, so that the same mistake gets the same message everywhere, dense or lazy:
indexes (layers, heads, positions), sizes and counts, choices such as ``level``, numbers
such as ``threshold``, token ids, roles, text and attention weights. Each helper returns
the value in the form the caller works with (a Python ``int``, an index array ...) or
raises an :class:`~attnkit.errors.InputError` (an :class:`~attnkit.errors.EmptyInputError`
for empty input) whose message says what was wrong and what to do.

The rule for indexes, everywhere (layers, heads, positions, ``(layer, head)`` pairs,
``(query, key)`` pairs, counts), and the only code in attnkit that checks them:

- **whole numbers only**: a Python ``int`` or a numpy integer. ``True``/``False``, floats
  (``1.5`` and ``1.0`` alike), strings and ``None`` are refused, never truncated;
- **0-indexed, negative counts from the end**, as in Python: ``layer=-1`` is the last layer
  in every function and view (a view stores the index it resolved to);
- the message names the parameter, the value and the valid range, e.g.
  ``layer 7 is outside 0..5 (0-indexed; negative counts from the end)``.

Examples
--------
>>> from attnkit.core import validate
>>> validate.positions(slice(None, None, -2), 5).tolist()
[4, 2, 0]
>>> validate.head_index(-1, 0, 2, 4)
(1, 0)
>>> validate.positions([True, False], 5)
Traceback (most recent call last):
attnkit.errors.InputError: A boolean mask of positions must have one entry per position (5); got 2.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import EmptyInputError, InputError

#: Largest distance of a row sum from 1 that attention weights may have (float16 storage
#: and bfloat16 models stay far inside it).
ROW_SUM_TOL = 1e-2

#: Roles a position can play. "cls" is a leading [CLS]/<s>/BOS, "sep" a [SEP]/</s>/EOS,
#: "word" a piece (or, at word level, a whole word) of the text, "special" any other
#: special token.
ROLES = ("cls", "sep", "word", "special")

#: The levels attention is read at: model tokens, or words (Clark pooling).
LEVELS = ("token", "word")

#: What a map can hold (:mod:`attnkit.runtime.measures`): attention weights, or a measure of
#: what attention passes on.
MEASURES = ("weights", "norm", "norm+residual", "alti", "grad×attn")


# ------------------------------------------------------------------ numbers
def integer(value: Any, name: str, *, minimum: int | None = None) -> int:
    """``value`` as a Python int: a whole number (not a bool, not a float such as 2.5 or
    2.0), at least ``minimum`` when given.

    >>> integer(3, "batch_size", minimum=1)
    3
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InputError(f"{name} must be a whole number (an int); got {value!r} "
                         f"({type(value).__name__}).")
    out = int(value)
    if minimum is not None and out < minimum:
        raise InputError(f"{name} must be at least {minimum}; got {out}.")
    return out


def size(value: Any, name: str = "size") -> int:
    """A count of bins, items or positions: an int of at least 1.

    >>> size(4)
    4
    """
    return integer(value, name, minimum=1)


def number(value: Any, name: str, *, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a finite float (a real number, not a bool or a string), within
    ``[low, high]`` where given.

    >>> number(0.3, "threshold", low=0.0)
    0.3
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise InputError(f"{name} must be a number; got {value!r} ({type(value).__name__}).")
    out = float(value)
    if not math.isfinite(out):
        raise InputError(f"{name} must be a finite number; got {out}.")
    if (low is not None and out < low) or (high is not None and out > high):
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise InputError(f"{name} must lie in [{lo}, {hi}]; got {out:g}.")
    return out


def choice(value: Any, name: str, allowed: Sequence[str]) -> str:
    """``value`` when it is one of ``allowed`` (strings); otherwise an InputError listing them.

    >>> choice("max", "reduce", ("max", "mean"))
    'max'
    """
    if not isinstance(value, str) or value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise InputError(f"{name} must be one of {options}; got {value!r}.")
    return value


def level(value: Any) -> str:
    """A level of attention: ``"token"`` or ``"word"``.

    >>> level("word")
    'word'
    """
    return choice(value, "level", LEVELS)


# ------------------------------------------------------------------ indexes
def index(value: Any, n: int, name: str) -> int:
    """One index into ``n`` things (negative counts from the end, as in Python), as an int
    in ``0..n-1``.

    >>> index(-1, 3, "layer")
    2
    """
    i = integer(value, name)
    if not -n <= i < n:
        raise InputError(f"{name} {i} is outside 0..{n - 1} (0-indexed; negative counts from "
                         "the end).")
    return i + n if i < 0 else i


def head_index(layer: Any, head: Any, n_layers: int, n_heads: int,
               name: str | None = None) -> tuple[int, int]:
    """A ``(layer, head)`` pair (0-indexed; negative counts from the end) as two ints.
    ``name`` (e.g. ``"heads"``) is the parameter the pair came from, for the message;
    without it the message names ``layer`` and ``head``.

    >>> head_index(1, -1, 2, 12)
    (1, 11)
    >>> head_index(0, 0.5, 2, 12, "heads")
    Traceback (most recent call last):
    attnkit.errors.InputError: heads: head must be a whole number (an int); got 0.5 (float).
    """
    where = "" if name is None else f"{name}: "
    try:
        return index(layer, n_layers, "layer"), index(head, n_heads, "head")
    except InputError as exc:
        raise InputError(where + str(exc)) from None


def indices(values: Any, n: int, name: str) -> list[int]:
    """A sequence of indexes into ``n`` things (each as :func:`index`), e.g. ``layers=``.

    >>> indices([0, -1], 4, "layers")
    [0, 3]
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InputError(f"{name} must be a sequence of ints; got {values!r}.")
    return [index(v, n, name) for v in values]


def head_pairs(heads: Any, n_layers: int, n_heads: int, name: str = "heads") -> list[tuple[int, int]]:
    """``heads=``: an iterable of ``(layer, head)`` pairs of whole numbers, in range (each as
    :func:`head_index`), in the order given with repeats dropped.

    >>> head_pairs([(0, 1), [1, 0], (-1, 0)], 2, 2)
    [(0, 1), (1, 0)]
    """
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Iterable):
        raise InputError(f"{name} must be (layer, head) pairs; got {heads!r}.")
    pairs = []
    for item in heads:
        if isinstance(item, (str, bytes)) or not isinstance(item, Iterable) or len(tuple(item)) != 2:
            raise InputError(f"{name} must be (layer, head) pairs; got {item!r}.")
        layer, head = tuple(item)
        pairs.append(head_index(layer, head, n_layers, n_heads, name))
    return list(dict.fromkeys(pairs))


def _slice_bound(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return operator.index(value)
    except TypeError:
        raise InputError(f"slice bounds and steps must be ints or None; got {value!r}.") from None


def positions(where: Any, n: int, name: str = "positions", *, unique: bool = False,
              empty: bool = True) -> np.ndarray:
    """Positions ``0..n-1`` selected by ``where``, as a contiguous int64 array, with numpy's
    meaning: a slice (any step but 0, reversed too), one int, a sequence of ints (negative
    counts from the end) or a boolean mask of exactly ``n`` entries. A lone ``True`` or
    ``False``, floats and bools mixed with ints are refused. ``unique`` refuses a position
    given twice; ``empty=False`` refuses selecting nothing.

    >>> positions([0, -1], 4).tolist(), positions(np.array([True, False, True]), 3).tolist()
    ([0, 3], [0, 2])
    >>> positions([1.5], 4, "queries")
    Traceback (most recent call last):
    attnkit.errors.InputError: queries must be ints (or a boolean mask); got float64 values [1.5].
    """
    out = _positions(where, n, name)
    if not empty and out.size == 0:
        raise InputError(f"{name} is empty: it selects no position of the input's 0..{n - 1}.")
    if unique and len(np.unique(out)) != len(out):
        vals, counts = np.unique(out, return_counts=True)
        raise InputError(f"{name} gives position {int(vals[counts > 1][0])} more than once; "
                         "give each position once.")
    return out


def _positions(where: Any, n: int, name: str) -> np.ndarray:
    if isinstance(where, slice):
        start, stop, step = (_slice_bound(v) for v in (where.start, where.stop, where.step))
        if step == 0:
            raise InputError(f"{name}: a slice step cannot be zero.")
        return np.ascontiguousarray(np.arange(n)[slice(start, stop, step)])
    if isinstance(where, (str, bytes, bool, np.bool_)) or where is None:
        raise InputError(f"{name} must be a slice, ints or a boolean mask; got {where!r}.")
    if isinstance(where, (list, tuple)):
        kinds = {isinstance(v, (bool, np.bool_)) for v in where}
        if kinds == {True, False}:
            raise InputError(f"{name} mixes booleans with ints ({list(where)[:6]!r}): give "
                             "ints, or a boolean mask of one entry per position.")
    try:
        arr = np.asarray(where)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a slice, ints or a boolean mask; got {where!r}.") from None
    if arr.ndim == 0:
        if arr.dtype == bool:
            raise InputError(f"{name} must be a slice, ints or a boolean mask; got {where!r}.")
        arr = arr[None]
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional; got shape {arr.shape}.")
    if arr.dtype == bool:
        if len(arr) != n:
            raise InputError(f"A boolean mask of {name} must have one entry per position ({n}); "
                             f"got {len(arr)}.")
        return np.flatnonzero(arr)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise InputError(f"{name} must be ints (or a boolean mask); got {arr.dtype} values "
                         f"{arr[:4].tolist()}.")
    arr = arr.astype(np.int64)
    if arr.min() < -n or arr.max() >= n:
        bad = arr[(arr < -n) | (arr >= n)]
        raise InputError(f"{name} {bad[:5].tolist()} outside 0..{n - 1}: the input has {n} "
                         "positions (0-indexed; negative counts from the end).")
    return np.ascontiguousarray(np.where(arr < 0, arr + n, arr))


# ------------------------------------------------------------------ tokens, roles, text
def token_ids(ids: Any, vocab_size: int | None = None) -> np.ndarray:
    """Token ids: a 1-D sequence of whole numbers in ``0..vocab_size-1``, as int64.

    >>> token_ids([101, 2003, 102], 30522).tolist()
    [101, 2003, 102]
    """
    try:
        arr = np.asarray(ids)
    except (TypeError, ValueError):
        arr = np.asarray(ids, dtype=object)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"Token ids must be a non-empty 1-D sequence of ints; got shape "
                         f"{arr.shape}.")
    if arr.dtype.kind not in "iu" or arr.dtype == bool:
        if arr.dtype == object and all(isinstance(v, (numbers.Integral, np.integer))
                                       and not isinstance(v, bool) for v in arr):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"Token ids must be ints; got {arr.dtype} values {arr[:4].tolist()}. "
                             "Pass text as a str, words as a list of str, and ids as ints.")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or (vocab_size is not None and arr.max() >= vocab_size):
        hi = "" if vocab_size is None else f"..{vocab_size - 1}"
        raise InputError(f"Token ids must lie in 0{hi} (the model's vocabulary); got "
                         f"{arr.min()}..{arr.max()}.")
    return arr


def roles(values: Any) -> np.ndarray:
    """One of :data:`ROLES` per position, as a numpy string array.

    >>> roles(["cls", "word", "sep"]).tolist()
    ['cls', 'word', 'sep']
    """
    arr = np.asarray(list(values), dtype=object)
    bad = sorted({str(v) for v in arr if v not in ROLES})
    if bad:
        raise InputError(f"Unknown roles {bad}: each position's role is one of {list(ROLES)}.")
    return np.asarray(arr.tolist() if arr.size else [], dtype="<U7")


def text(value: str, name: str = "text") -> str:
    """Text a tokenizer can read: a str without lone UTF-16 surrogates (which are no
    characters, e.g. from a badly decoded file).

    >>> text("The cat sat.")
    'The cat sat.'
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"The {name} holds a lone surrogate {value[exc.start]!r} at character {exc.start}, "
            "which is no character: the text was decoded wrongly. Read files with "
            "encoding='utf-8' (errors='replace' to keep going) and pass the result."
        ) from None
    return value


def word_ids(ids: Any, n_words: int, n: int) -> np.ndarray:
    """Each position's word index: ``-1`` (no word) or ``0..n_words-1``; ``n`` entries.

    >>> word_ids([-1, 0, 0, 1, -1], 2, 5).tolist()
    [-1, 0, 0, 1, -1]
    """
    arr = np.asarray(ids)
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError(f"word_ids must be ints; got {arr.dtype}.")
    arr = arr.astype(np.int64).reshape(-1)
    if len(arr) != n:
        raise InputError(f"word_ids has {len(arr)} entries but there are {n} positions.")
    if arr.size and (arr.min() < -1 or arr.max() >= n_words):
        raise InputError(f"word_ids must be -1 or 0..{n_words - 1} (one per word of {n_words}); "
                         f"got {arr.min()}..{arr.max()}.")
    return arr


# ------------------------------------------------------------------ attention values
def maps_array(maps: Any) -> np.ndarray:
    """Numbers as a float32 array (``maps`` given as strings or ragged lists are refused).

    >>> maps_array([[0.5, 0.5], [1, 0]]).dtype
    dtype('float32')
    """
    try:
        arr = np.asarray(maps)
        if arr.dtype.kind not in "biuf":
            raise TypeError(arr.dtype)
        return arr.astype(np.float32, copy=False)
    except (TypeError, ValueError):
        raise InputError("Attention maps must be an array of numbers, [layer, head, n, n]; got "
                         f"{type(maps).__name__} {str(maps)[:60]!r}.") from None


def weights(maps: np.ndarray, *, probabilities: bool = True, sinks: bool = False) -> None:
    """Refuse attention that is empty (0 positions), holds NaN or infinite values, or, for
    ``probabilities`` (attention weights), holds negative values (below
    ``-ROW_SUM_TOL``), rows that do not sum to 1
    within :data:`ROW_SUM_TOL` (all-zero rows, padding, are allowed) or a head whose every
    row is zero. With ``sinks`` (models with learned sink logits, e.g. gpt-oss, whose
    softmax also spends weight on a sink that is no token) rows may sum to anything from 0
    to 1.

    >>> weights(np.full((1, 1, 2, 2), 0.5))
    >>> weights(np.zeros((1, 1, 2, 2)))
    Traceback (most recent call last):
    attnkit.errors.InputError: Attention weights of layer 0, head 0 are all zero: ...
    """
    if maps.ndim == 4 and maps.shape[2] == 0:
        raise EmptyInputError("Attention with 0 positions: give at least one token.")
    if maps.size == 0:
        return
    sums = maps.sum(-1, dtype=np.float64)
    if not np.isfinite(sums).all():
        bad = np.argwhere(~np.isfinite(sums))[0]
        raise InputError(
            f"Attention maps hold NaN or infinite values (first at layer {bad[0]}, head "
            f"{bad[1]}, row {bad[2]}): the model's forward pass overflowed or the maps are "
            "corrupt. Run the model in float32 (attnkit.load(..., dtype='float32'))."
        )
    if not probabilities:
        return
    if maps.min() < -ROW_SUM_TOL:  # the rows' tolerance (perturbed maps dip just below 0)
        bad = np.argwhere(maps < -ROW_SUM_TOL)[0]
        raise InputError(
            f"Attention weights must not be negative; layer {bad[0]}, head {bad[1]}, row "
            f"{bad[2]}, column {bad[3]} holds {maps[tuple(bad)]:.4g}. Pass measure= for a "
            "quantity that is not a probability."
        )
    if not sinks and maps.ndim == 4:
        dead = ~(sums != 0.0).any(-1)
        if dead.any():
            bad = np.argwhere(dead)[0]
            raise InputError(
                f"Attention weights of layer {bad[0]}, head {bad[1]} are all zero: no position "
                "attends anywhere, so every statistic of that head would be meaningless. The "
                "maps were not filled in (check how they were captured)."
            )
    off = np.abs(sums - 1.0)
    off[sums == 0.0] = 0.0
    if sinks:
        off = np.maximum(sums - 1.0, 0.0)
    if off.max() > ROW_SUM_TOL:
        bad = np.unravel_index(int(np.argmax(off)), off.shape)
        raise InputError(
            f"Attention weights must have rows that sum to 1; row {bad[2]} of layer "
            f"{bad[0]}, head {bad[1]} sums to {sums[bad]:.4g}. Rows are 'from' and columns "
            "'to': transpose maps that are the other way round, or pass measure= for a "
            "quantity that is not a probability."
        )


def position_pairs(pairs: Any, n: int, name: str = "pairs") -> np.ndarray:
    """``(query, key)`` position pairs: a non-empty sequence of two whole numbers each
    (negative counts from the end), as an int64 ``[pairs, 2]`` array in ``0..n-1``.

    >>> position_pairs([(3, 0), (-1, 1)], 4).tolist()
    [[3, 0], [3, 1]]
    """
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise InputError(f"{name} must be a sequence of (query, key) positions; got {pairs!r}.")
    out = []
    for item in pairs:
        if isinstance(item, (str, bytes)) or not isinstance(item, Iterable) or len(tuple(item)) != 2:
            raise InputError(f"{name} must be (query, key) position pairs; got {item!r}.")
        q, k = tuple(item)
        try:
            out.append((index(q, n, "query"), index(k, n, "key")))
        except InputError as exc:
            raise InputError(f"{name}: {exc} The input has {n} positions.") from None
    if not out:
        raise InputError(f"{name} is empty; give at least one (query, key) pair.")
    return np.asarray(out, dtype=np.int64)


def model(value: Any, name: str = "model", *, family: str | tuple[str, ...] | None = None) -> None:
    """Refuse what is not a loaded attnkit model: a model's name (``"minilm"``), a bare
    transformers model (``model.hf``), or anything else, saying how to get one; with
    ``family`` (``"text"``, ``"encoder-decoder"``, ``"vision"``), also a model of another
    family.

    >>> model("minilm")
    Traceback (most recent call last):
    attnkit.errors.InputError: model must be a loaded model, not the name 'minilm': load it first (model = attnkit.load('minilm')) and pass that.
    """
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        raise InputError(f"{name} must be a loaded model, not the name {str(value)!r}: load it "
                         f"first (model = attnkit.load({str(value)!r})) and pass that.")
    if hasattr(value, "n_layers") and hasattr(value, "encode"):
        have = getattr(value, "family", "text")
        families = (family,) if isinstance(family, str) else family
        if families is not None and have not in families:
            raise InputError(f"{name} is a{'n' if have[0] in 'aeiou' else ''} {have} model "
                             f"({getattr(value, 'name', type(value).__name__)}); this needs a "
                             f"{' or '.join(families)} model.")
        return
    if hasattr(value, "config") and hasattr(value, "forward"):
        raise InputError(f"{name} is a bare transformers {type(value).__name__}; pass the model "
                         "attnkit.load(...) returned (its .hf is this object).")
    raise InputError(f"{name} must be a model loaded with attnkit.load(...); got "
                     f"{type(value).__name__}.")


def seed(value: Any, name: str = "seed") -> int:
    """A seed of randomness: a whole number of at least 0.

    >>> seed(0)
    0
    """
    return integer(value, name, minimum=0)


def span(value: Any, name: str) -> slice:
    """A slice of positions (``rows=``, ``cols=`` of readers that take only slices): bounds
    and step whole numbers or None, step not zero.

    >>> span(slice(1, 3), "rows")
    slice(1, 3, None)
    """
    if not isinstance(value, slice):
        raise InputError(f"{name} must be a slice of positions (e.g. slice(0, 8)); got "
                         f"{type(value).__name__} {value!r}.")
    for bound in (value.start, value.stop, value.step):
        if bound is not None:
            integer(bound, f"{name} (a slice bound)")
    if value.step == 0:
        raise InputError(f"{name}: a slice step cannot be zero.")
    return value


def path(value: Any, name: str = "path") -> Any:
    """A file or folder path: a ``str`` or ``os.PathLike`` (not a number, not None), as a
    :class:`pathlib.Path`.

    >>> path("data/x.conllu").name
    'x.conllu'
    """
    import os
    from pathlib import Path

    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{name} must be a file or folder path (str or Path); got "
                         f"{type(value).__name__} {value!r}.")
    return Path(value)


def position_form(where: Any, name: str = "positions") -> None:
    """Check the form of positions whose input is not known yet (a metric built now and
    applied to inputs later): a slice, ints or a boolean mask, as :func:`positions` takes;
    the range is checked against each input when they are applied.

    >>> position_form([0, -1]); position_form(slice(1, None))
    >>> position_form([0.5])
    Traceback (most recent call last):
    attnkit.errors.InputError: positions must be ints (or a boolean mask); got float64 values [0.5].
    """
    if isinstance(where, slice):
        span(where, name)
        return
    if not isinstance(where, (str, bytes, bool, np.bool_)) and where is not None:
        try:
            arr = np.asarray(where)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.dtype == bool and arr.ndim == 1:
            return
    _positions(where, 1 << 62, name)
