"""Circuits (issue 30): the edge graph, exact edge patching, EAP / EAP-IG, circuits, their
faithfulness and ACDC, on tiny and hand-built models.

Known answers: patching no edge is the clean run and patching every edge the corrupted run
(each downstream input then reads the corrupted stream); EAP is the derivative of exact edge
patching along the edge (a float64 central difference); EAP-IG with one step is EAP; and on a
hand-built GPT-2 where one path carries the behaviour by construction, every method finds
exactly that path. Post-norm encoders (BERT, RoBERTa, DistilBERT): the same endpoints both
ways of building a read's stream, the carried terms against ak.residual_stream, one edge
against a float64 forward written by hand from transformers' modules, EAP as the derivative,
and a head that writes nothing scoring 0.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError, UnsupportedModelError
from attnkit.interventions import hooks
from attnkit.interventions.eap import gradient_scores
from attnkit.interventions.edges import clean_and_corrupted, edge_graph, run
from attnkit.testing import tiny_model
from tolerances import F32, F32_DEEP, F64, FD, assert_close

pytestmark = pytest.mark.numerics


def _ids(seed: int = 0, items: int = 2, n: int = 6, changed: int = 1):
    rng = np.random.default_rng(seed)
    clean = rng.integers(5, 290, (items, n))
    corrupted = clean.copy()
    corrupted[:, changed] = (clean[:, changed] + 7) % 290 + 5
    return list(clean), list(corrupted)


def _everything(g):
    return [(u, d) for u in range(len(g.upstream)) for d in range(len(g.downstream)) if g.valid[u, d]]


@pytest.mark.parametrize("kind, kw", [("gpt2", {}), ("llama", {"kv_heads": 2}),
                                      ("qwen2", {"kv_heads": 2}),
                                      ("llama", {"heads": 4, "kv_heads": 2}),
                                      ("qwen2", {"heads": 4, "kv_heads": 1})])
def test_no_edge_patched_is_clean_and_every_edge_patched_is_corrupted(kind, kw):
    model = tiny_model(kind, **kw)
    clean, corrupted = _ids()
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.loss())
    g = runs.graph
    bc, bx = runs.clean, runs.corrupted
    masks = g.mask([[], _everything(g)], runs.reference.dtype, bc.device)
    out, _ = run(model, bc, g, copies=2, masks=masks, corrupted=runs.ups_corrupted)
    assert_close(out[:2].numpy(), hooks.forward(model, bc).numpy(), F32_DEEP)
    assert_close(out[2:].numpy(), hooks.forward(model, bx).numpy(), F32_DEEP)
    # and the upstream values of the unpatched run sum to the stream the logits read
    assert_close(runs.measure([[], _everything(g)]), [runs.m_clean, runs.m_corrupted], F32_DEEP)


def test_edge_graph_names_and_edges():
    g = edge_graph(tiny_model("gpt2"))
    edges = g.edges()
    # a head reaches later layers' heads and its own layer's MLP, never its own layer's heads
    assert ("1-1", "2-2.k") in edges and ("1-1", "1-mlp.in") in edges
    assert ("1-1", "1-2.q") not in edges and ("2-mlp", "2-1.v") not in edges
    # every upstream component reaches the logits
    assert {u for u, d in edges if d == "logits"} == set(g.upstream)
    # 2 embeddings x 6 head inputs + 4 into 1-mlp + 5 x 6 into layer 2 + 7 into 2-mlp + 8 logits
    assert len(edges) == 12 + 4 + 30 + 7 + 8


def test_eap_is_the_derivative_of_exact_edge_patching():
    """Float64: moving one edge a fraction eps of the way to the corrupted value changes the
    metric by eps x its EAP score (central difference, every edge)."""
    model = tiny_model("gpt2")
    model.hf.double()
    clean, corrupted = _ids(seed=1)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.loss())
    g = runs.graph
    scores = gradient_scores(runs)
    pairs = _everything(g)
    eps = 1e-5
    fractional = torch.zeros(2 * len(pairs), *g.valid.shape, dtype=torch.float64)
    for i, (u, d) in enumerate(pairs):
        fractional[2 * i, u, d], fractional[2 * i + 1, u, d] = eps, -eps
    v = runs.measure([], fractional=fractional, batch_size=512)
    fd = (v[0::2] - v[1::2]) / (2 * eps)
    assert_close(np.array([scores[u, d] for u, d in pairs]), fd, FD)
    assert np.abs(fd).max() > 1e-2  # the edges do matter
    # invalid edges score nothing
    assert not scores[~g.valid].any()


def test_eap_ig_with_one_step_is_eap_and_exact_scores_are_single_edge_patches():
    model = tiny_model("gpt2")
    clean, corrupted = _ids(seed=2)
    eap = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss())
    ig1 = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss(),
                              method="eap-ig", steps=1)
    assert_close(ig1.table["score"].to_numpy(), eap.table["score"].to_numpy(), F32)
    exact = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss(),
                                method="exact", progress=False)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.loss())
    one = runs.graph.index([("1-2", "2-1.k")])
    assert_close(exact.table.loc[("1-2", "2-1.k"), "score"],
                 runs.measure([one])[0] - runs.m_clean, F32_DEEP)
    assert exact.meta["method"] == "exact" and ig1.meta["steps"] == 1
    assert list(exact.table.columns) == ["score", "layer_up", "layer_down"]
    assert exact.table.loc[("embed", "logits"), "layer_up"] == -1
    assert exact.table.loc[("embed", "logits"), "layer_down"] == 2


def _one_path_model():
    """A 2-layer GPT-2 where only head 1-1 writes to the stream, reading values only: its
    queries and keys are zero (uniform attention), every other head's output projection and
    every MLP's output are zero. A change of the first token then reaches the last
    position's logits through embed -> 1-1.v -> 1-1 -> logits alone."""
    model = tiny_model("gpt2", layers=2, heads=2, hidden=16)
    d, dh = 16, 8
    with torch.no_grad():
        for layer, block in enumerate(model.hf.transformer.h):
            block.attn.c_attn.weight[:, :2 * d] = 0
            block.attn.c_attn.bias[:2 * d] = 0
            keep = slice(0, dh) if layer == 0 else slice(0, 0)
            w = block.attn.c_proj.weight
            mask = torch.zeros_like(w)
            mask[keep] = 1
            w.mul_(mask)
            block.mlp.c_proj.weight.zero_()
            block.mlp.c_proj.bias.zero_()
    return model


