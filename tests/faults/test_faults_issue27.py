"""Fault catalogue: the APIs of score attribution, composition, queries/keys and
qk_embedding, QKScatter, seq2seq pairs, vision and the new views (issue 27, item 5).

Each case is one the issue reproduced (silently wrong, a foreign exception or an unclear
message), tried as a hostile user would, with a known answer: the exact error class and the
parameter its message names, or the right result. The data-loss cases are in
``test_faults_user_files.py``; the generated contract over every public callable is
``tests/test_hostile.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from fault_helpers import raises_exactly
from tolerances import F32, assert_close

import attnkit as ak
from attnkit.core.qkstates import scores
from attnkit.errors import InputError, TruncationWarning
from attnkit.runtime.vision import gradient_rollout
from attnkit.testing import tiny_model, tiny_seq2seq, tiny_vision

TEXT = "The cat sat on the mat. The cat"


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def att(llama):
    return llama.attend(TEXT)


# ------------------------------------------------------------------ silently wrong
def test_unsorted_keys_sum_as_sorted_keys(llama, att):
    """aggregate='sum' with keys in another order summed other pairs (40.51 vs 39.05)."""
    a = ak.score_attribution(llama, att, layer=1, head=0, keys=[5, 1, 3], aggregate="sum")
    b = ak.score_attribution(llama, att, layer=1, head=0, keys=[1, 3, 5], aggregate="sum")
    total = b.table["contribution"].sum()
    assert a.table["contribution"].sum() == pytest.approx(total, rel=1e-9)
    # and the sum is the model's own scores of those pairs (causal: keys <= query)
    per_pair = ak.score_attribution(llama, att, layer=1, head=0, keys=[1, 3, 5])
    assert per_pair.meta["scores"]["score"].sum() == pytest.approx(total, rel=1e-4)


def test_duplicated_keys_are_refused(llama, att):
    err = raises_exactly(InputError, ak.score_attribution, llama, att, layer=1, head=0,
                         keys=[1, 1])
    assert "keys" in str(err) and "more than once" in str(err)


@pytest.mark.parametrize("lazy", [False, True])
def test_an_attention_is_read_by_its_own_tokens(llama, lazy):
    """score_attribution(model, att) re-tokenised the tokens' text (14 tokens, not 12)."""
    a = llama.attend(TEXT, lazy=lazy)
    r = ak.score_attribution(llama, a, layer=1, head=0, queries=[-1])
    assert r.meta["tokens"] == list(a.tokens)
    assert len(r.meta["scores"]) == len(a)  # causal: the last query sees every key
    s = ak.residual_stream(llama, a, layer=1)
    assert len(s.positions) == len(a)


@pytest.mark.parametrize("call, param", [
    (lambda m, a: ak.score_attribution(m, a, layer=1, head=0, queries=[1.5]), "queries"),
    (lambda m, a: ak.score_attribution(m, a, layer=1, head=0, queries=True), "queries"),
    (lambda m, a: ak.score_attribution(m, a, layer=1, head=0, pairs=[(1.7, 0)]), "pairs"),
    (lambda m, a: ak.score_attribution(m, a, layer=0.5, head=0), "layer"),
    (lambda m, a: ak.score_attribution(m, a, layer=True, head=0), "layer"),
    (lambda m, a: ak.residual_stream(m, a, layer=1, positions=[1.5]), "positions"),
    (lambda m, a: a.queries(1.5), "layer"),
    (lambda m, a: m.attend(TEXT, lazy=True).queries(1.5), "layer"),
    (lambda m, a: ak.extract(m, [TEXT], keep="qk", level="token", qk_layers=[0.7],
                             progress=False), "qk_layers"),
    (lambda m, a: ak.qk_embedding(a, heads=[(0, 0.5)], method="pca", progress=False), "heads"),
    (lambda m, a: ak.Heatmap(a, layer=0.5), "layer"),
])
def test_fractional_and_boolean_indexes_are_refused_not_truncated(llama, att, call, param):
    err = raises_exactly(InputError, call, llama, att)
    assert param in str(err)


def test_crossview_refuses_a_fractional_layer():
    pair = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    err = raises_exactly(InputError, ak.CrossView, pair, layer=0.5)
    assert "layer" in str(err) and "whole number" in str(err)
    err = raises_exactly(InputError, ak.CrossView, pair, layer=2)
    assert "layer 2 is outside 0..1" in str(err)  # not "1 layers" for a 2-layer model


