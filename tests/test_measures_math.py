"""Known answers for the measures' mathematics (attnkit.runtime.measures.*), on hand-set tensors
and on a one-layer model computed by hand in numpy."""

import numpy as np
import torch
import pytest

from attnkit.runtime.measures._arch import LayerParts, NormSpec, layer_parts
from attnkit.runtime.measures._decompose import BlockDecomposition
from attnkit.runtime.measures.alti import alti_maps
from attnkit.runtime.measures.grad_attn import grad_attn_maps
from attnkit.runtime.measures.norm import norm_maps
from attnkit.runtime.measures.norm_residual import norm_residual_maps
from tolerances import assert_close, F32, F64

pytestmark = pytest.mark.numerics

D = torch.float64


def _probs(rng, h, n, causal=False):
    s = rng.normal(size=(h, n, n))
    if causal:
        s = np.where(np.tril(np.ones((n, n))) > 0, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return torch.tensor(p / p.sum(-1, keepdims=True), dtype=D)


def test_norm_of_values_with_known_norms():
    """Value vectors of norms 1, 2, 3 and an output projection that is 2 x a rotation:
    the norm map is 2 x weight x value norm, whatever the direction of the values."""
    rng = np.random.default_rng(0)
    probs = _probs(rng, 2, 3)
    dirs = rng.normal(size=(2, 3, 2))
    dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
    norms = np.array([1.0, 2.0, 3.0])
    values = torch.tensor(dirs * norms[None, :, None], dtype=D)  # [H=2, n=3, k=2]
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    w_o = torch.tensor(2.0 * q, dtype=D)  # [d=4, H*k=4], orthogonal x 2
    got = norm_maps(probs, values, w_o).numpy()
    assert_close(got, 2.0 * probs.numpy() * norms[None, None, :], F64)


def _parts(placement, d, rng, kind="layer", bias=True):
    w_o = torch.tensor(rng.normal(size=(d, d)), dtype=D)
    b_o = torch.tensor(rng.normal(size=d), dtype=D) if bias else None
    norm = None
    if placement != "pre":
        scale = torch.tensor(rng.uniform(0.5, 1.5, size=d), dtype=D)
        nb = torch.tensor(rng.normal(size=d), dtype=D) if kind == "layer" else None
        norm = NormSpec(kind, scale, nb, 1e-5)
    return LayerParts(None, w_o, b_o, placement, norm)


@pytest.mark.parametrize("placement,kind", [("post", "layer"), ("pre", None), ("sandwich", "rms")])
def test_zero_value_gives_zero_contribution(placement, kind):
    """A token whose value is zero contributes nothing to other tokens, in every head and
    by every measure, however much attention it gets (here most of every row)."""
    rng = np.random.default_rng(1)
    h, n, k = 2, 5, 3
    d = h * k
    probs = _probs(rng, h, n)
    probs[:, :, 2] += 5.0
    probs /= probs.sum(-1, keepdim=True)
    values = torch.tensor(rng.normal(size=(h, n, k)), dtype=D)
    values[:, 2] = 0.0
    x = torch.tensor(rng.normal(size=(n, d)), dtype=D)
    parts = _parts(placement, d, rng, kind)
    block = BlockDecomposition(probs, values, x, parts)
    assert (probs[:, :, 2] > 0.5).all()
    assert torch.all(norm_maps(probs, values, parts.w_o)[:, :, 2] == 0)
    others = [i for i in range(n) if i != 2]
    nr = norm_residual_maps(block)[0]
    al = alti_maps(block)[0]
    assert_close(nr[others, 2].numpy(), 0.0, F64, scale=1)
    assert_close(al[others, 2].numpy(), 0.0, F64, scale=1)
    assert nr[2, 2] > 0  # its own residual still reaches itself


def _layer_norm(u, scale, bias, eps):
    mu = u.mean(-1, keepdims=True)
    return scale * (u - mu) / np.sqrt(((u - mu) ** 2).mean(-1, keepdims=True) + eps) + bias


@pytest.mark.parametrize("placement,kind", [("post", "layer"), ("pre", None), ("sandwich", "rms"),
                                            ("post", "rms")])
def test_decomposition_sums_to_the_block_output(placement, kind):
    """Σ_j T_i(x_j) + c_i equals the block output computed directly (numpy, float64)."""
    rng = np.random.default_rng(2)
    h, n, k = 3, 6, 2
    d = h * k
    probs = _probs(rng, h, n, causal=placement != "post")
    values = torch.tensor(rng.normal(size=(h, n, k)), dtype=D)
    x = torch.tensor(rng.normal(size=(n, d)), dtype=D)
    parts = _parts(placement, d, rng, kind)
    block = BlockDecomposition(probs, values, x, parts)
    # the block output, by hand
    p, v, xn = probs.numpy(), values.numpy(), x.numpy()
    heads = np.concatenate([p[i] @ v[i] for i in range(h)], axis=-1)  # [n, H*k]
    y = heads @ parts.w_o.numpy().T + parts.b_o.numpy()
    if placement == "pre":
        z = xn + y
    elif placement == "post" and kind == "layer":
        z = _layer_norm(xn + y, parts.norm.scale.numpy(), parts.norm.bias.numpy(), 1e-5)
    elif placement == "post":
        s = xn + y
        z = parts.norm.scale.numpy() * s / np.sqrt((s ** 2).mean(-1, keepdims=True) + 1e-5)
    else:
        z = xn + parts.norm.scale.numpy() * y / np.sqrt((y ** 2).mean(-1, keepdims=True) + 1e-5)
    assert_close(block.whole.numpy(), z, F64)
    total = block.rest().clone()
    for _, rows, t in block.chunks():
        total[rows] += t[0].sum(1)
    assert_close(total.numpy(), z, F64)


@pytest.mark.parametrize("placement,kind", [("post", "layer"), ("pre", None), ("sandwich", "rms")])
def test_term_norms_equal_the_norms_of_the_terms(placement, kind):
    """norm+residual's Gram-matrix shortcut equals the norms of the explicit terms."""
    rng = np.random.default_rng(5)
    probs = _probs(rng, 3, 6)
    values = torch.tensor(rng.normal(size=(3, 6, 2)), dtype=D)
    x = torch.tensor(rng.normal(size=(6, 6)), dtype=D)
    block = BlockDecomposition(probs, values, x, _parts(placement, 6, rng, kind))
    explicit = torch.cat([t[0].norm(dim=-1) for _, _, t in block.chunks()])
    assert_close(block.term_norms().numpy(), explicit.numpy(), F64)
    assert_close(norm_residual_maps(block)[0].numpy(), explicit.numpy(), F64)


def test_chunks_do_not_change_results(monkeypatch):
    import attnkit.runtime.measures._decompose as dec

    rng = np.random.default_rng(3)
    probs = _probs(rng, 2, 7)
    values = torch.tensor(rng.normal(size=(2, 7, 2)), dtype=D)
    x = torch.tensor(rng.normal(size=(7, 4)), dtype=D)
    parts = _parts("post", 4, rng, "layer")
    whole = alti_maps(BlockDecomposition(probs, values, x, parts))
    monkeypatch.setattr(dec, "CHUNK_ELEMENTS", 4 * 7 * 3)  # 3 rows per chunk
    assert len(list(BlockDecomposition(probs, values, x, parts).chunks())) == 3
    assert torch.allclose(alti_maps(BlockDecomposition(probs, values, x, parts)), whole)


def test_alti_rows_are_distributions():
    rng = np.random.default_rng(4)
    probs = _probs(rng, 2, 6, causal=True)
    values = torch.tensor(rng.normal(size=(1, 6, 3)), dtype=D)  # one shared value head
    x = torch.tensor(rng.normal(size=(6, 6)), dtype=D)
    m = alti_maps(BlockDecomposition(probs, values, x, _parts("pre", 6, rng)))[0].numpy()
    assert (m >= 0).all()
    assert_close(m.sum(-1), 1.0, F64, scale=1)
    assert np.allclose(np.triu(m, 1), 0.0)  # causal: nothing from the future


def test_grad_attn_is_elementwise_product():
    a = np.array([[[0.2, 0.8], [1.0, 0.0]]])
    g = np.array([[[3.0, -1.0], [0.5, 7.0]]])
    assert_close(grad_attn_maps(a, g), [[[0.6, -0.8], [0.5, 0.0]]], F32)


# ------------------------------------------------- one-layer model, computed by hand
@pytest.fixture(scope="module")
def one_layer_bert():
    from attnkit.testing import tiny_model

    m = tiny_model("bert", layers=1, heads=2, hidden=8, seed=5)
    m.hf.double()
    return m


def _hand_alti(model, x):
    """ALTI of a one-layer BERT from its weights, written out with loops (numpy)."""
    sd = {k: v.detach().numpy() for k, v in model.hf.state_dict().items()}
    pre = "encoder.layer.0.attention."
    H, n, d = model.n_heads, x.shape[0], x.shape[1]
    k = d // H
    q = x @ sd[pre + "self.query.weight"].T + sd[pre + "self.query.bias"]
    key = x @ sd[pre + "self.key.weight"].T + sd[pre + "self.key.bias"]
    v = x @ sd[pre + "self.value.weight"].T + sd[pre + "self.value.bias"]
    w_o, b_o = sd[pre + "output.dense.weight"], sd[pre + "output.dense.bias"]
    gamma, beta = sd[pre + "output.LayerNorm.weight"], sd[pre + "output.LayerNorm.bias"]
    probs = np.zeros((H, n, n))
    for h in range(H):
        s = q[:, h * k:(h + 1) * k] @ key[:, h * k:(h + 1) * k].T / np.sqrt(k)
        e = np.exp(s - s.max(-1, keepdims=True))
        probs[h] = e / e.sum(-1, keepdims=True)
    # each token's vector through each head: f[h, j] = W_O[:, h] v[j, h]
    f = np.stack([v[:, h * k:(h + 1) * k] @ w_o[:, h * k:(h + 1) * k].T for h in range(H)])
    out = np.zeros((n, n))
    for i in range(n):
        parts = [sum(probs[h, i, j] * f[h, j] for h in range(H)) + (x[j] if i == j else 0.0)
                 for j in range(n)]
        s = sum(parts) + b_o
        sigma = np.sqrt(s.var() + 1e-12)
        z = gamma * (s - s.mean()) / sigma + beta
        t = [gamma * (u - u.mean()) / sigma for u in parts]
        c = [max(0.0, np.abs(z).sum() - np.abs(z - tj).sum()) for tj in t]
        out[i] = np.array(c) / sum(c)
    return probs, v, z, out


def test_alti_one_layer_model_equals_hand_computation(one_layer_bert):
    model = one_layer_bert
    enc = model.encode("The cat sat on the mat.")
    batch = model.pad([enc])
    with torch.no_grad(), model.eager():
        out = model.base(**batch, output_attentions=True, output_hidden_states=True)
    x = out.hidden_states[0][0]
    probs, v, _, expected = _hand_alti(model, x.numpy())
    assert_close(out.attentions[0][0].numpy(), probs, F64)
    H, n = model.n_heads, len(enc)
    values = torch.tensor(v).reshape(n, H, -1).transpose(0, 1)  # [H, n, k]
    block = BlockDecomposition(out.attentions[0][0], values, x, layer_parts(model)[0])
    assert_close(alti_maps(block)[0].numpy(), expected, F64)
