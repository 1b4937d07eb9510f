"""General head behaviour end to end (Clark et al. 2019, §3, §6): statistics, behaviour
labels, head clusters and gradient importance, written as tables and figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ...analysis.cluster import embed_heads, head_behaviours, head_distances
from ...analysis.importance import attention_importance
from ...analysis.stats import head_stats
from ...runtime.objectives import head_kind


def cluster_summary(dist: pd.DataFrame) -> dict[str, float]:
    """How much heads of one layer resemble each other: mean JS divergence within and
    across layers, and how often a head's nearest head is in its own layer (vs chance)."""
    d = dist.to_numpy()
    layer = dist.index.get_level_values("layer").to_numpy()
    same = layer[:, None] == layer[None, :]
    off = ~np.eye(len(d), dtype=bool)
    nn = np.where(off, d, np.inf).argmin(1)
    n_heads = len(layer) // (layer.max() + 1)
    return {
        "mean_js_same_layer": float(d[same & off].mean()),
        "mean_js_other_layers": float(d[~same].mean()),
        "nearest_neighbour_same_layer": float((layer[nn] == layer).mean()),
        "nearest_neighbour_chance": (n_heads - 1) / (len(layer) - 1),
    }


def run_general(
    attentions: Sequence[Any],
    out: str | Path | None = None,
    *,
    model: Any = None,
    importance_inputs: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Head statistics, behaviours, distances, 2-D embedding and (with ``model`` and
    ``importance_inputs``) gradient importance; with ``out``, CSV tables and PNG figures.

    ``attentions`` is a word-level AttentionSet (or list of Attention) of one model.
    """
    items = list(attentions)
    stats = head_stats(items)
    dist = head_distances(items)
    emb = embed_heads(dist)
    beh = head_behaviours(stats)
    per_layer = stats.groupby(level="layer").mean()
    counts = beh.groupby(level="layer", observed=False).value_counts().unstack(fill_value=0)
    per_layer = per_layer.join(counts.add_prefix("n "))
    per_layer.index = per_layer.index + 1  # displayed 1-indexed, as in the paper
    summary = {"items": len(items), "uniform_entropy": stats.meta["uniform_entropy"],
               "stress1": emb.meta["stress1"], **cluster_summary(dist)}
    result = {"stats": stats, "behaviours": beh, "distances": dist, "embedding": emb,
              "per_layer": per_layer, "summary": summary, "importance": None}
    if model is not None and importance_inputs:
        imp = attention_importance(model, importance_inputs, batch_size=16,
                                   # a bare sentence encoder: the MLM-loss analogue of
                                   # Clark et al.'s Fig. 3 (docs/results.md)
                                   objective="embedding" if head_kind(model) == "none" else "auto")
        result["importance"] = imp
        summary["importance_objective"] = imp.meta["objective"]
        summary["importance_items"] = len(importance_inputs)
    if out is not None:
        write_general(result, out)
    return result


def write_general(result: dict[str, Any], out: str | Path, prefix: str = "") -> list[Path]:
    """Write :func:`run_general`'s tables and figures under ``out``; returns the paths."""
    from ...plot.heads import head_stats_figures
    from ...plot.stats import plot_entropy, plot_head_clusters, plot_importance, plot_special_attention

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {
        "head_stats.csv": result["stats"].join(result["behaviours"]),
        "head_distances.csv": result["distances"],
        "head_embedding.csv": result["embedding"].join(result["behaviours"]),
        "per_layer.csv": result["per_layer"],
    }
    stats, emb, beh = result["stats"], result["embedding"], result["behaviours"]
    figures = {
        "fig2_special_attention": plot_special_attention(stats),
        "fig4_entropy": plot_entropy(stats),
        "fig4_cls_entropy": plot_entropy(stats, column="cls_entropy"),
        "fig6_head_clusters": plot_head_clusters(emb, behaviours=beh),
        "fig6_head_clusters_layer": plot_head_clusters(emb, color_by="layer"),
        **head_stats_figures(stats),
    }
    if result["importance"] is not None:
        imp = result["importance"].copy()
        figures["fig3_importance"] = plot_importance(imp)
        imp.index = imp.index + 1
        tables["importance.csv"] = imp
    written = []
    for name, df in tables.items():
        df.to_csv(out / f"{prefix}{name}", float_format="%.6g")
        written.append(out / f"{prefix}{name}")
    for name, fig in figures.items():
        fig.savefig(out / f"{prefix}{name}.png", dpi=110, bbox_inches="tight")
        written.append(out / f"{prefix}{name}.png")
    return written
