"""Interventions (issue 29): metrics, ablation, patching, knockout, attribution patching.

Known answers come from reference computations written here: an ablated head is the same
model with that head's columns of the output projection's weight zeroed (or its mean moved
into the projection's bias); a patched component is the corrupted run with that component's
weights arranged to write the clean value; a knocked-out edge is the eager softmax with that
score at minus infinity.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError, UnsupportedModelError
from attnkit.interventions import hooks
from attnkit.interventions.metrics import Context
from attnkit.testing import tiny_model, tiny_seq2seq
from tolerances import F32, F32_DEEP, FD, assert_close

pytestmark = pytest.mark.numerics

TEXTS = ["The cat sat on the mat.", "We read it now."]
# float32 forwards of different batch shapes sum in different orders: relative 1e-4
RTOL = F32_DEEP.rtol  # float32 through a whole model (tests/tolerances.py)


def _proj(model, layer):
    return hooks.sites(model).out_proj[layer]


def _zero_head(model, layer, head, shift=None):
    """A copy of ``model`` whose head (layer, head) writes nothing (or writes ``shift``, a
    [d_head] vector, at every position): the reference of an ablation."""
    m = copy.deepcopy(model)
    proj = _proj(m, layer)
    d = hooks.sites(m).head_dim
    conv1d = type(proj).__name__ == "Conv1D"
    with torch.no_grad():
        w = proj.weight.T if conv1d else proj.weight  # [out, in]
        cols = slice(head * d, (head + 1) * d)
        if shift is not None:
            proj.bias += w[:, cols] @ shift
        w[:, cols] = 0
    return m


def _mean_metric(model, texts, metric):
    b = hooks.batch(model, texts)
    out = hooks.forward(model, b)
    return float(hooks.per_copy(metric(out, hooks.context(model, b, out)), 1)[0])


# ------------------------------------------------------------------ metrics
def test_loss_of_uniform_logits_is_log_vocabulary():
    logits = torch.zeros(2, 5, 7)
    ids = torch.tensor([[0, 1, 2, 3, 4], [4, 3, 2, 0, 0]])
    ctx = Context(ids, torch.tensor([[1] * 5, [1, 1, 1, 0, 0]]), [5, 3], logits, True)
    vals = ak.interventions.loss()(logits, ctx)
    assert_close(vals.numpy(), [math.log(7)] * 2, F32)


def test_loss_reads_the_predicted_tokens_positions():
    # causal: the logits at p - 1 predict the token at p
    logits = torch.full((1, 3, 4), -10.0)
    logits[0, 0, 2] = 10.0  # position 0 predicts token 2 for position 1 (right)
    logits[0, 1, 0] = 10.0  # position 1 predicts token 0 for position 2 (wrong: it is 3)
    ctx = Context(torch.tensor([[1, 2, 3]]), torch.ones(1, 3), [3], logits, True)
    right = float(ak.interventions.loss(positions=[1])(logits, ctx)[0])
    wrong = float(ak.interventions.loss(positions=[2])(logits, ctx)[0])
    assert right < 1e-6 and wrong == pytest.approx(20.0, rel=1e-4)
    with pytest.raises(InputError, match="position 0"):
        ak.interventions.loss(positions=[0])(logits, ctx)


def test_logprob_logit_diff_kl_class_logit_known_values():
    model = tiny_model("gpt2")
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25] + [0.0] * 34]]).clamp(min=1e-30))
    ctx = Context(torch.tensor([[1]]), torch.ones(1, 1), [1], logits, True)
    lp = ak.interventions.logprob(token=1, model=model)(logits, ctx)
    assert float(lp[0]) == pytest.approx(math.log(0.25), rel=1e-5)
    ld = ak.interventions.logit_diff(good=0, bad=1, model=model)(logits, ctx)
    assert float(ld[0]) == pytest.approx(math.log(2.0), rel=1e-5)
    # KL of a distribution to itself is 0; to uniform over 2 of 2 classes known
    cls = torch.tensor([[0.0, math.log(3.0)]])  # p = (1/4, 3/4)
    cctx = Context(torch.tensor([[1]]), torch.ones(1, 1), [1], cls, False)
    assert float(ak.interventions.kl()(cls, cctx)[0]) == pytest.approx(0.0, abs=1e-7)
    uniform = torch.zeros(1, 2)
    expected = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert float(ak.interventions.kl()(uniform, cctx)[0]) == pytest.approx(expected, rel=1e-5)
    assert float(ak.interventions.class_logit()(cls, cctx)[0]) == pytest.approx(math.log(3.0))
    assert float(ak.interventions.class_logit(label=0)(cls, cctx)[0]) == 0.0


def test_class_margin_is_the_reference_decisions_lead():
    ref = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 5.0]])
    ctx = Context(torch.zeros(3, 1), torch.ones(3, 1), [1, 1, 1], ref, False)
    out = torch.tensor([[0.0, 1.0, 1.5], [2.0, 0.5, -1.0], [4.0, -2.0, 1.0]])
    # decisions 1, 0, 2: 1.0 - 1.5, 2.0 - 0.5, 1.0 - 4.0
    assert_close(ak.interventions.class_margin()(out, ctx).numpy(), [-0.5, 1.5, -3.0], F32)
    with pytest.raises(InputError, match="at least two classes"):
        ak.interventions.class_margin()(torch.zeros(3, 1), ctx)


def test_class_margin_through_ablate_on_a_classifier():
    model = tiny_model("bert-cls")
    texts = ["The cat sat.", "We read a book today."]
    r = ak.ablate(model, texts, metric=ak.interventions.class_margin(), progress=False)
    b = hooks.batch(model, texts)
    with torch.no_grad():
        top2 = model.hf(**b.kwargs).logits.double().topk(2, dim=-1).values
    expected = float((top2[:, 0] - top2[:, 1]).mean())
    assert_close(r.meta["baseline"], expected, F32_DEEP)
    assert r.meta["baseline"] > 0
    assert r.table.shape == (model.n_layers * model.n_heads, 2)


def test_pair_similarity_pairs_inputs_two_by_two_and_ignores_padding():
    # pair 0: pooled (1, 0) and (1, 1) -> cos 1/sqrt(2); pair 1: (0, 2) and (0, -3) -> -1
    h = torch.tensor([[[1.0, 0.0], [1.0, 0.0]],
                      [[1.0, 1.0], [9.0, -9.0]],      # second position is padding
                      [[0.0, 1.0], [0.0, 3.0]],
                      [[0.0, -3.0], [5.0, 5.0]]])     # padding again
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 0]])
    ctx = Context(torch.zeros(4, 2), mask, [2, 1, 2, 1], h, False)
    got = ak.interventions.pair_similarity()(h, ctx).numpy()
    assert_close(got, [2 ** -0.5] * 2 + [-1.0] * 2, F32)
    # two copies of the same two inputs (copy-major rows): each copy pairs its own rows
    h2 = torch.cat([h[:2], h[:2]])
    ctx2 = Context(torch.zeros(4, 2), mask[:2].repeat(2, 1), [2, 1, 2, 1], h2, False, items=2)
    assert_close(ak.interventions.pair_similarity()(h2, ctx2).numpy(), [2 ** -0.5] * 4, F32)
    odd = Context(torch.zeros(3, 2), mask[:3], [2, 1, 2], h[:3], False)
    with pytest.raises(InputError, match="even number of inputs"):
        ak.interventions.pair_similarity()(h[:3], odd)


def test_pair_similarity_through_ablate_matches_separate_encodings():
    model = tiny_model("bert")
    texts = ["The cat sat.", "A cat sat down.", "We read.", "They read a book."]
    r = ak.ablate(model, texts, metric=ak.interventions.pair_similarity(), progress=False)
    pooled = []
    for t in texts:
        b = hooks.batch(model, [t])
        with torch.no_grad():
            pooled.append(model.base(**b.kwargs).last_hidden_state[0].double().mean(0))
    cos = [float(torch.nn.functional.cosine_similarity(pooled[i], pooled[i + 1], dim=0))
           for i in (0, 2)]
    assert_close(r.meta["baseline"], np.mean(cos), F32_DEEP)


def test_metric_errors_name_the_input():
    model = tiny_model("gpt2")
    with pytest.raises(InputError, match="token"):
        ak.interventions.logprob(token="no-such-token", model=model)
    with pytest.raises(InputError, match="99999"):
        ak.interventions.logprob(token=99999, model=model)
    with pytest.raises(InputError, match="one number per input"):
        ak.ablate(model, TEXTS, metric=lambda logits: logits[-1], progress=False)
    with pytest.raises(InputError, match="metric must be one of"):
        ak.ablate(model, TEXTS, metric="accuracy", progress=False)
    with pytest.raises(InputError, match="class logits"):
        ak.ablate(model, TEXTS, metric="class_logit", progress=False)
    with pytest.raises(InputError, match="hidden states"):  # no distribution to compare
        ak.ablate(tiny_model("bert"), TEXTS, metric="kl", progress=False)
    with pytest.raises(InputError, match="positions"):
        ak.ablate(model, TEXTS, metric=ak.interventions.loss(positions=[40]), progress=False)
    with pytest.raises(InputError, match="position 40"):
        ak.ablate(model, TEXTS, metric=ak.interventions.logprob(token=5, position=40), progress=False)
    with pytest.raises(InputError, match="token: 2 tokens given for 3 inputs"):
        ak.ablate(model, TEXTS + ["Hi."], metric=ak.interventions.logprob(token=[5, 6]),
                  progress=False)


# ------------------------------------------------------------------ ablation
@pytest.mark.parametrize("kind,kw", [("llama", {"heads": 4, "kv_heads": 2}), ("gpt2", {}),
                                     ("bert-mlm", {}), ("bert-cls", {}), ("gpt_neox", {}),
                                     ("distilbert", {}), ("gemma2", {"heads": 4, "kv_heads": 2}),
                                     ("gpt_oss", {"heads": 4, "kv_heads": 2}), ("qwen2", {})])
def test_zero_ablation_of_each_head_is_that_head_removed(kind, kw):
    model = tiny_model(kind, **kw)
    # a bare encoder (distilbert here) is measured by its embedding's projection
    metric = ak.interventions.projection() if kind == "distilbert" else "auto"
    r = ak.ablate(model, TEXTS, metric=metric, progress=False, batch_size=5)
    m = ak.interventions.metrics.resolve(metric, model)
    assert r.meta["baseline"] == pytest.approx(_mean_metric(model, TEXTS, m), rel=RTOL)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            ref = _zero_head(model, layer, head)
            expected = _metric_against(model, ref, TEXTS, m)
            assert r.table.loc[(layer, head), "metric"] == pytest.approx(expected, rel=RTOL), (layer, head)
    # every head matters to a random model: the effects are not all equal
    assert r.table["effect"].abs().max() > 0


def _metric_against(model, ref, texts, metric):
    """``metric`` of the model ``ref`` on ``texts``, compared with ``model``'s clean run."""
    b = hooks.batch(model, texts)
    clean = hooks.forward(model, b)
    out = hooks.forward(ref, b)
    return float(hooks.per_copy(metric(out, hooks.context(model, b, clean)), 1)[0])


