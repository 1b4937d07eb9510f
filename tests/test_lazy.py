"""LazyAttention: every reader equals the dense Attention's on the same input."""

import numpy as np
import pytest

import attnkit
from attnkit.runtime import model as model_module
from attnkit.errors import (
    CaptureError,
    InputError,
    InputTooLongError,
    TruncationWarning,
)
from attnkit.runtime.lazy import LazyAttention
from attnkit.testing import CORPUS, tiny_model
from attnkit.core.types import AttentionLike
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

TEXT = "She has written three letters to her brother, unbelievably. " + CORPUS[1]


@pytest.fixture(scope="module", params=["llama", "bert", "mistral"])
def pair(request):
    """(lazy, dense) attention of one model on TEXT."""
    model = tiny_model(request.param, heads=4, hidden=32)
    return model.attend(TEXT, lazy=True), model.attend(TEXT, lazy=False)


def test_alignment_and_protocol(pair):
    lazy, dense = pair
    assert isinstance(lazy, LazyAttention) and isinstance(lazy, AttentionLike)
    assert (lazy.n_layers, lazy.n_heads, len(lazy)) == dense.maps.shape[:3]
    assert lazy.tokens == dense.tokens and lazy.words == dense.words
    for name in ("roles", "word_ids", "segments", "input_ids", "cls_positions", "punct",
                 "word_positions"):
        assert np.array_equal(getattr(lazy, name), getattr(dense, name)), name
    assert (lazy.level, lazy.causal, lazy.model) == (dense.level, dense.causal, dense.model)


def test_readers_equal_dense(pair):
    lazy, dense = pair
    n = len(dense)
    assert_close(lazy.maps, dense.maps, F32, scale=1)
    for layer, head in [(0, 0), (1, 3)]:
        assert_close(lazy.map(layer, head), dense.map(layer, head), F32, scale=1)
        for rows, cols in [(slice(3, 9), slice(0, n)), (slice(None, None, 2), slice(n - 5, None)),
                           ([7, 2, 2], [0, n - 1])]:
            want = (dense.maps[layer, head][np.ix_(rows, cols)] if isinstance(rows, list)
                    else dense.block(layer, head, rows, cols))
            assert_close(lazy.block(layer, head, rows, cols), want, F32, scale=1)
        for size in (1, 5, n, n + 3):
            for reduce in ("max", "mean"):
                assert_close(lazy.pooled(layer, head, size, reduce),
                                           dense.pooled(layer, head, size, reduce), F32, scale=1)


def test_bands_are_exact(pair, monkeypatch):
    """Readers that work band by band (tiny bands here) give the same numbers."""
    from attnkit.runtime import lazy as lazy_module

    lazy, dense = pair
    monkeypatch.setattr(lazy_module, "BAND_ELEMENTS", 7)
    assert_close(lazy.map(1, 2), dense.map(1, 2), F32, scale=1)
    assert_close(lazy.pooled(1, 2, 4, "mean"), dense.pooled(1, 2, 4, "mean"), F32, scale=1)


def test_to_words_equals_dense(pair):
    lazy, dense = pair
    lw, dw = lazy.to_words(), dense.to_words()
    assert lw.level == "word" and lw.tokens == dw.tokens
    assert np.array_equal(lw.roles, dw.roles) and np.array_equal(lw.word_ids, dw.word_ids)
    assert_close(lw.maps, dw.maps, F32, scale=1)
    m = len(dw)
    assert_close(lw.block(1, 1, slice(2, m), [0, 3]),
                               dw.maps[1, 1][2:, [0, 3]], F32, scale=1)
    assert_close(lw.pooled(0, 2, 3, "mean"), dw.pooled(0, 2, 3, "mean"), F32, scale=1)
    assert lw.to_words() is lw


def test_support_bounds_the_nonzero_columns(pair):
    lazy, dense = pair
    n = len(dense)
    for rows in (slice(0, 4), slice(5, n)):
        cols = lazy.support(rows)
        outside = np.ones(n, bool)
        outside[cols] = False
        assert (dense.maps[:, :, rows][..., outside] == 0).all()


def test_to_dense_roundtrip(pair):
    lazy, dense = pair
    back = lazy.to_dense()
    assert back.tokens == dense.tokens
    assert_close(back.maps, dense.maps, F32, scale=1)
    assert lazy.nbytes < dense.maps.nbytes * 10  # tiny here; O(L n d) in general


def test_memory_is_linear_in_length():
    model = tiny_model("llama", heads=4, hidden=32, max_positions=1024)
    short = model.attend(" ".join(CORPUS), lazy=True)
    long = model.attend(" ".join(CORPUS * 4), lazy=True)
    ratio = len(long) / len(short)
    assert long.nbytes / short.nbytes == pytest.approx(ratio, rel=0.01)


def test_word_level_and_embeddings():
    model = tiny_model("llama")
    att = model.attend(TEXT, lazy=True, level="word", embeddings=True)
    dense = model.attend(TEXT, lazy=False, level="word", embeddings=True)
    assert att.level == "word"
    assert_close(att.embeddings, dense.embeddings, F32)
    assert_close(att.maps, dense.maps, F32, scale=1)


def test_lazy_by_itself_above_the_threshold(monkeypatch):
    model = tiny_model("llama")
    assert isinstance(model.attend(TEXT), attnkit.Attention)
    monkeypatch.setattr(model_module, "LAZY_ABOVE_BYTES", model.dense_bytes(len(model.encode(TEXT))) - 1)
    assert isinstance(model.attend(TEXT), LazyAttention)
    assert isinstance(model.attend(TEXT, lazy=False), attnkit.Attention)


def test_bad_readers():
    att = tiny_model("llama").attend("The cat sat.", lazy=True)
    with pytest.raises(InputError, match="outside"):
        att.map(2, 0)
    with pytest.raises(InputError, match="reduce"):
        att.pooled(0, 0, 2, "median")
    with pytest.raises(InputError, match="outside"):
        att.block(0, 0, [99], slice(None))


# ------------------------------------------------------------------ bad input
def test_lazy_on_eager_model_is_refused():
    model = tiny_model("llama")
    eager = model_module.Model(model.hf, model.tokenizer, name="eager-llama", capture="eager")
    assert eager.capture == "eager"
    with pytest.raises(CaptureError, match="eager"):
        eager.attend("The cat sat.", lazy=True)
    assert isinstance(eager.attend("The cat sat."), attnkit.Attention)  # dense still works
    with pytest.raises(CaptureError, match="eager"):
        eager.record([eager.encode("The cat sat.")], [])


def test_too_long_input_is_refused_lazily_and_truncated_densely():
    model = tiny_model("llama", max_positions=32)
    text = " ".join(CORPUS)
    with pytest.raises(InputTooLongError, match=r"tokens but tiny-llama has 32 positions"):
        model.attend(text, lazy=True)
    with pytest.warns(TruncationWarning):
        att = model.attend(text, lazy=False)
    assert len(att) == 32 and att.truncated


def test_two_wrappers_around_one_model():
    """Wrapping the same weights for the eager path does not break the interface wrapper."""
    model = tiny_model("llama")
    eager = model_module.Model(model.hf, model.tokenizer, name="eager", capture="eager")
    a = model.attend("The cat sat.")
    b = eager.attend("The cat sat.")
    assert_close(a.maps, b.maps, F32, scale=1)
    assert isinstance(model.attend("The cat sat.", lazy=True), LazyAttention)
