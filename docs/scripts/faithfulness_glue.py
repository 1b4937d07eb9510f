"""Abnar & Zuidema (2020) on the bundled model fine-tuned on a GLUE task: which attention
attribution tracks what the classifier uses?

    python docs/scripts/faithfulness_glue.py --model runs/minilm-sst2 --task SST-2 \
        --out runs/faithfulness-sst2 --figures docs/figures

Runs ``attnkit.faithfulness`` on every item of the task's dev split (or ``--limit``), target
the logit of the class the classifier predicts, and writes ``faithfulness.csv`` (the
table), ``per_item.csv``, ``curves.csv`` and ``faithfulness.md`` under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from _common import prepare

import attnkit as ak

MEASURES = ("weights", "rollout", "flow", "norm", "norm+residual", "alti", "grad×attn",
            "input×grad", "random")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a fine-tuned classifier folder")
    p.add_argument("--task", required=True)
    p.add_argument("--split", default="dev")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--out", required=True)
    p.add_argument("--figures")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    out, model = prepare(args)
    data = ak.read_glue(args.task, args.split, limit=args.limit)
    t, c = time.perf_counter(), time.process_time()
    load0 = os.getloadavg()[0]
    r = ak.faithfulness(model, data.inputs, measures=MEASURES, steps=args.steps,
                        n_boot=args.n_boot, progress=False)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    r.table.to_csv(out / "faithfulness.csv")
    r.meta["per_item"].to_csv(out / "per_item.csv", index=False)
    r.meta["curves"].to_csv(out / "curves.csv")
    info = {k: v for k, v in r.meta.items() if k not in ("per_item", "curves")}
    info.update(task=args.task, split=args.split, wall_seconds=wall, cpu_seconds=cpu,
                load_before=load0, load_after=os.getloadavg()[0], threads=torch.get_num_threads())
    (out / "info.json").write_text(json.dumps(info, indent=1, default=str))
    tab = r.table
    metrics = ["spearman_blankout", "spearman_abs_blankout", "spearman_inputxgrad",
               "spearman_abs_inputxgrad", "deletion_auc", "insertion_auc"]
    head = "| measure | " + " | ".join(metrics) + " |"
    lines = [head, "|---|" + "---:|" * len(metrics)]
    for m in MEASURES:
        cells = [f"{tab.loc[(m, mt), 'mean']:.3f} [{tab.loc[(m, mt), 'ci_low']:.3f}, "
                 f"{tab.loc[(m, mt), 'ci_high']:.3f}]" for mt in metrics]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "Paired difference from raw attention (weights), mean [95 % CI]:", "",
              head, "|---|" + "---:|" * len(metrics)]
    for m in MEASURES:
        cells = [f"{tab.loc[(m, mt), 'delta']:+.3f} [{tab.loc[(m, mt), 'delta_low']:+.3f}, "
                 f"{tab.loc[(m, mt), 'delta_high']:+.3f}]" for mt in metrics]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    md = "\n".join(lines) + (
        f"\n\n{r.meta['n_items']} items; target {r.meta['target']}; mask token "
        f"{r.meta['mask_token']}; mean target on the clean input {r.meta['baseline_full']:.3f}, "
        f"all words masked {r.meta['baseline_empty']:.3f}; {wall / 60:.1f} min wall, "
        f"{cpu / 60:.1f} min CPU, load {load0:.1f} -> {os.getloadavg()[0]:.1f} (2 shared cores).\n")
    (out / "faithfulness.md").write_text(md)
    if args.figures:
        fig = r.plot()
        Path(args.figures).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(args.figures) / f"faithfulness-{args.task.lower()}.png", dpi=100)
    print(md)


if __name__ == "__main__":
    main()
