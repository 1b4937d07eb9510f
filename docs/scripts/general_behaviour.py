"""Regenerate the general-behaviour results of docs/results.md (Clark et al. 2019, §3, §6).

    python docs/scripts/general_behaviour.py --store /work/runs/ewt-dev \
        --treebank ud-english-ewt/en_ewt-ud-dev.conllu --out runs/general-ewt-dev \
        --figures docs/figures

Reads a word-level AttentionSet store of the bundled model (attnkit.extract), writes CSV
tables, PNG figures and summary.json under --out, and prints the markdown tables.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

import attnkit as ak
from attnkit.analysis.cluster import embed_heads, head_behaviours, head_distances, uniform_entropy
from attnkit.analysis.importance import attention_importance
from attnkit.data import find_data
from attnkit.plot.stats import plot_entropy, plot_head_clusters, plot_importance, plot_special_attention


def markdown(df: pd.DataFrame, fmt: str = "{:.3f}") -> str:
    """A pipe table (no tabulate dependency)."""
    cols = [df.index.name or ""] + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in df.iterrows():
        cells = [str(int(v)) if df[c].dtype.kind in "iu" else fmt.format(v)
                 if isinstance(v, (float, np.floating)) else str(v) for c, v in row.items()]
        lines.append("| " + " | ".join([str(idx)] + cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True)
    p.add_argument("--treebank", default="ud-english-ewt/en_ewt-ud-dev.conllu")
    p.add_argument("--model", default="minilm")
    p.add_argument("--out", required=True)
    p.add_argument("--figures", help="also save the figures here, named ewt-dev-<figure>.png")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sset = ak.AttentionSet.open(args.store)
    summary: dict = {"store": str(args.store), "items": len(sset), "model": sset.model}

    t = time.perf_counter()
    items = list(sset)
    summary["load_s"] = time.perf_counter() - t
    stats = ak.head_stats(items)
    u = uniform_entropy(items)
    stats.attrs["uniform_entropy"] = u
    summary["uniform_entropy"] = u
    t = time.perf_counter()
    dist = head_distances(items)
    summary["head_distances_s"] = time.perf_counter() - t
    t = time.perf_counter()
    emb = embed_heads(dist)
    summary["embed_heads_s"] = time.perf_counter() - t
    summary["stress1"] = emb.attrs["stress1"]
    beh = head_behaviours(stats)

    d = dist.to_numpy()
    layer = dist.index.get_level_values("layer").to_numpy()
    same = layer[:, None] == layer[None, :]
    off = ~np.eye(len(d), dtype=bool)
    summary["mean_js_same_layer"] = float(d[same & off].mean())
    summary["mean_js_other_layers"] = float(d[~same].mean())
    nn = np.where(off, d, np.inf).argmin(1)
    summary["nearest_neighbour_same_layer"] = float((layer[nn] == layer).mean())
    # chance level of the nearest-neighbour statistic: another head drawn at random
    L = layer.max() + 1
    H = len(layer) // L
    summary["nearest_neighbour_chance"] = (H - 1) / (len(layer) - 1)

    stats.join(beh).to_csv(out / "head_stats.csv")
    dist.to_csv(out / "head_distances.csv")
    emb.join(beh).to_csv(out / "head_embedding.csv")

    per_layer = stats.groupby(level="layer")[["cls", "sep", "punct", "self", "prev", "next",
                                              "entropy", "cls_entropy"]].mean()
    counts = beh.groupby(level="layer", observed=False).value_counts().unstack(fill_value=0)
    per_layer = per_layer.join(counts.add_prefix("n "))
    per_layer.index = per_layer.index + 1
    per_layer.to_csv(out / "per_layer.csv")

    model = ak.load(args.model)
    tb = ak.read_conllu(find_data(args.treebank))
    t = time.perf_counter()
    imp = attention_importance(model, tb, batch_size=16)
    summary["importance_s"] = time.perf_counter() - t
    summary["importance_objective"] = imp.attrs["objective"]
    imp_out = imp.copy()
    imp_out.index = imp_out.index + 1
    imp_out.to_csv(out / "importance.csv")

    for name, fig in [
        ("fig2_special_attention.png", plot_special_attention(stats)),
        ("fig3_importance.png", plot_importance(imp)),
        ("fig4_entropy.png", plot_entropy(stats)),
        ("fig4_cls_entropy.png", plot_entropy(stats, column="cls_entropy")),
        ("fig6_head_clusters.png", plot_head_clusters(emb, beh)),
        ("fig6_head_clusters_layer.png", plot_head_clusters(emb, color_by="layer")),
    ]:
        fig.savefig(out / name, dpi=110)
        if args.figures:
            Path(args.figures).mkdir(parents=True, exist_ok=True)
            fig.savefig(Path(args.figures) / f"ewt-dev-{name}", dpi=110)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))

    print(json.dumps(summary, indent=1))
    print(markdown(per_layer))
    print(markdown(imp_out, "{:.3g}"))
    print(markdown(beh.value_counts().to_frame()))


if __name__ == "__main__":
    main()