def test_a_hand_built_path_is_the_circuit():
    model = _one_path_model()
    clean, corrupted = _ids(seed=3, items=2, n=6, changed=0)
    metric = ak.interventions.logprob(token=42, position=-1)
    path = {("embed", "1-1.v"), ("1-1", "logits")}
    exact = ak.edge_attribution(model, clean, corrupted, metric=metric, method="exact",
                                progress=False)
    s = exact.table["score"].abs()
    assert set(s[s > 1e-6 * s.max()].index) == path
    eap = ak.edge_attribution(model, clean, corrupted, metric=metric)
    e = eap.table["score"].abs()
    assert set(e[e > 1e-6 * e.max()].index) == path
    G = ak.circuit(exact, top=2)
    assert sorted(G.edges(keys=True)) == [("1-1", "logits", "out"), ("embed", "1-1", "v")]
    assert G.nodes["1-1"] == {"layer": 0, "kind": "head"}
    assert G.nodes["embed"] == {"layer": -1, "kind": "embed"}
    assert G.nodes["logits"] == {"layer": 2, "kind": "logits"}
    assert G.graph["n_layers"] == 2 and G.graph["n_heads"] == 2 and G.graph["method"] == "exact"
    f = ak.circuit_faithfulness(model, G, clean, corrupted, metric=metric)
    assert_close(f.meta["faithfulness"], 1.0, F32_DEEP, scale=1.0)
    assert_close(f.table["faithfulness"].to_numpy(), [0.0, 0.0, 1.0], F32_DEEP, scale=1.0)
    A = ak.acdc(model, clean, corrupted, metric=metric, threshold=1e-4, progress=False)
    assert sorted(A.edges(keys=True)) == [("1-1", "logits", "out"), ("embed", "1-1", "v")]
    assert A.graph["n_forwards"] <= len(exact.table) and A.graph["seconds"] > 0


def test_circuit_keeps_the_largest_scores_and_threshold():
    model = tiny_model("gpt2")
    clean, corrupted = _ids(seed=4)
    s = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss())
    mag = s.table["score"].abs().sort_values(ascending=False)
    G = ak.circuit(s, top=4)
    kept = {(u, "logits" if v == "logits" else f"{v}.{k}") for u, v, k in G.edges(keys=True)}
    assert kept == set(mag.index[:4])
    cut = float(mag.iloc[5])
    T = ak.circuit(s, min_score=cut)
    assert T.number_of_edges() == 5  # strictly greater than the 6th largest
    both = ak.circuit(s, top=3, min_score=cut)
    assert both.number_of_edges() == 3
    # the name it had before the contract: a deprecation warning naming the new one
    with pytest.warns(DeprecationWarning, match="min_score"):
        old = ak.circuit(s, threshold=cut)
    assert sorted(old.edges(keys=True)) == sorted(T.edges(keys=True))
    assert all(data["input"] == key for _, _, key, data in G.edges(keys=True, data=True))


