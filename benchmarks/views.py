"""Building the long-context views against the lazy forward that computed their scores.

The long-views fixture: benchmarks/long.py's random-init Llama-shaped decoder cut down to 4
layers x 4 heads (2 key/value heads, hidden 256: head dimension 64, MLP 1536, vocabulary
32,000, seed 0) captured lazily (``model.attend(text, lazy=True)``) on a text of the tiny
corpus cut to 21,843 tokens (long.py's ``text_of``). In one process, one after the other:

- the lazy forward: ``model.attend(text, lazy=True)`` (queries, keys and row log-sum-exps
  kept; every score computed once by the forward);
- building ``Heatmap(att)`` and ``HeadGrid(att)`` on that attention (every map read band by
  band from Q/K: the pooled overview, the thumbnails and the scale tops);

and the views' time over the forward's (target: at most 2, whatever the machine's load).

Run from the repo root::

    python benchmarks/views.py [--n 21843] [--threads 2] [--before main] [--stress 0 4] [--write]

Every measurement runs in a fresh process with the environment as it is (no
``OMP_WAIT_POLICY`` or other setting a user would have to make). ``--before REV`` measures
the attnkit of git revision ``REV`` (``git archive``) beside this tree's, alternately in one
run; ``--stress K ...`` repeats the pair with ``K`` busy Python processes (one spinning
loop each) started beside it, an artificial load on top of whatever else the machine runs.
``--write`` replaces the ``## views at long context`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHAPE = {"layers": 4, "heads": 4, "kv_heads": 2, "hidden": 256}
TARGET = 2.0
BUSY = "while True:\n    pass\n"


def fixture_model(n: int):
    """The random Llama of the long-views fixture, with positions for ``n`` tokens."""
    from long import build_model

    hf, tok, Model = build_model(n + 8, SHAPE)
    return Model(hf, tok, name="llama-shaped (random init)")


def measure(n: int, threads: int | None = None) -> dict:
    """Lazy forward, then Heatmap and HeadGrid on its attention: seconds of each."""
    import torch
    from long import text_of

    import attnkit
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
            "load_before": load, "load_after": os.getloadavg()[0], "attnkit": attnkit.__file__,
            "omp_wait": os.environ.get("OMP_WAIT_POLICY", "unset")}


def child(tree: str, n: int, threads: int | None) -> dict:
    """:func:`measure` in a fresh process on the attnkit of ``tree``."""
    cmd = [sys.executable, str(Path(__file__)), "--child", tree, "--n", str(n)]
    if threads:
        cmd += ["--threads", str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    lines = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    if res.returncode or not lines:
        raise SystemExit(f"{tree} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def busy(k: int) -> list[subprocess.Popen]:
    """``k`` processes that spin on a core each until killed."""
    return [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(k)]


def archive(rev: str) -> str:
    """A folder with the attnkit of git revision ``rev`` (its front-end bundles: this tree's)."""
    tmp = Path(tempfile.mkdtemp(prefix="attnkit-views-before-"))
    subprocess.run(f"git -C {REPO} archive {rev} attnkit | tar -x -C {tmp}", shell=True, check=True)
    static = REPO / "attnkit" / "static"
    if static.is_dir() and not (tmp / "attnkit" / "static").exists():
        (tmp / "attnkit" / "static").symlink_to(static)
    return str(tmp)


def report(runs: list[dict], args: argparse.Namespace) -> str:
    r0 = runs[0]["result"]
    rows = []
    for run in runs:
        r = run["result"]
        verdict = "met" if r["ratio"] <= TARGET else "not met"
        rows.append(f"| {run['tree']} | {run['stress']} | {r['load_before']:.1f} → {r['load_after']:.1f} | "
                    f"{r['forward_s']:.1f} s ({r['forward_cpu']:.1f} s CPU) | {r['heatmap_s']:.1f} s | "
                    f"{r['grid_s']:.1f} s | {r['views_s']:.1f} s ({r['views_cpu']:.1f} s CPU) | "
                    f"**{r['ratio']:.2f}x** ({r['cpu_ratio']:.2f}x CPU) | {verdict} |")
    stress = " ".join(str(k) for k in args.stress)
    before = f" --before {args.before}" if args.before else ""
    return f"""
Command: `python benchmarks/views.py --n {args.n} --threads {r0['threads']}{before} --stress {stress}`, run
{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. The long-views fixture: benchmarks/long.py's
random-init Llama-shaped decoder cut to {SHAPE['layers']} layers x {SHAPE['heads']} heads
({SHAPE['kv_heads']} key/value heads, hidden {SHAPE['hidden']}) captured with `lazy=True` on
{r0['n']:,} tokens; torch {r0['torch']}, {r0['threads']} torch threads (`OMP_WAIT_POLICY` {r0['omp_wait']}: the
environment as a user has it), {os.cpu_count()} CPU cores ({platform.machine()}), shared with other
work. Each row is a fresh process, one after the other in one run; "busy" is the number of
spinning Python processes started beside it (an artificial load on top of the machine's own);
load is the 1-min load average before → after. Wall time, and the process's CPU time beside it.

| attnkit | busy | load | lazy forward | `Heatmap(att)` | `HeadGrid(att)` | both views | views / forward | ≤ {TARGET:g}x |
|---|---:|---|---:|---:|---:|---:|---:|---|
{chr(10).join(rows)}

Each head is read once, band by band, for every reduction the views need (overview max and
mean, the thumbnail, the scale tops: `attnkit.core.blocks.summarize`, kept for the other
view). Before: the bands were read and reduced on torch's OpenMP threads, a few
medium-sized operations per band, each ending at a barrier; on a loaded machine the threads
wait for one another there (spinning on the cores the others need), and the views slowed
down far more than the forward's few large operations. Now the bands of a pass are read in
worker threads, one band each with torch on one thread (`blocks.PARALLEL_CELLS` and up;
as many workers as the caller's torch threads and the cores allow): no barriers, and every
worker busy until the pass ends.
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=21843)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default torch's: one per core)")
    ap.add_argument("--before", default=None, help="git revision measured beside this tree (e.g. main)")
    ap.add_argument("--stress", type=int, nargs="+", default=[0],
                    help="busy processes started beside each pair of measurements")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path[:0] = [args.child, str(HERE)]
        print("RESULT " + json.dumps(measure(args.n, args.threads)), flush=True)
        return
    trees = ([(f"before ({args.before})", archive(args.before))] if args.before else []) + [("now", str(REPO))]
    runs = []
    for k in args.stress:
        procs = busy(k)
        try:
            time.sleep(5 if k else 0)  # the load average catches up a little
            for name, tree in trees:
                r = child(tree, args.n, args.threads)
                runs.append({"tree": name, "stress": k, "result": r})
                print(f"{name:14s} busy {k}: load {r['load_before']:.1f}; lazy forward {r['forward_s']:.1f} s; "
                      f"Heatmap {r['heatmap_s']:.1f} s; HeadGrid {r['grid_s']:.1f} s; views / forward "
                      f"{r['ratio']:.2f}x (CPU {r['forward_cpu']:.1f} s, {r['views_cpu']:.1f} s: "
                      f"{r['cpu_ratio']:.2f}x)", flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    body = report(runs, args)
    if args.write:
        sys.path.insert(0, str(HERE))
        from _report import write_section

        write_section("views at long context", body)
    print(body)


if __name__ == "__main__":
    main()
