"""Cost of the interventions (issue 29) beside the plain passes they replace, in one run.

    .venv/bin/python benchmarks/interventions.py [--reps 3] [--threads 1] [--n 4096]

Three comparisons, each side measured in the same process (knockout: one child process per
side, for its peak memory), best (time) of ``reps`` interleaved rounds:

- **attribution patching** of every head and position (``grain="head×position"``) of the
  bundled all-MiniLM-L6-v2 on 8 pairs of 128 tokens, against one forward + backward of the
  same metric on the same batch (target: at most 3x);
- **exact activation patching** of all 72 heads of the bundled model on one pair of 128
  tokens (``ak.patch``, batched, 24 copies per forward) against 73 plain forwards of one input
  (the clean and corrupted runs plus one per head, as a loop over heads would run them;
  target: at most 1.2x);
- **knockout** of a stripe of edges (``"key = query - 1"``, every head of one middle layer) on
  ``benchmarks/long.py``'s Llama-shaped decoder (8 layers x 8 heads) at 4,096 tokens, against
  the same model's SDPA forward through attnkit's attention function: time and peak memory
  above the loaded model (target: at most 2x each).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long import build_model, current_rss_mb, rss_mb, text_of  # noqa: E402

TARGETS = {"atp": 3.0, "patch": 1.2, "knockout_time": 2.0, "knockout_mem": 2.0}


def _pairs(model, n_items: int, length: int, seed: int = 0):
    """Token-id inputs of ``length`` tokens ([CLS] ... [SEP]) and corrupted copies with one
    word token changed in the middle."""
    import numpy as np

    tok = model.tokenizer
    rng = np.random.default_rng(seed)
    vocab = np.arange(1000, 20000)
    clean, corrupted = [], []
    for _ in range(n_items):
        body = rng.choice(vocab, size=length - 2)
        ids = np.concatenate([[tok.cls_token_id], body, [tok.sep_token_id]]).astype(np.int64)
        other = ids.copy()
        other[length // 2] = rng.choice(vocab)
        clean.append(ids)
        corrupted.append(other)
    return clean, corrupted


def best(fn, reps: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), times


def text_sides(reps: int) -> dict:
    import torch

    import attnkit as ak
    from attnkit.interventions import hooks

    model = ak.load("minilm")
    metric = ak.interventions.projection()
    out: dict = {}
    clean, corrupted = _pairs(model, 8, 128)
    bc = hooks.batch(model, clean)

    def forward_backward():
        model.hf.zero_grad(set_to_none=True)
        with torch.enable_grad():
            o = hooks.output_of(model.hf(**bc.kwargs))
            ref = o.detach()
            value = metric(o, hooks.context(model, bc, ref)).mean()
            value.backward()
        model.hf.zero_grad(set_to_none=True)

    def atp():
        ak.attribution_patching(model, clean, corrupted, metric=metric, grain="head×position")

    c1, x1 = _pairs(model, 1, 128, seed=1)
    b1 = hooks.batch(model, c1)

    def plain73():
        with torch.inference_mode():
            for _ in range(73):
                model.hf(**b1.kwargs)

    def patch72():
        ak.patch(model, c1, x1, metric=metric, grain="head", batch_size=24, progress=False)

    sides = {"forward + backward (8 x 128)": forward_backward,
             "attribution patching, head×position (8 x 128)": atp,
             "73 plain forwards (1 x 128)": plain73, "patch 72 heads, batched (1 x 128)": patch72}
    rounds: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(reps):
        for name, fn in sides.items():
            rounds[name] += best(fn, 1)[1]
    out["rounds"] = rounds
    return out


def child(side: str, n: int, reps: int) -> dict:
    import torch

    from attnkit.interventions import hooks
    from attnkit.interventions.knockout import Blocker, edge_masks

    torch.set_num_threads(1)
    hf, tok, Model = build_model(n + 8)
    model = Model(hf, tok, name="llama-shaped")
    b = hooks.batch(model, [text_of(tok, n)])
    recorders = [Blocker({})]
    if side == "knockout":
        masks, _ = edge_masks(model, b, "key = query - 1", heads=[(4, h) for h in range(8)])
        recorders = [Blocker(masks)]
    base = current_rss_mb()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        with torch.inference_mode():
            hooks.forward(model, b, recorders=recorders)
        times.append(time.perf_counter() - t)
    return {"times": times, "peak_mb": rss_mb() - base, "n": len(b.lengths) and b.lengths[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.reps)))
        return
    import torch

    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()[0]
    text = text_sides(args.reps)
    kids = {}
    for side in ("sdpa", "knockout"):
        res = subprocess.run([sys.executable, __file__, "--child", side, "--n", str(args.n),
                              "--reps", str(args.reps)], capture_output=True, text=True, check=True)
        kids[side] = json.loads(res.stdout.strip().splitlines()[-1])
    load1 = os.getloadavg()[0]
    r = text["rounds"]
    fb, atp = min(r["forward + backward (8 x 128)"]), min(r["attribution patching, head×position (8 x 128)"])
    p73, p72 = min(r["73 plain forwards (1 x 128)"]), min(r["patch 72 heads, batched (1 x 128)"])
    ks, kk = min(kids["sdpa"]["times"]), min(kids["knockout"]["times"])
    ms, mk = kids["sdpa"]["peak_mb"], kids["knockout"]["peak_mb"]
    rows = [
        ("forward + backward (8 x 128)", fb, 1.0, ""),
        ("attribution patching, every head x position (8 x 128)", atp, atp / fb, f"≤ {TARGETS['atp']}"),
        ("73 plain forwards (1 x 128)", p73, 1.0, ""),
        ("patch 72 heads, batched 24 per forward (1 x 128)", p72, p72 / p73, f"≤ {TARGETS['patch']}"),
        (f"SDPA forward ({args.n} tokens)", ks, 1.0, ""),
        (f"knockout of a stripe in one layer ({args.n} tokens)", kk, kk / ks, f"≤ {TARGETS['knockout_time']}"),
    ]
    body = [f"Command: `.venv/bin/python benchmarks/interventions.py --reps {args.reps} --threads "
            f"{args.threads} --n {args.n}`", "",
            f"torch {torch.__version__} on {os.cpu_count()} CPU cores ({platform.machine()}), "
            f"{args.threads} torch thread(s); 1-min load average {load0:.1f}-{load1:.1f} during "
            f"the run (shared machine). Best of {args.reps} interleaved rounds per side. MiniLM "
            "sides: all-MiniLM-L6-v2 (6 x 12 heads), random word-piece ids, the corrupted copy "
            "changes one token; metric `projection()`. Knockout sides: `benchmarks/long.py`'s "
            "Llama-shaped decoder (8 layers x 8 heads, 2 key/value heads, width 512), one child "
            "process each (run one after the other, best of the reps within it), peak RSS above "
            "the loaded model.", "",
            "| side | seconds | ratio | target |", "|---|---:|---:|---|"]
    body += [f"| {name} | {t:.3f} | {ratio:.2f} | {tgt} |" for name, t, ratio, tgt in rows]
    body += ["", f"Peak memory above the loaded model: SDPA forward {ms:.0f} MB, knockout {mk:.0f} MB "
             f"(ratio {mk / max(ms, 1e-9):.2f}; target ≤ {TARGETS['knockout_mem']}).", "",
             "- all rounds: " + "; ".join(f"{k} {', '.join(f'{v:.3f}' for v in vals)}"
                                          for k, vals in {**r, "SDPA forward": kids['sdpa']['times'],
                                                          "knockout": kids['knockout']['times']}.items())]
    from _report import write_section

    write_section("interventions", "\n".join(body))
    print("\n".join(body))


if __name__ == "__main__":
    main()
