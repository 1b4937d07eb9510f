"""Gradient importance: gradients checked against finite differences of the objective."""

import sys

import numpy as np
import pytest
from tolerances import assert_close, F32, F32_DEEP

pytestmark = pytest.mark.numerics

torch = pytest.importorskip("torch")

from attnkit.analysis.importance import TARGETS, attention_importance  # noqa: E402
from attnkit.runtime.gradients import attention_gradients  # noqa: E402
from attnkit.errors import InputError  # noqa: E402
from attnkit.testing import CORPUS, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    out = {k: tiny_model(k) for k in ("bert-mlm", "bert-cls", "bert", "gpt2", "roberta")}
    for m in out.values():  # float64: central differences in float32 are too coarse on some CPUs
        m.hf.double()
    return out


def _perturbing_attention(original_module, layer, head, i, j, delta):
    """An eager attention function that adds ``delta`` to one attention probability
    (after the softmax, before the product with the values), in one layer only. Forward
    passes without grad (the embedding objective's fixed target) stay unperturbed."""

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
        if scaling is None:
            scaling = query.size(-1) ** -0.5
        scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask[..., : key.shape[-2]]
        probs = torch.softmax(scores, dim=-1)
        if module.layer_idx == layer and torch.is_grad_enabled():
            bump = torch.zeros_like(probs)
            bump[0, head, i, j] = delta
            probs = probs + bump
        out = torch.matmul(probs, value).transpose(1, 2).contiguous()
        return out, probs

    return attention


def _attention_module(model):
    for m in model.hf.modules():
        if hasattr(m, "layer_idx") and type(m).__name__.endswith(("SelfAttention", "Attention")):
            return m
    raise AssertionError("no attention module found")


@pytest.mark.parametrize(
    "kind,objective,label",
    [("bert-mlm", "auto", None), ("bert-cls", "auto", 1), ("bert", "auto", None),
     ("gpt2", "auto", None), ("roberta", "embedding", None)],
)
def test_gradients_match_finite_differences(models, monkeypatch, kind, objective, label):
    model = models[kind]
    text = CORPUS[1]
    r = attention_gradients(model, text, objective=objective, label=label, seed=3)
    L, H, n, _ = r.grads.shape
    assert r.attention.maps.shape == r.grads.shape
    assert_close(r.attention.maps.sum(-1), 1.0, F32, scale=1)
    module = sys.modules[type(_attention_module(model)).__module__]
    rng = np.random.default_rng(0)
    eps = 1e-3
    # the largest-gradient entry of each layer plus random ones (visible entries only)
    picks = []
    for layer in range(L):
        g = np.abs(r.grads[layer])
        if r.attention.causal:
            g = g * np.tril(np.ones((n, n)))
        picks.append((layer, *np.unravel_index(np.argmax(g), g.shape)))
        for _ in range(2):
            i = int(rng.integers(n))
            j = int(rng.integers(i + 1)) if r.attention.causal else int(rng.integers(n))
            picks.append((layer, int(rng.integers(H)), i, j))
    for layer, h, i, j in picks:
        vals = []
        for sign in (+1, -1):
            monkeypatch.setattr(module, "eager_attention_forward",
                                _perturbing_attention(module, layer, h, i, j, sign * eps))
            vals.append(attention_gradients(model, text, objective=objective, label=label, seed=3).value)
        monkeypatch.undo()
        fd = (vals[0] - vals[1]) / (2 * eps)
        assert fd == pytest.approx(r.grads[layer, h, i, j], rel=2e-2, abs=2e-4), (layer, h, i, j)
    # the perturbing function itself reproduces the model exactly at delta = 0
    monkeypatch.setattr(module, "eager_attention_forward", _perturbing_attention(module, 0, 0, 0, 0, 0.0))
    assert attention_gradients(model, text, objective=objective, label=label, seed=3).value == pytest.approx(r.value, rel=1e-5)


def test_auto_objectives(models):
    """"auto" means what it means everywhere (attnkit.runtime.objectives.AUTO): what the model predicts."""
    assert attention_importance(models["bert-mlm"], CORPUS[:2]).meta["objective"] == "mlm"
    assert attention_importance(models["bert-cls"], CORPUS[:2]).meta["objective"] == "logit"
    assert attention_importance(models["bert"], CORPUS[:2]).meta["objective"] == "projection"
    assert attention_importance(models["gpt2"], CORPUS[:2]).meta["objective"] == "logit"
    # where "auto" used to mean something else here, a FutureWarning says so, once per call
    with pytest.warns(FutureWarning, match="it meant 'lm' here before"):
        attention_importance(models["gpt2"], CORPUS[:1])
    # the losses stay available by name
    assert attention_importance(models["bert-cls"], CORPUS[:2], labels=[0, 1],
                                objective="classification").meta["objective"] == "classification"
    assert attention_importance(models["gpt2"], CORPUS[:2], objective="lm").meta["objective"] == "lm"


