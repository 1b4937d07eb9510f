"""Peak memory of EAP-IG over every edge of MiniLM: the pairs in one batch vs in chunks (issue 30).

    .venv/bin/python benchmarks/circuits_memory.py [--pairs 16] [--chunk 4] [--n 64] [--steps 10] [--threads 1]

``ak.edge_attribution(..., method="eap-ig")`` runs at most ``batch_size`` pairs at a time: each
chunk's clean and corrupted runs keep every upstream component of every input (and a
post-norm encoder carries them through each run's norms), so peak memory grows with
``batch_size``, not with the pairs. Two sides, each in a fresh subprocess (peak resident set
size, ``ru_maxrss``, is a high-water mark: one process per side), one after the other in one
run: ``--pairs`` pairs with ``batch_size=--pairs`` (one chunk: the code path of one batch) and
with ``batch_size=--chunk``. The bundled all-MiniLM-L6-v2 (a post-norm encoder, 8,034 edges),
random MiniLM token ids, ``--n`` tokens per input, the corrupted copy changing one token in
the middle; metric ``projection()`` (the mean-pooled embedding along the clean run's). Each
side reports its peak RSS once the model is loaded and after EAP-IG, and its wall and CPU
time (on a shared machine the CPU time is the steadier); the
two sides' scores are compared (they must agree to float32 precision).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def peak_gb() -> float:
    """Peak resident set size of this process so far, GB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


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
    loaded = peak_gb()
    t, cpu = time.perf_counter(), time.process_time()
    r = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.projection(),
                            method="eap-ig", steps=args.steps, batch_size=args.batch_size,
                            progress=False)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    np.save(args.scores, r.table["score"].to_numpy())
    print(json.dumps({"loaded_gb": loaded, "peak_gb": peak_gb(), "seconds": seconds,
                      "cpu": cpu, "edges": len(r.table)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=4)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--scores", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.batch_size is not None:
        child(args)
        return
    import numpy as np
    import torch

    sides = {f"{args.pairs} pairs in one batch (batch_size={args.pairs})": args.pairs,
             f"{args.pairs} pairs in chunks of {args.chunk} (batch_size={args.chunk})": args.chunk}
    results, scores = {}, {}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, size) in enumerate(sides.items()):
            out = Path(tmp) / f"scores{i}.npy"
            cmd = [sys.executable, __file__, "--pairs", str(args.pairs), "--n", str(args.n),
                   "--steps", str(args.steps), "--threads", str(args.threads),
                   "--batch-size", str(size), "--scores", str(out)]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            scores[name] = np.load(out)
    load1 = os.getloadavg()[0]
    a, b = scores.values()
    rel = float(np.abs(a - b).max() / np.abs(a).max())
    body = [f"Command: `.venv/bin/python benchmarks/circuits_memory.py --pairs {args.pairs} "
            f"--chunk {args.chunk} --n {args.n} --steps {args.steps} --threads {args.threads}`", "",
            f"torch {torch.__version__} on {os.cpu_count()} CPU cores ({platform.machine()}), "
            f"{args.threads} torch thread(s); 1-min load average {load0:.1f}-{load1:.1f} during "
            f"the run (shared machine). EAP-IG ({args.steps} steps) over every edge of the bundled "
            f"all-MiniLM-L6-v2, {args.pairs} pairs of {args.n} random tokens, metric "
            "`projection()`; each side in a fresh subprocess, peak RSS (`ru_maxrss`).", "",
            "| side | edges | peak RSS, model loaded (GB) | peak RSS after EAP-IG (GB) | "
            "EAP-IG wall (s) | EAP-IG CPU (s) |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        body.append(f"| {name} | {r['edges']} | {r['loaded_gb']:.2f} | {r['peak_gb']:.2f} | "
                    f"{r['seconds']:.1f} | {r['cpu']:.1f} |")
    body += ["", f"- the two sides' scores agree to {rel:.1e} of the largest |score| (float32)"]
    from _report import write_section

    write_section("circuits: memory of the pairs in chunks", "\n".join(body))
    print("\n".join(body))


if __name__ == "__main__":
    main()
