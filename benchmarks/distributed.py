"""Extraction in one process vs on a Dask LocalCluster, and the cost of the checksummed store.

    .venv/bin/python benchmarks/distributed.py [--reps 1] [--limit N]

UD EWT train with the bundled all-MiniLM-L6-v2, word level, batch 32, measured in one run:

- one process with one torch thread, writing today's format-1 store (``.npy`` batches) and
  the format-2 store (Zarr with crc32c checksums), interleaved;
- a LocalCluster of one worker (one thread), and one of two workers with one thread each,
  both writing the format-2 store; each cluster has loaded the model (a warm-up extraction
  of 64 sentences) before it is timed.

Every timing is a whole ``attnkit.extract`` call (tokenizing, laying out the store, the
forward passes, writing and committing every batch). The best of ``reps`` runs counts.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

# This file is named like the `distributed` package: take its folder off the path so that
# `import distributed` finds Dask's, and load the section writer by file.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
import importlib.util  # noqa: E402

import torch  # noqa: E402

import attnkit as ak  # noqa: E402
from attnkit.storage.store_v1 import extract_v1  # noqa: E402

_spec = importlib.util.spec_from_file_location("_report", HERE / "_report.py")
_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_report)
write_section = _report.write_section


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    torch.set_num_threads(1)
    path = ak.data.find_data("ud-english-ewt/en_ewt-ud-train.conllu")
    tb = list(ak.read_conllu(path, limit=args.limit))
    model = ak.load("minilm")
    n_tokens = sum(len(model.encode(s)) for s in tb)
    tmp = Path(tempfile.mkdtemp(prefix="attnkit-dist-"))
    bs = args.batch_size
    loads = [load()]
    clusters = {}
    for n in (1, 2):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster, set_as_default=False)
        ak.extract("minilm", tb[:64], batch_size=bs, client=client, progress=False)  # load the model
        clusters[n] = (cluster, client)
    ak.extract(model, tb[:64], batch_size=bs, progress=False)

    times: dict[str, list[float]] = {"v1": [], "v2": [], "c1": [], "c2": []}
    sizes: dict[str, int] = {}
    run_loads: dict[str, list[float]] = {k: [] for k in times}
    cpu: dict[str, list[float]] = {k: [] for k in times}  # CPU seconds of every process
    for rep in range(args.reps):
        for key, runs in times.items():
            out = tmp / f"{key}-{rep}"
            start_load = load()
            client = clusters[int(key[1])][1] if key[0] == "c" else None
            w0 = client.run(time.process_time) if client is not None else {}
            c0 = time.process_time()
            t = time.perf_counter()
            if key == "v1":
                extract_v1(model, tb, out, batch_size=bs)
            elif key == "v2":
                ak.extract(model, tb, batch_size=bs, store=out, progress=False)
            else:
                ak.extract("minilm", tb, batch_size=bs, store=out, client=client, progress=False)
            runs.append(time.perf_counter() - t)
            w1 = client.run(time.process_time) if client is not None else {}
            cpu[key].append(time.process_time() - c0 + sum(w1[w] - w0[w] for w in w0))
            run_loads[key].append(max(start_load, load()))
            sizes[key] = du(out)
            shutil.rmtree(out)
            print(key, rep, f"{runs[-1]:.1f} s", f"load {run_loads[key][-1]:.1f}", flush=True)
    # what per-item summaries cost: time per attention value, token level, one thread
    from attnkit.storage.summaries import SUMMARIES

    sample = ak.extract(model, tb[:500], batch_size=bs, level="token", progress=False)
    atts = list(sample)
    n_values = sum(a.maps.size for a in atts)
    summary_ns = {}
    for name, summ in SUMMARIES.items():
        t = time.perf_counter()
        for a in atts:
            summ.compute(a)
        summary_ns[name] = (time.perf_counter() - t) / n_values * 1e9
    # the whole stats-only path (maps -> float16 -> Attention -> statistics -> store) beyond
    # the forward pass, per attention value: what docs/scale.md scales to a 7 B model
    from attnkit.storage.batches import plan_batches as _plan

    encs = [model.encode(s) for s in tb[:500]]
    plan = _plan([len(e) for e in encs], bs)
    best_fwd = best_stats = float("inf")
    for rep in range(2):
        t = time.perf_counter()
        for b in plan:
            model.run([encs[i] for i in b])
        best_fwd = min(best_fwd, time.perf_counter() - t)
        t = time.perf_counter()
        ak.extract(model, tb[:500], batch_size=bs, level="token", keep="stats",
                   store=tmp / f"stats-{rep}", progress=False, verify=False)
        best_stats = min(best_stats, time.perf_counter() - t)
    stats_path_ns = (best_stats - best_fwd) / n_values * 1e9
    loads.append(load())
    for cluster, client in clusters.values():
        client.close()
        cluster.close()
    shutil.rmtree(tmp, ignore_errors=True)

    best = {k: min(v) for k, v in times.items()}
    best_cpu = {k: cpu[k][v.index(best[k])] for k, v in times.items()}
    growth = best_cpu["c2"] / best_cpu["c1"] - 1
    cores = os.cpu_count() or 1
    rate = {k: len(tb) / v for k, v in best.items()}
    scale = rate["c2"] / rate["c1"]
    overhead = (best["v2"] - best["v1"]) / best["v1"]
    per_worker_tok = n_tokens / best["c1"]
    body = f"""