def test_gqa_ablation_leaves_the_shared_key_value_head_and_its_other_query_head():
    model = tiny_model("llama", heads=4, kv_heads=2)
    b = hooks.batch(model, TEXTS)
    clean, ablated = {}, {}
    hooks.forward(model, b, capture=clean)
    masks = {("z", 0): torch.zeros(1, b.width, 4, dtype=torch.bool)}
    masks[("z", 0)][0, :, 0] = True  # head 0 shares key/value head 0 with head 1
    zero = torch.zeros(1, 1, 4, hooks.sites(model).head_dim)
    calls = []
    out = hooks.forward(model, b, edits=hooks.Edits(1, masks, {("z", 0): zero}), capture=ablated,
                        recorders=[calls.append])
    z0, z0c = ablated[("z", 0)], clean[("z", 0)]
    assert bool((z0[:, :, 0] == 0).all())
    # the other query head of the group (1) and the other group (2, 3) are the clean run's
    torch.testing.assert_close(z0[:, :, 1:], z0c[:, :, 1:])
    # the keys and values of layer 0 are untouched: both groups still have their own
    assert calls[0].key.shape[1] == 2
    # the next layer sees the change
    assert not torch.allclose(ablated[("z", 1)], clean[("z", 1)])
    assert out.shape[0] == len(TEXTS)