def test_faithfulness_curve_ends_at_one_for_every_edge():
    model = tiny_model("llama", kv_heads=2)
    clean, corrupted = _ids(seed=5)
    s = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss())
    f = ak.circuit_faithfulness(model, s, clean, corrupted, metric=ak.interventions.loss(),
                                sizes=[0, 5, len(s.table)])
    assert_close(f.table["faithfulness"].to_numpy()[[0, 2]], [0.0, 1.0], F32_DEEP, scale=1.0)
    assert f.meta["n_total"] == len(s.table)


def test_bad_input_is_refused_clearly():
    model = tiny_model("gpt2")
    clean, corrupted = _ids()
    loss = ak.interventions.loss()
    with pytest.raises(InputError, match="same length|tokens"):
        ak.edge_attribution(model, clean, [c[:-1] for c in corrupted], metric=loss)
    with pytest.raises(InputError, match="one corrupted input per clean"):
        ak.edge_attribution(model, clean, corrupted[:1], metric=loss)
    with pytest.raises(InputError, match="one number per input"):
        ak.edge_attribution(model, clean, corrupted,
                            metric=ak.interventions.custom(fn=lambda out: out[-1]))
    with pytest.raises(InputError, match="method"):
        ak.edge_attribution(model, clean, corrupted, metric=loss, method="acdc")
    with pytest.raises(InputError, match="no gap|same on the clean"):
        ak.edge_attribution(model, clean, clean, metric=loss)
    s = ak.edge_attribution(model, clean, corrupted, metric=loss)
    with pytest.raises(InputError, match="min_score=1000000000.0 keeps no edge"):
        ak.circuit(s, min_score=1e9)
    with pytest.raises(InputError, match="min_score"):
        ak.circuit(s, min_score=-1.0)
    with pytest.raises(InputError, match="top= .* or min_score="):
        ak.circuit(s)
    with pytest.raises(InputError, match="edge_attribution"):
        ak.circuit(s.table["score"], top=3)
    import networkx as nx

    with pytest.raises(InputError, match="no edge"):
        ak.circuit_faithfulness(model, nx.MultiDiGraph(), clean, corrupted, metric=loss)
    bogus = nx.MultiDiGraph()
    bogus.add_edge("2-1", "1-1", key="q", score=1.0, input="q")
    with pytest.raises(InputError, match="does not reach"):
        ak.circuit_faithfulness(model, bogus, clean, corrupted, metric=loss)
    with pytest.raises(InputError, match="removes every edge"):
        ak.acdc(model, clean, corrupted, metric=loss, threshold=1e9, progress=False)
    with pytest.raises(UnsupportedModelError, match="parallel attention"):
        ak.edge_attribution(tiny_model("gpt_neox"), clean, corrupted, metric=loss)


def test_gradients_need_an_unpatched_forward():
    """The attention inputs' gradients come from the projections' outputs of a forward in
    which every head reads the one stream: patching with grad=True is refused."""
    model = tiny_model("gpt2")
    clean, corrupted = _ids()
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.loss())
    masks = runs.graph.mask([[]], runs.reference.dtype, runs.clean.device)
    with pytest.raises(InputError, match="grad: .*unpatched forward"):
        run(model, runs.clean, runs.graph, masks=masks, corrupted=runs.ups_corrupted, grad=True)


