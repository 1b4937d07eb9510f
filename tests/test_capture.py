"""Capture through transformers' attention interface: known answer = the eager path.

The architecture sweep covers every family attnkit reads: each tiny text model runs a padded
batch, each encoder–decoder a (source, target) pair, each vision transformer an image, once
with attnkit's attention function (SDPA computes, attnkit records) and once with
transformers' eager attention and ``output_attentions=True``; the maps must agree within
1e-5 in float32. Lazy maps (queries, keys and row log-sum-exps) must agree with them too.
"""

import numpy as np
import pytest
import torch

from attnkit.runtime.capture import AttentionCall, RowSpans, recording
from attnkit.errors import CaptureError
from attnkit.testing import SEQ2SEQ_KINDS, TINY_WINDOW, VISION_KINDS, tiny_model, tiny_seq2seq, tiny_vision
from eager_cases import TEXTS, captured_and_eager, eager_maps
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

# Mistral and gpt-oss: sliding window TINY_WINDOW everywhere; Gemma 2: soft-capping and a
# sliding window on every other layer; Llama, Qwen2, Mistral, Gemma 2, gpt-oss: grouped keys
ARCHS = ["bert", "roberta", "distilbert", "gpt2", "gpt_neox", "llama", "qwen2", "mistral",
         "gemma2", "gpt_oss"]

#: Every family in one sweep: text models (above), encoder–decoders, vision transformers.
SWEEP = [*ARCHS, *SEQ2SEQ_KINDS, *VISION_KINDS]


@pytest.fixture(scope="module")
def models():
    return {k: tiny_model(k, heads=4, hidden=32) for k in ARCHS}


@pytest.fixture(scope="module")
def sweep_models(models):
    return {**models, **{k: tiny_seq2seq(k, heads=4, hidden=32) for k in SEQ2SEQ_KINDS},
            **{k: tiny_vision(k, heads=4, hidden=32) for k in VISION_KINDS}}


@pytest.mark.parametrize("kind", SWEEP)
def test_dense_capture_equals_eager(sweep_models, kind):
    """Every family, exact against its own eager attention (T5's relative position bias,
    BART's and Marian's cross-attention, DeiT's distillation token, CLIP's vision tower)."""
    model = sweep_models[kind]
    assert model.capture == "interface"
    pairs = captured_and_eager(model, kind)
    assert pairs
    for got, want in pairs:
        assert got.shape == want.shape
        # float32, the same arithmetic (scores, softmax) in another order: 1e-5
        assert_close(got, want, F32, scale=1)


@pytest.mark.parametrize("kind", ARCHS)
def test_lazy_maps_equal_eager(models, kind):
    model = models[kind]
    enc = model.encode(TEXTS[1])
    want = eager_maps(model, [enc])[0]
    att = model.attend(TEXTS[1], lazy=True)
    assert type(att).__name__ == "LazyAttention"
    assert_close(att.maps, want, F32, scale=1)
    n = len(att)
    rows, cols = slice(2, n - 1), slice(1, n, 2)
    assert_close(att.block(1, 3, rows, cols), want[1, 3, rows, cols], F32, scale=1)
    pick = [5, 0, 3]
    assert_close(att.block(0, 2, pick, pick), want[0, 2][np.ix_(pick, pick)], F32, scale=1)


def test_sliding_window_and_softcap_are_in_the_maps(models):
    """The references are not trivially equal: the window zeroes keys further than
    TINY_WINDOW back, and soft-capping bounds logits (eager maps of Gemma 2 differ from
    uncapped softmax)."""
    att = models["mistral"].attend(TEXTS[1], lazy=True)
    m = att.map(0, 0)
    q = np.arange(len(att))
    far = q[:, None] - q[None, :] >= TINY_WINDOW
    assert (m[far] == 0).all() and (m[~far & (q[:, None] >= q[None, :])] > 0).all()
    gemma = models["gemma2"]
    calls = []
    gemma.record([gemma.encode(TEXTS[0])], [calls.append])
    call = calls[0]
    assert call.softcap == 2.0
    s = call.scores()
    assert float(s[torch.isfinite(s) & (s > -1e30)].abs().max()) <= 2.0


def test_sinks_rows_sum_below_one(models):
    model = models["gpt_oss"]
    att = model.attend(TEXTS[0])
    sums = att.maps.sum(-1)
    assert (sums <= 1 + 1e-6).all() and (sums > 0).all() and (sums < 0.5).any()
    assert att.meta["sinks"] is True


