"""Extraction throughput vs the bare forward pass, on UD EWT dev with the bundled model.

    .venv/bin/python benchmarks/extract.py [--reps 2]

Both sides start from the same parsed sentences and run the same batches (same
tokenization, timed on both sides; same length-sorted plan, batch 32) in one process,
interleaved; the best of ``reps`` runs of each is compared. The extraction side
is the full ``attnkit.extract`` at word level into a fresh on-disk float16 store.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402

import attnkit as ak  # noqa: E402
from attnkit.storage.batches import plan_batches as _plan  # noqa: E402
from _report import write_section  # noqa: E402


def bare_forward(model, encodings, batch_size):
    """Forward every batch with output_attentions=False; nothing kept."""
    for batch in _plan([len(e) for e in encodings], batch_size):
        with torch.inference_mode():
            model.base(**model.pad([encodings[i] for i in batch]), output_attentions=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    path = ak.data.find_data("ud-english-ewt/en_ewt-ud-dev.conllu")
    model = ak.load("minilm")
    tb = ak.read_conllu(path)
    n_tokens = sum(len(model.encode(s)) for s in tb)
    bare, full = [], []
    for _ in range(args.reps):
        t = time.perf_counter()
        bare_forward(model, [model.encode(s) for s in tb], args.batch_size)
        bare.append(time.perf_counter() - t)
        tmp = Path(tempfile.mkdtemp(prefix="attnkit-bench-"))
        t = time.perf_counter()
        sset = ak.extract(model, tb, batch_size=args.batch_size, level="word",
                          store=tmp / "store", progress=False)
        full.append(time.perf_counter() - t)
        size = sum(f.stat().st_size for f in (tmp / "store").rglob("*") if f.is_file())
        shutil.rmtree(tmp)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    b, f = min(bare), min(full)
    ratio = b / f
    load = os.getloadavg()[0]
    body = f"""
Command: `.venv/bin/python benchmarks/extract.py --reps {args.reps}`

UD EWT dev ({len(tb)} sentences, {n_tokens} word-pieces with specials), all-MiniLM-L6-v2
(6 x 12 heads), batch {args.batch_size}, length-sorted batches, torch {torch.__version__} on
{os.cpu_count()} CPU cores ({platform.machine()}), {torch.get_num_threads()} torch threads,
1-min load average at the end {load:.1f}. Best of {args.reps} interleaved runs each.

| | seconds | sentences/s |
|---|---:|---:|
| bare forward pass (`output_attentions=False`) | {b:.1f} | {len(tb) / b:.1f} |
| `attnkit.extract(level="word", store=...)` (attention, word pooling, float16 store) | {f:.1f} | {len(tb) / f:.1f} |

- **throughput ratio extract / bare forward: {ratio:.2f}** (target >= 0.85)
- peak RSS of the whole benchmark process: **{peak_mb:.0f} MB** (target < 1500 MB)
- store size on disk: {size / 1e6:.1f} MB for {len(sset)} sentences
- all runs: bare {', '.join(f'{x:.1f}' for x in bare)} s; extract {', '.join(f'{x:.1f}' for x in full)} s
"""
    write_section("extract", body)
    print(body)


if __name__ == "__main__":
    main()