# ------------------------------------------------------------------ grouped-query attention
def _ungrouped(model):
    """The same network as ``model`` with one key/value head per query head: each shared
    key/value head's projection rows repeated for every query head it serves (as the
    attention repeats its keys and values), so both compute the same function."""
    import copy

    from attnkit.runtime.model import Model

    cfg = copy.deepcopy(model.hf.config)
    H, G = cfg.num_attention_heads, cfg.num_key_value_heads
    dh = cfg.hidden_size // H
    cfg.num_key_value_heads = H
    hf = type(model.hf)(cfg)
    state = {}
    for name, w in model.hf.state_dict().items():
        if name.endswith(("k_proj.weight", "v_proj.weight", "k_proj.bias", "v_proj.bias")):
            w = w.view(G, dh, *w.shape[1:]).repeat_interleave(H // G, 0).reshape(H * dh, *w.shape[1:])
        state[name] = w
    hf.load_state_dict(state)
    hf.eval()
    return Model(hf, model.tokenizer, name=f"{model.name}-ungrouped")


@pytest.fixture(scope="module")
def grouped():
    """A tiny Qwen2 (query, key and value biases) with 4 query heads sharing 2 key/value
    heads, its ungrouped twin, and inputs that differ in one token."""
    model = tiny_model("qwen2", heads=4, kv_heads=2, layers=2, seed=3)
    clean, corrupted = _ids(seed=7, n=7, changed=2)
    return model, _ungrouped(model), clean, corrupted


def test_grouped_edge_graph_names_each_shared_key_value_head():
    g = edge_graph(tiny_model("llama", heads=4, kv_heads=2))
    assert g.n_kv_heads == 2
    layer1 = [d for d in g.downstream if d.startswith("1-") and not d.endswith(".in")]
    assert layer1 == ["1-1.q", "1-2.q", "1-kv1.k", "1-kv1.v", "1-3.q", "1-4.q", "1-kv2.k", "1-kv2.v"]
    edges = g.edges()
    # a layer-1 head reaches the layer-2 key/value heads, never its own layer's
    assert ("1-3", "2-kv1.k") in edges and ("1-3", "1-kv1.v") not in edges
    assert g.readers("2-kv2.v") == ["2-3", "2-4"]
    # 1 embedding x 8 inputs + 5 into 1-mlp + 6 x 8 into layer 2 + 10 into 2-mlp + 11 logits
    assert len(edges) == 8 + 5 + 48 + 10 + 11
    with pytest.raises(InputError, match="not a downstream input"):
        g.index([("1-1", "2-1.k")])  # a grouped model's keys belong to its key/value heads


def test_a_patched_key_value_edge_is_every_query_heads_edge_patched_in_the_ungrouped_twin(grouped):
    """Hand reference: the ungrouped twin computes the same function, and a shared key (or
    value) input feeds every query head of its group, so patching edge (u, "L-kvG.k") is
    patching (u, "L-h.k") for each query head h of the group in the twin; a query edge is
    the same edge in both."""
    model, twin, clean, corrupted = grouped
    loss = ak.interventions.loss()
    a = clean_and_corrupted(model, clean, corrupted, loss)
    b = clean_and_corrupted(twin, clean, corrupted, loss)
    assert_close(a.reference.numpy(), b.reference.numpy(), F32_DEEP)  # the same network
    cases = [
        ([("1-2", "2-kv1.k")], [("1-2", "2-1.k"), ("1-2", "2-2.k")]),
        ([("embed", "2-kv2.v")], [("embed", "2-3.v"), ("embed", "2-4.v")]),
        ([("1-mlp", "2-3.q")], [("1-mlp", "2-3.q")]),
        ([("embed", "1-kv1.k"), ("1-4", "2-kv2.v")],
         [("embed", "1-1.k"), ("embed", "1-2.k"), ("1-4", "2-3.v"), ("1-4", "2-4.v")]),
    ]
    got = a.measure([a.graph.index(e) for e, _ in cases])
    want = b.measure([b.graph.index(e) for _, e in cases])
    assert_close(got, want, F32_DEEP)
    assert np.abs(got - a.m_clean).min() > 1e-4  # each patch changes the metric
    # patching one query head's key (in the twin) is not patching the shared key
    one = b.measure([b.graph.index([("1-2", "2-1.k")])])[0]
    assert abs(one - got[0]) > 1e-4


@contextmanager
def _float64_throughout(model, monkeypatch):
    """``model`` in float64 end to end, so that a float64 central difference can check a
    derivative: its eager attention (attnkit's capture function forms float32 scores), a
    softmax that keeps float64 (Llama and Qwen2's eager path asks for float32) and RMS norms
    computed in the input's dtype (transformers' compute in float32 whatever the input);
    each the same formula."""
    import types

    softmax = torch.nn.functional.softmax

    def softmax64(x, dim=None, _stacklevel=3, dtype=None):
        return softmax(x, dim=dim, dtype=None if x.dtype == torch.float64 else dtype)

    def rms(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(torch.nn.functional, "softmax", softmax64)
    norms = [m for m in model.hf.modules() if type(m).__name__.endswith("RMSNorm")]
    assert norms
    for m in norms:
        m.forward = types.MethodType(rms, m)
    model.hf.double()
    try:
        with model.eager():
            yield model
    finally:
        model.hf.float()
        for m in norms:
            del m.forward


def test_grouped_eap_is_the_derivative_of_exact_patching_and_sums_the_twins_key_edges(grouped, monkeypatch):
    model, twin, clean, corrupted = grouped
    with _float64_throughout(model, monkeypatch):
        runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.loss())
        g = runs.graph
        scores = gradient_scores(runs)
        pairs = _everything(g)
        eps = 1e-5
        fractional = torch.zeros(2 * len(pairs), *g.valid.shape, dtype=torch.float64)
        for i, (u, d) in enumerate(pairs):
            fractional[2 * i, u, d], fractional[2 * i + 1, u, d] = eps, -eps
        v = runs.measure([], fractional=fractional, batch_size=512)
        fd = (v[0::2] - v[1::2]) / (2 * eps)
        assert_close(np.array([scores[u, d] for u, d in pairs]), fd, FD)
        kv = [i for i, (u, d) in enumerate(pairs) if "-kv" in g.downstream[d]]
        assert len(kv) > 20 and np.abs(fd[kv]).max() > 1e-3  # key/value edges do matter
    # the shared stream's gradient is the sum of its query heads' (chain rule): EAP of a
    # key/value edge is the sum of the twin's EAP scores of the group's edges
    s = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss()).table["score"]
    t = ak.edge_attribution(twin, clean, corrupted, metric=ak.interventions.loss()).table["score"]
    for up in ("embed", "1-1", "1-3", "1-mlp"):
        for grp, heads in (("2-kv1", (1, 2)), ("2-kv2", (3, 4))):
            for via in "kv":
                assert_close(s[(up, f"{grp}.{via}")], sum(t[(up, f"2-{h}.{via}")] for h in heads),
                             F32_DEEP, scale=float(t.abs().max()))
    assert_close(s[("1-2", "2-4.q")], t[("1-2", "2-4.q")], F32_DEEP, scale=float(t.abs().max()))


