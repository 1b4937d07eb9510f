"""head_distances speed: attnkit's chunked pair loop beside a per-item reference, one run.

    python benchmarks/clustering.py --store runs/ewt/ewt-dev [--subset 300]

The reference is the straightforward per-item loop (for every item and every head, the JS
divergence of that head's rows against all heads at once, as Clark et al.'s script does,
without its smoothing). Both run on the same subset in this process; then attnkit's version
runs on the whole store. Writes the ``## clustering`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time
from pathlib import Path

import numpy as np

import attnkit as ak
from attnkit.analysis.cluster import head_distances
from _report import write_section


def reference(items) -> np.ndarray:
    k = None
    total, rows = None, 0
    for att in items:
        L, H, n, _ = att.maps.shape
        x = att.maps.reshape(L * H, n, n).astype(np.float64)
        if total is None:
            k = L * H
            total = np.zeros((k, k))
        xlx = x * np.log(np.where(x > 0, x, 1.0))
        for a in range(k):
            m = (x[a][None] + x) / 2
            mlm = m * np.log(np.where(m > 0, m, 1.0))
            total[a] += (0.5 * (xlx[a][None] + xlx) - mlm).sum((1, 2))
        rows += n
    return total / rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--subset", type=int, default=300)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"))
    args = p.parse_args()
    sset = ak.AttentionSet.open(args.store)
    t = time.perf_counter()
    items = list(sset)
    load_s = time.perf_counter() - t
    sub = items[: args.subset]

    t, c = time.perf_counter(), time.process_time()
    ref = reference(sub)
    ref_s, ref_c = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    ours = head_distances(sub).to_numpy()
    ours_s, ours_c = time.perf_counter() - t, time.process_time() - c
    err = float(np.abs(ours - ref).max())

    t, c = time.perf_counter(), time.process_time()
    full = head_distances(items)
    full_s, full_c = time.perf_counter() - t, time.process_time() - c
    n_values = sum(len(a) ** 2 for a in items)
    k = full.shape[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    body = f"""
`python benchmarks/clustering.py --store {args.store} --subset {args.subset}`
({platform.processor() or platform.machine()}, numpy {np.__version__}, one process on a
shared 2-core machine whose load varies: CPU time is the steadier figure).

| what | items | wall (s) | CPU (s) | CPU ratio |
|---|---|---|---|---|
| per-item reference loop (float64, as Clark et al.'s script) | {len(sub)} | {ref_s:.2f} | {ref_c:.2f} | 1.0 |
| `head_distances` (float32 chunks, pair loop) | {len(sub)} | {ours_s:.2f} | {ours_c:.2f} | {ref_c / ours_c:.1f}x faster |
| `head_distances`, whole store | {len(items)} | {full_s:.1f} | {full_c:.1f} | |

Max. abs. difference from the reference on the subset: {err:.1e} (divergences in nats).
The whole store holds {n_values:,} attention values per head; {k} heads make
{k * (k - 1) // 2:,} pairs, so {n_values * k * (k - 1) // 2 / 1e9:.2f} G logarithms
({full_c / (n_values * k * (k - 1) / 2) * 1e9:.1f} ns of CPU each, log-bound). Loading the
store: {load_s:.1f} s. Peak RSS of the run: {peak:.0f} MiB.
"""
    write_section("clustering", body, doc=Path(args.out))
    print(body)


if __name__ == "__main__":
    main()
