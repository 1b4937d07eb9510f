"""Relation heads across a fine-tune of the bundled encoder, and the score attribution of the
induction toy's stripe across its training; prints markdown for docs/results.md.

    python docs/scripts/relations_across_training.py

1. ``ak.finetune`` of the bundled MiniLM on MRPC (512 training pairs, one epoch, batches of 16:
   32 steps, a checkpoint every 4), then ``checkpoint_scores(series, ewt, ewt)`` on the first
   100 sentences of EWT dev: per relation, the best dep->head head before fine-tuning and its
   accuracy at every checkpoint, beside the best head at the end.
2. ``train_induction_model(steps=260, checkpoint_every=20)`` (the default recipe, seed 0), then
   ``checkpoint_scores(..., attribution=stripe, heads=[(1, 0), (1, 1)], components="heads")`` on
   ``induction_inputs(final, 2, 64, seed=0)``: the share of each head's stripe score carried by
   its largest (query component, key component) terms at every checkpoint.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

import attnkit as ak
from attnkit.toys import induction as toy

RELATIONS = ("nsubj", "obj", "det", "amod", "case", "advmod", "aux")


def relations(tmp: Path) -> list[str]:
    data = ak.data.data_dir()
    encoder = ak.load("minilm")
    start = time.perf_counter()
    ak.finetune(encoder, ak.read_glue(data / "glue" / "MRPC", "train"), max_items=512, epochs=1,
                batch_size=16, max_length=64, checkpoint_every=4, checkpoint_dir=tmp / "ft",
                seed=0, progress=False)
    tuned = time.perf_counter() - start
    series = ak.checkpoints(tmp / "ft")
    ewt = ak.read_conllu(data / "ud-english-ewt" / "en_ewt-ud-dev.conllu", limit=100)
    start = time.perf_counter()
    r = ak.checkpoint_scores(series, ewt, ewt, kinds="sink", progress=False)
    scored = time.perf_counter() - start
    dep = r.relations[r.relations["direction"] == "dep->head"].drop(columns="direction")
    steps = series.steps
    shown = [s for s in steps if s % 8 == 0 or s == steps[-1]]
    out = [f"MiniLM fine-tuned on 512 MRPC pairs (one epoch, {steps[-1]} steps; {tuned:.0f} s), "
           f"{len(steps)} checkpoints scored on 100 EWT dev sentences in {scored:.0f} s "
           f"(load {os.getloadavg()[0]:.1f}). Accuracy (dep->head) of the best head of each "
           "relation before fine-tuning, at each checkpoint, and the best head at the end:", "",
           "| relation | words | head (chosen at step 0) | "
           + " | ".join(f"step {s}" for s in shown) + " | best head at the end |",
           "|---|---:|---|" + "---:|" * len(shown) + "---|"]
    for rel in RELATIONS:
        if rel not in dep.columns:
            continue
        first = dep[rel].xs(steps[0], level="step")
        layer, head = first.idxmax()
        last = dep[rel].xs(steps[-1], level="step")
        bl, bh = last.idxmax()
        cells = " | ".join(f"{dep[rel].loc[(s, layer, head)]:.3f}" for s in shown)
        out.append(f"| {rel} | {r.meta['relation_counts'][rel]} | {layer + 1}-{head + 1} | {cells} "
                   f"| {bl + 1}-{bh + 1}: {last.max():.3f} |")
    return out


def attribution(tmp: Path) -> list[str]:
    start = time.perf_counter()
    final = toy.train_induction_model(steps=260, checkpoint_every=20, out=tmp / "toy",
                                      progress=False)
    trained = time.perf_counter() - start
    series = ak.checkpoints(tmp / "toy")
    inputs = ak.induction_inputs(final, 2, 64, seed=0)
    stripe = [(65 + t, 2 + t) for t in range(63)]
    start = time.perf_counter()
    r = ak.checkpoint_scores(series, inputs, kinds="induction", attribution=stripe,
                             heads=[(1, 0), (1, 1)], components="heads", early=50, late=120,
                             progress=False)
    scored = time.perf_counter() - start
    out = [f"Induction toy, 260 steps of the default recipe with a checkpoint every 20 "
           f"({trained:.0f} s), {len(series)} checkpoints attributed in {scored:.0f} s "
           f"(load {os.getloadavg()[0]:.1f}); largest absolute error of a summed score "
           f"{r.meta['attribution_error']:.1e}. Share of each head's summed stripe score carried "
           "by its three largest terms at the last checkpoint, and its induction score:", ""]
    steps = series.steps
    shown = [s for s in steps if s in (0, 100, 140, 160, 180, 200, 260)]
    for layer, head in ((1, 0), (1, 1)):
        share = r.attribution["share"].xs((layer, head), level=["layer", "head"]).unstack("step")
        top = share[steps[-1]].abs().sort_values(ascending=False).index[:3]
        out += [f"Head {layer + 1}-{head + 1}:", "",
                "| term (query × key) | " + " | ".join(f"step {s}" for s in shown) + " |",
                "|---|" + "---:|" * len(shown)]
        for q, k in top:
            out.append(f"| {q} × {k} | " + " | ".join(f"{share.loc[(q, k), s]:.2f}" for s in shown)
                       + " |")
        ind = r.table["induction"].xs((layer, head), level=["layer", "head"])
        out.append("| induction score | " + " | ".join(f"{ind[s]:.3f}" for s in shown) + " |")
        out.append("")
    return out


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        lines = attribution(Path(tmp)) + [""] + relations(Path(tmp))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
