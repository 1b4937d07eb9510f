"""Faithfulness: every number checked against a slow, obvious computation."""

import numpy as np
import torch
import pandas as pd
import pytest

import attnkit as ak
from attnkit.runtime import objectives as targets
from attnkit.analysis.faithfulness import METRICS, _summarise
from attnkit.runtime.gradients import attention_gradients, run_gradients
from attnkit.errors import InputError
from attnkit.testing import CORPUS, tiny_model

pytestmark = pytest.mark.numerics

TEXTS = CORPUS[:3]


@pytest.fixture(scope="module")
def cls_model():
    m = tiny_model("bert-cls")
    m.hf.double()
    return m


def _target(model, ids, kind, ref):
    """The target of one input, by itself (no batching, no padding)."""
    batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    if model._accepts_type_ids:
        batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
    with torch.no_grad():
        out = targets.forward(model, kind, batch)
        if ref is None:
            ref = targets.references(kind, out, batch)
        return float(targets.values(kind, out, batch, ref)[0]), ref


@pytest.fixture(scope="module")
def result(cls_model):
    return ak.faithfulness(cls_model, TEXTS, measures=["weights", "rollout", "input×grad", "random"],
                           steps=4, n_boot=200, progress=False)


def test_blank_out_and_curves_match_one_forward_per_copy(cls_model, result):
    """Blank-out importance and the deletion/insertion curves, redone one unbatched forward
    at a time, give the same Spearman correlations and areas."""
    from scipy.stats import spearmanr

    from attnkit.analysis.attribution import attribution

    model = cls_model
    per = result.meta["per_item"].set_index(["item", "measure"])
    mask_id = model.tokenizer.mask_token_id
    for item, text in enumerate(TEXTS):
        enc = model.encode(text)
        y0, ref = _target(model, enc.input_ids, "logit", None)
        words = [p for p, r in enumerate(enc.roles) if r == "word"]
        blank = []
        for p in words:
            ids = list(enc.input_ids)
            ids[p] = mask_id
            blank.append(y0 - _target(model, ids, "logit", ref)[0])
        att = model.attend(text)
        rollout = attribution({"weights": att}, name="rollout", sources=[0])[words]
        rho = spearmanr(rollout, blank).statistic
        assert per.loc[(item, "rollout"), "spearman_blankout"] == pytest.approx(rho, abs=1e-6)
        # deletion curve of rollout at 5 points (steps=4)
        order = np.asarray(words)[np.argsort(-rollout, kind="stable")]
        m = len(words)
        ks = np.unique(np.round(np.linspace(0, m, 5)).astype(int))
        dele, ins = [], []
        for k in ks:
            ids = list(enc.input_ids)
            for p in order[:k]:
                ids[p] = mask_id
            dele.append(_target(model, ids, "logit", ref)[0])
            ids = [mask_id if (p in words and p not in order[:k]) else t
                   for p, t in enumerate(enc.input_ids)]
            ins.append(_target(model, ids, "logit", ref)[0])
        assert per.loc[(item, "rollout"), "deletion_auc"] == pytest.approx(np.trapezoid(dele, ks / m), abs=1e-6)
        assert per.loc[(item, "rollout"), "insertion_auc"] == pytest.approx(np.trapezoid(ins, ks / m), abs=1e-6)


def test_input_times_gradient_matches_finite_differences(cls_model):
    """Σ_d e_jd ∂y/∂e_jd is the derivative of y when token j's embedding is scaled by 1 + t."""
    model = cls_model
    enc = model.encode(TEXTS[1])
    r = attention_gradients(model, TEXTS[1], objective="logit")
    r_full = next(run_gradients(model, [enc], "logit", None, 1, 0.15, 0, False, input_grads=True))
    ixg = (r_full.input_embeds.astype(np.float64) * r_full.input_grads).sum(-1)
    assert r_full.value == pytest.approx(r.value)
    batch = model.pad([enc])
    emb = model.hf.get_input_embeddings()(batch["input_ids"]).detach()
    ref = torch.tensor([int(np.argmax(model.hf(**batch).logits.detach().numpy()))])
    eps = 1e-5
    for j in (1, 4):
        vals = []
        for s in (1, -1):
            e = emb.clone()
            e[0, j] *= 1 + s * eps
            kw = {k: v for k, v in batch.items() if k != "input_ids"}
            with torch.no_grad():
                out = model.hf(inputs_embeds=e, **kw)
            vals.append(float(out.logits[0, ref]))
        assert (vals[0] - vals[1]) / (2 * eps) == pytest.approx(ixg[j], rel=1e-4, abs=1e-8)


