"""Long inputs: lazy capture vs the bare SDPA forward and today's eager capture, on CPU.

    .venv/bin/python benchmarks/long.py [--sizes 512 1024 2048 4096 8192] [--reps 3]

A random-init Llama-shaped decoder (8 layers x 8 heads, 2 key/value heads, hidden 512,
MLP 1536, vocabulary 32,000, seed 0), one torch thread, on the CPU. For every input length
``n`` each configuration runs in a fresh subprocess (so its peak RSS is its own), one after
the other, all in one run (so all see the same machine load):

- ``bare``: tokenization + the bare transformer's forward with transformers' SDPA attention,
  nothing recorded (the reference);
- ``eager``: ``model.attend(text)`` on the eager path (``output_attentions=True``, dense
  float32 maps ``[L, H, n, n]``): what attnkit did before lazy capture; skipped where its
  maps alone would pass ``--eager-cap`` GB;
- ``lazy``: ``model.attend(text, lazy=True)`` (queries, keys and row log-sum-exps kept);
  then, in the same process, one full ``[n, n]`` map and one 256 x 256 block (medians over
  heads and positions);
- ``stats``: one lazy capture, then ``head_stats`` streamed band by band (timed alone).

The configurations alternate in ``--reps`` rounds of one run each (after one untimed warm-up
forward of 256 tokens in every process); times are medians over the rounds, wall and CPU
time; peak memory is the process's peak RSS (``ru_maxrss``), with the RSS after
loading the model (``base``) beside it.
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPE = {"layers": 8, "heads": 8, "kv_heads": 2, "hidden": 512, "mlp": 1536, "vocab": 32000}
TARGETS = {"lazy_time": 1.5, "lazy_mem": 2.0, "block_ms": 20.0, "stats_time": 3.0}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def build_model(max_positions: int, shape: dict | None = None):
    """The random-init Llama-shaped model (:data:`SHAPE`, or ``shape``'s entries over it), its
    tokenizer and :class:`attnkit.runtime.model.Model`."""
    import torch
    import transformers as tf

    from attnkit import Model  # the public name: the same script runs on an older attnkit (--base)
    from attnkit.testing import gpt2_tokenizer

    s = {**SHAPE, **(shape or {})}
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"],
                         intermediate_size=s["mlp"], num_hidden_layers=s["layers"],
                         num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                         max_position_embeddings=max_positions, attn_implementation="eager")
    hf = tf.LlamaForCausalLM(cfg)
    tok = gpt2_tokenizer()
    tok.model_max_length = max_positions
    return hf, tok, Model


def text_of(tokenizer, n: int) -> str:
    """A text of the tiny corpus, repeated and cut so that it has ``n`` tokens."""
    from attnkit.testing import CORPUS

    long = " ".join(CORPUS * (n // 40 + 2))
    enc = tokenizer(long, return_offsets_mapping=True)
    return long[: enc["offset_mapping"][n - 1][1]]


def median_time(fn, reps: int):
    """Median wall time, the wall times, median CPU time of the process, and the last result."""
    times, cpu, out = [], [], None
    for _ in range(reps):
        out = None  # the previous run's result is not alive during the next one
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), times, statistics.median(cpu), out


def child(config: str, n: int, reps: int) -> dict:
    import numpy as np
    import torch

    import attnkit as ak

    torch.set_num_threads(1)
    hf, tok, Model = build_model(max(n, 512) + 8)
    capture = "eager" if config == "eager" else "auto"
    model = Model(hf, tok, name="llama-shaped", capture=capture)
    text = text_of(tok, n)
    base_mb = current_rss_mb()

    def bare():
        with torch.inference_mode():
            model.base(**model.to_device(model.pad([model.encode(text)])), use_cache=False)

    out: dict = {"config": config, "n": len(model.encode(text)), "base_mb": base_mb}
    with torch.inference_mode():  # warm-up: kernels and allocator, on a short input
        model.base(**model.pad([model.encode(text_of(tok, 256))]), use_cache=False)
    if config == "bare":
        hf.set_attn_implementation("sdpa")
        out["time"], out["times"], out["cpu"], _ = median_time(bare, reps)
    elif config == "eager":
        out["time"], out["times"], out["cpu"], att = median_time(
            lambda: model.attend(text, lazy=False), reps)
        out["maps_mb"] = att.maps.nbytes / 2**20
    elif config == "stats":  # capture once, then the streamed statistics
        att = model.attend(text, lazy=True)
        out["time"], out["times"], out["cpu"], _ = median_time(lambda: ak.head_stats([att]), reps)
    else:
        out["time"], out["times"], out["cpu"], att = median_time(
            lambda: model.attend(text, lazy=True), reps)
        out["kept_mb"] = att.nbytes / 2**20
        out["peak_mb"] = rss_mb()  # capture only, before any map is read
        if True:  # capture only, before any map is read
            rng = np.random.default_rng(0)
            heads = [(int(rng.integers(8)), int(rng.integers(8))) for _ in range(3)]
            out["map_s"] = statistics.median(
                median_time(lambda lh=lh: att.map(*lh), 1)[0] for lh in heads)
            blocks = []
            for _ in range(20):
                layer, head = int(rng.integers(8)), int(rng.integers(8))
                r0 = int(rng.integers(0, max(1, len(att) - 256)))
                c0 = int(rng.integers(0, r0 + 1))
                t = time.perf_counter()
                att.block(layer, head, slice(r0, r0 + 256), slice(c0, c0 + 256))
                blocks.append(time.perf_counter() - t)
            out["block_ms"] = 1000 * statistics.median(blocks)
    out.setdefault("peak_mb", rss_mb())
    return out


def run_child(config: str, n: int, reps: int) -> dict:
    cmd = [sys.executable, __file__, "--child", config, "--n", str(n), "--reps", str(reps)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        return {"config": config, "n": n, "error": res.stderr.strip().splitlines()[-1:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def merge_runs(results: list[dict]) -> dict:
    """One configuration's rounds: median times, the largest peak RSS, the first run's other
    numbers (or the first error)."""
    errors = [r for r in results if "error" in r]
    if errors:
        return errors[0]
    out = dict(results[0])
    for key in ("time", "cpu", "map_s", "block_ms"):
        if key in out:
            out[key] = statistics.median(r[key] for r in results)
    out["times"] = [r["time"] for r in results]
    out["peak_mb"] = max(r["peak_mb"] for r in results)
    return out


def fmt(r: dict | None, key: str = "time") -> str:
    if r is None:
        return "skipped: maps alone would not fit"
    if "error" in r:
        return f"failed ({r['error']})"
    return f"{r[key]:.2f} s, {r['peak_mb']:.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--eager-cap", type=float, default=6.0,
                    help="skip eager capture where its float32 maps alone pass this many GB")
    ap.add_argument("--child", default=None)
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.reps)))
        return
    import torch
    from _report import write_section

    load_before = os.getloadavg()[0]
    rows = []
    for n in args.sizes:
        r: dict = {"n": n}
        maps_gb = 4 * SHAPE["layers"] * SHAPE["heads"] * n * n / 1e9
        runs: dict[str, list[dict]] = {c: [] for c in ("bare", "lazy", "stats", "eager")}
        for round_ in range(args.reps):  # rounds: the sides alternate, so they share the load
            for config in runs:
                if config == "eager" and (maps_gb > args.eager_cap or (maps_gb > 1 and round_)):
                    continue
                runs[config].append(run_child(config, n, 1))
                print(n, config, runs[config][-1], flush=True)
        for config, results in runs.items():
            r[config] = merge_runs(results) if results else None
        rows.append(r)
    load_after = os.getloadavg()[0]
    lines = [
        "| tokens | bare SDPA forward | eager capture (before) | lazy capture | lazy / bare: "
        "wall, CPU, peak RSS | one full map | one 256 x 256 block | streaming `head_stats` | "
        "stats / bare: wall, CPU |",
        "|---:|---|---|---|---|---:|---:|---|---|",
    ]
    verdicts = []
    nan = float("nan")
    for r in rows:
        b, lz, st = r["bare"], r["lazy"], r["stats"]
        ok = all("error" not in x for x in (b, lz, st))
        lt, lc, lm = ((lz["time"] / b["time"], lz["cpu"] / b["cpu"], lz["peak_mb"] / b["peak_mb"])
                      if ok else (nan, nan, nan))
        stt, stc = (st["time"] / b["time"], st["cpu"] / b["cpu"]) if ok else (nan, nan)
        lines.append(
            f"| {b.get('n', r['n'])} | {fmt(b)} | {fmt(r['eager'])} | {fmt(lz)} | "
            f"{lt:.2f}x, {lc:.2f}x, {lm:.2f}x | {lz.get('map_s', nan):.2f} s | "
            f"{lz.get('block_ms', nan):.1f} ms | {fmt(st)} | {stt:.2f}x, {stc:.2f}x |")
        if r["n"] == 4096 and ok:
            verdicts = [
                (f"lazy capture / bare forward time: **{lt:.2f}x** wall, **{lc:.2f}x** CPU "
                 f"(target <= {TARGETS['lazy_time']})"),
                (f"lazy capture / bare forward peak RSS: **{lm:.2f}x** (target <= "
                 f"{TARGETS['lazy_mem']}); above the RSS after loading the model: lazy "
                 f"{lz['peak_mb'] - lz['base_mb']:.0f} MB, bare {b['peak_mb'] - b['base_mb']:.0f} MB"),
                f"one 256 x 256 block: **{lz['block_ms']:.1f} ms** (target < {TARGETS['block_ms']:.0f} ms)",
                (f"streaming head_stats / bare forward time: **{stt:.2f}x** wall, **{stc:.2f}x** "
                 f"CPU (target < {TARGETS['stats_time']})"),
            ]
    kept = ", ".join(f"{r['lazy']['n']}: {r['lazy']['kept_mb']:.0f} MB" for r in rows
                     if "kept_mb" in r["lazy"])
    body = f"""
Command: `.venv/bin/python benchmarks/long.py --reps {args.reps}` (sizes {' '.join(map(str, args.sizes))})

Random-init Llama-shaped decoder ({SHAPE['layers']} layers x {SHAPE['heads']} heads,
{SHAPE['kv_heads']} key/value heads, hidden {SHAPE['hidden']}, MLP {SHAPE['mlp']}, vocabulary
{SHAPE['vocab']}), float32, one torch thread, torch {torch.__version__} on {os.cpu_count()} CPU
cores ({platform.machine()}), 1-min load average {load_before:.1f} before, {load_after:.1f}
after (the machine is shared). Every run is one fresh process (after a warm-up forward of
256 tokens); the configurations alternate in {args.reps} rounds so that they share the load,
and each cell gives the median wall time over the rounds (eager capture above 1 GB of maps:
one round), the median CPU time of the process beside it (less sensitive to the shared
machine's load), and the largest peak RSS (model and libraries included: about
{rows[0]['bare']['base_mb']:.0f} MB after loading). `head_stats` is timed on its own, after
one lazy capture; its peak RSS includes that capture.
Lazy capture keeps queries, keys and row log-sum-exps: {kept}.

{chr(10).join(lines)}

At 4,096 tokens:

{chr(10).join('- ' + v for v in verdicts)}
"""
    if not args.no_write:
        write_section("long", body)
    print(body)


if __name__ == "__main__":
    main()
