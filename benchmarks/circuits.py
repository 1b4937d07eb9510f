"""Cost of edge attribution (issue 30) beside one forward + backward, in one run.

    .venv/bin/python benchmarks/circuits.py [--reps 3] [--threads 1] [--items 8] [--n 128] [--before REV]

EAP (``ak.edge_attribution(..., method="eap")``: the clean and the corrupted forwards, then
one backward, the attention inputs' gradients taken from the query, key and value
projections' outputs) over every edge of a model, against one forward + backward of the same
metric on the same batch (target: at most 3x), each side measured in the same process, best
of ``reps`` interleaved rounds.

Two models, each against its own forward + backward: the bundled all-MiniLM-L6-v2 (a
post-norm encoder: each run's components are carried through its own norms,
docs/circuits.md), random MiniLM token ids, metric ``projection()`` (the mean-pooled
embedding along the clean run's); and a GPT-2 (pre-norm decoder) of MiniLM's shape: 6 layers
x 12 heads, width 384, MLP 1536, vocabulary 30,522, random weights (token ids of the tiny test
tokenizer, 300 ids), metric the loss over the second half. ``items`` pairs of ``n`` tokens; the
corrupted copy changes one token in the middle.

``--before REV``: the attnkit of git revision ``REV`` (``git archive REV attnkit``, in a
temporary folder) is timed in the same run by a second process running the same cases, the
two sides alternating case by case (one process computes at a time), so that each ratio has
its counterpart measured under the same load.
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
from typing import Any

TARGET = 3.0
REPO = Path(__file__).resolve().parents[1]


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


def cases(args: argparse.Namespace) -> tuple[list[str], dict[str, Any], dict[str, int]]:
    """The models, their timed sides (``"<model>: forward + backward"``, ``"<model>: EAP,
    every edge"``) and each model's number of edges (one warm-up EAP on one pair)."""
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
    return list(setups), sides, n_edges


def timed(fn: Any) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of ``fn()``: with one torch thread the process's CPU time is
    what the run cost, whatever else the shared machine ran meanwhile."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def serve(args: argparse.Namespace) -> None:
    """The ``--before`` side: build the cases, then time the side named on each stdin line."""
    import attnkit

    _, sides, n_edges = cases(args)
    print(json.dumps({"attnkit": attnkit.__file__, "edges": n_edges}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        if name not in sides:
            break
        print(json.dumps({"seconds": timed(sides[name])}), flush=True)


class Before:
    """A process timing the cases with revision ``rev``'s attnkit."""

    def __init__(self, rev: str, args: argparse.Namespace):
        self.commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True,
                                     capture_output=True, text=True).stdout.strip()
        self.tmp = Path(tempfile.mkdtemp(prefix="attnkit-before-"))
        subprocess.run(f"git -C {REPO} archive {rev} attnkit | tar -x -C {self.tmp}", shell=True, check=True)
        argv = [sys.executable, __file__, "--serve", "--threads", str(args.threads), "--items",
                str(args.items), "--n", str(args.n)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(self.tmp)})
        head = self._read()
        if not str(head["attnkit"]).startswith(str(self.tmp)):
            raise SystemExit(f"the --before process imported {head['attnkit']}, not {self.tmp}")
        self.edges = head["edges"]

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the --before process ended (exit {self.proc.wait()})")
            if line.startswith("{"):  # anything else the libraries print is passed over
                return json.loads(line)

    def time(self, name: str) -> tuple[float, float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        wall, cpu = self._read()["seconds"]
        return float(wall), float(cpu)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--before", metavar="REV", default=None,
                    help="also time git revision REV's attnkit, alternating with this tree's")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args)
        return
    import torch

    before = Before(args.before, args) if args.before else None
    models, sides, n_edges = cases(args)
    rounds: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    then: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    load0 = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for rep in range(args.reps):
        for name, fn in sides.items():
            for side in ("now", "before") if rep % 2 == 0 else ("before", "now"):
                if side == "before" and before is not None:
                    then[name].append(before.time(name))
                elif side == "now":
                    rounds[name].append(timed(fn))
    if before is not None:
        before.close()
    load1 = os.getloadavg()[0]
    flag = f" --before {args.before}" if args.before else ""
    body = [f"Command: `.venv/bin/python benchmarks/circuits.py --reps {args.reps} --threads "
            f"{args.threads} --items {args.items} --n {args.n}{flag}` ({started})", "",
            f"torch {torch.__version__} on {os.cpu_count()} CPU cores ({platform.machine()}), "
            f"{args.threads} torch thread(s); 1-min load average {load0:.1f}-{load1:.1f} during "
            f"the run (shared machine). Best of {args.reps} interleaved rounds per side. "
            f"{args.items} pairs of {args.n} tokens."]
    body[-1] += (" Wall and CPU seconds (the process's, one torch thread: what the run cost "
                 "whatever else ran meanwhile), each the best of its rounds.")
    labels = [("this tree", rounds, n_edges)]
    if before is not None:
        body[-1] += (f" `before`: the attnkit of `{args.before}` ({before.commit}), timed by a "
                     "second process in the same rounds, the two alternating side by side.")
        labels.append((f"before ({before.commit})", then, before.edges))
    body += ["", "| model | edges | attnkit | forward + backward: wall / CPU (s) | EAP over every edge: "
             "wall / CPU (s) | ratio: wall / CPU | target |", "|---|---:|---|---:|---:|---:|---|"]
    for name in models:
        for label, times, edges in labels:
            fb = [min(t[i] for t in times[f"{name}: forward + backward"]) for i in (0, 1)]
            e = [min(t[i] for t in times[f"{name}: EAP, every edge"]) for i in (0, 1)]
            body.append(f"| {name} | {edges[name]} | {label} | {fb[0]:.3f} / {fb[1]:.3f} | {e[0]:.3f} / "
                        f"{e[1]:.3f} | {e[0] / fb[0]:.2f} / {e[1] / fb[1]:.2f} | ≤ {TARGET} |")

    def listing(times: dict[str, list[tuple[float, float]]]) -> str:
        return "; ".join(f"{k} {', '.join(f'{w:.3f}/{c:.3f}' for w, c in vals)}" for k, vals in times.items())

    body += ["", "- all rounds (wall/CPU s): " + listing(rounds)]
    if before is not None:
        body += [f"- all rounds, before ({before.commit}): " + listing(then)]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _report import write_section

    write_section("circuits", "\n".join(body))
    print("\n".join(body))


if __name__ == "__main__":
    main()
