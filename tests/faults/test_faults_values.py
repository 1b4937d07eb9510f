"""Fault catalogue: attention values and alignment handed to attnkit (issue items 5, 11,
18, 19): each refused with the exact error class, and the good edge cases still accepted."""

from __future__ import annotations

import numpy as np
import pytest
from fault_helpers import raises_exactly

import attnkit as ak
from attnkit.errors import EmptyInputError, InputError
from tolerances import assert_close, F32

TOKENS = ["[CLS]", "the", "cat", "[SEP]"]


def _uniform(n=4, layers=1, heads=1):
    return np.full((layers, heads, n, n), 1.0 / n)


def _with(value, at=(0, 0, 1)):
    maps = _uniform()
    maps[at] = value
    return maps


BAD_MAPS = {
    "negative-weight-row-sums-to-1": (np.array([[[[1.5, -0.5], [0.5, 0.5]]]]), ["a", "b"]),
    "all-zero-maps": (np.zeros((1, 1, 4, 4)), TOKENS),
    "one-all-zero-head": (np.concatenate([_uniform(), np.zeros((1, 1, 4, 4))], axis=1), TOKENS),
    "nan": (_with([np.nan, 0.5, 0.25, 0.25]), TOKENS),
    "inf": (_with([np.inf, 0, 0, 0]), TOKENS),
    "row-sums-to-2": (_uniform() * 2, TOKENS),
    "transposed-causal": ((np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]).T[None, None], TOKENS),
    "strings": ([["a"]], ["a"]),
    "ragged": ([[0.5, 0.5], [1.0]], ["a", "b"]),
    "not-square": (np.full((1, 1, 2, 3), 1 / 3), ["a", "b", "c"]),
    "tokens-too-few": (_uniform(), TOKENS[:3]),
    "object-array": (np.array([[0.5, "x"]], dtype=object), ["a", "b"]),
}


@pytest.mark.parametrize("name", list(BAD_MAPS))
def test_bad_maps_are_refused(name):
    maps, tokens = BAD_MAPS[name]
    raises_exactly(InputError, ak.Attention.from_maps, maps, tokens)


def test_zero_positions_is_empty_input():
    raises_exactly(EmptyInputError, ak.Attention.from_maps, np.zeros((1, 1, 0, 0)), [])


@pytest.mark.parametrize("roles", [["separator", "word", "word", "sep"], ["cls", "WORD", "word", "sep"],
                                   ["cls", "", "word", "sep"]])
def test_made_up_roles_are_refused_not_truncated(roles):
    err = raises_exactly(InputError, ak.Attention.from_maps, _uniform(), TOKENS, roles)
    assert "Unknown roles" in str(err)


@pytest.mark.parametrize("word_ids, words", [([-1, 0, 5, -1], ["the", "cat"]), ([-1, 0, -2, -1], ["the", "cat"]),
                                             ([-1, 0, 1], ["the", "cat"]), ([-1, 0.5, 1, -1], ["the", "cat"])])
def test_word_ids_outside_the_words_are_refused(word_ids, words):
    raises_exactly(InputError, ak.Attention.from_maps, _uniform(), TOKENS, word_ids=word_ids, words=words)


def test_an_unknown_level_is_refused():
    att = ak.Attention.from_maps(_uniform(), TOKENS)
    raises_exactly(InputError, ak.Attention, att.maps, att.tokens, att.roles, att.word_ids, att.words,
                   level="bogus")


def test_padding_rows_and_sink_rows_are_still_accepted():
    maps = _uniform()
    maps[0, 0, 3] = 0.0  # an all-zero padding row
    assert ak.Attention.from_maps(maps, TOKENS).maps[0, 0, 3].sum() == 0
    sinks = _uniform() * 0.5  # rows of a sink model may sum to less than 1
    att = ak.Attention(sinks, TOKENS, ["cls", "word", "word", "sep"], [-1, 0, 1, -1], ["the", "cat"],
                       meta={"sinks": True})
    assert att.n_heads == 1


def test_other_measures_may_be_negative():
    maps = np.array([[[[1.5, -0.5], [0.5, 0.5]]]])
    assert ak.Attention.from_maps(maps, ["a", "b"], measure="grad×attn").measure == "grad×attn"


def test_to_words_works_on_every_accepted_alignment():
    att = ak.Attention.from_maps(_uniform(), ["[CLS]", "play", "##ing", "[SEP]"])
    words = att.to_words()
    # pooling sums the columns of a word's pieces: float32 sums of exact quarters
    assert_close(words.maps.sum(-1), 1.0, F32)