def test_mean_ablation_is_the_mean_written_through_the_bias():
    model = tiny_model("llama", heads=4, kv_heads=2)
    reference = ["A dog ran off far away.", "I saw it too."]
    r = ak.ablate(model, TEXTS, heads=[[(1, 2)]], how="mean", reference=reference, progress=False)
    b = hooks.batch(model, reference)
    seen = {}
    hooks.forward(model, b, capture=seen)
    z = seen[("z", 1)][:, :, 2]  # [B, T, d]
    mask = b.kwargs["attention_mask"].float()[..., None]
    mean = (z * mask).sum((0, 1)) / mask.sum()
    ref = _zero_head(model, 1, 2, shift=mean) if _proj(model, 1).bias is not None else None
    if ref is None:  # Llama's o_proj has no bias: give the copy one
        ref = copy.deepcopy(model)
        proj = _proj(ref, 1)
        d = hooks.sites(ref).head_dim
        with torch.no_grad():
            bias = proj.weight[:, 2 * d:3 * d] @ mean
            proj.weight[:, 2 * d:3 * d] = 0
        proj.bias = torch.nn.Parameter(bias)
    m = ak.interventions.loss()
    expected = _metric_against(model, ref, TEXTS, m)
    assert r.table.loc[0, "metric"] == pytest.approx(expected, rel=RTOL)