def test_negative_indexes_count_from_the_end_everywhere(llama, att):
    """One rule: layer=-1 worked in Attention.map and attention_graph(heads=) but was refused
    by score_attribution, Heatmap and qk_embedding."""
    last = att.n_layers - 1
    np.testing.assert_array_equal(att.map(-1, -1), att.map(last, att.n_heads - 1))
    a = ak.score_attribution(llama, att, layer=-1, head=-1, queries=[-1])
    b = ak.score_attribution(llama, att, layer=last, head=att.n_heads - 1, queries=[len(att) - 1])
    assert a.meta["layer"] == b.meta["layer"] == last
    np.testing.assert_array_equal(a.table["contribution"], b.table["contribution"])
    view = ak.Heatmap(att, layer=-1, head=-1)
    assert (view.layer, view.head) == (last, att.n_heads - 1)
    emb = ak.qk_embedding(att, heads=[(-1, 0)], method="pca", progress=False)
    assert emb.meta["heads"] == [[last, 0]]


def test_nan_weights_are_refused_by_score_attribution_and_residual_stream():
    model = tiny_model("llama")
    with torch.no_grad():
        dict(model.hf.named_parameters())["model.layers.0.self_attn.o_proj.weight"][0, :3] = float("nan")
    for call in (lambda: ak.score_attribution(model, TEXT, layer=1, head=0),
                 lambda: ak.residual_stream(model, TEXT, layer=1)):
        err = raises_exactly(InputError, call)
        # names where: the damaged weights (layer 0's output projection, 1-indexed '1-h')
        assert "NaN" in str(err) and ("layer 0's output weights" in str(err) or "'1-" in str(err))


def test_a_long_seq2seq_target_warns_as_a_long_source_does():
    model = tiny_seq2seq("t5")
    with pytest.warns(TruncationWarning, match="The target has more than"):
        pair = model.attend("A cat.", "word " * 200)
    assert len(pair.decoder) <= model.max_length + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        model.attend("A cat.", "A dog.")  # nothing truncated, nothing said


def test_a_float_image_in_0_255_is_refused_not_clipped_to_white():
    model = tiny_vision("vit")
    img = np.random.default_rng(0).uniform(0, 255, (32, 32, 3))
    err = raises_exactly(InputError, model.attend, img)
    assert "[0, 1]" in str(err) and "uint8" in str(err)
    a = model.attend(img.astype(np.uint8))
    b = model.attend(img.astype(np.uint8) / 255.0)
    assert_close(a.maps, b.maps, F32)  # the same pixels reach the model either way


def test_qkscatter_shows_the_head_asked_for():
    emb = ak.qk_embedding(tiny_model("gpt2").attend("The cat sat on the mat."), method="pca",
                          progress=False)
    view = ak.QKScatter(emb, head=1)
    assert (view.layer, view.head) == (0, 1)
    assert view.n_total == len(emb.head(0, 1))
    err = raises_exactly(InputError, setattr, view, "layer", 9)
    assert "layer 9 is outside" in str(err)
    assert (view.layer, view.head) == (0, 1) and view.n_total > 0  # nothing drawn empty


def test_qk_embedding_refuses_causal_and_non_causal_items_together():
    causal = tiny_model("gpt2").attend("The cat sat.")
    both = tiny_model("bert").attend("The cat sat.")
    err = raises_exactly(InputError, ak.qk_embedding, [causal, both], method="pca",
                         progress=False)
    assert "same model" in str(err) and "causal" in str(err)


@pytest.mark.parametrize("lazy", [False, True])
def test_qkstates_carry_the_models_mask(lazy):
    """QKStates.causal was False from attend(...).qk_states(): scores(..., causal=st.causal)
    then differed from the model's map by 0.9998."""
    a = tiny_model("gpt2").attend("The cat sat on the mat.", lazy=lazy)
    st = a.qk_states()
    assert st.causal is True
    for layer in range(a.n_layers):
        for head in range(a.n_heads):
            assert_close(scores(st, layer, head, causal=st.causal), a.map(layer, head), F32)


def test_aer_gold_outside_the_sentence_or_fractional_is_refused():
    pair = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    n_src = len(pair.cross.to_words().source_words)
    for gold, what in ([{(n_src + 3, 0)}], "outside"), ([{(0.5, 0)}], "whole number"), \
            ([{(0, 0, 1)}], "pairs"), (["ab"], "links"):
        err = raises_exactly(InputError, ak.alignment_error_rate, [pair], gold, progress=False)
        assert "gold" in str(err) and what in str(err), str(err)
    ok = ak.alignment_error_rate([pair], [{(0, 0)}], progress=False)
    assert ok["aer"].between(0, 1).all()


