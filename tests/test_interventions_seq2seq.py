"""Interventions on encoder–decoders (issue 29, item 7): the encoder's self-attention heads, the
decoder's self-attention heads and the cross-attention heads, one stack at a time (``stack=``).

Known answers come from reference computations written here: an ablated head is a copy of the
model with that head's columns of its output projection's weight zeroed (with its mean moved
into the bias for mean ablation); a knocked-out cross edge is the clean head output with that
key's share removed, ``z′ = (z − p_k v_k) / (1 − p_k)``; patching components that carry all
(or none) of a difference restores exactly 1 (or 0).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError, UnsupportedModelError
from attnkit.interventions import hooks
from attnkit.testing import tiny_model, tiny_seq2seq
from tolerances import F32, F32_DEEP, assert_close

pytestmark = pytest.mark.numerics

STACKS = ("encoder", "decoder", "cross")
#: Pairs of different lengths on both sides (padding in both the encoder and the decoder).
PAIRS = [("The cat sat on the mat.", "A cat sat."), ("We read it.", "We read a book now.")]


@pytest.fixture(scope="module")
def models():
    return {kind: tiny_seq2seq(kind) for kind in ("t5", "bart", "marian")}


def _zero_head(model, stack, layer, head, shift=None):
    """A copy of ``model`` whose head (layer, head) of ``stack`` writes nothing (or writes
    ``W_O^h shift`` through the bias): the reference of an ablation."""
    m = copy.deepcopy(model)
    site = hooks.sites(m, stack)
    proj, d = site.out_proj[layer], site.head_dim
    cols = slice(head * d, (head + 1) * d)
    with torch.no_grad():
        if shift is not None:
            proj.bias += proj.weight[:, cols] @ shift
        proj.weight[:, cols] = 0
    return m


def _loss(model, pairs):
    """The mean teacher-forced loss over the target tokens, computed from transformers'
    own forward one pair at a time (no padding, no attnkit hooks)."""
    values = []
    for source, target in pairs:
        src, tgt = model.encode(source), model.encode_target(target)
        with torch.no_grad():
            logits = model.hf(**model.pair_inputs(src, tgt)).logits[0].double()
        ids = torch.tensor(tgt.input_ids)
        logp = torch.log_softmax(logits[:-1], -1).gather(-1, ids[1:, None])[:, 0]
        values.append(float(-logp.mean()))
    return float(np.mean(values))


# ------------------------------------------------------------------ ablation
@pytest.mark.parametrize("kind", ["t5", "bart", "marian"])
@pytest.mark.parametrize("stack", STACKS)
def test_ablating_one_head_equals_zeroing_its_output_projection_columns(models, kind, stack):
    model = models[kind]
    layer, head = 1, 1
    r = ak.ablate(model, PAIRS, stack=stack, heads=[(layer, head)], progress=False)
    assert r.meta["stack"] == stack and r.meta["metric"] == "loss"
    # the baseline is transformers' own teacher-forced loss of the targets, pair by pair
    assert_close(r.meta["baseline"], _loss(model, PAIRS), F32_DEEP)
    expected = _loss(_zero_head(model, stack, layer, head), PAIRS)
    assert_close(r.table.loc[0, "metric"], expected, F32_DEEP)
    assert abs(r.table.loc[0, "effect"]) > 1e-4  # the head does something


def test_each_head_of_each_stack_is_its_own_zeroed_copy(models):
    model = models["bart"]
    effects = []
    for stack in STACKS:
        r = ak.ablate(model, PAIRS, stack=stack, progress=False, batch_size=4)
        assert isinstance(r, ak.HeadResult) and r.table.shape == (4, 2)
        got = r.table["metric"].to_numpy()
        want = [_loss(_zero_head(model, stack, l, h), PAIRS) for l in range(2) for h in range(2)]
        assert_close(got, want, F32_DEEP)
        effects.append(r.table["effect"].to_numpy())
    # three stacks, three different answers: the hooks reach three different projections
    assert not np.allclose(effects[0], effects[1]) and not np.allclose(effects[1], effects[2])


@pytest.mark.parametrize("stack", STACKS)
def test_mean_ablation_takes_the_mean_over_the_stacks_own_positions(models, stack):
    """The mean of z_h is over the source tokens (encoder) or the target tokens (decoder,
    cross), never over padding; the reference moves W_O^h mean into the bias."""
    model = models["bart"]
    layer, head = 0, 1
    seen = {}
    for source, target in PAIRS:  # one pair at a time: no padding to leave out
        src, tgt = model.encode(source), model.encode_target(target)
        one = {}
        hooks.forward(model, hooks.batch(model, [(source, target)]), capture=one, stack=stack)
        n = len(src) if stack == "encoder" else len(tgt)
        seen.setdefault("z", []).append(one[("z", layer)][0, :n, head].double())
    mean = torch.cat(seen["z"]).mean(0).float()
    r = ak.ablate(model, PAIRS, stack=stack, heads=[(layer, head)], how="mean", progress=False)
    expected = _loss(_zero_head(model, stack, layer, head, shift=mean), PAIRS)
    assert_close(r.table.loc[0, "metric"], expected, F32_DEEP)


def test_different_encoder_and_decoder_shapes_are_each_stacks_own():
    """A BART with a 1-layer, 2-head encoder and a 3-layer, 4-head decoder: heads are
    checked against their own stack."""
    import transformers as tf

    from attnkit.runtime.seq2seq import Seq2SeqModel
    from attnkit.testing import roberta_tokenizer

    torch.manual_seed(0)
    tok = roberta_tokenizer()
    cfg = tf.BartConfig(vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=3,
                        encoder_attention_heads=2, decoder_attention_heads=4, encoder_ffn_dim=32,
                        decoder_ffn_dim=32, max_position_embeddings=64, init_std=0.5,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    model = Seq2SeqModel(tf.BartForConditionalGeneration(cfg), tok, name="uneven-bart")
    assert ak.ablate(model, PAIRS, stack="encoder", progress=False).table.shape == (2, 2)
    cross = ak.ablate(model, PAIRS, stack="cross", progress=False)
    assert (cross.n_layers, cross.n_heads) == (3, 4)
    r = ak.ablate(model, PAIRS, stack="cross", heads=[(2, 3)], progress=False)
    assert_close(r.table.loc[0, "metric"], _loss(_zero_head(model, "cross", 2, 3), PAIRS), F32_DEEP)
    with pytest.raises(InputError, match="layer"):  # a decoder layer the encoder lacks
        ak.ablate(model, PAIRS, stack="encoder", heads=[(2, 0)], progress=False)
    with pytest.raises(InputError, match="head"):  # a decoder head the encoder lacks
        ak.ablate(model, PAIRS, stack="encoder", heads=[(0, 3)], progress=False)
    pair = [("The cat sat on the mat.", "A cat.")]
    nq, nk = len(model.encode_target(pair[0][1])), len(model.encode(pair[0][0]))
    assert nk > nq
    with pytest.raises(InputError, match="query"):  # a source position is no target position
        ak.knockout(model, pair, [(0, 0, nk - 1, 0)], stack="cross", progress=False)
    # the last source position is a key of the cross-attention
    r = ak.knockout(model, pair, [(2, 3, nq - 1, nk - 1)], stack="cross", progress=False)
    assert r.meta["n_edges"] == 1


# ------------------------------------------------------------------ knockout
@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_knocked_out_cross_edge_renormalises_the_rest_of_its_row(models, kind):
    """Cross layer 0 reads the encoder's output and the decoder's first layer, neither of which
    a cross knockout changes, so its knocked-out head output is the clean one with source
    key k's share removed: z′ = (z − p_k v_k) / (1 − p_k); every other head and row is as
    it was."""
    from attnkit.interventions.knockout import Blocker, edge_masks

    model = models[kind]
    b = hooks.batch(model, PAIRS)
    calls, clean = [], {}
    hooks.forward(model, b, capture=clean, recorders=[calls.append], stack="cross")
    cross0 = [c for c in calls if model.kind_of(c) == "cross"][0]
    # an edge that carries part of its row's weight in both inputs (the tiny T5's attention
    # is nearly one-hot; a share of 1 would leave the row empty)
    probs = cross0.probabilities()[:, :, :4, :7]  # rows and keys real in both inputs
    share = probs.min(0).values * (probs.max(0).values < 0.95)
    head, q, k = (int(i) for i in np.unravel_index(int(share.argmax()), tuple(share.shape)))
    assert float(share.max()) > 0.05
    masks, n = edge_masks(model, b, [(0, head, q, k)], stack="cross")
    assert n == b.size and tuple(masks[0].shape[2:]) == (b.width, b.width_of("encoder"))
    knocked = {}
    hooks.forward(model, b, capture=knocked, recorders=[Blocker(masks, model, "cross")],
                  stack="cross")
    p = cross0.probabilities()[:, head, q, k].float()  # [B]
    v = cross0.repeated(cross0.value)[:, head, k].float()  # [B, d]
    z = clean[("z", 0)][:, q, head].float()
    expected = (z - p[:, None] * v) / (1 - p[:, None])
    assert_close(knocked[("z", 0)][:, q, head].numpy(), expected.numpy(), F32_DEEP)
    other = torch.ones_like(knocked[("z", 0)][..., 0], dtype=torch.bool)
    other[:, q, head] = False
    assert_close(knocked[("z", 0)][other].numpy(), clean[("z", 0)][other].numpy(), F32_DEEP)
    r = ak.knockout(model, PAIRS, [(0, head, q, k)], stack="cross", progress=False)
    assert r.meta["stack"] == "cross" and r.meta["change"] != 0


def test_knockout_only_touches_its_own_stack(models):
    """The same (layer, head, query, key) knocked out in each stack: the encoder's and the
    decoder's self-attention and the cross-attention give three different answers, and the
    encoder's output does not change when a decoder or cross edge is knocked out."""
    model = models["bart"]
    pair = [("The cat sat on the mat.", "We read a book now.")]
    changes = {s: ak.knockout(model, pair, [(0, 0, 3, 1)], stack=s, progress=False).meta["change"]
               for s in STACKS}
    assert len({round(c, 9) for c in changes.values()}) == 3
    from attnkit.interventions.knockout import Blocker, edge_masks

    b = hooks.batch(model, pair)
    for stack in ("decoder", "cross"):
        masks, _ = edge_masks(model, b, [(0, 0, 3, 1)], stack=stack)
        enc_clean, enc_knocked = {}, {}
        hooks.forward(model, b, capture=enc_clean, stack="encoder",
                      recorders=[Blocker({}, model, stack)])
        hooks.forward(model, b, capture=enc_knocked, stack="encoder",
                      recorders=[Blocker(masks, model, stack)])
        for key in enc_clean:
            torch.testing.assert_close(enc_knocked[key], enc_clean[key], rtol=0, atol=0)


