"""Measures end to end: model.attend(measure=...) on every supported architecture, checked
against the models' own computations, hand computations and finite differences."""

import sys

import numpy as np
import torch
import pytest

from attnkit.errors import InputError, UnsupportedModelError
from attnkit.runtime.measures import (
    MEASURES,
    check_measure,
    compute,
    grad_attn,
)
from attnkit.runtime.archs import ARCHS, submodule
from attnkit.runtime.measures._arch import spec
from attnkit.runtime.measures.alti import alti_maps
from attnkit.testing import CORPUS, VISION_KINDS, tiny_model, tiny_vision
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

ARCH_KINDS = ["bert", "roberta", "distilbert", "gpt2", "gpt_neox", "llama", "qwen2", "mistral",
              "gemma2", "gpt_oss"]
TEXT = CORPUS[1]
IMAGE = np.random.default_rng(0).integers(0, 256, (40, 52, 3), dtype=np.uint8)


def item_of(kind):
    """What a model of ``kind`` reads: the text, or an image for a vision transformer."""
    return IMAGE if kind in VISION_KINDS else TEXT


@pytest.fixture(scope="module")
def models():
    out = {}
    for k in ARCH_KINDS + ["bert-cls", *VISION_KINDS]:
        m = tiny_vision(k) if k in VISION_KINDS else tiny_model(k)
        if k != "gpt_oss":  # its grouped expert matmul has no float64 kernel
            m.hf.double()
        out[k] = m
    return out