def test_grouped_circuit_faithfulness_and_acdc(grouped):
    model, _, clean, corrupted = grouped
    loss = ak.interventions.loss()
    s = ak.edge_attribution(model, clean, corrupted, metric=loss)
    assert s.meta["n_kv_heads"] == 2
    f = ak.circuit_faithfulness(model, s, clean, corrupted, metric=loss, sizes=[0, len(s.table)])
    assert_close(f.table["faithfulness"].to_numpy(), [0.0, 1.0], F32_DEEP, scale=1.0)
    G = ak.circuit(s, top=len(s.table))
    assert G.nodes["2-kv1"]["kind"] == "kv" and G.nodes["2-kv1"]["layer"] == 1
    assert G.graph["n_kv_heads"] == 2 and ("1-1", "2-kv1", "k") in G.edges(keys=True)
    # ACDC: a key/value input is pruned without a forward once none of its query heads
    # feeds anything (one layer: 19 edges)
    small = tiny_model("llama", layers=1, heads=4, kv_heads=2, seed=1)
    A = ak.acdc(small, clean, corrupted, metric=loss, threshold=0.0, progress=False)
    assert A.graph["n_kv_heads"] == 2 and 1 <= A.number_of_edges() <= 19
    assert A.graph["n_forwards"] <= 19
    assert all(A.nodes[n]["kind"] in ("embed", "head", "kv", "mlp", "logits") for n in A)


# ------------------------------------------------------------------ post-norm encoders
_POST = [("bert-cls", "margin"), ("bert-mlm", "loss"), ("roberta", "projection"),
         ("distilbert", "projection")]


def _metric(name):
    return {"margin": ak.interventions.class_margin(), "loss": ak.interventions.loss(),
            "projection": ak.interventions.projection()}[name]


def _post_ids(seed: int = 0, items: int = 2, n: int = 6, changed: int = 2):
    """Token ids with the special tokens of the tiny BERT tokenizer around random words."""
    clean, corrupted = _ids(seed, items, n, changed)
    return ([np.concatenate([[2], c % 50 + 5, [3]]) for c in clean],
            [np.concatenate([[2], c % 50 + 5, [3]]) for c in corrupted])