def test_resample_ablation_takes_the_other_inputs_head_output():
    model = tiny_model("gpt2")
    a, other = ["The cat sat on it."], ["We read it all now."]
    assert len(model.encode(a[0])) == len(model.encode(other[0]))
    # resampling every head of every layer from `other` runs `other`'s heads on `a`'s tokens:
    # with all heads resampled, each layer's attention output is other's (its residual, a's)
    every = [(l, h) for l in range(model.n_layers) for h in range(model.n_heads)]
    r = ak.ablate(model, a, heads=[every], how="resample", reference=other, progress=False)
    b, bo = hooks.batch(model, a), hooks.batch(model, other)
    seen = {}
    hooks.forward(model, bo, capture=seen)
    srcs = {("z", l): seen[("z", l)] for l in range(model.n_layers)}
    masks = {k: torch.ones(1, b.width, model.n_heads, dtype=torch.bool) for k in srcs}
    m = ak.interventions.loss()
    clean = hooks.forward(model, b)
    out = hooks.forward(model, b, edits=hooks.Edits(1, masks, srcs))
    expected = float(hooks.per_copy(m(out, hooks.context(model, b, clean)), 1)[0])
    assert r.table.loc[0, "metric"] == pytest.approx(expected, rel=RTOL)
    # and a resample of a head by its own input changes nothing
    same = ak.ablate(model, a, heads=[(0, 0)], how="resample", reference=a, progress=False)
    assert same.table.loc[0, "effect"] == pytest.approx(0.0, abs=1e-5 * abs(same.meta["baseline"]))


def test_ablate_bad_input():
    model = tiny_model("gpt2")
    with pytest.raises(InputError, match="head"):
        ak.ablate(model, TEXTS, heads=[(2, 0)], progress=False)
    with pytest.raises(InputError, match="how"):
        ak.ablate(model, TEXTS, how="noise", progress=False)
    with pytest.raises(InputError, match="inputs is empty"):
        ak.ablate(model, [], progress=False)
    with pytest.raises(InputError, match="reference"):
        ak.ablate(model, ["The cat sat on the mat today."], heads=[(0, 0)], how="resample",
                  reference=["Hi."], progress=False)
    with pytest.raises(InputError, match="two inputs"):
        ak.ablate(model, ["The cat."], how="resample", progress=False)
    # an encoder-decoder's heads are in three stacks: say which (tests/test_interventions_seq2seq.py)
    with pytest.raises(InputError, match="stack"):
        ak.ablate(tiny_seq2seq("t5"), [("The cat.", "A cat.")], progress=False)
    # a family whose output projections attnkit does not locate (OPT: read through its maps only)
    import transformers as tf

    from attnkit.runtime.model import Model

    cfg = tf.OPTConfig(vocab_size=len(model.tokenizer), hidden_size=16, word_embed_proj_dim=16,
                       num_hidden_layers=1, num_attention_heads=2, ffn_dim=32,
                       max_position_embeddings=64)
    opt = Model(tf.OPTForCausalLM(cfg), model.tokenizer, name="tiny-opt")
    with pytest.raises(UnsupportedModelError, match="model: interventions cannot act on 'tiny-opt'"):
        ak.ablate(opt, TEXTS, progress=False)