def _block_outputs(model, enc):
    """The attention block's output of every layer as the model computes it (forward hooks
    on the modules of the architecture table; test-only)."""
    s = spec(model)
    layers = list(submodule(model.base, s.layers))
    got, hooks = {}, []
    for i, layer in enumerate(layers):
        if s.placement == "post":
            mod = submodule(layer, s.norm)
        elif s.placement == "pre":
            mod = submodule(layer, s.attention)
        else:
            mod = submodule(layer, s.norm)
        hooks.append(mod.register_forward_hook(
            lambda m, a, o, i=i: got.__setitem__(i, (o[0] if isinstance(o, tuple) else o).detach())))
    try:
        with torch.no_grad(), model.eager():
            out = model.base(**model.pad([enc]), output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    res = []
    for i in range(len(layers)):
        o = got[i][0]
        if s.placement != "post":
            o = o + out.hidden_states[i][0]
        res.append(o)
    return res


@pytest.mark.parametrize("kind", ARCH_KINDS + list(VISION_KINDS))
def test_decomposition_reproduces_the_block_output(models, monkeypatch, kind):
    """On every architecture, the block output rebuilt by the decomposition (which the
    norm+residual and ALTI maps are made of) equals what the model computes, and every
    measure gives maps of the documented shape."""
    model = models[kind]
    blocks = []

    def keep(block):
        blocks.append(block)
        return alti_maps(block)

    monkeypatch.setitem(compute._BLOCK, "alti", keep)
    item = item_of(kind)
    att = model.attend(item, measure="alti")
    enc = model.encode(item)
    expected = _block_outputs(model, enc)
    assert len(blocks) == model.n_layers
    for layer, block in enumerate(blocks):  # a batch of one
        np.testing.assert_allclose(block.whole[0].numpy(), expected[layer].float().numpy(),
                                   atol=1e-4, rtol=1e-5, err_msg=f"{kind} layer {layer}")
        total = block.rest().clone()
        for items, rows, t in block.chunks():
            total[items, rows] += t.sum(2)
        np.testing.assert_allclose(total.numpy(), block.whole.numpy(), atol=1e-4)
    n = len(enc)
    assert att.maps.shape == (model.n_layers, 1, n, n) and att.measure == "alti"
    assert_close(att.maps.sum(-1), 1.0, F32, scale=1)
    if model.causal:
        assert np.allclose(np.triu(att.maps, 1), 0.0)
    for measure in ("norm", "norm+residual"):
        m = model.attend(item, measure=measure)
        heads = model.n_heads if measure == "norm" else 1
        assert m.maps.shape == (model.n_layers, heads, n, n) and m.measure == measure
        assert (m.maps >= 0).all()


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2", "vit", "deit", "clip"])
def test_norm_is_weight_times_transformed_value_norm(models, kind):
    """norm / weight is the same for every row of a column (‖f^h(x_j)‖ depends on j only)."""
    model = models[kind]
    w = model.attend(item_of(kind)).maps
    nm = model.attend(item_of(kind), measure="norm").maps
    ratio = nm / np.where(w > 1e-6, w, np.nan)
    col = np.isfinite(ratio).any(axis=2)  # columns with some row of visible weight
    hi = np.nanmax(np.where(np.isfinite(ratio), ratio, -np.inf), axis=2)[col]
    lo = np.nanmin(np.where(np.isfinite(ratio), ratio, np.inf), axis=2)[col]
    assert np.max(hi - lo) < 1e-3 * np.max(hi)  # the same ratio in every row of a column


def test_zero_value_token_contributes_nothing():
    """A Llama whose embedding of one token is zero: that token's value (RMSNorm of zero,
    no bias) is zero, so in layer 1 it gets attention weight but zero norm and zero ALTI
    contribution in every other row."""
    model = tiny_model("llama")
    model.hf.double()
    enc = model.encode(TEXT)
    pos = 3
    with torch.no_grad():
        model.hf.get_input_embeddings().weight[enc.input_ids[pos]] = 0.0
    w = model.attend(TEXT).maps[0]
    nm = model.attend(TEXT, measure="norm").maps[0]
    al = model.attend(TEXT, measure="alti").maps[0, 0]
    nr = model.attend(TEXT, measure="norm+residual").maps[0, 0]
    assert (w[:, pos:, pos].sum(-1) > 0.3).all()  # it does get attention in every head
    assert np.all(nm[:, :, pos] == 0.0)
    others = [i for i in range(len(enc)) if i != pos]
    assert np.all(al[others, pos] == 0.0) and np.all(nr[:, pos] == 0.0)


def test_alti_one_layer_model_end_to_end_equals_hand_computation():
    """model.attend(measure="alti") on a one-layer BERT equals ALTI written out by hand from
    the weights (tests/test_measures_math.py::_hand_alti)."""
    from test_measures_math import _hand_alti

    model = tiny_model("bert", layers=1, heads=2, hidden=8, seed=5)
    model.hf.double()
    enc = model.encode(TEXT)
    with torch.no_grad():
        x = model.base(**model.pad([enc]), output_hidden_states=True).hidden_states[0][0]
    _, _, _, expected = _hand_alti(model, x.numpy())
    got = model.attend(TEXT, measure="alti").maps[0, 0]
    assert_close(got, expected, F32)


def _scaling_attention(layer, head, i, j, eps):
    """An eager attention that multiplies one probability by ``1 + eps`` (after the softmax)."""

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
        from transformers.integrations.sdpa_attention import repeat_kv

        groups = query.shape[1] // key.shape[1]
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
        scores = torch.matmul(query, key.transpose(-1, -2)) * (scaling or query.size(-1) ** -0.5)
        if attention_mask is not None:
            scores = scores + attention_mask[..., : key.shape[-2]]
        probs = torch.softmax(scores, dim=-1)
        if module.layer_idx == layer and torch.is_grad_enabled():
            bump = torch.ones_like(probs)
            bump[0, head, i, j] += eps
            probs = probs * bump
        return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs

    return attention


@pytest.mark.parametrize("kind,objective", [("bert-cls", "logit"), ("bert", "projection"),
                                            ("gpt2", "logit"), ("llama", "logit")])
def test_grad_attn_matches_finite_differences(models, monkeypatch, kind, objective):
    """grad×attn[l, h, i, j] is the derivative of the objective when that one term α_ij v_j
    is scaled by (1 + ε): central differences in float64."""
    from attnkit.runtime.gradients import attention_gradients

    model = models[kind]
    att = grad_attn(model, [TEXT], objective=objective, progress=False)[0]
    assert att.measure == "grad×attn" and att.meta["objective"] == objective
    module = sys.modules[type(model.hf).__module__]
    L, H, n, _ = att.maps.shape
    picks = [(layer, *np.unravel_index(np.argmax(np.abs(att.maps[layer])), (H, n, n)))
             for layer in range(L)]
    # Llama's RMSNorm computes in float32 even in a float64 model, so its objective carries
    # float32 rounding (~4e-7 of a value ~6): with eps = 1e-4 that is ~2e-3 of the derivative,
    # over the tolerance on some CPUs' kernels. eps = 1e-3 keeps it ~2e-4, and the central
    # difference's own error (eps²) below 1e-5.
    eps = 1e-3
    for layer, h, i, j in picks:
        vals = []
        for sign in (1, -1):
            monkeypatch.setattr(module, "eager_attention_forward",
                                _scaling_attention(layer, h, i, j, sign * eps))
            vals.append(attention_gradients(model, TEXT, objective=objective).value)
            monkeypatch.undo()
        fd = (vals[0] - vals[1]) / (2 * eps)
        assert fd == pytest.approx(att.maps[layer, h, i, j], rel=1e-3, abs=1e-7), (layer, h, i, j)


def test_attend_measure_grad_attn_default_objective(models):
    att = models["bert-cls"].attend(TEXT, measure="grad*attn")
    assert att.measure == "grad×attn" and att.maps.shape[1] == models["bert-cls"].n_heads


def test_word_level_keeps_the_measure(models):
    att = models["bert"].attend(TEXT, measure="norm", level="word")
    assert att.level == "word" and att.measure == "norm"


def test_bad_measures(models):
    with pytest.raises(InputError, match="measure must be one of"):
        models["bert"].attend(TEXT, measure="nonsense")
    with pytest.raises(InputError, match="Lazy capture"):
        models["llama"].attend(TEXT, measure="norm", lazy=True)
    eager = tiny_model("bert")
    from attnkit.runtime.model import Model

    eager = Model(eager.hf, eager.tokenizer, capture="eager")
    with pytest.raises(UnsupportedModelError, match="eager attention path"):
        eager.attend(TEXT, measure="alti")
    assert check_measure(measure="grad*attn") == "grad×attn"
    assert set(ARCHS) >= {"bert", "roberta", "distilbert", "gpt2", "gpt_neox", "llama", "qwen2",
                          "mistral", "gemma2"}
    assert MEASURES[0] == "weights"


def test_vision_refuses_grad_attn_and_names_gradient_rollout(models):
    with pytest.raises(UnsupportedModelError, match="gradient_rollout"):
        models["vit"].attend(IMAGE, measure="grad×attn")


def test_unsupported_architecture_refuses_clearly(models, monkeypatch):
    model = models["bert"]
    monkeypatch.setattr(model, "model_type", "t5")
    with pytest.raises(UnsupportedModelError, match="supported: bert"):
        model.attend(TEXT, measure="norm")


@pytest.mark.parametrize("measure", ["norm", "norm+residual", "alti"])
@pytest.mark.parametrize("kind", ["bert", "gpt2", "gemma2"])
def test_a_padded_batch_gives_each_item_its_own_maps(models, kind, measure):
    model = models[kind]
    encs = [model.encode(t) for t in CORPUS[:3]]
    assert len({len(e) for e in encs}) > 1
    batch, _ = model.run(encs, measure=measure)
    for enc, maps in zip(encs, batch):
        alone, _ = model.run([enc], measure=measure)
        np.testing.assert_allclose(maps, alone[0], atol=1e-5, rtol=1e-5)
