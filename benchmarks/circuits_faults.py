"""Page faults of a patched forward: circuit faithfulness with glibc's default heap and with
large blocks kept for reuse (issue 30; docs/circuits.md, "Speed").

    .venv/bin/python benchmarks/circuits_faults.py [--pairs 8] [--n 64] [--top 300] [--threads 1]

``ak.circuit_faithfulness`` (with its curve) gives every downstream input a stream of its own,
so each patched forward makes fresh ``[36, rows, tokens, d]`` tensors at every layer; on Linux
a tensor over glibc's mmap threshold is new memory from the kernel, one page fault per 4 kB.
Two sides, each in a fresh subprocess, one after the other in one run, the same call: glibc's
defaults, and the environment ``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736`` (large
blocks served from the heap, freed ones kept for reuse). The bundled all-MiniLM-L6-v2, random
MiniLM token ids, ``--n`` tokens per input, the corrupted copy changing one token in the
middle, metric ``projection()``; the circuit is the top ``--top`` EAP edges. Each side reports
the call's wall time, user and kernel CPU seconds, minor page faults, and the faithfulness
(the two must agree to float32 precision).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

HEAP = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(64 << 30)}


def child(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    import attnkit as ak

    torch.set_num_threads(args.threads)
    model = ak.load("minilm")
    rng = np.random.default_rng(0)
    clean = [rng.integers(1000, 29000, args.n) for _ in range(args.pairs)]
    corrupted = [c.copy() for c in clean]
    for c in corrupted:
        c[args.n // 2] = (c[args.n // 2] + 1 - 1000) % 28000 + 1000
    metric = ak.interventions.projection()
    scores = ak.edge_attribution(model, clean, corrupted, metric=metric, progress=False)
    circuit = ak.circuit(scores, top=args.top)
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    f = ak.circuit_faithfulness(model, circuit, clean, corrupted, metric=metric)
    seconds, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": seconds, "user": r1.ru_utime - r0.ru_utime,
                      "kernel": r1.ru_stime - r0.ru_stime, "faults": r1.ru_minflt - r0.ru_minflt,
                      "faithfulness": float(f.meta["faithfulness"])}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--top", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    import torch

    sides = {"glibc's defaults": {}, "large blocks kept for reuse (`" + " ".join(
        f"{k}={v}" for k, v in HEAP.items()) + "`)": HEAP}
    results = {}
    load0 = os.getloadavg()[0]
    for name, env in sides.items():
        cmd = [sys.executable, __file__, "--child", "--pairs", str(args.pairs), "--n", str(args.n),
               "--top", str(args.top), "--threads", str(args.threads)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True,
                              env={**os.environ, **env})
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    load1 = os.getloadavg()[0]
    first, second = results.values()
    body = [f"Command: `.venv/bin/python benchmarks/circuits_faults.py --pairs {args.pairs} "
            f"--n {args.n} --top {args.top} --threads {args.threads}` "
            f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
            f"torch {torch.__version__} on {os.cpu_count()} CPU cores ({platform.machine()}), "
            f"{args.threads} torch thread(s); 1-min load average {load0:.1f}-{load1:.1f} during "
            f"the run (shared machine). `ak.circuit_faithfulness` (with its curve) of the top "
            f"{args.top} EAP edges of the bundled all-MiniLM-L6-v2, {args.pairs} pairs of {args.n} "
            "random tokens, metric `projection()`; each side in a fresh subprocess.", "",
            "| heap | wall (s) | user CPU (s) | kernel CPU (s) | minor page faults | faithfulness |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        body.append(f"| {name} | {r['seconds']:.1f} | {r['user']:.1f} | {r['kernel']:.1f} | "
                    f"{r['faults']:,} | {r['faithfulness']:.5f} |")
    body += ["", f"- wall time, defaults against kept blocks: {first['seconds'] / second['seconds']:.2f}x"]
    from _report import write_section

    write_section("circuits: page faults of a patched forward", "\n".join(body))
    print("\n".join(body))


if __name__ == "__main__":
    main()