# ------------------------------------------------------------------ activation patching
def _pair(model, n=8, at=2, seed=0):
    """Token-id inputs that differ only at position ``at``."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 30, size=n)
    other = ids.copy()
    other[at] = (ids[at] + 1 - 5) % 25 + 5
    return [ids], [other]


def test_patching_the_residual_at_the_changed_position_restores_everything():
    model = tiny_model("llama", heads=4, kv_heads=2)
    clean, corrupted = _pair(model, at=3)
    r = ak.patch(model, clean, corrupted, metric=ak.interventions.kl(), grain="residual×position",
                 progress=False)
    restored = r.table["restored"]
    # layer 0's stream is the embeddings: only position 3 differs, and patching it is the clean run
    assert restored.loc[(0, 3)] == pytest.approx(1.0, rel=RTOL)
    others = restored.loc[0].drop(3)
    assert_close(others.to_numpy(), 0.0, F32, scale=1)
    # before position 3 nothing differs in a causal model, at any layer
    assert_close(restored.loc[(1, slice(0, 2))].to_numpy(), 0.0, F32, scale=1)
    assert r.meta["clean"] == 0.0 and r.meta["corrupted"] > 0


def test_one_layer_patching_known_answers():
    # one layer: the last position's prediction reads the changed token only through
    # attention, so patching the whole layer's heads restores all of the gap, and a head's
    # output at an earlier position (which only that position's prediction reads) nothing
    model = tiny_model("gpt2", layers=1, heads=2)
    clean, corrupted = _pair(model, n=6, at=2)
    metric = ak.interventions.logprob(token=7)
    layer = ak.patch(model, clean, corrupted, metric=metric, grain="layer", progress=False)
    assert layer.table.loc[0, "restored"] == pytest.approx(1.0, rel=RTOL)
    hp = ak.patch(model, clean, corrupted, metric=metric, grain="head×position", progress=False,
                  batch_size=4)
    assert hp.table.index.names == ["layer", "head", "position"]
    early = hp.table.loc[(0, slice(None), slice(0, 4)), "restored"]
    assert_close(early.to_numpy(), 0.0, F32, scale=1)
    head = ak.patch(model, clean, corrupted, metric=metric, grain="head", progress=False)
    assert isinstance(head, ak.HeadResult)
    # each head at every position is the same as that head at the last position only
    last = hp.table.loc[(0, slice(None), 5), "restored"].to_numpy()
    assert_close(head.table["restored"].to_numpy(), last, F32_DEEP)


def test_a_head_that_writes_nothing_restores_nothing():
    model = _zero_head(tiny_model("llama", heads=4, kv_heads=2), 0, 1)
    clean, corrupted = _pair(model, at=2)
    r = ak.patch(model, clean, corrupted, metric=ak.interventions.kl(), progress=False)
    assert r.table.loc[(0, 1), "restored"] == pytest.approx(0.0, abs=1e-5)
    assert r.table["restored"].abs().max() > 1e-3


def test_patch_bad_input():
    model = tiny_model("gpt2")
    with pytest.raises(InputError, match="same length"):
        ak.patch(model, ["The cat sat on the mat."], ["The cat."], progress=False)
    with pytest.raises(InputError, match="one corrupted input per clean"):
        ak.patch(model, TEXTS, TEXTS[:1], progress=False)
    with pytest.raises(InputError, match="no gap"):
        ak.patch(model, TEXTS, TEXTS, progress=False)
    with pytest.raises(InputError, match="grain"):
        ak.patch(model, ["The cat sat."], ["A cat sat."], grain="neuron", progress=False)


# ------------------------------------------------------------------ attention knockout
@pytest.mark.parametrize("kind,kw,texts", [("llama", {"heads": 4, "kv_heads": 2}, TEXTS),
                                           ("bert", {}, TEXTS), ("gpt2", {}, TEXTS[:1])])
def test_knocked_out_edge_renormalises_the_rest_of_its_row(kind, kw, texts):
    """Layer 0 sees the same input with and without the knockout, so its knocked-out head
    output is the clean one with key k's share removed: z' = (z − p_k v_k) / (1 − p_k)."""
    from attnkit.interventions.knockout import Blocker, edge_masks

    model = tiny_model(kind, **kw)
    b = hooks.batch(model, texts)
    head, q, k = 1, 3, 1
    calls, clean = [], {}
    hooks.forward(model, b, capture=clean, recorders=[calls.append])
    masks, n = edge_masks(model, b, [(0, head, q, k)])
    assert n == b.size
    knocked = {}
    hooks.forward(model, b, capture=knocked, recorders=[Blocker(masks)])
    p = calls[0].probabilities()[:, head, q, k]  # [B]
    v = calls[0].repeated(calls[0].value)[:, head, k].float()  # [B, d]
    z = clean[("z", 0)][:, q, head].float()
    expected = (z - p[:, None] * v) / (1 - p[:, None])
    # float32 forwards through different kernels (with and without a mask): relative 1e-4
    torch.testing.assert_close(knocked[("z", 0)][:, q, head].float(), expected, rtol=1e-4, atol=1e-5)
    # every other head and row of layer 0 is untouched
    other = torch.ones_like(knocked[("z", 0)][..., 0], dtype=torch.bool)
    other[:, q, head] = False
    torch.testing.assert_close(knocked[("z", 0)][other], clean[("z", 0)][other], rtol=1e-4, atol=1e-6)


def test_edges_as_list_mask_and_rule_agree():
    model = tiny_model("llama", heads=4, kv_heads=2)
    [ids] = ak.induction_inputs(model, 1, 6, seed=1)
    n = len(ids)
    rule = ak.knockout(model, [ids], "key = query - 5", heads=[(1, 0), (1, 2)],
                       queries=slice(7, None), progress=False)
    listed = [(1, h, q, q - 5) for h in (0, 2) for q in range(7, n)]
    as_list = ak.knockout(model, [ids], listed, progress=False)
    mask = np.zeros((2, 4, n, n), dtype=bool)
    for l, h, q, k in listed:
        mask[l, h, q, k] = True
    as_mask = ak.knockout(model, [ids], mask, progress=False)
    assert rule.meta["n_edges"] == as_list.meta["n_edges"] == as_mask.meta["n_edges"] == len(listed)
    assert rule.meta["knocked_out"] == as_list.meta["knocked_out"] == as_mask.meta["knocked_out"]
    assert rule.meta["change"] != 0


def test_knockout_bad_input():
    model = tiny_model("gpt2")
    with pytest.raises(InputError, match="no key"):  # causal row 0 has only key 0
        ak.knockout(model, TEXTS, [(0, 0, 0, 0)], progress=False)
    with pytest.raises(InputError, match="later key"):
        ak.knockout(model, TEXTS, [(0, 0, 1, 2)], progress=False)
    with pytest.raises(InputError, match="query"):
        ak.knockout(model, TEXTS, [(0, 0, 50, 0)], progress=False)
    with pytest.raises(InputError, match="head"):
        ak.knockout(model, TEXTS, [(0, 5, 2, 0)], progress=False)
    with pytest.raises(InputError, match="rule"):
        ak.knockout(model, TEXTS, "key = 3", progress=False)
    with pytest.raises(InputError, match=r"\[2, 2, n, n\]"):
        ak.knockout(model, TEXTS, np.zeros((2, 3, 4, 4), dtype=bool), progress=False)
    with pytest.raises(InputError, match="inputs of 5 tokens"):
        ak.knockout(model, TEXTS, np.ones((2, 2, 5, 5), dtype=bool), progress=False)
    from attnkit.runtime.model import Model

    tiny = tiny_model("gpt2")
    eager = Model(tiny.hf, tiny.tokenizer, capture="eager")
    with pytest.raises(UnsupportedModelError, match="attention function"):
        ak.knockout(eager, TEXTS, [(0, 0, 2, 0)], progress=False)


# ------------------------------------------------------------------ attribution patching
@pytest.mark.parametrize("grain", ["head", "head×position", "layer", "residual×position"])
def test_attribution_patching_is_the_directional_derivative(grain):
    """AtP(a) = Δa · ∂M/∂a is the derivative of M along the patch direction at the corrupted
    run: checked against a central difference of patching a′ + ε Δa, in float64."""
    from attnkit.interventions.patch import component_masks, components

    # GPT-2 computes everything in float64 once its weights are (Llama's RMSNorm goes through
    # float32, whose rounding a central difference amplifies)
    model = tiny_model("gpt2")
    model.hf.double()
    clean, corrupted = _pair(model, at=2)
    metric = ak.interventions.kl()
    r = ak.attribution_patching(model, clean, corrupted, metric=metric, grain=grain, progress=False)
    bc, bx = hooks.batch(model, clean), hooks.batch(model, corrupted)
    src, cor = {}, {}
    ref = hooks.forward(model, bc, capture=src)
    hooks.forward(model, bx, capture=cor)
    comps = components(grain, model.n_layers, model.n_heads, bx.width)
    pick = comps[:: max(1, len(comps) // 6)]
    eps = 1e-4
    masks = component_masks(grain, pick, model.n_heads, bx.width, "cpu")
    deriv = []
    for sign in (1, -1):
        sources = {k: cor[k] + sign * eps * (src[k] - cor[k]) for k in masks}
        out = hooks.forward(model, bx, copies=len(pick), edits=hooks.Edits(len(pick), masks, sources))
        deriv.append(hooks.per_copy(metric(out, hooks.context(model, bc, ref, len(pick))), len(pick)))
    expected = (deriv[0] - deriv[1]) / (2 * eps)
    got = np.array([r.table.loc[c if len(c) > 1 else c[0], "estimate"] for c in pick])
    # float64 central difference: truncation error O(eps²) = 1e-8 relative to the values
    assert_close(got, expected, FD)
    assert np.abs(expected).max() > 0


def test_attribution_agreement_reports_rank_correlation():
    model = tiny_model("llama", heads=4, kv_heads=2)
    clean, corrupted = _pair(model, at=2)
    r = ak.interventions.attribution_agreement(model, clean, corrupted, metric=ak.interventions.kl(),
                                               progress=False)
    exact = ak.patch(model, clean, corrupted, metric=ak.interventions.kl(), progress=False)
    np.testing.assert_array_equal(r.table["patching"].to_numpy(), exact.table["restored"].to_numpy())
    from scipy.stats import spearmanr

    assert r.meta["spearman"] == pytest.approx(
        spearmanr(r.table["patching"], r.table["attribution"]).statistic)


# ------------------------------------------------------------------ path patching
@pytest.mark.parametrize("via", ["q", "k", "v"])
def test_path_patching_matches_a_hand_computed_receiver(via):
    """GPT-2, sender 1-1 -> receiver 2-2: the receiver's head output computed by hand from the
    corrupted stream entering layer 2 plus W_O^s Δz_s, through ln_1 and c_attn's weights."""
    from attnkit.interventions.patch import clean_and_corrupted
    from attnkit.interventions.path import receivers_by_layer, routing, sender_delta

    model = tiny_model("gpt2")
    clean, corrupted = _pair(model, at=2)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.kl())
    runs["corrupted_z"] = {}
    hooks.forward(model, runs["corrupted"], capture=runs["corrupted_z"])
    sender, receiver = (0, 0), 1
    delta = sender_delta(model, sender, runs)
    got = {}
    with routing(model, receivers_by_layer(model, sender, [(1, receiver)], via), via, delta):
        hooks.forward(model, runs["corrupted"], capture=got)
    # by hand
    block0, block1 = model.hf.transformer.h[0], model.hf.transformer.h[1]
    d, D = 8, 16
    with torch.no_grad():
        ids = torch.as_tensor(np.stack(corrupted))
        x = model.hf(input_ids=ids, output_hidden_states=True).hidden_states[1]  # entering layer 2
        dz = runs["sources"][("z", 0)][:, :, 0] - runs["corrupted_z"][("z", 0)][:, :, 0]
        w_o = block0.attn.c_proj.weight[:d]  # Conv1D: [in, out], the sender's rows
        ln = block1.ln_1

        def qkv(stream, which):
            h = torch.nn.functional.layer_norm(stream, (D,), ln.weight, ln.bias, ln.eps)
            out = h @ block1.attn.c_attn.weight + block1.attn.c_attn.bias
            i = "qkv".index(which)
            return out[..., i * D + receiver * d: i * D + (receiver + 1) * d]

        parts = {w: qkv(x + (dz @ w_o if w == via else 0), w) for w in "qkv"}
        n = x.shape[1]
        scores = parts["q"] @ parts["k"].transpose(-1, -2) / math.sqrt(d)
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        z = torch.softmax(scores, -1) @ parts["v"]
    # float32, different summation orders: relative 1e-4
    torch.testing.assert_close(got[("z", 1)][:, :, receiver], z, rtol=1e-4, atol=1e-5)
    # the other head of layer 2 stays at the corrupted run
    torch.testing.assert_close(got[("z", 1)][:, :, 1 - receiver],
                               runs["corrupted_z"][("z", 1)][:, :, 1 - receiver])
    # and the sender's own layer too
    torch.testing.assert_close(got[("z", 0)], runs["corrupted_z"][("z", 0)])