def test_cross_edges_as_list_mask_and_rule_agree(models):
    model = models["t5"]
    pair = [("The cat sat on the mat.", "A cat sat on it.")]
    b = hooks.batch(model, pair)
    nq, nk = b.width, b.width_of("encoder")
    rule = ak.knockout(model, pair, "key = query - 1", stack="cross", heads=[(1, 0)],
                       queries=slice(2, None), progress=False)
    listed = [(1, 0, q, q - 1) for q in range(2, nq) if q - 1 < nk]
    as_list = ak.knockout(model, pair, listed, stack="cross", progress=False)
    mask = np.zeros((2, 2, nq, nk), dtype=bool)
    for l, h, q, k in listed:
        mask[l, h, q, k] = True
    as_mask = ak.knockout(model, pair, mask, stack="cross", progress=False)
    assert rule.meta["n_edges"] == as_list.meta["n_edges"] == as_mask.meta["n_edges"] == len(listed)
    assert rule.meta["knocked_out"] == as_list.meta["knocked_out"] == as_mask.meta["knocked_out"]
    with pytest.raises(InputError, match=r"\[2, 2, target, source\]"):
        ak.knockout(model, pair, np.zeros((2, 2, nq), dtype=bool), stack="cross", progress=False)
    with pytest.raises(InputError, match="sources of"):
        ak.knockout(model, pair, np.ones((2, 2, nq, nk + 1), dtype=bool), stack="cross",
                    progress=False)
    with pytest.raises(InputError, match="later key"):  # the decoder's self-attention is causal
        ak.knockout(model, pair, [(0, 0, 1, 2)], stack="decoder", progress=False)