@pytest.mark.parametrize("kind, metric", _POST)
def test_post_norm_no_edge_is_clean_and_every_edge_is_corrupted(kind, metric):
    """Both ways of building a read's stream: from this run's (none patched; every edge
    patched with an unpatched copy in the same forward, so the components are carried) and
    from the corrupted stream (every edge patched alone: nothing is carried)."""
    model = tiny_model(kind)
    clean, corrupted = _post_ids()
    runs = clean_and_corrupted(model, clean, corrupted, _metric(metric))
    g = runs.graph
    bc, bx = runs.clean, runs.corrupted
    masks = g.mask([[], _everything(g)], runs.reference.dtype, bc.device)
    out, _ = run(model, bc, g, copies=2, masks=masks, corrupted=runs.corrupted_values)
    assert_close(out[:2].numpy(), hooks.forward(model, bc).numpy(), F32_DEEP)
    assert_close(out[2:].numpy(), hooks.forward(model, bx).numpy(), F32_DEEP)
    alone, _ = run(model, bc, g, copies=1, masks=masks[1:], corrupted=runs.corrupted_values)
    assert_close(alone.numpy(), hooks.forward(model, bx).numpy(), F32_DEEP)
    assert_close(runs.measure([[], _everything(g)]), [runs.m_clean, runs.m_corrupted], F32_DEEP)


def test_post_norm_terms_are_the_residual_stream_decomposition():
    """The carried terms at every layer's input are ak.residual_stream's components (float64
    walk of the same forward), the token embedding's term holding the biases."""
    model = tiny_model("bert-cls", layers=3)
    clean, corrupted = _post_ids(seed=6, items=1)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.class_margin())
    g = runs.graph
    for i, (_, ups, delta) in enumerate(runs.deltas()):
        if i % 2 or i == 2 * g.n_layers:  # layer inputs only
            continue
        layer = i // 2
        a = ak.residual_stream(model, clean[0], layer=layer)
        b = ak.residual_stream(model, corrupted[0], layer=layer)
        want = b.vectors - a.vectors
        names = [g.upstream[u] for u in ups]
        assert names == a.names[:-1]
        want[0] += want[-1]  # the biases travel with the token embedding
        assert_close(delta[:, 0].numpy(), want[:-1], F32_DEEP)


def _bert_by_hand(model, ids, other, up=None, layer_d=None, head_d=None, via=None):
    """Float64 logits of a BERT classifier computed from its own modules, with the stream
    that head ``head_d`` of layer ``layer_d`` reads as ``via`` replaced by
    ``x − (c_up − c′_up)``: ``up = (layer, head)``'s output carried by hand through each
    run's norms (each run's own standard deviations)."""
    bert, hf = model.hf.bert, model.hf
    H = model.n_heads

    def ln(mod, u):
        sigma = ((u - u.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True).add(mod.eps).sqrt()
        return mod(u), sigma

    def carry(mod, c, sigma):
        return mod.weight * (c - c.mean(-1, keepdim=True)) / sigma

    def forward(ids, replace=None):
        ids = torch.as_tensor(ids)[None]
        emb = bert.embeddings
        e = (emb.word_embeddings(ids) + emb.position_embeddings(torch.arange(ids.shape[1]))[None]
             + emb.token_type_embeddings(torch.zeros_like(ids)))
        x, _ = ln(emb.LayerNorm, e)
        carried = None
        for li, layer in enumerate(bert.encoder.layer):
            att = layer.attention
            dh = x.shape[-1] // H
            streams = {v: [x] * H for v in "qkv"}
            if replace is not None and li == layer_d:
                streams[via] = [replace if h == head_d else x for h in range(H)]
            proj = {"q": att.self.query, "k": att.self.key, "v": att.self.value}
            parts = {v: torch.stack([proj[v](streams[v][h])[..., h * dh:(h + 1) * dh]
                                     for h in range(H)]) for v in "qkv"}  # [H, 1, T, dh]
            probs = torch.softmax(parts["q"] @ parts["k"].transpose(-1, -2) / dh ** 0.5, -1)
            z = probs @ parts["v"]  # [H, 1, T, dh]
            w = att.output.dense.weight
            heads = [z[h] @ w[:, h * dh:(h + 1) * dh].T for h in range(H)]
            y = sum(heads) + att.output.dense.bias
            h_l, s_a = ln(att.output.LayerNorm, x + y)
            mlp = layer.output.dense(layer.intermediate(h_l))
            x_next, s_o = ln(layer.output.LayerNorm, h_l + mlp)
            if up is not None and li == up[0]:
                carried = carry(layer.output.LayerNorm, carry(att.output.LayerNorm, heads[up[1]], s_a), s_o)
            elif carried is not None and li < layer_d:
                carried = carry(layer.output.LayerNorm, carry(att.output.LayerNorm, carried, s_a), s_o)
            if li + 1 == layer_d:
                at_read = (x_next, carried)
            x = x_next
        return hf.classifier(bert.pooler(x)), at_read

    _, (x_c, c_c) = forward(ids)
    _, (_, c_x) = forward(other)
    return forward(ids, replace=x_c - (c_c - c_x))[0]


def test_post_norm_one_edge_by_hand():
    """Patching ("1-2", "3-1.k") of a 3-layer BERT classifier (float64) equals the logits
    computed by hand from its modules, the head's output carried through two layers' norms
    with each run's own statistics."""
    model = tiny_model("bert-cls", layers=3)
    model.hf.double()
    clean, corrupted = _post_ids(seed=7, items=1)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.class_margin())
    g = runs.graph
    masks = g.mask([[], g.index([("1-2", "3-1.k")])], torch.float64, "cpu")
    out, _ = run(model, runs.clean, g, copies=2, masks=masks, corrupted=runs.corrupted_values)
    with torch.no_grad():
        want = _bert_by_hand(model, clean[0], corrupted[0], up=(0, 1), layer_d=2, head_d=0, via="k")
    assert_close(out[1].numpy(), want[0].numpy(), F64)
    assert_close(out[0].numpy(), runs.reference[0].numpy(), F64)
    assert not np.allclose(out[0].numpy(), out[1].numpy())  # the edge does move the logits


