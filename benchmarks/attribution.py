"""Cost of each attention measure relative to the plain forward with attention, on EWT dev.

    .venv/bin/python benchmarks/attribution.py [--items 200] [--reps 3] [--threads 1]

All sides run in one process on the same sentences and the same length-sorted batches
(batch 32), interleaved round by round; the best of ``reps`` rounds of each is compared.
The reference is ``Model.run`` with ``measure="weights"``: one forward through attnkit's
attention function with every layer's maps recorded. Each measure is the same call with
``measure=...`` (``grad×attn`` adds one backward). Blank-out is the faithfulness
evaluation's forward of every one-token-masked copy of a sentence (``m`` word tokens: ``m +
1`` copies with the clean one), batched (all copies of a sentence in one batch) and, for
comparison, one copy per forward.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import torch
from _report import write_section

import attnkit as ak
from attnkit.analysis.faithfulness import _Runner
from attnkit.storage.batches import plan_batches as _plan

MEASURES = ("weights", "norm", "norm+residual", "alti", "grad×attn")


def run_measure(model, encs, plan, measure):
    for batch in plan:
        model.run([encs[i] for i in batch], measure=measure)


def blank_out(model, encs, refs, batched):
    runner = _Runner(model, "projection", model.tokenizer.mask_token_id, 64)
    for enc, ref in zip(encs, refs):
        words = np.flatnonzero(np.asarray(enc.roles) == "word")
        masks = np.zeros((len(words) + 1, len(enc)), dtype=bool)
        masks[np.arange(1, len(words) + 1), words] = True
        if batched:
            runner.values(enc, ref, masks)
        else:
            for row in masks:
                runner.values(enc, ref, row[None])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=200, help="EWT dev sentences (the first N)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on shared cores two spinning threads ran 3-4x slower)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = ak.load("minilm")
    tb = ak.read_conllu(ak.data.find_data("ud-english-ewt/en_ewt-ud-dev.conllu"))
    encs = [model.encode(s) for s in list(tb)[: args.items]]
    plan = _plan([len(e) for e in encs], args.batch_size)
    runner = _Runner(model, "projection", model.tokenizer.mask_token_id, 64)
    refs = [runner.references([e], None)[0] for e in encs]
    sides = {m: (lambda m=m: run_measure(model, encs, plan, m)) for m in MEASURES}
    sides["blank-out, batched"] = lambda: blank_out(model, encs, refs, True)
    sides["blank-out, one copy per forward"] = lambda: blank_out(model, encs, refs, False)
    times: dict[str, list[float]] = {k: [] for k in sides}
    loads = [os.getloadavg()[0]]
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(args.reps):
        for name, fn in sides.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
        loads.append(os.getloadavg()[0])
    best = {k: min(v) for k, v in times.items()}
    base = best["weights"]
    best_cpu = {k: min(v) for k, v in cpu.items()}
    n_tok = sum(len(e) for e in encs)
    copies = sum(int((np.asarray(e.roles) == "word").sum()) + 1 for e in encs)
    target = {"norm": "≤ 1.5", "norm+residual": "≤ 1.5", "alti": "≤ 3"}
    rows = "\n".join(
        f"| {k} | {v:.2f} | {v / base:.2f} | {best_cpu[k] / best_cpu['weights']:.2f} | "
        f"{target.get(k, '')} |" for k, v in best.items())
    body = f"""
Command: `.venv/bin/python benchmarks/attribution.py --items {args.items} --reps {args.reps} --threads {args.threads}`

UD EWT dev, the first {len(encs)} sentences ({n_tok} word-pieces with specials), all-MiniLM-L6-v2
(6 x 12 heads), batch {args.batch_size}, length-sorted batches, token level, torch
{torch.__version__} on {os.cpu_count()} CPU cores ({platform.machine()}),
{torch.get_num_threads()} torch threads; 1-min load average {min(loads):.1f}-{max(loads):.1f}
during the run (the machine is shared, so the process's CPU time is given too). Best of
{args.reps} interleaved rounds per side.
Blank-out forwards {copies} copies ({copies / len(encs):.1f} per sentence: the clean one
and one per word token masked).

| side | seconds (wall) | × forward with attention | × by CPU time | target |
|---|---:|---:|---:|---|
{rows}

- all rounds: {'; '.join(f"{k} {', '.join(f'{x:.2f}' for x in v)}" for k, v in times.items())}
"""
    write_section("attribution", body)
    print(body)


if __name__ == "__main__":
    main()
