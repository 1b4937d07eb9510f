"""Attention flow, attention graph and influence: speed side by side with the reference.

    .venv/bin/python benchmarks/flow.py

One run measures, on random Dirichlet attention with a fixed seed (the speed of max-flow
and graph tracing does not depend on where the maps come from):

1. ``attention_flow`` (all sources) vs the networkx all-pairs loop of Abnar & Zuidema's
   code (``maximum_flow_value`` with ``edmonds_karp`` for every top-level node and input
   token), and vs the same loop with networkx's default ``preflow_push``, on a 12-layer,
   12-head input of 10 tokens; values compared.
2. ``attention_flow`` from [CLS] only, 64 tokens, 12 layers x 12 heads.
3. ``attention_graph`` + ``influence`` for one 128-token input of a 6-layer x 12-head
   model.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np
import scipy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

import attnkit as ak  # noqa: E402
from attnkit.flow import attention_flow, attention_graph, flow_network, influence  # noqa: E402


def dirichlet_attention(n_layers: int, n_heads: int, n: int, conc: float, seed: int):
    """Random attention: every row a Dirichlet(conc) sample; [CLS] first, [SEP] last."""
    rng = np.random.default_rng(seed)
    maps = rng.dirichlet(np.full(n, conc), size=(n_layers, n_heads, n)).astype(np.float32)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(1, n - 1)] + ["[SEP]"]
    roles = ["cls"] + ["word"] * (n - 2) + ["sep"]
    word_ids = [-1] + list(range(n - 2)) + [-1]
    return ak.Attention(maps=maps, tokens=tokens, roles=roles, word_ids=word_ids,
                        words=tokens[1:-1])


def best(fn, reps: int):
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def networkx_all_pairs(att, flow_func):
    g = flow_network(att)
    n_layers, n = att.n_layers, len(att)
    return np.array([[nx.maximum_flow_value(g, (n_layers, s), (0, t), flow_func=flow_func)
                      for t in range(n)] for s in range(n)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conc", type=float, default=0.1,
                    help="Dirichlet concentration of the rows for the flow measurements")
    ap.add_argument("--graph-conc", type=float, default=0.02,
                    help="Dirichlet concentration for the graph measurement (peakier, so "
                         "that many weights pass the 0.3 threshold)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    conc, gconc, seed = args.conc, args.graph_conc, args.seed
    load0 = os.getloadavg()[0]

    # 1. all pairs at n = 10, 12 layers
    att10 = dirichlet_attention(12, 12, 10, conc, seed)
    t_ek, ref_ek = best(lambda: networkx_all_pairs(att10, nx.algorithms.flow.edmonds_karp), 1)
    t_pp, ref_pp = best(lambda: networkx_all_pairs(att10, nx.algorithms.flow.preflow_push), 1)
    t_ours, (ours, upper) = best(lambda: attention_flow(att10, sources="all", return_bounds=True), 5)
    rel_ek = float(np.max(np.abs(ours - ref_ek) / ref_ek))
    rel_pp = float(np.max(np.abs(ours - ref_pp) / ref_pp))
    gap10 = float(np.max((upper - ours) / ours))

    # 2. [CLS] only at n = 64, 12 layers
    att64 = dirichlet_attention(12, 12, 64, conc, seed + 1)
    t64, (f64, u64) = best(lambda: attention_flow(att64, sources=0, return_bounds=True), 3)
    gap64 = float(np.max((u64 - f64) / f64))
    g64 = flow_network(att64)
    check = [0, 31, 63]
    t_nx64, ref64 = best(lambda: [nx.maximum_flow_value(g64, (12, 0), (0, t)) for t in check], 1)
    rel64 = float(np.max(np.abs(f64[check] - np.array(ref64)) / np.array(ref64)))

    # 3. attention graph + influence, 128 tokens, 6 layers
    att128 = dirichlet_attention(6, 12, 128, gconc, seed + 2)
    t128, g128 = best(lambda: (lambda g: (g, influence(g)))(attention_graph(att128, threshold=0.3)), 7)
    g128 = g128[0]
    load1 = os.getloadavg()[0]

    body = f"""
Command: `.venv/bin/python benchmarks/flow.py` (defaults `--conc {conc} --graph-conc {gconc}
--seed {seed}`)

Random attention, every row drawn from Dirichlet({conc}) (flows) or Dirichlet({gconc})
(graph: peaky enough that most of the 768 nodes are reached at threshold 0.3, a larger
graph than the bundled MiniLM gives on real text), seed {seed}; speed does not depend on
where the maps come from. numpy {np.__version__},
scipy {scipy.__version__}, networkx {nx.__version__}, Python {platform.python_version()} on
{os.cpu_count()} CPU cores ({platform.machine()}), shared with other jobs: 1-min load
average {load0:.1f} at the start, {load1:.1f} at the end. Best of repeated runs for attnkit
(5, 3, 7 runs), one run for the networkx references.

| measurement | reference | attnkit | ratio | target |
|---|---:|---:|---:|---|
| all-pairs attention flow, n = 10, 12 layers x 12 heads (100 max-flows) | networkx `edmonds_karp` loop (Abnar & Zuidema's code): {t_ek:.2f} s | `attention_flow(att, "all")`: {t_ours:.3f} s | **{t_ek / t_ours:.0f}x** | >= 50x, same values |
| same, networkx default `preflow_push` loop | {t_pp:.2f} s | {t_ours:.3f} s | {t_pp / t_ours:.0f}x | |
| attention flow from [CLS], n = 64, 12 layers x 12 heads (64 max-flows) | | `attention_flow(att, sources=0)`: **{t64:.2f} s** | | < 10 s |
| `attention_graph(att, threshold=0.3)` + `influence(g)`, n = 128, 6 layers x 12 heads | | **{t128 * 1000:.0f} ms** ({g128.number_of_nodes()} nodes, {g128.number_of_edges()} edges) | | < 0.2 s |

Values: at n = 10 the largest relative difference from networkx is {rel_ek:.1e}
(`edmonds_karp`) and {rel_pp:.1e} (`preflow_push`), and the certified gap between the
flow found and the cut found is at most {gap10:.1e} of the value; at n = 64 the certified
gap is at most {gap64:.1e}, and three sinks (positions {check}) checked with networkx's
default algorithm ({t_nx64:.1f} s for the three) differ by at most {rel64:.1e}.

How: every (source, sink) pair is a max-flow problem on `(L - 1) n + 2` nodes; up to 256 of
them are solved as one disjoint union with scipy's compiled Dinic, inside an iterative
refinement (integer flow on the floored, rescaled residual network, then a certified cut)
that ends within a relative gap of 1e-11 - see `attnkit/flow/maxflow.py`.
"""
    write_section("flow", body)
    print(body)


if __name__ == "__main__":
    main()
