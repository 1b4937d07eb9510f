"""Why a head attends: query-key score attribution and head composition, against the forward.

    .venv/bin/python benchmarks/why_heads.py [--reps 3] [--threads 1] [--no-write] [--base DIR]

Side by side in one run, each configuration in a fresh subprocess (so its peak RSS, the
process's ``ru_maxrss``, is its own), alternating in ``--reps`` rounds; times are medians of
wall time, with the process's CPU time beside them (on a shared machine wall time also counts
waiting for a core). Every process runs its configuration once untimed first, as the forward
is warmed up: the encoder's on the same 512 tokens, the decoder's on 256 tokens:

- **encoder, 512 tokens** (the bundled all-MiniLM-L6-v2): the bare forward (SDPA, nothing
  recorded) against ``score_attribution`` of one head of the last layer over all query rows x
  all keys (262,144 pairs): ``components="layers"`` (top 8 pairs + rest per (query, key)),
  ``"heads"`` aggregated over all pairs, and ``"heads"`` per pair (top 8 + rest). Target:
  at most 3x the forward.
- **decoder, 4,096 tokens** (``benchmarks/long.py``'s Llama-shaped model: 8 layers x 8 heads,
  2 key/value heads, width 512): its SDPA forward against ``score_attribution`` of one head
  of the last layer, the last query row, all keys, ``components="heads"``. Target: at most 2x
  the time and 2x the peak memory.
- **composition** of a random 32-layer x 32-head Llama shape (width 512, head size 16), with
  the machine's float32 matrix-product rate measured in the same process. Target: < 30 s.

``--base DIR`` runs every attribution and composition configuration a second time in the
same rounds with ``DIR`` first on ``PYTHONPATH`` (an older ``attnkit/`` package, e.g.
``git archive <commit> attnkit | tar -x -C DIR``): before and after, side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long import build_model, current_rss_mb, rss_mb, text_of  # noqa: E402

ENCODER_CONFIGS = ("enc_forward", "enc_layers", "enc_heads_sum", "enc_heads_top")
DECODER_CONFIGS = ("dec_forward", "dec_row")


def timed(fn, reps: int = 1):
    """Median wall time, median CPU time of the process, and the last result."""
    times, cpu, out = [], [], None
    for _ in range(reps):
        out = None
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), statistics.median(cpu), out


def child(config: str, threads: int) -> dict:
    import torch

    import attnkit as ak

    torch.set_num_threads(threads)
    out: dict = {"config": config}
    if config.startswith("enc"):
        model = ak.load("minilm")
        words = " ".join(["the cat sat on the mat while a student read the new book"] * 60)
        enc = model.encode(words)  # truncated to the model's 512 tokens
        out["n"] = len(enc)
        layer, head = model.n_layers - 1, 0
        model.hf.set_attn_implementation("sdpa" if config == "enc_forward" else "attnkit")
        batch = model.to_device(model.pad([enc]))
        with torch.inference_mode():
            model.base(**batch)  # warm-up
        if config == "enc_forward":
            def fn():
                with torch.inference_mode():
                    return model.base(**batch)
        else:
            kw = {"enc_layers": dict(components="layers"),
                  "enc_heads_sum": dict(components="heads", aggregate="sum"),
                  "enc_heads_top": dict(components="heads")}[config]

            def fn():
                return ak.score_attribution(model, enc, layer=layer, head=head, **kw)

            fn()  # warm-up on the same input, as the forward's
        out["time"], out["cpu"], res = timed(fn)
        if config != "enc_forward":
            out["rows"] = len(res.table)
            out["error"] = res.meta["max_abs_error"]
            out["exact"] = res.meta.get("top_exact", True)
    elif config.startswith("dec"):
        n = 4096
        hf, tok, Model = build_model(n + 8)
        model = Model(hf, tok, name="llama-shaped")
        enc = model.encode(text_of(tok, n))
        out["n"] = len(enc)
        with torch.inference_mode():
            model.base(**model.pad([model.encode(text_of(tok, 256))]), use_cache=False)
        out["base_mb"] = current_rss_mb()
        if config == "dec_forward":
            hf.set_attn_implementation("sdpa")
            batch = model.pad([enc])

            def fn():
                with torch.inference_mode():
                    return model.base(**batch, use_cache=False)
        else:
            def fn():
                return ak.score_attribution(model, enc, layer=model.n_layers - 1, head=0,
                                            queries=[len(enc) - 1])

            short = model.encode(text_of(tok, 256))
            ak.score_attribution(model, short, layer=model.n_layers - 1, head=0,
                                 queries=[len(short) - 1])  # warm-up
        out["time"], out["cpu"], res = timed(fn)
        if config != "dec_forward":
            out["rows"] = len(res.table)
            out["error"] = res.meta["max_abs_error"]
            out["exact"] = res.meta.get("top_exact", True)
    else:  # composition
        from attnkit.testing import tiny_model

        model = tiny_model("llama", layers=32, heads=32, hidden=512, kv_heads=32)
        a, b = torch.randn(4096, 512), torch.randn(512, 4096)
        a @ b
        t = time.perf_counter()
        for _ in range(5):
            a @ b
        out["gflops"] = 5 * 2 * 4096 * 4096 * 512 / (time.perf_counter() - t) / 1e9
        out["time"], out["cpu"], res = timed(lambda: ak.composition(model, progress=False))
        out["pairs"] = len(res.table)
    out["peak_mb"] = rss_mb()
    return out


def run_child(config: str, threads: int, base: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", config, "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if base:
        env["PYTHONPATH"] = os.pathsep.join([base, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        return {"config": config, "failed": res.stderr.strip().splitlines()[-1:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def merged(runs: list[dict]) -> dict:
    bad = [r for r in runs if "failed" in r]
    if bad:
        return bad[0]
    out = dict(runs[0])
    out["time"] = statistics.median(r["time"] for r in runs)
    out["cpu"] = statistics.median(r["cpu"] for r in runs)
    out["times"] = [round(r["time"], 3) for r in runs]
    out["peak_mb"] = max(r["peak_mb"] for r in runs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", default=None)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--base", default=None, help="an older attnkit to run beside (before)")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.threads)))
        return
    import torch

    load = os.getloadavg()[0]
    configs = ENCODER_CONFIGS + DECODER_CONFIGS + ("composition",)
    jobs = [(c, None) for c in configs]
    if args.base:
        jobs += [(c, args.base) for c in configs if "forward" not in c]
        jobs.sort(key=lambda j: configs.index(j[0]))  # each before beside its after
    runs: dict[tuple[str, str | None], list[dict]] = {j: [] for j in jobs}
    for _ in range(args.reps):
        for c, base in jobs:
            runs[(c, base)].append(run_child(c, args.threads if c != "composition" else 2, base))
            print(c, "before" if base else "", runs[(c, base)][-1], flush=True)
    r = {c: merged(v) for (c, base), v in runs.items() if base is None}
    before = {c: merged(v) for (c, base), v in runs.items() if base is not None}

    def was(c: str, ref: dict | None = None) -> str:
        """The same configuration before (``--base``), for the last column."""
        b = before.get(c)
        if b is None:
            return ""
        if "failed" in b:
            return f"failed: {b['failed']}"
        ratio = f", {b['time'] / ref['time']:.2f}x" if ref else ""
        mem = f", {b['peak_mb']:.0f} MB" if c.startswith("dec") else ""
        return f"{b['time']:.3f} s ({b['cpu']:.3f} s){ratio}{mem}"
    f_enc, f_dec = r["enc_forward"], r["dec_forward"]
    end = os.getloadavg()[0]
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores shared "
        f"with other jobs, torch {torch.__version__}, {args.threads} torch thread(s) "
        f"(composition: 2), load average {load:.1f} at the start and {end:.1f} at the end; "
        f"medians of {args.reps} rounds, each configuration in its own process. Ratios are of "
        "wall times (CPU-time ratio in brackets).",
        "",
        "| configuration | wall time (CPU) | ratio to the forward | peak RSS | target | before, same run |",
        "|---|---|---|---|---|---|",
        f"| encoder forward, {f_enc.get('n')} tokens (SDPA) | {f_enc['time']:.3f} s "
        f"({f_enc['cpu']:.3f} s) | 1 | {f_enc['peak_mb']:.0f} MB | | |",
    ]
    for c, what in (("enc_layers", "layers, top 8 + rest per pair"),
                    ("enc_heads_sum", "heads, summed over all pairs"),
                    ("enc_heads_top", "heads, top 8 + rest per pair")):
        x = r[c]
        if "failed" in x:
            lines.append(f"| one head, all rows x keys: {what} | failed: {x['failed']} | | | <= 3x | |")
            continue
        top = "" if c == "enc_heads_sum" else (", top exact" if x["exact"] else
                                                ", top among 8 candidates a side")
        lines.append(f"| one head, all rows x keys: {what} ({x['rows']:,} rows{top}, max error "
                     f"{x['error']:.1e}) | {x['time']:.3f} s ({x['cpu']:.3f} s) | "
                     f"{x['time'] / f_enc['time']:.2f}x ({x['cpu'] / f_enc['cpu']:.2f}x) | "
                     f"{x['peak_mb']:.0f} MB | <= 3x | {was(c, f_enc)} |")
    x = r["dec_row"]
    lines += [
        f"| decoder forward, {f_dec.get('n')} tokens (SDPA) | {f_dec['time']:.3f} s "
        f"({f_dec['cpu']:.3f} s) | 1 | {f_dec['peak_mb']:.0f} MB | | |",
        f"| one head, last row, all keys, heads ({x.get('rows', 0):,} rows, max error "
        f"{x.get('error', float('nan')):.1e}) | {x['time']:.3f} s ({x.get('cpu', 0):.3f} s) | "
        f"{x['time'] / f_dec['time']:.2f}x time ({x.get('cpu', 0) / f_dec['cpu']:.2f}x), "
        f"{x['peak_mb'] / f_dec['peak_mb']:.2f}x memory | {x['peak_mb']:.0f} MB | <= 2x, <= 2x | "
        f"{was('dec_row', f_dec)} |",
    ]
    c = r["composition"]
    lines.append(f"| composition, 32 layers x 32 heads, width 512 ({c.get('pairs', 0):,} pairs; "
                 f"matmul rate {c.get('gflops', 0):.0f} GFLOP/s) | {c['time']:.1f} s "
                 f"({c.get('cpu', 0):.1f} s) | | "
                 f"{c['peak_mb']:.0f} MB | < 30 s | {was('composition')} |")
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        from _report import write_section

        write_section("why heads attend", "Written by `benchmarks/why_heads.py`.\n\n" + body)


if __name__ == "__main__":
    main()