def test_path_patch_result_and_bad_input():
    model = tiny_model("llama", heads=4, kv_heads=2, layers=3)
    clean, corrupted = _pair(model, at=2)
    r = ak.path_patch(model, clean, corrupted, sender=(0, 1), receivers=[(2, 0), (2, 1)], via="v",
                      metric=ak.interventions.kl(), progress=False)
    assert r.table.loc[0, "receivers"] == ((2, 0), (2, 1)) and r.meta["corrupted"] > 0
    assert np.isfinite(r.table.loc[0, "restored"])
    with pytest.raises(InputError, match="share key/value head"):
        ak.path_patch(model, clean, corrupted, sender=(0, 1), receivers=[(2, 0)], via="k",
                      progress=False)
    with pytest.raises(InputError, match="later layer"):
        ak.path_patch(model, clean, corrupted, sender=(1, 1), receivers=[(1, 0)], progress=False)
    with pytest.raises(InputError, match="via"):
        ak.path_patch(model, clean, corrupted, sender=(0, 1), receivers=[(1, 0)], via="o",
                      progress=False)
    with pytest.raises(InputError, match="sender"):
        ak.path_patch(model, clean, corrupted, sender=3, receivers=[(1, 0)], progress=False)
    with pytest.raises(UnsupportedModelError, match="pre-norm"):
        bert = tiny_model("bert-mlm")
        ak.path_patch(bert, ["The cat sat."], ["The dog sat."], sender=(0, 0), receivers=[(1, 0)],
                      progress=False)