Command: `.venv/bin/python benchmarks/distributed.py --reps {args.reps}{f' --limit {args.limit}' if args.limit else ''}`

UD EWT train ({len(tb)} sentences, {n_tokens} word-pieces with specials), all-MiniLM-L6-v2
(6 x 12 heads), word level, batch {bs}, torch {torch.__version__} on {os.cpu_count()} CPU
cores ({platform.machine()}) shared with other jobs; every worker and the single process use
one torch thread. 1-min load average: {loads[0]:.1f} before, {loads[1]:.1f} after; the
highest seen during each run is in the table (on 2 cores, a load above ~2 means the runs
competed with other work). Best of {args.reps} interleaved run(s) each; each is one whole
`attnkit.extract` call.

CPU seconds count every process of the run (the client with the cluster's scheduler, and
each worker, background writer threads included); "cores busy" is CPU seconds over wall.

| run | seconds | sentences/s | CPU seconds | cores busy | load | store size |
|---|---:|---:|---:|---:|---:|---:|
| one process, 1 thread, format-1 store (`.npy` batches) | {best['v1']:.1f} | {rate['v1']:.1f} | {best_cpu['v1']:.1f} | {best_cpu['v1'] / best['v1']:.2f} | {min(run_loads['v1']):.1f} | {sizes['v1'] / 1e6:.0f} MB |
| one process, 1 thread, format-2 store (Zarr, crc32c) | {best['v2']:.1f} | {rate['v2']:.1f} | {best_cpu['v2']:.1f} | {best_cpu['v2'] / best['v2']:.2f} | {min(run_loads['v2']):.1f} | {sizes['v2'] / 1e6:.0f} MB |
| LocalCluster, 1 worker x 1 thread, format 2 | {best['c1']:.1f} | {rate['c1']:.1f} | {best_cpu['c1']:.1f} | {best_cpu['c1'] / best['c1']:.2f} | {min(run_loads['c1']):.1f} | {sizes['c1'] / 1e6:.0f} MB |
| LocalCluster, 2 workers x 1 thread, format 2 | {best['c2']:.1f} | {rate['c2']:.1f} | {best_cpu['c2']:.1f} | {best_cpu['c2'] / best['c2']:.2f} | {min(run_loads['c2']):.1f} | {sizes['c2'] / 1e6:.0f} MB |

- **two workers / one worker: {scale:.2f}x** throughput (target >= 1.7x); the two-worker
  run kept {best_cpu['c2'] / best['c2']:.2f} of the machine's {cores} cores busy and one worker
  already {best_cpu['c1'] / best['c1']:.2f} (its writer thread runs beside the forward
  passes), so on {cores} cores the ratio is bounded by the CPU there is, not by the engine:
  the total CPU work grew by {growth * 100:+.1f} % from one worker to two (client, scheduler,
  shipping batches). With a free core for each worker and its writer, that growth alone
  would allow up to {2 / (1 + growth):.2f}x (an estimate from these CPU times, not a
  measurement)
- **format 2 (Zarr + checksums) vs format 1: {overhead * 100:+.1f} %** of extraction time (target <= +10 %)
- store size format 2 / format 1: {sizes['v2'] / sizes['v1']:.3f} (chunk padding and the item index)
- one worker's throughput: {per_worker_tok:.0f} word-pieces/s ({rate['c1']:.1f} sentences/s;
  MiniLM on one CPU thread)
- per-item summaries (one thread, token level, {len(atts)} sentences, {n_values / 1e6:.0f} M attention
  values): `stats` {summary_ns['stats']:.2f} ns and `edges` {summary_ns['edges']:.2f} ns per attention value;
  the whole `extract(keep="stats")` path beyond the forward pass (float16 rounding, checks,
  statistics, store) {stats_path_ns:.2f} ns per attention value (forward {best_fwd:.1f} s,
  extract {best_stats:.1f} s); these per-value costs are what docs/scale.md scales to a 7 B model
- all runs (s): {'; '.join(f"{k} {', '.join(f'{x:.1f}' for x in v)}" for k, v in times.items())}
"""
    print(body)
    if not args.no_write:
        write_section("distributed", body)


if __name__ == "__main__":
    main()