# ------------------------------------------------------------------ patching
def _source_pair(model):
    """Pairs whose sources differ in one token (the same targets), a token the tiny models'
    outputs depend on (KL of the outputs above 0.5 on both)."""
    clean = [("The cat sat on the mat.", "A cat sat.")]
    # one word-piece of T5's tokenizer, one character-level piece of BART's
    other = "we" if "t5" in model.name else "ou"
    corrupted = [(f"The cat sat {other} the mat.", "A cat sat.")]
    a, b = model.encode(clean[0][0]), model.encode(corrupted[0][0])
    diff = [i for i, (x, y) in enumerate(zip(a.input_ids, b.input_ids)) if x != y]
    assert len(a) == len(b) and len(diff) == 1
    return clean, corrupted, diff[0]


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_patching_known_answers_when_the_source_changes(kind):
    """A one-layer encoder–decoder whose sources differ at one position p: the decoder reads
    the source only through its cross-attention, so patching the cross layer restores all of
    the gap and the decoder's self-attention none; the encoder's stream entering layer 0 at p
    restores all of it and at any other position none."""
    model = tiny_seq2seq(kind, layers=1)
    clean, corrupted, p = _source_pair(model)
    kl = ak.interventions.kl()
    cross = ak.patch(model, clean, corrupted, stack="cross", grain="layer", metric=kl,
                     progress=False)
    assert cross.meta["stack"] == "cross" and cross.meta["clean"] == 0.0
    assert_close(cross.table.loc[0, "restored"], 1.0, F32_DEEP)
    dec = ak.patch(model, clean, corrupted, stack="decoder", grain="layer", metric=kl,
                   progress=False)
    assert_close(dec.table.loc[0, "restored"], 0.0, F32, scale=1)
    resid = ak.patch(model, clean, corrupted, stack="encoder", grain="residual×position",
                     metric=kl, progress=False)
    assert resid.table.index.names == ["layer", "position"]
    assert len(resid.table) == len(model.encode(clean[0][0]))  # source positions
    assert_close(resid.table.loc[(0, p), "restored"], 1.0, F32_DEEP)
    assert_close(resid.table.loc[0].drop(p)["restored"].to_numpy(), 0.0, F32, scale=1)
    # the heads of the cross layer together carry what the layer carries
    heads = ak.patch(model, clean, corrupted, stack="cross", metric=kl, progress=False)
    assert isinstance(heads, ak.HeadResult) and heads.table.shape == (2, 2)


