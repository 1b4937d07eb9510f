"""Fault catalogue: indexes into attention (issue items 8, 11, 17, 18, 19).

Dense and lazy attention accept and refuse exactly the same indexes: every case runs on
both, and an accepted index gives the same block from both.
"""

from __future__ import annotations

import numpy as np
import pytest
from fault_helpers import raises_exactly

from attnkit.errors import InputError
from attnkit.testing import tiny_model

TEXT = "The cat sat on the mat and looked at the dog."


@pytest.fixture(scope="module")
def pair():
    model = tiny_model("llama")
    dense = model.attend(TEXT, lazy=False)
    lazy = model.attend(TEXT, lazy=True)
    assert len(dense) == len(lazy)
    return {"dense": dense, "lazy": lazy}


KINDS = ["dense", "lazy"]
N = None  # positions of TEXT, filled per case from the attention


def _accepted(n):
    return {
        "all": slice(None),
        "range": slice(2, 5),
        "reversed": slice(None, None, -1),
        "stepped": slice(1, None, 2),
        "reversed-stepped": slice(-1, 0, -3),
        "negative-start": slice(-3, None),
        "numpy-int-bounds": slice(np.int64(1), np.int32(4)),
        "one-int": 3,
        "negative-int": -1,
        "list": [0, 2, 4],
        "negative-list": [-1, 0],
        "unsorted-repeat": [4, 1, 1],
        "array": np.array([1, 3]),
        "mask": np.arange(n) % 2 == 0,
        "numpy-int": np.int64(2),
        "empty-list": [],
    }


ACCEPTED = list(_accepted(3))


@pytest.mark.parametrize("axis", ["rows", "cols"])
@pytest.mark.parametrize("name", ACCEPTED)
def test_an_index_reads_the_same_block_dense_and_lazy(pair, name, axis):
    n = len(pair["dense"])
    index = _accepted(n)[name]
    expected = np.arange(n)[index]
    expected = np.atleast_1d(expected)
    blocks = {}
    for kind in KINDS:
        rows, cols = (index, slice(None)) if axis == "rows" else (slice(None), index)
        blocks[kind] = pair[kind].block(1, 0, rows, cols)
        shape = (len(expected), n) if axis == "rows" else (n, len(expected))
        assert blocks[kind].shape == shape
    full = pair["dense"].map(1, 0)
    want = full[expected] if axis == "rows" else full[:, expected]
    np.testing.assert_array_equal(blocks["dense"], want)
    # lazy recomputes the map from queries, keys and row log-sum-exps in float32: a few ulp
    # of values in [0, 1] away from the eager softmax
    np.testing.assert_allclose(blocks["lazy"], blocks["dense"], rtol=0, atol=1e-5)


def _refused(n):
    return {
        "short-mask": [True, False, True],
        "long-mask": [True] * (n + 2),
        "float-slice": slice(0.5, 3),
        "string-slice": slice("a", 3),
        "zero-step": slice(0, 3, 0),
        "past-end": [n],
        "before-start": [-n - 1],
        "int-past-end": n + 5,
        "float-list": [1.5, 2.0],
        "float-array": np.array([0.0, 1.0]),
        "string": "abc",
        "two-dimensional": [[0, 1], [1, 2]],
        "none-entry": [None],
    }


REFUSED = list(_refused(3))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", REFUSED)
def test_a_bad_index_is_refused_the_same_way_dense_and_lazy(pair, kind, name):
    att = pair[kind]
    index = _refused(len(att))[name]
    msgs = {}
    for axis in ("rows", "cols"):
        rows, cols = (index, slice(None)) if axis == "rows" else (slice(None), index)
        msgs[axis] = str(raises_exactly(InputError, att.block, 0, 0, rows, cols))
    # the same message dense or lazy (one validation layer)
    other = pair["lazy" if kind == "dense" else "dense"]
    assert str(raises_exactly(InputError, other.block, 0, 0, index, slice(None))) == msgs["rows"]


BAD_HEADS = {
    "layer-past-end": (99, 0),
    "head-past-end": (0, 2),
    "layer-before-start": (-3, 0),
    "fractional-layer": (0.5, 0),
    "fractional-head": (0, 0.5),
    "string-layer": ("0", 0),
    "bool-head": (0, True),
    "none-layer": (None, 0),
}


@pytest.mark.parametrize("reader", ["map", "head", "block", "pooled"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(BAD_HEADS))
def test_a_head_outside_the_model_is_refused(pair, kind, name, reader):
    att = pair[kind]
    layer, head = BAD_HEADS[name]
    extra = {"block": (slice(None), slice(None)), "pooled": (4,)}.get(reader, ())
    raises_exactly(InputError, getattr(att, reader), layer, head, *extra)


@pytest.mark.parametrize("kind", KINDS)
def test_negative_heads_count_from_the_end(pair, kind):
    att = pair[kind]
    np.testing.assert_array_equal(att.map(-1, -1), att.map(att.n_layers - 1, att.n_heads - 1))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [0, -1, 2.5, None, "4"])
def test_pooled_refuses_a_size_that_is_not_a_positive_int(pair, kind, size):
    raises_exactly(InputError, pair[kind].pooled, 0, 0, size)


@pytest.mark.parametrize("kind", KINDS)
def test_pooled_refuses_an_unknown_reduction(pair, kind):
    raises_exactly(InputError, pair[kind].pooled, 0, 0, 4, "median")


@pytest.mark.parametrize("kind", KINDS)
def test_pooled_is_the_same_dense_and_lazy(pair, kind):
    # lazy pools its recomputed float32 blocks: a few ulp from the dense pool
    np.testing.assert_allclose(pair[kind].pooled(1, 1, 4, "mean"), pair["dense"].pooled(1, 1, 4, "mean"),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{"layers": [99]}, {"heads": [5]}, {"layers": [0.5]},
                                    {"layers": "0"}, {"heads": [-3]}])
def test_select_refuses_layers_and_heads_outside_the_model(pair, kwargs):
    raises_exactly(InputError, pair["dense"].select, **kwargs)


def test_select_keeps_negative_indexes(pair):
    att = pair["dense"]
    np.testing.assert_array_equal(att.select(layers=[-1]).maps, att.maps[-1:])