def test_post_norm_eap_is_the_derivative_of_exact_edge_patching():
    model = tiny_model("bert-cls")
    model.hf.double()
    clean, corrupted = _post_ids(seed=8)
    runs = clean_and_corrupted(model, clean, corrupted, ak.interventions.class_margin())
    g = runs.graph
    scores = gradient_scores(runs)
    pairs = _everything(g)
    eps = 1e-5
    fractional = torch.zeros(2 * len(pairs), *g.valid.shape, dtype=torch.float64)
    for i, (u, d) in enumerate(pairs):
        fractional[2 * i, u, d], fractional[2 * i + 1, u, d] = eps, -eps
    v = runs.measure([], fractional=fractional, batch_size=512)
    fd = (v[0::2] - v[1::2]) / (2 * eps)
    assert_close(np.array([scores[u, d] for u, d in pairs]), fd, FD)
    assert np.abs(fd).max() > 1e-3
    assert not scores[~g.valid].any()


def test_post_norm_zeroed_head_scores_zero_and_eap_ranks_like_exact():
    """Head 1-2's output projection is zero, so none of its edges can carry anything: exact
    patching and EAP both give them 0 (exact patching within float32 through the model).
    EAP ranks every edge by |score| as exact patching does."""
    model = tiny_model("bert-cls", layers=2, heads=2, hidden=16)
    with torch.no_grad():
        model.hf.bert.encoder.layer[0].attention.output.dense.weight[:, 8:] = 0
    clean, corrupted = _post_ids(seed=9, items=3)
    metric = ak.interventions.class_margin()
    exact = ak.edge_attribution(model, clean, corrupted, metric=metric, method="exact",
                                progress=False)
    eap = ak.edge_attribution(model, clean, corrupted, metric=metric)
    for table in (exact.table, eap.table):
        s = table["score"]
        assert_close(s.loc["1-2"].to_numpy(), np.zeros(len(s.loc["1-2"])), F32_DEEP,
                     scale=float(s.abs().max()))
        assert s.loc["1-1"].abs().max() > 1e-2 * s.abs().max()
    assert not eap.table.loc["1-2", "score"].any()  # its difference is exactly zero
    from scipy.stats import spearmanr

    rho = spearmanr(exact.table["score"].abs(), eap.table["score"].abs()).statistic
    assert rho > 0.9, rho


# ------------------------------------------------------------------ pairs in chunks
def _uneven(post: bool):
    """Five pairs of 4 to 8 tokens (so that chunks are padded to widths of their own)."""
    clean, corrupted = [], []
    for seed, n in enumerate((6, 4, 8, 5, 6)):
        c, x = (_post_ids if post else _ids)(seed=seed, items=1, n=n, changed=1)
        clean += c
        corrupted += x
    return clean, corrupted


@pytest.mark.parametrize("kind, metric", [("gpt2", "loss"), ("llama", "loss"),
                                          ("bert-cls", "margin")])
