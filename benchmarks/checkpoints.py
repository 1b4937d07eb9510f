"""Heads across training: scoring 50 checkpoints of the induction toy on fixed inputs.

    .venv/bin/python benchmarks/checkpoints.py [--reps 3] [--threads 1 2] [--no-write]

Trains the default toy recipe for 490 steps with a checkpoint every 10 (50 checkpoints,
``train_induction_model(checkpoint_every=10, out=...)``; untimed), then measures side by side
in one run, each configuration in a fresh subprocess (so its peak RSS, the process's
``ru_maxrss``, is its own), alternating in ``--reps`` rounds; times are medians:

- **one**: ``checkpoint_scores`` of a series holding only the last checkpoint: the work of
  one checkpoint (load, attention of 8 inputs of 129 tokens, ``head_scores``, losses).
- **series**: ``checkpoint_scores`` of all 50 checkpoints, one model in memory at a time.
  Target: under 30 s on 2 cores; its peak RSS close to **one**'s (memory bounded by one model).
- **all in memory**: the loop one writes without a series: every checkpoint loaded with
  ``ak.load`` into a list first, then scored; its memory grows with the number of models.

Memory: the process's resident set (``/proc/self/statm``) right after the work against right
before it, and the number of the toy's ``LlamaForCausalLM`` modules still alive then (the
peak RSS, ``ru_maxrss``, is set by importing torch and transformers, far above what 50 toy
models of 0.4 MB add, so it cannot tell the configurations apart; it is reported too).

Writes the ``checkpoints`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

CONFIGS = ("one", "series", "all in memory")
STEPS, EVERY = 490, 10


def child(config: str, folder: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    import attnkit as ak

    series = ak.checkpoints(folder)
    final = series[-1].load(device="cpu")
    inputs = ak.induction_inputs(final, 8, 64, seed=0)
    del final
    import gc

    from transformers import LlamaForCausalLM

    gc.collect()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    before = rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    models = []
    if config == "one":
        ak.checkpoint_scores(ak.checkpoints([series[-1].path]), inputs, early=50, late=120,
                             progress=False)
    elif config == "series":
        ak.checkpoint_scores(series, inputs, early=50, late=120, progress=False)
    else:
        models = [ak.load(c.path, device="cpu") for c in series]
        for model in models:
            atts = [model.attend(x) for x in inputs]
            ak.head_scores(atts, progress=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    gc.collect()
    alive = sum(isinstance(o, LlamaForCausalLM) for o in gc.get_objects())
    after = rss_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": peak, "base_mb": base,
                      "growth_mb": after - before, "alive": alive, "n_models": len(models)}))


def rss_mb() -> float:
    """The process's resident set now, in MB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    import torch

    import attnkit as ak
    from attnkit.toys import induction as toy

    torch.set_num_threads(1)
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "toy"
        t = time.perf_counter()
        toy.train_induction_model(steps=STEPS, checkpoint_every=EVERY, out=folder, progress=False)
        train_s = time.perf_counter() - t
        n = len(ak.checkpoints(folder))
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
        runs: dict[tuple[str, int], list[dict]] = {}
        for _ in range(args.reps):
            for threads in args.threads:
                for config in CONFIGS:
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", config, str(folder), str(threads)],
                        check=True, capture_output=True, text=True).stdout
                    runs.setdefault((config, threads), []).append(json.loads(out.splitlines()[-1]))
                    print(config, threads, runs[(config, threads)][-1], file=sys.stderr)
    med = {k: {m: statistics.median(r[m] for r in v)
               for m in ("wall", "cpu", "peak_mb", "base_mb", "growth_mb", "alive")}
           for k, v in runs.items()}
    lines = [
        "Command: `.venv/bin/python benchmarks/checkpoints.py "
        f"--reps {args.reps} --threads {' '.join(map(str, args.threads))}`",
        "",
        f"The default induction-toy recipe trained {STEPS} steps with a checkpoint every {EVERY} "
        f"({n} checkpoints, {size:.1f} MB on disk; training and writing took {train_s:.0f} s, "
        "untimed below). Inputs: `induction_inputs(final, 8, 64, seed=0)` (8 x 129 tokens), "
        "`checkpoint_scores(..., early=50, late=120)`. torch "
        f"{torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPU cores "
        f"({platform.machine()}) shared with other jobs: 1-min load average {load_start:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end. Each configuration in a fresh "
        f"process, {args.reps} interleaved rounds, medians. RSS growth: resident set right "
        "after the work minus right before it; models alive: the toy's `LlamaForCausalLM` "
        "modules still in memory after the work; peak RSS: the process's `ru_maxrss` (set by "
        "importing torch and transformers).",
        "",
        "| configuration | torch threads | wall s | CPU s | RSS growth MB | models alive after | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for threads in args.threads:
        for config in CONFIGS:
            m = med[(config, threads)]
            label = {"one": "`checkpoint_scores`, the last checkpoint only",
                     "series": f"`checkpoint_scores`, all {n} checkpoints",
                     "all in memory": f"all {n} models loaded first, then scored"}[config]
            lines.append(f"| {label} | {threads} | {m['wall']:.2f} | {m['cpu']:.2f} | "
                         f"{m['growth_mb']:.1f} | {m['alive']:.0f} | {m['peak_mb']:.0f} |")
    lines.append("")
    for threads in args.threads:
        one, series = med[("one", threads)], med[("series", threads)]
        held = med[("all in memory", threads)]
        lines.append(
            f"- {threads} torch thread{'s' if threads > 1 else ''}: **{n} checkpoints in "
            f"{series['wall']:.1f} s wall, {series['cpu']:.1f} s CPU** (target < 30 s); "
            f"{series['wall'] / one['wall']:.1f}x the wall time of one checkpoint "
            f"({series['cpu'] / one['cpu']:.1f}x its CPU time); RSS growth "
            f"{series['growth_mb']:.1f} MB and {series['alive']:.0f} models alive after {n} "
            f"checkpoints, against {held['growth_mb']:.1f} MB and {held['alive']:.0f} models "
            "when all are loaded first.")
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("checkpoints", body)


if __name__ == "__main__":
    main()
