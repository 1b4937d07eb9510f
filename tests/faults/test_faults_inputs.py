"""Fault catalogue: what users hand to a model and to the analyses (issue items 6, 7, 11,
12, 19, 21, 22): text, token ids, levels, sizes, thresholds and head lists."""

from __future__ import annotations

import numpy as np
import pytest
from fault_helpers import raises_exactly

import attnkit as ak
from attnkit.errors import EmptyInputError, InputError
from attnkit.testing import tiny_model


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.mark.parametrize("text", ["Thecat", "The cat sat.", "x"])
def test_a_bare_string_is_not_a_corpus(tiny_bert, text):
    err = raises_exactly(InputError, ak.extract, tiny_bert, text, progress=False)
    assert "[text]" in str(err)


def test_bytes_are_not_a_corpus(tiny_bert):
    raises_exactly(InputError, ak.extract, tiny_bert, b"The cat sat.", progress=False)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("level", ["bogus", "Word", "", None, 1])
def test_an_unknown_level_is_refused_by_attend(llama, level, lazy):
    raises_exactly(InputError, llama.attend, "The cat sat.", level=level, lazy=lazy)


@pytest.mark.parametrize("level", ["bogus", "tokens"])
def test_an_unknown_level_is_refused_by_extract(tiny_bert, level):
    raises_exactly(InputError, ak.extract, tiny_bert, ["The cat sat."], level=level, progress=False)


SURROGATE = "The \ud800 cat"


@pytest.mark.parametrize("item", [SURROGATE, ("The cat.", SURROGATE), ["The", "\udcff", "cat"]],
                         ids=["text", "pair", "words"])
def test_a_lone_surrogate_is_a_clear_error(tiny_bert, item):
    err = raises_exactly(InputError, tiny_bert.attend, item)
    assert "surrogate" in str(err)


def test_a_lone_surrogate_in_a_corpus(tiny_bert):
    raises_exactly(InputError, ak.extract, tiny_bert, ["The cat sat.", SURROGATE], progress=False)


@pytest.mark.parametrize("ids", [[1.5, 2.0, 3.0], [5, 6.0], (5.0, 6.0), [np.float32(5), 6]],
                         ids=["floats", "mixed", "tuple", "numpy-float"])
def test_float_token_ids_in_a_list_say_so(tiny_bert, ids):
    err = raises_exactly(InputError, tiny_bert.attend, ids)
    assert "ints" in str(err)


@pytest.mark.parametrize("ids", [np.array([1.5, 2.0]), np.array([[5, 6]]), [5, -1], [5, 10**6]],
                         ids=["float-array", "2-d", "negative", "past-vocabulary"])
def test_bad_token_ids(tiny_bert, ids):
    raises_exactly(InputError, tiny_bert.attend, ids)


@pytest.mark.parametrize("item", ["", "   ", [], ["the", ""]], ids=["empty", "spaces", "no-words", "empty-word"])
def test_empty_input(tiny_bert, item):
    raises_exactly(EmptyInputError, tiny_bert.attend, item)


@pytest.mark.parametrize("batch_size", [2.5, 0, -1, "2", True, None])
def test_batch_size_must_be_a_positive_int(tiny_bert, batch_size):
    raises_exactly(InputError, ak.extract, tiny_bert, ["The cat sat.", "We read."], batch_size=batch_size,
                   progress=False)


def test_no_inputs(tiny_bert):
    raises_exactly(InputError, ak.extract, tiny_bert, [], progress=False)


@pytest.fixture(scope="module")
def att(tiny_bert):
    return tiny_bert.attend("The cat sat on the mat.")


@pytest.mark.parametrize("heads", [[(0, 0.5)], [(0.5, 0)], [(0, 5)], [(0,)], ["01"], [(0, 0, 0)], 3],
                         ids=["fractional-head", "fractional-layer", "past-end", "one", "string",
                              "three", "int"])
def test_heads_must_be_whole_pairs_inside_the_model(att, heads):
    raises_exactly(InputError, ak.attention_graph, att, heads=heads)


@pytest.mark.parametrize("threshold", [float("nan"), "0.3", 1.0, -0.1, None])
def test_threshold_must_be_a_number_in_range(att, threshold):
    raises_exactly(InputError, ak.attention_graph, att, threshold=threshold)


@pytest.mark.parametrize("alpha", [0.0, float("nan"), "0.5", 2.0])
def test_alpha_must_be_a_number_in_range(att, alpha):
    g = ak.attention_graph(att)
    raises_exactly(InputError, ak.influence, g, alpha=alpha)


@pytest.mark.parametrize("residual", [2.0, float("inf"), "0.5"])
def test_residual_must_be_a_number_in_range(att, residual):
    raises_exactly(InputError, ak.rollout, att, residual=residual)


def test_the_same_mistake_gets_the_same_message_dense_or_lazy(llama):
    dense = llama.attend("The cat sat.", lazy=False)
    lazy = llama.attend("The cat sat.", lazy=True)
    msgs = {str(raises_exactly(InputError, a.map, 7, 0)) for a in (dense, lazy)}
    assert len(msgs) == 1
