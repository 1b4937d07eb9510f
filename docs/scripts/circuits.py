"""Regenerate the numbers of docs/results.md, "Circuits".

    PYTHONPATH=. .venv/bin/python docs/scripts/circuits.py [--items 16] [--steps 20]

Toy induction model (attnkit.toys.induction, 2 layers x 2 heads, vocabulary 512) on
``<bos> r r`` inputs (r = 32 distinct random tokens, seed 1); metric: the loss over the
predictable second-copy tokens (positions 34..64), i.e. minus their mean log-probability.
Two corruptions: the first copy replaced by other tokens (seed 2), and the first copy
permuted (seed 3). For each: every edge scored by exact edge patching, EAP and EAP-IG
(rank correlations with exact, and where each puts the previous-token head's two key
edges); the faithfulness of the top-10 exact circuit, its curve, and the same circuit
without the two key edges; ACDC's circuit and run time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import spearmanr

import attnkit as ak

N = 32


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threshold", type=float, default=0.05)
    args = p.parse_args()
    model = ak.toy.induction_model()
    inputs = ak.induction_inputs(model, args.items, N, seed=1)
    other = ak.induction_inputs(model, args.items, N, seed=2)
    replaced = [np.concatenate([a[:1], b[1:N + 1], a[N + 1:]]) for a, b in zip(inputs, other)]
    rng = np.random.default_rng(3)
    permuted = [np.concatenate([a[:1], a[1:N + 1][rng.permutation(N)], a[N + 1:]]) for a in inputs]
    loss = ak.interventions.loss(positions=slice(N + 2, 2 * N + 1))
    att = model.attend(inputs[0])
    n = len(att)
    prev = int(np.argmax([att.maps[0, h, np.arange(2, n), np.arange(1, n - 1)].mean()
                          for h in range(2)]))
    prev_name = f"1-{prev + 1}"
    keys = [(prev_name, "2-1.k"), (prev_name, "2-2.k")]
    print(f"## toy: {args.items} inputs <bos> r r, N = {N}; metric {loss.name}; previous-token "
          f"head {prev_name}")
    for name, corr in (("first copy replaced", replaced), ("first copy permuted", permuted)):
        res = {}
        for method in ("exact", "eap", "eap-ig"):
            res[method] = ak.edge_attribution(model, inputs, corr, metric=loss, method=method,
                                              steps=args.steps, batch_size=1024, progress=False)
        ex = res["exact"]
        s = ex.table["score"]
        print(f"### {name}: loss clean {ex.meta['clean']:.4f}, corrupted {ex.meta['corrupted']:.3f}; "
              f"{len(s)} edges; seconds exact {ex.meta['seconds']:.1f}, EAP "
              f"{res['eap'].meta['seconds']:.1f}, EAP-IG ({args.steps} steps) "
              f"{res['eap-ig'].meta['seconds']:.1f}")
        order = s.abs().sort_values(ascending=False)
        print("exact top 10: " + ", ".join(f"{u}->{d} {s[(u, d)]:+.3f}" for u, d in order.index[:10]))
        for method in ("eap", "eap-ig"):
            t = res[method].table["score"]
            rank = t.abs().rank(ascending=False, method="min")
            top_ex = set(order.index[:7])
            top_m = set(t.abs().sort_values(ascending=False).index[:7])
            print(f"{method}: spearman with exact {spearmanr(s, t).statistic:.3f} (signed), "
                  f"{spearmanr(s.abs(), t.abs()).statistic:.3f} (|score|); key edges ranked "
                  f"{', '.join(f'{d} #{int(rank[(u, d)])} ({t[(u, d)]:+.3f})' for u, d in keys)}; "
                  f"top-7 overlap with exact {len(top_ex & top_m)}/7")
        G = ak.circuit(ex, top=10)
        f = ak.circuit_faithfulness(model, G, inputs, corr, metric=loss)
        print(f"top-10 exact circuit: faithfulness {f.meta['faithfulness']:.3f}; curve "
              + ", ".join(f"{k}: {v:.3f}" for k, v in f.table["faithfulness"].items()))
        for u, d in keys:
            G.remove_edge(u, d.split(".")[0], key="k")
        w = ak.circuit_faithfulness(model, G, inputs, corr, metric=loss, sizes=[0])
        print(f"the same without the two key edges ({G.number_of_edges()} edges): faithfulness "
              f"{w.meta['faithfulness']:.3f}")
        for method in ("eap", "eap-ig"):
            fm = ak.circuit_faithfulness(model, ak.circuit(res[method], top=10), inputs, corr,
                                         metric=loss, sizes=[10])
            print(f"top-10 {method} circuit: faithfulness {fm.meta['faithfulness']:.3f}")
        t0 = time.perf_counter()
        A = ak.acdc(model, inputs, corr, metric=loss, threshold=args.threshold, progress=False)
        kept = sorted(f"{u}->{v}.{k}" if v != "logits" else f"{u}->logits"
                      for u, v, k in A.edges(keys=True))
        fa = ak.circuit_faithfulness(model, A, inputs, corr, metric=loss, sizes=[0])
        print(f"ACDC (threshold {args.threshold}): {A.number_of_edges()} edges in "
              f"{A.graph['seconds']:.1f} s ({A.graph['n_forwards']} forwards; wall "
              f"{time.perf_counter() - t0:.1f} s), faithfulness {fa.meta['faithfulness']:.3f}: "
              + ", ".join(kept))


if __name__ == "__main__":
    main()
