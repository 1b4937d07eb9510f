"""Issue 30's known answers on the trained induction toy (2 layers x 2 heads, vocabulary 512):
the induction circuit found by exact edge patching, EAP, EAP-IG and ACDC.

Inputs are ``<bos> r r`` (r = N distinct random tokens); the metric is the loss over the
predictable second-copy tokens (positions N + 2 .. 2N), i.e. minus their mean
log-probability; two corruptions: the first copy replaced by other tokens, and the first
copy permuted. docs/results.md reports the same numbers on more inputs
(docs/scripts/circuits.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import attnkit as ak

pytestmark = pytest.mark.numerics

N, ITEMS = 32, 4


@pytest.fixture(scope="module")
def toy():
    model = ak.toy.induction_model()
    inputs = ak.induction_inputs(model, ITEMS, N, seed=1)
    other = ak.induction_inputs(model, ITEMS, N, seed=2)
    replaced = [np.concatenate([a[:1], b[1:N + 1], a[N + 1:]]) for a, b in zip(inputs, other)]
    rng = np.random.default_rng(3)
    permuted = [np.concatenate([a[:1], a[1:N + 1][rng.permutation(N)], a[N + 1:]]) for a in inputs]
    loss = ak.interventions.loss(positions=slice(N + 2, 2 * N + 1))
    # the previous-token head: the layer-1 head that attends to the previous token
    att = model.attend(inputs[0])
    n = len(att)
    prev = int(np.argmax([att.maps[0, h, np.arange(2, n), np.arange(1, n - 1)].mean()
                          for h in range(2)]))
    exact = {name: ak.edge_attribution(model, inputs, corr, metric=loss, method="exact",
                                       batch_size=1024, progress=False)
             for name, corr in (("replaced", replaced), ("permuted", permuted))}
    return model, inputs, {"replaced": replaced, "permuted": permuted}, loss, f"1-{prev + 1}", exact


def test_the_previous_token_heads_key_edges_rank_among_the_top_exact_edges(toy):
    model, inputs, corrupted, loss, prev, exact = toy
    for name in ("replaced", "permuted"):
        s = exact[name].table["score"]
        top = set(s.abs().sort_values(ascending=False).index[:7])
        # the induction circuit: the previous-token head into both induction heads' keys, the
        # induction heads into the logits, the token embedding into their values (and into the
        # previous-token head's value: what it moves forward)
        assert top == {(prev, "2-1.k"), (prev, "2-2.k"), ("2-1", "logits"), ("2-2", "logits"),
                       ("embed", "2-1.v"), ("embed", "2-2.v"), ("embed", f"{prev}.v")}, name
        # the loss rises (the model gets worse) when any of them carries the corrupted value
        assert (s[list(top)] > 0).all()


def test_ten_edges_keep_the_behaviour_and_the_key_edges_are_needed(toy):
    model, inputs, corrupted, loss, prev, exact = toy
    for name, corr in corrupted.items():
        G = ak.circuit(exact[name], top=10)
        f = ak.circuit_faithfulness(model, G, inputs, corr, metric=loss, sizes=[10])
        assert f.meta["faithfulness"] >= 0.9, name
        G.remove_edge(prev, "2-1", key="k")
        G.remove_edge(prev, "2-2", key="k")
        without = ak.circuit_faithfulness(model, G, inputs, corr, metric=loss, sizes=[0])
        assert without.meta["faithfulness"] < 0.1, name


def test_eap_ig_ranks_the_edges_at_least_as_exact_patching_does_as_eap(toy):
    from scipy.stats import spearmanr

    model, inputs, corrupted, loss, prev, exact = toy
    corr = corrupted["replaced"]
    ref = exact["replaced"].table["score"].abs()
    eap = ak.edge_attribution(model, inputs, corr, metric=loss)
    ig = ak.edge_attribution(model, inputs, corr, metric=loss, method="eap-ig", steps=10,
                             batch_size=64)
    rho_eap = spearmanr(ref, eap.table["score"].abs()).statistic
    rho_ig = spearmanr(ref, ig.table["score"].abs()).statistic
    assert rho_ig >= rho_eap > 0.5
    # integrated gradients put both key edges among its top 10
    rank = ig.table["score"].abs().rank(ascending=False)
    assert rank[(prev, "2-1.k")] <= 10 and rank[(prev, "2-2.k")] <= 10


@pytest.mark.slow
def test_acdc_finds_the_induction_circuit(toy):
    model, inputs, corrupted, loss, prev, exact = toy
    G = ak.acdc(model, inputs, corrupted["permuted"], metric=loss, threshold=0.05,
                progress=False)
    kept = {(u, "logits" if v == "logits" else f"{v}.{k}") for u, v, k in G.edges(keys=True)}
    assert {(prev, "2-1.k"), (prev, "2-2.k"), ("2-1", "logits"), ("2-2", "logits")} <= kept
    assert len(kept) <= 10
