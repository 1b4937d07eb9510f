"""Regenerate the numbers of docs/results.md, "Circuits: the MRPC classifier".

    PYTHONPATH=. .venv/bin/python docs/scripts/circuits_mrpc.py --model runs/minilm-mrpc-1600 \
        [--pairs 64] [--flow-pairs 408] [--steps 20] [--top-heads 12]

Runs the code cells of section 4 of ``notebooks/09_circuits.ipynb`` (one place for the
analysis) with these parameters instead of the notebook's: the classifier at ``--model``
(written by ``attnkit finetune``), ``--pairs`` MRPC dev paraphrases the classifier calls
equivalent as clean inputs, each with a matched non-paraphrase as its corrupted input (the
same sentence A, the sentence B of another dev pair with as many tokens that the classifier
calls not equivalent); metric: the logit difference, equivalent minus not equivalent. Every
edge scored by EAP and EAP-IG (``--steps``); the faithfulness curve of the top-k EAP-IG edges;
notebook 02's flow comparison over ``--flow-pairs`` dev pairs and the share of the top-300
circuit's |score| through its ``--top-heads`` most changed heads, against random head sets.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    import numpy as np

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="folder of the fine-tuned MRPC classifier")
    p.add_argument("--pairs", type=int, default=64)
    p.add_argument("--flow-pairs", type=int, default=408)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top-heads", type=int, default=12)
    args = p.parse_args()

    nb = json.loads((ROOT / "notebooks" / "09_circuits.ipynb").read_text())
    cells = nb["cells"]
    start = next(i for i, c in enumerate(cells)
                 if "".join(c["source"]).startswith("## 4. The MRPC classifier"))
    ns: dict = {}
    exec("".join(cells[1]["source"]), ns)  # the parameters cell, then ours
    ns.update(FINETUNED=str(Path(args.model).resolve()), PAIRS=args.pairs, STEPS=args.steps,
              FLOW_PAIRS=None if args.flow_pairs >= 408 else args.flow_pairs,
              TOP_HEADS=args.top_heads, QUICK=False)
    exec("import numpy as np\nimport matplotlib\nmatplotlib.use('Agg')\n"
         "import matplotlib.pyplot as plt\nfrom scipy.stats import spearmanr\nimport attnkit as ak", ns)
    cwd = os.getcwd()
    began = time.perf_counter()
    os.chdir(ROOT / "notebooks")
    try:
        for c in cells[start:]:
            if c["cell_type"] != "code":
                continue
            t = time.perf_counter()
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec("".join(c["source"]), ns)
            print(out.getvalue().rstrip(), f"\n[{time.perf_counter() - t:.0f} s]", flush=True)
    finally:
        os.chdir(cwd)

    curve, jsd = ns["curve"], ns["jsd"]
    table = ns["top"]
    print("\n## top 12 edges (EAP-IG score, EAP score)")
    for (u, d), row in table.reindex(table["score"].abs().sort_values(ascending=False).index).head(12).iterrows():
        print(f"| {u} → {d} | {row['score']:+.4f} | {row['eap']:+.4f} |")
    print("\n## faithfulness curve")
    for k, row in curve.table.iterrows():
        print(f"| {k} | {row['faithfulness']:.3f} |")
    print("\n## most changed heads (jsd_mean)")
    print(", ".join(f"{l + 1}-{h + 1} {v:.4f}" for (l, h), v in
                    jsd.sort_values(ascending=False).head(args.top_heads).items()))
    per_layer = ns["per_head"].groupby(lambda h: int(h.split("-")[0])).sum()
    print("circuit share by layer of the head (an edge counts for each head it touches): "
          + ", ".join(f"{v:.3f}" for v in per_layer.to_numpy()))
    print(f"observed {ns['observed']:.4f}; random mean {np.mean(ns['random_shares']):.4f}, "
          f"95th pct {np.percentile(ns['random_shares'], 95):.4f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # KiB on Linux
    print(f"\nsection 4: {time.perf_counter() - began:.0f} s; peak RSS of the process {peak:.2f} GB; "
          f"{len(ns['clean'])} pairs, {args.steps} steps, 1-min load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