# ------------------------------------------------------------------ vision transformers
def _images(n=2):
    return [np.random.default_rng(i).integers(0, 255, (32, 32, 3)).astype(np.uint8) for i in range(n)]


@pytest.mark.parametrize("kind,labels", [("vit", 3), ("clip", None)])
def test_vision_zero_ablation_is_that_head_removed(kind, labels):
    from attnkit.testing import tiny_vision

    model = tiny_vision(kind, num_labels=labels) if labels else tiny_vision(kind)
    images = _images()
    r = ak.ablate(model, images, progress=False)
    assert r.meta["metric"] == ("class_logit" if labels else "projection")
    m = ak.interventions.metrics.resolve("auto", model)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            expected = _metric_against(model, _zero_head(model, layer, head), images, m)
            assert r.table.loc[(layer, head), "metric"] == pytest.approx(expected, rel=RTOL)


def test_vision_knockout_renormalises_the_row():
    from attnkit.interventions.knockout import Blocker, edge_masks
    from attnkit.testing import tiny_vision

    model = tiny_vision("vit", num_labels=3)
    b = hooks.batch(model, _images())
    calls, clean, knocked = [], {}, {}
    hooks.forward(model, b, capture=clean, recorders=[calls.append])
    masks, _ = edge_masks(model, b, [(0, 1, 0, 5)])  # [CLS] no longer reads patch 5 in head 1
    hooks.forward(model, b, capture=knocked, recorders=[Blocker(masks)])
    p = calls[0].probabilities()[:, 1, 0, 5]
    v = calls[0].repeated(calls[0].value)[:, 1, 5].float()
    expected = (clean[("z", 0)][:, 0, 1] - p[:, None] * v) / (1 - p[:, None])
    torch.testing.assert_close(knocked[("z", 0)][:, 0, 1], expected, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ figures
@pytest.mark.parametrize("grain", ["head", "head×position", "layer", "residual×position"])
def test_patching_figure_draws_the_table(grain):
    model = tiny_model("gpt2")
    r = ak.patch(model, ["The cat sat."], ["A cat sat."], grain=grain, progress=False)
    fig = r.plot()
    drawn = np.asarray(fig.axes[0].images[0].get_array(), dtype=float)
    values = r.table["restored"]
    if grain in ("head×position", "residual×position"):
        expected = values.unstack("position").to_numpy()
    elif grain == "head":
        expected = values.to_numpy().reshape(model.n_layers, model.n_heads)
    else:
        expected = values.to_numpy()[:, None]
    np.testing.assert_array_equal(drawn, expected)  # the same numbers, drawn as they are
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    if grain == "head×position":
        assert labels == ["1-1", "1-2", "2-1", "2-2"]  # displayed 1-indexed
    with pytest.raises(InputError, match="restored"):
        ak.plot.plot_patching(r, value="nothing")


def test_path_patching_on_gemma2_recomputes_the_senders_output_norm():
    """Gemma 2 adds N(o) to the stream (o the output projection's output, N an RMSNorm with
    scale 1 + w): the sender's difference reaches layer 2 as N(o′ + W_O^s Δz_s) − N(o′).
    The receiver's queries, computed by hand in float64 from the corrupted stream entering
    layer 2, are input_layernorm(x′ + N(o_mix) − N(o′)) through q_proj; the other head's
    queries stay at the corrupted run."""
    from attnkit.interventions.patch import clean_and_corrupted
    from attnkit.interventions.path import receivers_by_layer, routing, sender_delta

    model = tiny_model("gemma2")
    clean, corrupted = _pair(model, at=2)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.kl())
    runs["corrupted_z"] = {}
    hooks.forward(model, runs["corrupted"], capture=runs["corrupted_z"])
    sender, receiver = (0, 1), 0
    delta = sender_delta(model, sender, runs)
    layer0, layer1 = model.hf.model.layers[0], model.hf.model.layers[1]
    seen = {}
    with routing(model, receivers_by_layer(model, sender, [(1, receiver)], "q"), "q", delta):
        # registered after routing's own hook: sees the rerouted queries
        handle = layer1.self_attn.q_proj.register_forward_hook(
            lambda module, args, out: seen.setdefault("q", out.detach()))
        try:
            hooks.forward(model, runs["corrupted"])
        finally:
            handle.remove()

    def rms(x, norm):  # Gemma 2's RMSNorm, float64
        w = norm.weight.double()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * (1 + w)

    with torch.no_grad():
        ids = torch.as_tensor(np.stack(corrupted))
        x = model.hf(input_ids=ids, output_hidden_states=True).hidden_states[1].double()
        z = runs["corrupted_z"][("z", 0)].double()  # [B, T, H, d]
        mixed = z.clone()
        mixed[:, :, sender[1]] = runs["sources"][("z", 0)][:, :, sender[1]].double()
        w_o = layer0.self_attn.o_proj.weight.double()
        o_corr = z.reshape(*z.shape[:2], -1) @ w_o.T
        o_mix = mixed.reshape(*z.shape[:2], -1) @ w_o.T
        norm = layer0.post_attention_layernorm
        w_q = layer1.self_attn.q_proj.weight.double()
        routed = rms(x + rms(o_mix, norm) - rms(o_corr, norm), layer1.input_layernorm) @ w_q.T
        plain = rms(x, layer1.input_layernorm) @ w_q.T
    d = hooks.sites(model).head_dim
    mine = slice(receiver * d, (receiver + 1) * d)
    assert float((routed[..., mine] - plain[..., mine]).abs().max()) > 1e-3  # the path carries
    assert_close(seen["q"][..., mine].double().numpy(), routed[..., mine].numpy(), F32_DEEP)
    rest = torch.ones(seen["q"].shape[-1], dtype=torch.bool)
    rest[mine] = False
    assert_close(seen["q"][..., rest].double().numpy(), plain[..., rest].numpy(), F32_DEEP)
    r = ak.path_patch(model, clean, corrupted, sender=sender, receivers=[(1, receiver)], via="q",
                      metric=ak.interventions.kl(), progress=False)
    assert np.isfinite(r.table.loc[0, "restored"]) and r.table.loc[0, "restored"] != 0