def test_input_times_gradient_correlates_perfectly_with_itself(result):
    row = result.table.loc[("input×grad", "spearman_inputxgrad")]
    assert row["mean"] == pytest.approx(1.0) and row["ci_low"] == pytest.approx(1.0)
    assert result.table.loc[("weights", "spearman_blankout"), "delta"] == 0.0
    assert set(result.table.index.get_level_values("metric")) == set(METRICS)
    assert result.meta["objective"] == "logit" and result.meta["mask_token"] == "[MASK]"


def test_summary_bootstrap_on_known_values():
    """Means, percentile intervals and paired differences from hand-made per-item values."""
    rows = []
    for item, (w, r) in enumerate([(0.1, 0.3), (0.2, 0.5), (0.3, 0.4), (np.nan, 0.9)]):
        rows.append({"item": item, "measure": "weights", **{m: w for m in METRICS}})
        rows.append({"item": item, "measure": "rollout", **{m: r for m in METRICS}})
    t = _summarise(pd.DataFrame(rows), ["weights", "rollout"], n_boot=2000, seed=0)
    w = t.loc[("weights", "deletion_auc")]
    r = t.loc[("rollout", "deletion_auc")]
    assert w["mean"] == pytest.approx(0.2) and w["n"] == 3
    assert r["mean"] == pytest.approx(0.525) and r["n"] == 4
    assert 0.1 <= w["ci_low"] <= 0.2 <= w["ci_high"] <= 0.3
    # paired: differences 0.2, 0.3, 0.1 (item 3 has no weights value)
    assert r["delta"] == pytest.approx(0.2)
    assert 0.1 <= r["delta_low"] <= 0.2 <= r["delta_high"] <= 0.3


def test_projection_target_of_a_bare_encoder():
    model = tiny_model("bert")
    model.hf.double()
    enc = model.encode(TEXTS[0])
    y, _ = _target(model, enc.input_ids, "projection", None)
    with torch.no_grad():
        e = model.base(**model.pad([enc])).last_hidden_state[0].mean(0)
    assert y == pytest.approx(float(e.norm()))
    r = ak.faithfulness(model, TEXTS[:2], measures=["weights", "norm", "alti", "grad×attn", "flow"],
                        n_boot=20, steps=3, progress=False)
    assert r.meta["objective"] == "projection" and r.meta["sources"] == "default"
    assert np.isfinite(r.table["mean"]).all()


def test_decoder_target_is_the_next_token_logit():
    model = tiny_model("gpt2")
    r = ak.faithfulness(model, TEXTS[:2], measures=["weights", "alti", "norm"], n_boot=20, steps=3,
                        progress=False)
    assert r.meta["objective"] == "logit"
    assert r.meta["mask_token"] == "<|endoftext|>"  # no mask token: the unknown token


def test_bad_input(cls_model):
    with pytest.raises(InputError, match="Unknown attribution"):
        ak.faithfulness(cls_model, TEXTS, measures=["nonsense"], progress=False)
    with pytest.raises(InputError, match="no inputs"):
        ak.faithfulness(cls_model, [], progress=False)
    with pytest.raises(InputError, match="one per input"):
        ak.faithfulness(cls_model, TEXTS, labels=[1], progress=False)
    with pytest.raises(InputError, match="logit"):
        ak.faithfulness(tiny_model("bert"), TEXTS, objective="logit", progress=False)
    # the former name still works for one release, with a warning naming the new one
    with pytest.warns(DeprecationWarning, match="objective="), pytest.raises(InputError, match="logit"):
        ak.faithfulness(tiny_model("bert"), TEXTS, target="logit", progress=False)


def test_plot(result):
    fig = result.plot()
    assert len([a for a in fig.axes if a.get_visible()]) == 6
    fig = result.plot(metric="deletion_auc")
    assert len(fig.axes) == 1