def test_pairs_in_chunks_give_the_scores_and_curve_of_one_batch(kind, metric):
    """edge_attribution and circuit_faithfulness run at most batch_size pairs at a time:
    chunks of 2, 2 and 1 pairs give what one batch of the 5 gives (every method)."""
    model = tiny_model(kind, **({"kv_heads": 2} if kind == "llama" else {}))
    clean, corrupted = _uneven(kind.startswith("bert"))
    m = _metric(metric)
    for method in ("eap", "eap-ig", "exact"):
        whole, parts = (ak.edge_attribution(model, clean, corrupted, metric=m, method=method,
                                            steps=3, batch_size=size, progress=False)
                        for size in (64, 2))
        assert_close(parts.table["score"].to_numpy(), whole.table["score"].to_numpy(), F32_DEEP,
                     err_msg=method)
        assert_close([parts.meta["clean"], parts.meta["corrupted"]],
                     [whole.meta["clean"], whole.meta["corrupted"]], F32_DEEP)
        assert parts.meta["n_items"] == whole.meta["n_items"] == 5
        assert parts.meta["tokens"] == whole.meta["tokens"]
    n = len(whole.table)
    curves = [ak.circuit_faithfulness(model, ak.circuit(whole, top=n // 2), clean, corrupted,
                                      metric=m, sizes=[0, 3, n // 4], batch_size=size)
              for size in (64, 2)]
    for f in (curves, [ak.circuit_faithfulness(model, whole, clean, corrupted, metric=m,
                                               sizes=[0, 10, n], batch_size=size)
                       for size in (64, 2)]):
        assert_close(f[1].table.to_numpy(), f[0].table.to_numpy(), F32_DEEP)
        assert_close([f[1].meta[k] for k in ("faithfulness", "kept", "clean", "corrupted")],
                     [f[0].meta[k] for k in ("faithfulness", "kept", "clean", "corrupted")],
                     F32_DEEP)
        assert f[1].meta["n_items"] == 5
    # no edge kept is the corrupted run, every edge the clean run
    assert_close(f[1].table["metric"].to_numpy()[[0, 2]],
                 [f[0].meta["corrupted"], f[0].meta["clean"]], F32_DEEP)


def _scaled_norms(model, seed, zero=None):
    """Random norm scales (some negative, some small) and shifts, so that the post-norm
    maps differ from norm to norm; ``zero``: set one entry of the first or the last norm's
    scale to 0."""
    gen = torch.Generator().manual_seed(seed)
    norms = [m for m in model.hf.modules() if isinstance(m, torch.nn.LayerNorm)]
    with torch.no_grad():
        for m in norms:
            m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.8 + 0.3)
            m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.5)
        if zero is not None:
            norms[0 if zero == "first" else -1].weight[3] = 0.0
    return model


@pytest.mark.parametrize("kind, metric, zero", [(k, m, z) for k, m in _POST for z in (None, "first", "last")]
                         + [("gpt2", "loss", None), ("llama-gqa", "loss", None)])
@pytest.mark.parametrize("block_bytes", [16 << 20, 3000])
def test_first_order_sums_are_the_differences_times_the_gradients(kind, metric, zero, block_bytes):
    """Runs.first_order equals Σ (ĉ′ − ĉ) · g over the differences Runs.deltas gives, in
    whole or in blocks of rows. Post-norm: each component is scaled once, the norms' maps
    factored out (a zero scale before the last norm falls back to carrying them through each
    run's norms); pre-norm: the differences themselves."""
    post = kind not in ("gpt2", "llama-gqa")
    model = tiny_model("llama", layers=3, heads=4, kv_heads=2) if kind == "llama-gqa" else tiny_model(kind, layers=3)
    if post:
        model = _scaled_norms(model, seed=11, zero=zero)
    clean, corrupted = _post_ids(seed=8, items=3) if post else _ids(seed=8, items=3, n=7)
    m = _metric(metric)
    runs = clean_and_corrupted(model, clean, corrupted, m, grad=True)
    out, p = runs.clean_pass
    value = runs.metric(out, hooks.context(model, runs.clean, runs.reference, 1)).sum()
    grads = {d: gr[i] for downs, gr in p.gradients(value) for i, d in enumerate(downs)}
    want = np.zeros(runs.graph.valid.shape)
    for downs, ups, delta in runs.deltas():
        g = torch.stack([grads[d] for d in downs]).double()
        want[np.ix_(ups, downs)] = torch.einsum("untd,kntd->uk", delta.double(), g).numpy()
    got = runs.first_order(lambda downs: (downs, torch.stack([grads[d].reshape(-1) for d in downs])),
                           block_bytes=block_bytes)
    assert np.abs(want).max() > 0
    assert_close(got, want, F32_DEEP)
