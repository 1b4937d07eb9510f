"""Information-flow routes (Ferrando & Voita 2024): hand-computed proximities, a reference
implementation written from the model's own modules, the induction toy's known route, and
the lazy path (no n x n map)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError
from attnkit.flow.routes import proximity_shares
from attnkit.runtime.lazy import LazyAttention
from attnkit.testing import tiny_model
from tolerances import F32_DEEP, F64, assert_close

pytestmark = pytest.mark.numerics

TEXT = "The cat sat on the mat because it was warm."


def test_proximity_by_hand():
    # z = (4, 1): (4, 0) is 1 away (5 - 1 = 4), (0, 1) is 4 away (5 - 4 = 1)
    assert_close(proximity_shares([[4.0, 0.0], [0.0, 1.0]], [4.0, 1.0]), [0.8, 0.2], F64)
    # (-3, 0) lies 8 away, farther than zero (5): no share; (2, 1) is 2 away (3)
    assert_close(proximity_shares([[-3.0, 0.0], [2.0, 1.0], [0.0, 0.0]], [4.0, 1.0]),
                 [0.0, 1.0, 0.0], F64)
    # nothing closer than zero: all shares 0, not NaN
    assert_close(proximity_shares([[-1.0, 0.0]], [1.0, 0.0]), [0.0], F64)
    # batched: one row per sum
    got = proximity_shares([[[4.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]],
                           [[4.0, 1.0], [2.0, 0.0]])
    assert_close(got, [[0.8, 0.2], [0.5, 0.5]], F64)
    with pytest.raises(InputError, match="parts must be"):
        proximity_shares([[1.0, 2.0]], [1.0, 2.0, 3.0])


def _reference(model, text):
    """Every block's shares at every position, from the model's own modules in float64:
    ``(attention residual [L, n], heads [L, n, H, n], mlp [L, n])`` of a pre-norm decoder."""
    enc = model.encode(text)
    att = model.attend(np.asarray(enc.input_ids))  # dense probabilities (eager arithmetic)
    hf = model.base
    ids = torch.tensor([list(enc.input_ids)])
    with torch.no_grad():
        hidden = hf(input_ids=ids, output_hidden_states=True).hidden_states
    layers = hf.layers
    L, H = model.n_layers, model.n_heads
    n = len(enc)
    res, heads, mlp = np.zeros((L, n)), np.zeros((L, n, H, n)), np.zeros((L, n))
    x = hidden[0][0].double()
    for m, layer in enumerate(layers):
        layer = layer.double()
        with torch.no_grad():
            v = layer.self_attn.v_proj(layer.input_layernorm(x))  # [n, H_kv k]
            hd = layer.self_attn.o_proj.weight.shape[1] // H
            kv = v.shape[1] // hd
            v = v.view(n, kv, hd).permute(1, 0, 2).repeat_interleave(H // kv, 0)  # [H, n, k]
            wo = layer.self_attn.o_proj.weight.view(x.shape[1], H, -1).permute(1, 0, 2)  # [H,d,k]
            g = torch.einsum("hdk,hjk->hjd", wo, v)  # [H, n, d]
            alpha = torch.tensor(att.maps[m], dtype=torch.float64)  # [H, n, n]
            terms = alpha[..., None] * g[:, None]  # [H, i, j, d]
            mid = x + terms.sum((0, 2))
            out = mid + layer.mlp(layer.post_attention_layernorm(mid))
        for i in range(n):
            parts = np.concatenate([x[i][None].numpy(), terms[:, i].reshape(H * n, -1).numpy()])
            e = proximity_shares(parts, mid[i].numpy())
            res[m, i], heads[m, i] = e[0], e[1:].reshape(H, n)
            mlp[m, i] = proximity_shares(np.stack([mid[i].numpy(), (out - mid)[i].numpy()]),
                                         out[i].numpy())[1]
        x = out
        layer.float()
    return res, heads, mlp


@pytest.mark.parametrize("kind, kw", [("llama", {}), ("mistral", {}),
                                      # grouped-query attention: 2 key/value heads serve 4
                                      # query heads (values repeated per group, not tiled)
                                      ("llama", {"heads": 4, "kv_heads": 2}),
                                      ("qwen2", {"heads": 4, "kv_heads": 2, "seed": 2})])
def test_routes_match_a_reference_built_from_the_modules(kind, kw):
    model = tiny_model(kind, **kw)
    res, heads, mlp = _reference(model, TEXT)
    threshold = 0.05
    g = ak.flow_routes(model, TEXT, threshold=threshold)
    L = model.n_layers
    n = res.shape[1]
    assert g.graph["source"] == (L, n - 1) and (L, n - 1) in g
    checked = 0
    for (level, i), data in g.nodes(data=True):
        if level == 0:
            continue
        m = level - 1
        assert_close(data["mlp"], mlp[m, i], F32_DEEP, scale=1.0)
        out = {v[1]: d for _, v, d in g.out_edges((level, i), data=True)}
        for j in range(n):
            want_heads = [h for h in range(model.n_heads) if heads[m, i, h, j] > threshold + 1e-4]
            maybe = [h for h in range(model.n_heads) if heads[m, i, h, j] > threshold - 1e-4]
            keeps_res = j == i and res[m, i] > threshold
            if j not in out:
                assert not want_heads and not (j == i and res[m, i] > threshold + 1e-4)
                continue
            d = out[j]
            assert set(want_heads) <= set(d["heads"]) <= set(maybe)
            assert_close(d["weights"], heads[m, i, d["heads"], j], F32_DEEP, scale=1.0)
            assert d["labels"] == [f"{m + 1}-{h + 1}" for h in d["heads"]]
            if d["residual"]:
                assert_close(d["residual"], res[m, i], F32_DEEP, scale=1.0)
            else:
                assert not keeps_res or abs(res[m, i] - threshold) < 1e-4
            assert_close(d["weight"], sum(d["weights"]) + d["residual"], F64)
            checked += 1
    assert checked >= 2
    # every node below the top is reached from the source
    for node in g:
        assert node == g.graph["source"] or g.in_degree(node) > 0


def test_threshold_zero_keeps_every_positive_part_and_shares_sum_to_one():
    model = tiny_model("llama")
    g = ak.flow_routes(model, "The cat sat.", threshold=0.0)
    top = g.graph["source"]
    total = sum(d["weight"] for _, _, d in g.out_edges(top, data=True))
    assert_close(total, 1.0, F32_DEEP, scale=1.0)


def test_post_norm_encoder_routes_are_shares():
    model = tiny_model("bert")
    g = ak.flow_routes(model, TEXT, position=0, threshold=0.0)
    assert g.graph["source"] == (model.n_layers, 0)
    for node in g:
        if node[0] > 0 and g.out_degree(node):
            assert_close(sum(d["weight"] for *_, d in g.out_edges(node, data=True)), 1.0,
                         F32_DEEP, scale=1.0)
            assert 0.0 <= g.nodes[node]["mlp"] <= 1.0


def test_long_input_never_builds_a_full_map(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("flow_routes read a full map")

    monkeypatch.setattr(LazyAttention, "map", refuse)
    monkeypatch.setattr(LazyAttention, "to_dense", refuse)
    model = tiny_model("llama")
    text = " ".join([TEXT] * 30)
    g = ak.flow_routes(model, text, threshold=0.1)
    n = len(model.encode(text))
    assert g.graph["source"] == (model.n_layers, n - 1)


def test_bad_input():
    model = tiny_model("llama")
    with pytest.raises(InputError, match="position"):
        ak.flow_routes(model, "The cat sat.", position=99)
    with pytest.raises(InputError, match="threshold"):
        ak.flow_routes(model, "The cat sat.", threshold=1.0)
    with pytest.raises(InputError, match="threshold"):
        ak.flow_routes(model, "The cat sat.", threshold=-0.1)


# ------------------------------------------------------------------ the induction toy
N, ITEMS = 32, 4


@pytest.fixture(scope="module")
def toy():
    model = ak.toy.induction_model()
    return model, ak.induction_inputs(model, ITEMS, N, seed=1)


def test_induction_route_runs_through_the_induction_and_previous_token_heads(toy):
    model, inputs = toy
    # the previous-token head: the layer-1 head that attends to the previous token
    att = model.attend(inputs[0])
    n = len(att)
    prev = int(np.argmax([att.maps[0, h, np.arange(2, n), np.arange(1, n - 1)].mean()
                          for h in range(model.n_heads)]))
    for item in inputs:
        for t in (N + 3, N + 17, 2 * N - 1):  # second-copy positions: predict token t + 1
            g = ak.flow_routes(model, item, position=t, threshold=0.3)
            top = (2, t)
            key = (1, t - N + 1)  # the token after the earlier occurrence of token t
            assert g.has_edge(top, key), sorted(g.edges)
            d = g.edges[top, key]
            assert d["kind"] == "head" and d["heads"]  # layer-2 heads: the induction heads
            # below the key: the previous-token head brings token t - N, what matched t
            below = (0, t - N)
            assert g.has_edge(key, below), sorted(g.edges)
            assert prev in g.edges[key, below]["heads"]
            # and the route does not run through the current token's own stream
            assert not g.has_edge(top, (1, t))
