"""Cost of edge attribution (issue 30) beside one forward + backward, in one run.

    .venv/bin/python benchmarks/circuits.py [--reps 3] [--threads 1] [--items 8] [--n 128]

EAP (``ak.edge_attribution(..., method="eap")``: the clean and the corrupted forwards, then
one forward and backward with every downstream input given its own stream) over every edge
of a model, against one forward + backward of the same metric on the same batch (target: at
most 3x), each side measured in the same process, best of ``reps`` interleaved rounds.

Two models, each against its own forward + backward: the bundled all-MiniLM-L6-v2 (a
post-norm encoder: each run's components are carried through its own norms,
docs/circuits.md), random MiniLM token ids, metric ``projection()`` (the mean-pooled
embedding along the clean run's); and a GPT-2 (pre-norm decoder) of MiniLM's shape: 6 layers
x 12 heads, width 384, MLP 1536, vocabulary 30,522, random weights (token ids of the tiny test
tokenizer, 300 ids), metric the loss over the second half. ``items`` pairs of ``n`` tokens; the
corrupted copy changes one token in the middle.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

TARGET = 3.0


def build():
    import torch
    import transformers as tf

    from attnkit import Model
    from attnkit.testing import gpt2_tokenizer

    torch.manual_seed(0)
    cfg = tf.GPT2Config(vocab_size=30522, n_embd=384, n_layer=6, n_head=12, n_inner=1536,
                        n_positions=512, attn_implementation="eager")
    tok = gpt2_tokenizer()
    return Model(tf.GPT2LMHeadModel(cfg).eval(), tok, name="gpt2, MiniLM-shaped")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--n", type=int, default=128)
    args = ap.parse_args()
    import numpy as np
    import torch

    import attnkit as ak
    from attnkit.interventions import hooks

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)

    def pairs(low: int, high: int) -> tuple[list, list]:
        clean = [rng.integers(low, high, args.n) for _ in range(args.items)]
        corrupted = [c.copy() for c in clean]
        for c in corrupted:
            c[args.n // 2] = (c[args.n // 2] + 1 - low) % (high - low) + low
        return clean, corrupted

    minilm = ak.load("minilm")
    setups = {"MiniLM (post-norm)": (minilm, *pairs(1000, 29000), ak.interventions.projection()),
              "GPT-2, MiniLM-shaped (pre-norm)": (build(), *pairs(5, 295),
                                                  ak.interventions.loss(positions=slice(args.n // 2 + 1, None)))}
    sides: dict[str, Any] = {}
    n_edges = {}
    for name, (model, clean, corrupted, metric) in setups.items():
        m = ak.interventions.metrics.resolve(metric, model)
        n_edges[name] = len(ak.edge_attribution(model, clean[:1], corrupted[:1], metric=metric).table)

        def forward_backward(model: Any = model, clean: Any = clean, m: Any = m) -> None:
            bc = hooks.batch(model, clean)
            model.hf.zero_grad(set_to_none=True)
            with torch.enable_grad():
                o = hooks.output_of(hooks.network(model)(**bc.kwargs))
                value = m(o, hooks.context(model, bc, o.detach())).mean()
                value.backward()
            model.hf.zero_grad(set_to_none=True)

        def eap(model: Any = model, clean: Any = clean, corrupted: Any = corrupted,
                metric: Any = metric) -> None:
            ak.edge_attribution(model, clean, corrupted, metric=metric, batch_size=args.items)

        sides[f"{name}: forward + backward"] = forward_backward
        sides[f"{name}: EAP, every edge"] = eap
    rounds: dict[str, list[float]] = {k: [] for k in sides}
    load0 = os.getloadavg()[0]
    for _ in range(args.reps):
        for name, fn in sides.items():
            t = time.perf_counter()
            fn()
            rounds[name].append(time.perf_counter() - t)
    load1 = os.getloadavg()[0]
    body = [f"Command: `.venv/bin/python benchmarks/circuits.py --reps {args.reps} --threads "
            f"{args.threads} --items {args.items} --n {args.n}`", "",
            f"torch {torch.__version__} on {os.cpu_count()} CPU cores ({platform.machine()}), "
            f"{args.threads} torch thread(s); 1-min load average {load0:.1f}-{load1:.1f} during "
            f"the run (shared machine). Best of {args.reps} interleaved rounds per side. "
            f"{args.items} pairs of {args.n} tokens.", "",
            "| model | edges | forward + backward (s) | EAP over every edge (s) | ratio | target |",
            "|---|---:|---:|---:|---:|---|"]
    for name in setups:
        fb, e = min(rounds[f"{name}: forward + backward"]), min(rounds[f"{name}: EAP, every edge"])
        body.append(f"| {name} | {n_edges[name]} | {fb:.3f} | {e:.3f} | {e / fb:.2f} | ≤ {TARGET} |")
    body += ["", "- all rounds: " + "; ".join(f"{k} {', '.join(f'{v:.3f}' for v in vals)}"
                                              for k, vals in rounds.items())]
    from _report import write_section

    write_section("circuits", "\n".join(body))
    print("\n".join(body))


if __name__ == "__main__":
    main()
