"""Regenerate the numbers of docs/results.md, "Information-flow routes", and the pictures of
docs/widgets.md (CircuitView, RoutesView).

    PYTHONPATH=. .venv/bin/python docs/scripts/routes.py [--items 16] [--pictures]

Toy induction model (attnkit.toys.induction, 2 layers x 2 heads) on ``<bos> r r`` inputs
(r = 32 distinct random tokens, seed 1). For every second-copy position t (N + 1 .. 2N - 1,
predicting token t + 1) of every item, ``ak.flow_routes(model, item, position=t)`` at two
thresholds; counted: routes with an edge from (2, t) through a layer-2 head to key
t - N + 1 (the token after the earlier occurrence of token t), routes that below that key
run through the previous-token head to t - N; the mean importance of those edges.
The previous-token head is the layer-1 head that attends most to the previous token.
With ``--pictures``, ``view.save`` writes docs/img/routesview.png (the route at t = N + 9 of
item 0) and docs/img/circuitview.png (the top-10 exact circuits of the two corruptions of
docs/scripts/circuits.py compared, 4 items).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import attnkit as ak

N = 32
IMG = Path(__file__).resolve().parents[1] / "img"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=16)
    p.add_argument("--thresholds", type=float, nargs="+", default=[0.3, 0.04])
    p.add_argument("--pictures", action="store_true")
    args = p.parse_args()
    model = ak.toy.induction_model()
    inputs = ak.induction_inputs(model, args.items, N, seed=1)
    att = model.attend(inputs[0])
    n = len(att)
    prev = int(np.argmax([att.maps[0, h, np.arange(2, n), np.arange(1, n - 1)].mean()
                          for h in range(model.n_heads)]))
    print(f"previous-token head: 1-{prev + 1}")
    print("| threshold | routes | through a layer-2 head to `t − N + 1` | then the previous-token "
          "head to `t − N` | mean importance (that layer-2 edge, that 1-1 edge) | mean nodes, "
          "edges |")
    print("|---:|---:|---:|---:|---:|---:|")
    for tau in args.thresholds:
        total = top_hit = key_hit = 0
        w_top, w_key, nodes, edges = [], [], [], []
        for item in inputs:
            for t in range(N + 1, 2 * N):
                g = ak.flow_routes(model, item, position=t, threshold=tau)
                total += 1
                a, b = ((2, t), (1, t - N + 1)), ((1, t - N + 1), (0, t - N))
                hit_a = g.has_edge(*a) and bool(g.edges[a]["heads"])
                hit_b = hit_a and g.has_edge(*b) and prev in g.edges[b]["heads"]
                top_hit += hit_a
                key_hit += hit_b
                if hit_a:
                    w_top.append(sum(g.edges[a]["weights"]))
                if hit_b:
                    w_key.append(g.edges[b]["weights"][g.edges[b]["heads"].index(prev)])
                nodes.append(g.number_of_nodes())
                edges.append(g.number_of_edges())
        print(f"| {tau:g} | {total} | {top_hit} ({top_hit / total:.1%}) | {key_hit} "
              f"({key_hit / total:.1%}) | "
              f"{np.mean(w_top):.3f}, {np.mean(w_key):.3f} | {np.mean(nodes):.1f}, "
              f"{np.mean(edges):.1f} |")
    if args.pictures:
        t = N + 9
        g = ak.flow_routes(model, inputs[0], position=t, threshold=0.1)
        ak.RoutesView(g).save(IMG / "routesview.png", dpi=120)
        other = ak.induction_inputs(model, 4, N, seed=2)
        clean = inputs[:4]
        replaced = [np.concatenate([a[:1], b[1:N + 1], a[N + 1:]]) for a, b in zip(clean, other)]
        rng = np.random.default_rng(3)
        permuted = [np.concatenate([a[:1], a[1:N + 1][rng.permutation(N)], a[N + 1:]])
                    for a in clean]
        loss = ak.interventions.loss(positions=slice(N + 2, 2 * N + 1))
        circuits = [ak.circuit(ak.edge_attribution(model, clean, corr, metric=loss,
                                                   method="exact", batch_size=1024,
                                                   progress=False), top=10)
                    for corr in (replaced, permuted)]
        ak.CircuitView(circuits[0], other=circuits[1], names=("first copy replaced",
                                                              "first copy permuted")).save(
            IMG / "circuitview.png", dpi=120)
        print("wrote", IMG / "routesview.png", IMG / "circuitview.png")


if __name__ == "__main__":
    main()