@pytest.mark.parametrize("kind", ["llama", "gemma2", "bert"])
def test_capture_does_not_change_the_forward(models, kind):
    """Lazy recording leaves the hidden states of the SDPA forward exactly as they are; dense
    recording (output from the recorded probabilities) and the eager forward agree with
    them within float32 rounding."""
    model = models[kind]
    encs = [model.encode(t) for t in TEXTS]
    kw = model.to_device(model.pad(encs))
    hidden = {}

    def grab(name):
        with torch.inference_mode():
            hidden[name] = model.base(**kw, **model._forward_options).last_hidden_state

    from attnkit.runtime.capture import DenseRecorder, LazyRecorder

    grab("plain")
    with recording([lambda call: call.probabilities()]):
        grab("on demand")
    with recording([DenseRecorder([len(e) for e in encs], model.n_layers, model.n_heads)]):
        grab("dense")
    with model.eager():
        grab("eager")
    mask = kw["attention_mask"].bool()
    assert torch.equal(hidden["plain"][mask], hidden["on demand"][mask])
    if kind != "gemma2":  # soft-capped layers are computed from probabilities anyway
        one = model.to_device(model.pad(encs[:1]))
        with torch.inference_mode():
            plain = model.base(**one, **model._forward_options).last_hidden_state
            with recording([LazyRecorder(len(encs[0]))]):
                lazy = model.base(**one, **model._forward_options).last_hidden_state
        assert torch.equal(plain, lazy)
    for name in ("dense", "eager"):
        torch.testing.assert_close(hidden["plain"][mask], hidden[name][mask], atol=1e-5, rtol=1e-4)


def test_recorder_sees_values_and_output(models):
    """A recorder gets what norm-based measures need: values, probabilities and the module
    (its output projection); probabilities @ values is the layer's output."""
    model = models["llama"]
    calls: list[AttentionCall] = []
    n = model.record([model.encode(TEXTS[0])], [calls.append])
    assert n == model.n_layers == len(calls)
    for layer, call in enumerate(calls):
        assert call.layer == layer and hasattr(call.module, "o_proj")
        assert call.key.shape[1] == 2 and call.groups == 2  # 4 query heads share 2 key heads
        out = torch.matmul(call.probabilities(), call.repeated(call.value)).transpose(1, 2)
        torch.testing.assert_close(out, call.output, atol=1e-5, rtol=1e-5)


def test_lse_recorder_gets_row_log_sum_exps(models):
    model = models["gemma2"]

    class Lse:
        needs_lse = True

        def __init__(self):
            self.seen = []

        def __call__(self, call):
            self.seen.append((call.lse, call.log_sum_exp()))

    rec = Lse()
    model.record([model.encode(TEXTS[2])], [rec])
    for got, want in rec.seen:
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_row_spans():
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    spans = RowSpans.from_mask(mask)
    assert spans.lo.tolist() == [0, 0, 1, 2] and spans.hi.tolist() == [1, 2, 3, 4]
    assert torch.equal(spans.allowed(torch.arange(4), torch.arange(4)), mask)
    causal = RowSpans.full(4, 4, True, "cpu")
    assert causal.hi.tolist() == [1, 2, 3, 4]
    with pytest.raises(CaptureError, match="contiguous"):
        RowSpans.from_mask(torch.tensor([[1, 0, 1]], dtype=torch.bool))
    with pytest.raises(CaptureError, match="no key"):
        RowSpans.from_mask(torch.tensor([[0, 0, 0]], dtype=torch.bool))


def test_position_bias_refused_lazily_but_recorded_densely(models):
    """A position bias passed to the attention function (as some models do) is part of the
    dense probabilities; lazy capture refuses it."""
    from attnkit.runtime.capture import LazyRecorder, attention_forward

    model = models["llama"]
    module = model.hf.model.layers[0].self_attn
    q, k, v = (torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8))
    bias = torch.randn(1, 4, 5, 5)
    calls = []
    with recording([calls.append]):
        _out, _ = attention_forward(module, q, k, v, None, scaling=0.3, position_bias=bias)
    kr = k.repeat_interleave(2, dim=1)
    s = q @ kr.transpose(-1, -2) * 0.3 + bias
    s = s.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(calls[0].probabilities(), torch.softmax(s, -1))
    with pytest.raises(CaptureError, match="position bias"), recording([LazyRecorder(5)]):
        attention_forward(module, q, k, v, None, scaling=0.3, position_bias=bias)


def test_additive_masks_as_spans():
    """A pure additive mask (0 / large negative) is described exactly; one holding a bias is
    refused for lazy capture."""
    from attnkit.runtime.capture import _bool_mask

    low = torch.finfo(torch.float32).min
    pure = torch.tensor([[0.0, low, low], [0.0, 0.0, low], [low, 0.0, 0.0]])
    assert torch.equal(_bool_mask(pure), pure == 0)
    spans = RowSpans.from_mask(_bool_mask(pure))
    assert spans.lo.tolist() == [0, 0, 1] and spans.hi.tolist() == [1, 2, 3]
    with pytest.raises(CaptureError, match="position bias"):
        _bool_mask(pure + torch.tensor([[0.0, 0.0, 0.0], [-0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]))