# ------------------------------------------------------------------ foreign exceptions
def test_gradient_rollout_of_a_text_model_says_it_needs_a_vision_model():
    err = raises_exactly(InputError, gradient_rollout, tiny_model("bert"), "The cat sat.")
    assert "vision model" in str(err)


def test_extract_of_a_vision_model_says_what_it_runs():
    img = np.zeros((32, 32, 3), np.uint8)
    err = raises_exactly(InputError, ak.extract, tiny_vision("vit"), [img], progress=False)
    assert "vision model" in str(err) and "text or encoder-decoder" in str(err)


def test_rollout_of_cross_attention_points_to_the_pair_rollout():
    pair = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    err = raises_exactly(InputError, ak.rollout, pair.cross)
    assert "seq2seq_rollout" in str(err)


@pytest.mark.parametrize("heads", [[(0,)], ["h0"], [(0, "1")]])
def test_compare_heads_that_are_not_pairs_are_an_input_error(heads):
    a = tiny_model("bert").attend("The cat sat.")
    err = raises_exactly(InputError, ak.compare, a, a, heads=heads)
    assert "heads" in str(err)


# ------------------------------------------------------------------ unclear messages
def test_a_models_name_is_told_to_load_it(att):
    err = raises_exactly(InputError, ak.score_attribution, "minilm", att, layer=0, head=0)
    assert "attnkit.load('minilm')" in str(err)


def test_a_bare_transformers_model_is_told_to_use_attnkits(llama, att):
    err = raises_exactly(InputError, ak.score_attribution, llama.hf, att, layer=0, head=0)
    assert "LlamaForCausalLM" in str(err) and "attnkit.load" in str(err)
    assert "does not know" not in str(err)


def test_image_view_names_the_layer_range_of_a_two_layer_model():
    a = tiny_vision("vit").attend(np.zeros((32, 32, 3), np.uint8))
    err = raises_exactly(InputError, ak.ImageAttention, a, layer=5)
    assert "layer 5 is outside 0..1" in str(err)


# ------------------------------------------------------------------ views' traits
def _views():
    att = tiny_model("gpt2").attend("The cat sat on the mat.")
    pair = tiny_seq2seq("bart").attend("The cat sat.", "A cat.")
    img = tiny_vision("vit").attend(np.zeros((32, 32, 3), np.uint8))
    emb = ak.qk_embedding(att, method="pca", progress=False)
    return {"Heatmap": ak.Heatmap(att), "QKScatter": ak.QKScatter(emb),
            "CrossView": ak.CrossView(pair), "ImageAttention": ak.ImageAttention(img)}


@pytest.mark.parametrize("value", [0.5, 1.0, True, "1", None, 99])
def test_a_views_layer_set_from_python_is_checked_like_an_argument(value):
    """view.layer = 0.5 was traitlets' TraitError, True read as 1, and QKScatter's layer 9
    drew 0 points."""
    for name, view in _views().items():
        before = view.layer
        err = raises_exactly(InputError, setattr, view, "layer", value)
        assert "layer" in str(err), (name, str(err))
        assert view.layer == before, name


def test_a_views_layer_minus_one_is_the_last():
    for name, view in _views().items():
        view.layer = -1
        assert view.layer == view.n_layers - 1 if hasattr(view, "n_layers") else view.layer == 1, name


def test_extract_counts_a_truncated_target_as_a_truncated_pair():
    model = tiny_seq2seq("t5")
    pairs = [("A cat.", "word " * 200), ("word " * 200, "A cat."), ("A cat.", "A dog.")]
    with pytest.warns(TruncationWarning, match="2 of 3 inputs"):
        sset = ak.extract(model, pairs, progress=False)
    assert sset.truncated.tolist() == [True, True, False]


def test_nan_weights_are_refused_by_composition_not_a_linalg_error():
    model = tiny_model("llama")
    with torch.no_grad():
        dict(model.hf.named_parameters())["model.layers.0.self_attn.o_proj.weight"][0, :3] = float("nan")
    err = raises_exactly(InputError, ak.composition, model, progress=False)
    assert "layer 0's output weights" in str(err) and "NaN" in str(err)
