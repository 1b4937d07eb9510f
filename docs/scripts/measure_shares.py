"""Kobayashi et al. (2020) on the bundled model: where attention goes, by weight and by norm.

    python docs/scripts/measure_shares.py --treebank ud-english-ewt/en_ewt-ud-test.conllu \
        --out runs/measure-shares-ewt-test --figures docs/figures

For each measure (weights, norm, norm+residual, ALTI) the share of each row's total that
goes to [CLS], [SEP], punctuation and the position itself, averaged over rows, heads and
sentences per layer (``attnkit.head_stats`` on word-level maps; a measure's maps are read
as each row's shares). Writes ``shares.csv`` and ``shares.md`` under --out and prints the
markdown table.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd
from _common import prepare

import attnkit as ak
from attnkit.data import find_data

MEASURES = ("weights", "norm", "norm+residual", "alti")
COLUMNS = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punct", "self": "self"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--treebank", default="ud-english-ewt/en_ewt-ud-test.conllu")
    p.add_argument("--model", default="minilm")
    p.add_argument("--level", default="word", choices=("word", "token"))
    p.add_argument("--out", required=True)
    p.add_argument("--figures", help="also save the figure here")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    out, model = prepare(args)
    tb = ak.read_conllu(find_data(args.treebank))
    frames, seconds = [], {}
    for measure in MEASURES:
        t = time.perf_counter()
        sset = ak.extract(model, tb, level=args.level, measure=measure, progress=False)
        stats = ak.head_stats(sset)
        seconds[measure] = time.perf_counter() - t
        per_layer = stats.groupby(level="layer")[list(COLUMNS)].mean()
        per_layer.index = per_layer.index + 1
        per_layer.columns = pd.MultiIndex.from_product([[measure], list(COLUMNS.values())])
        frames.append(per_layer)
    table = pd.concat(frames, axis=1)
    table.index.name = "layer"
    table.to_csv(out / "shares.csv")
    lines = ["| layer | " + " | ".join(f"{m} {c}" for m, c in table.columns) + " |",
             "|---|" + "---:|" * len(table.columns)]
    for layer, row in table.iterrows():
        lines.append(f"| {layer} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    md = "\n".join(lines)
    md += (f"\n\n{len(tb)} sentences, {args.level} level; seconds per measure: "
           + ", ".join(f"{m} {s:.0f}" for m, s in seconds.items())
           + f"; load average at the end {os.getloadavg()[0]:.1f} (2 shared cores).\n")
    (out / "shares.md").write_text(md)
    if args.figures:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9, 3), layout="constrained")
        axes = fig.subplots(1, 3, sharey=True)
        for ax, col in zip(axes, ("[CLS]", "[SEP]", "punct")):
            for measure in MEASURES:
                ax.plot(table.index, table[(measure, col)], marker="o", label=measure)
            ax.set_title(f"share to {col}")
            ax.set_xlabel("layer")
        axes[0].set_ylabel("share of each row's total")
        axes[-1].legend(fontsize=8)
        Path(args.figures).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(args.figures) / "ewt-test-measure_shares.png", dpi=110)
    print(md)


if __name__ == "__main__":
    main()
