"""Building the long-context views against the lazy forward that computed their scores.

The long-views fixture: benchmarks/long.py's random-init Llama-shaped decoder cut down to 4
layers x 4 heads (2 key/value heads, hidden 256: head dimension 64, MLP 1536, vocabulary
32,000, seed 0) captured lazily (``model.attend(text, lazy=True)``) on a text of the tiny
corpus cut to 21,843 tokens (long.py's ``text_of``). In one run, one after the other in the
same process:

- the lazy forward: ``model.attend(text, lazy=True)`` (queries, keys and row log-sum-exps
  kept; every score computed once by the forward);
- building ``Heatmap(att)`` and ``HeadGrid(att)`` on that attention (every map read band by
  band from Q/K: the pooled overview, the thumbnails and the scale tops);

and prints the views' time over the forward's (target: at most 2).

Run from the repo root::

    python benchmarks/views.py [--n 21843] [--threads 1] [--write]

``--write`` replaces the ``## views at long context`` section of docs/benchmarks.md.

OpenMP's threads wait for work passively here (``OMP_WAIT_POLICY=PASSIVE`` unless the
environment sets it): on a machine shared with other busy processes, threads that spin
between parallel regions take the cores the other threads of the same process need, and a
pass of many medium-sized operations (the views: a band of rows at a time) then slows down
several times more than one of few large ones (the forward). Forward and views run under the
same setting.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read once, when torch loads OpenMP

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPE = {"layers": 4, "heads": 4, "kv_heads": 2, "hidden": 256}
TARGET = 2.0


def fixture_model(n: int):
    """The random Llama of the long-views fixture, with positions for ``n`` tokens."""
    from long import build_model

    hf, tok, Model = build_model(n + 8, SHAPE)
    return Model(hf, tok, name="llama-shaped (random init)")


def measure(n: int, threads: int | None = None) -> dict:
    """Lazy forward, then Heatmap and HeadGrid on its attention: seconds of each."""
    import torch
    from long import text_of

    from attnkit.widgets import HeadGrid, Heatmap

    if threads:
        torch.set_num_threads(threads)
    model = fixture_model(n)
    text = text_of(model.tokenizer, n)
    with torch.inference_mode():  # warm-up: kernels and allocator, on a short input
        model.attend(text_of(model.tokenizer, 256), lazy=True)
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    att = model.attend(text, lazy=True)
    forward_s, forward_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    hm = Heatmap(att)
    heatmap_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    grid = HeadGrid(att, progress=False)
    grid_s = time.perf_counter() - t1
    views_s, views_cpu = heatmap_s + grid_s, time.process_time() - c0
    return {"n": len(att), "forward_s": forward_s, "heatmap_s": heatmap_s, "grid_s": grid_s,
            "views_s": views_s, "ratio": views_s / forward_s, "forward_cpu": forward_cpu,
            "views_cpu": views_cpu, "cpu_ratio": views_cpu / forward_cpu, "level": hm.pyramid["top"],
            "thumb": grid.size, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "load_before": load, "load_after": os.getloadavg()[0],
            "omp_wait": os.environ.get("OMP_WAIT_POLICY", "")}


def report(r: dict) -> str:
    verdict = "met" if r["ratio"] <= TARGET else "not met"
    return f"""
Command: `python benchmarks/views.py --n {r['n']} --threads {r['threads']}`. The long-views fixture: benchmarks/long.py's
random-init Llama-shaped decoder cut to {SHAPE['layers']} layers x {SHAPE['heads']} heads
({SHAPE['kv_heads']} key/value heads, hidden {SHAPE['hidden']}) captured with `lazy=True` on
{r['n']:,} tokens; torch {r['torch']}, {r['threads']} torch threads (`OMP_WAIT_POLICY={r['omp_wait']}`),
{os.cpu_count()} CPU cores
({platform.machine()}), 1-min load average {r['load_before']:.1f} before, {r['load_after']:.1f}
after (the machine is shared); one run, in one process. Wall time, and the process's CPU
time beside it.

| lazy forward | `Heatmap(att)` | `HeadGrid(att)` | both views | views / forward |
|---:|---:|---:|---:|---:|
| {r['forward_s']:.1f} s ({r['forward_cpu']:.1f} s CPU) | {r['heatmap_s']:.1f} s | {r['grid_s']:.1f} s | {r['views_s']:.1f} s ({r['views_cpu']:.1f} s CPU) | **{r['ratio']:.2f}x** ({r['cpu_ratio']:.2f}x CPU) |

Target: both views built in at most {TARGET:g}x the lazy forward — {verdict}. Each head is
read once, band by band, for every reduction the views need (overview max and mean, the
thumbnail, the scale tops): `attnkit.core.blocks.summarize`, kept for the other view.
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=21843)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default torch's: one per core)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    r = measure(args.n, args.threads)
    print(f"lazy forward {r['forward_s']:.1f} s; Heatmap {r['heatmap_s']:.1f} s; "
          f"HeadGrid {r['grid_s']:.1f} s; views / forward {r['ratio']:.2f}x "
          f"(CPU {r['forward_cpu']:.1f} s, {r['views_cpu']:.1f} s: {r['cpu_ratio']:.2f}x)", flush=True)
    body = report(r)
    if args.write:
        from _report import write_section

        write_section("views at long context", body)
    print(body)


if __name__ == "__main__":
    main()