def test_patching_known_answers_when_the_target_changes(models):
    """Targets that differ at one position t (the same sources): the encoder never sees the
    target (restores 0); the decoder's stream entering layer 0 at t restores all, elsewhere
    none."""
    model = models["t5"]
    clean = [("The cat sat on the mat.", "A cat sat on the mat.")]
    corrupted = [("The cat sat on the mat.", "A cat sat we the mat.")]
    a, b = model.encode_target(clean[0][1]), model.encode_target(corrupted[0][1])
    [t] = [i for i, (x, y) in enumerate(zip(a.input_ids, b.input_ids)) if x != y]
    kl = ak.interventions.kl()
    enc = ak.patch(model, clean, corrupted, stack="encoder", metric=kl, progress=False)
    assert_close(enc.table["restored"].to_numpy(), 0.0, F32, scale=1)
    resid = ak.patch(model, clean, corrupted, stack="decoder", grain="residual×position",
                     metric=kl, progress=False)
    assert_close(resid.table.loc[(0, t), "restored"], 1.0, F32_DEEP)
    assert_close(resid.table.loc[0].drop(t)["restored"].to_numpy(), 0.0, F32, scale=1)
    hp = ak.patch(model, clean, corrupted, stack="cross", grain="head×position", metric=kl,
                  progress=False, batch_size=8)
    assert hp.table.index.names == ["layer", "head", "position"]
    assert len(hp.table) == 2 * 2 * len(a)  # target positions


@pytest.mark.parametrize("stack", STACKS)
def test_attribution_patching_on_each_stack_is_the_directional_derivative(stack):
    """AtP = Δa · ∂M/∂a: for the share restored by patching a + ε Δa (float64), the
    central difference at ε = 0 is AtP over the gap."""
    from attnkit.interventions.patch import clean_and_corrupted, component_masks, components
    from tolerances import FD

    model = tiny_seq2seq("bart", layers=1)
    model.hf.double()
    clean, corrupted, _ = _source_pair(model)
    metric = ak.interventions.loss()
    est = ak.attribution_patching(model, clean, corrupted, stack=stack, metric=metric,
                                  progress=False)
    assert est.meta["stack"] == stack
    runs = clean_and_corrupted(model, clean, corrupted, metric, stack)
    bc, bx = runs["clean"], runs["corrupted"]
    acts = {}
    hooks.forward(model, bx, capture=acts, stack=stack)
    eps = 1e-4
    site = hooks.sites(model, stack)
    comps = components("head", site.n_layers, site.n_heads, bx.width_of(stack))
    fd = []
    for c in comps:
        masks = component_masks("head", [c], site.n_heads, bx.width_of(stack), "cpu")
        vals = []
        for sign in (1, -1):
            key = ("z", c[0])
            src = acts[key] + sign * eps * (runs["sources"][key] - acts[key])
            out = hooks.forward(model, bx, edits=hooks.Edits(1, masks, {key: src}), stack=stack)
            vals.append(float(metric(out, hooks.context(model, bc, runs["reference"]))[0]))
        fd.append((vals[0] - vals[1]) / (2 * eps))
    assert_close(est.table["estimate"].to_numpy(), fd, FD)