def test_importance_aggregates_known_gradients(models, monkeypatch):
    """With a callable objective whose gradient is known (sum of attention to [SEP] of
    layer 1, head 0), the table shows exactly that."""
    model = models["bert"]

    def objective(out, batch):
        return out.attentions[1][:, 0, :, :].mul(_sep_mask(batch)).sum((1, 2))

    def _sep_mask(batch):
        ids = batch["input_ids"]
        return (ids == model.tokenizer.sep_token_id).float()[:, None, :]

    df = attention_importance(model, CORPUS[:3], objective=objective, batch_size=2)
    H = model.n_heads
    # layer 1: gradient 1 on the head-0 column of [SEP], 0 elsewhere -> mean 1/H over heads
    assert df.loc[1, "sep"] == pytest.approx(1.0 / H)
    assert df.loc[1, "cls"] == pytest.approx(0.0)
    assert df.loc[1, "punct"] == pytest.approx(0.0)
    assert df.loc[1, "other"] == pytest.approx(0.0)
    # layer 0 influences layer 1's attention, so its gradient is not zero
    assert df.loc[0].abs().sum() > 0
    by_head = attention_importance(model, CORPUS[:3], objective=objective, by="head")
    assert by_head.loc[(1, 0), "sep"] == pytest.approx(1.0)
    assert by_head.loc[(1, 1), "sep"] == pytest.approx(0.0)
    assert list(df.columns) == list(TARGETS)


def test_batching_does_not_change_results(models):
    m = models["bert-mlm"]
    a = attention_importance(m, CORPUS, batch_size=1)
    b = attention_importance(m, CORPUS, batch_size=4)
    assert_close(a.to_numpy(), b.to_numpy(), F32_DEEP)


def test_bad_input(models):
    with pytest.raises(InputError, match="labels"):
        attention_importance(models["bert-cls"], CORPUS[:2], objective="classification")
    with pytest.raises(InputError, match="one per input"):
        attention_importance(models["bert-cls"], CORPUS[:2], labels=[1])
    with pytest.raises(InputError, match="objective"):
        attention_importance(models["bert"], CORPUS[:2], objective="nonsense")
    with pytest.raises(InputError, match="causal"):
        attention_importance(models["bert"], CORPUS[:2], objective="lm")
    with pytest.raises(InputError, match="no inputs"):
        attention_importance(models["bert"], [])
    with pytest.raises(InputError, match="by"):
        attention_importance(models["bert"], CORPUS[:2], by="token")


@pytest.fixture(scope="module")
def real_model():
    import os

    import attnkit
    from attnkit.errors import ModelNotFoundError

    try:
        return attnkit.load("minilm")
    except ModelNotFoundError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{exc} (required under CI=true)")
        pytest.skip(str(exc))


def test_bundled_model_gradients_match_finite_differences(real_model, monkeypatch):
    """The bundled sentence-embedding model (loaded the ordinary way) exposes attention
    that is in its graph: the embedding objective's gradient matches finite differences."""
    text = "The committee approved the new budget on Tuesday, after a long debate."
    r = attention_gradients(real_model, text, objective="embedding", seed=1)
    assert r.attention.tokens[0] == "[CLS]" and "[MASK]" in r.attention.tokens
    module = sys.modules[type(_attention_module(real_model)).__module__]
    layer = 3
    g = np.abs(r.grads[layer])
    h, i, j = np.unravel_index(np.argmax(g), g.shape)
    eps = 1e-3
    vals = []
    for sign in (+1, -1):
        monkeypatch.setattr(module, "eager_attention_forward",
                            _perturbing_attention(module, layer, h, i, j, sign * eps))
        vals.append(attention_gradients(real_model, text, objective="embedding", seed=1).value)
    monkeypatch.undo()
    fd = (vals[0] - vals[1]) / (2 * eps)
    assert fd == pytest.approx(r.grads[layer, h, i, j], rel=3e-2, abs=1e-5)