# ------------------------------------------------------------------ bad input
def test_seq2seq_bad_input(models):
    model = models["t5"]
    with pytest.raises(InputError, match="stack"):  # which heads?
        ak.ablate(model, PAIRS, progress=False)
    with pytest.raises(InputError, match="stack must be one of"):
        ak.ablate(model, PAIRS, stack="self", progress=False)
    with pytest.raises(InputError, match="stack"):  # one-stack models take no stack
        ak.ablate(tiny_model("gpt2"), ["The cat sat."], stack="encoder", progress=False)
    with pytest.raises(InputError, match="pair"):  # a text, not a (source, target) pair
        ak.ablate(model, ["The cat sat."], stack="cross", progress=False)
    with pytest.raises(InputError, match="source has"):
        ak.patch(model, [("The cat sat.", "A cat.")], [("The cat sat on it.", "A cat.")],
                 stack="cross", progress=False)
    with pytest.raises(InputError, match="target has"):
        ak.patch(model, [("The cat sat.", "A cat.")], [("The cat sat.", "A cat sat on it.")],
                 stack="cross", progress=False)
    with pytest.raises(InputError, match="no gap"):
        ak.patch(model, PAIRS, PAIRS, stack="encoder", progress=False)
    with pytest.raises(InputError, match="residual stream of its own"):
        ak.patch(model, PAIRS, PAIRS, stack="cross", grain="residual×position", progress=False)
    with pytest.raises(InputError, match="residual stream of its own"):
        ak.attribution_patching(model, PAIRS, PAIRS, stack="cross", grain="residual×position",
                                progress=False)
    with pytest.raises(InputError, match="reference\\[0\\] source"):
        ak.ablate(model, PAIRS[:1], stack="encoder", how="resample",
                  reference=[("Hi.", "A cat sat.")], progress=False)
    with pytest.raises(InputError, match="key"):  # source position 40 of 8
        ak.knockout(model, PAIRS, [(0, 0, 1, 40)], stack="cross", progress=False)
    with pytest.raises(UnsupportedModelError, match="encoder-decoder"):
        ak.interventions.path_patch(model, PAIRS, PAIRS, sender=(0, 0), receivers=[(1, 0)],
                                    progress=False)
    # a single pair counts as one input
    one = ak.ablate(model, ("The cat sat.", "A cat."), stack="decoder", heads=[(0, 0)],
                    progress=False)
    assert one.meta["n_items"] == 1


# ------------------------------------------------------------------ the trained reversal T5
def test_reversal_t5_reads_the_anti_diagonal_through_redundant_cross_heads():
    """Issue 29's encoder–decoder known answer (docs/results.md reports more pairs,
    docs/scripts/reversal_interventions.py): to write word j the reversal T5 reads source word
    n - 1 - j. Knocking out those anti-diagonal cross edges in every cross head destroys the
    output (loss above chance, ln 32); as many random cross edges change nothing; ablating every
    cross head destroys it, any one alone does not (the heads back each other up)."""
    import math

    from attnkit.toys.tasks import reversal_model, reversal_pairs

    model = reversal_model()
    n = 6
    pairs = reversal_pairs(8, min_length=n, max_length=n, seed=20_013)
    loss = ak.interventions.loss(positions=slice(1, n + 1))  # the n predicted words
    heads = [(l, h) for l in range(2) for h in range(4)]
    diag = [(l, h, j, n - 1 - j) for l, h in heads for j in range(n)]
    rng = np.random.default_rng(0)
    rand = [(l, h, j, int(rng.choice([x for x in range(n) if x != k]))) for l, h, j, k in diag]
    anti = ak.knockout(model, pairs, diag, stack="cross", metric=loss, progress=False)
    other = ak.knockout(model, pairs, rand, stack="cross", metric=loss, progress=False)
    assert anti.meta["clean"] < 0.01  # the model reverses these pairs
    assert anti.meta["knocked_out"] > math.log(32)
    assert other.meta["knocked_out"] < 0.01
    each = ak.ablate(model, pairs, stack="cross", metric=loss, progress=False)
    assert each.table["metric"].max() < 0.5
    every = ak.ablate(model, pairs, stack="cross", heads=heads, metric=loss, progress=False)
    assert every.table.loc[0, "metric"] > math.log(32)
