"""Train the induction toy with checkpoints, score its heads at every step, and print the
"Heads across training" section of docs/results.md.

    python docs/scripts/heads_across_training.py --figure docs/figures/heads_across_training.png

Trains ``train_induction_model(checkpoint_every=10)`` (the default recipe, seed 0, one torch
thread) and the same recipe with ``layers=1`` into a temporary folder, reads each run with
``attnkit.checkpoints``, scores every checkpoint with ``attnkit.checkpoint_scores`` on
``induction_inputs(final, 8, 64, seed=0)`` (129 tokens; the in-context score compares token 120,
in the second copy, with token 50, in the first), and reports the phase-change window of the
training loss (the loss of the second copy), the step at which each head crosses 0.5 and the
in-context score before and after. Prints markdown.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import torch

import attnkit as ak
from attnkit.toys import induction as toy

LATE, EARLY = 120, 50


def run(folder: Path, layers: int, steps: int, every: int) -> tuple[ak.Model, ak.training.SeriesResult, dict]:
    final = toy.train_induction_model(steps=steps, layers=layers, checkpoint_every=every,
                                      out=folder, progress=True)
    series = ak.checkpoints(folder)
    inputs = ak.induction_inputs(final, 8, 64, seed=0)
    start, cpu = time.perf_counter(), time.process_time()
    result = ak.checkpoint_scores(series, inputs, early=EARLY, late=LATE, maps=layers == 2,
                                  composition=layers == 2)
    timing = {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu,
              "n": len(series)}
    return final, result, timing


def window(result: ak.training.SeriesResult) -> tuple[int, int]:
    """(last checkpoint whose training loss is >= 90 % of chance, first one <= 10 %)."""
    chance = math.log(512)
    loss = result.steps["training_loss"]
    high, low = loss.index[loss >= 0.9 * chance], loss.index[loss <= 0.1 * chance]
    return (int(high.max()) if len(high) else -1), (int(low.min()) if len(low) else -1)


def crossings(result: ak.training.SeriesResult) -> str:
    lines = ["| head | previous crosses 0.5 at | induction crosses 0.5 at | stays above | "
             "induction at step 0 | at the end |", "|---|---:|---:|---|---:|---:|"]
    prev = ak.crossing_steps(result, value="previous", above=0.5).table
    ind = ak.crossing_steps(result, value="induction", above=0.5).table

    def at(row) -> str:
        return "never" if math.isnan(row["step"]) else f"({int(row['previous_step'])}, {int(row['step'])}]"

    for (layer, head) in ind.index:
        p, i = prev.loc[(layer, head)], ind.loc[(layer, head)]
        stays = "yes" if i["stays"] else ("no" if not math.isnan(i["step"]) else "")
        lines.append(f"| {layer + 1}-{head + 1} | {at(p)} | {at(i)} | {stays} | {i['first']:.3f} "
                     f"| {i['final']:.3f} |")
    return "\n".join(lines)


def trajectory(result: ak.training.SeriesResult, steps: list[int]) -> str:
    wide_ind = result.table["induction"].unstack(["layer", "head"])
    wide_prev = result.table["previous"].unstack(["layer", "head"])
    heads = list(wide_ind.columns)
    head_cols = " | ".join(f"induction {l + 1}-{h + 1}" for l, h in heads[-2:])
    lines = [f"| step | training loss | late loss | early loss | ICL score | previous 1-1 | {head_cols} |",
             "|---:|---:|---:|---:|---:|---:|" + "---:|" * len(heads[-2:])]
    for s in steps:
        row = result.steps.loc[s]
        tl = "" if math.isnan(row["training_loss"]) else f"{row['training_loss']:.3f}"
        lines.append(f"| {s} | {tl} | {row['late_loss']:.3f} | {row['early_loss']:.3f} | "
                     f"{row['icl']:.3f} | {wide_prev.loc[s, heads[0]]:.3f} | "
                     + " | ".join(f"{wide_ind.loc[s, hd]:.3f}" for hd in heads[-2:]) + " |")
    return "\n".join(lines)


def composition_table(result: ak.training.SeriesResult, steps: list[int]) -> str:
    """K-composition of each layer-1 head into each layer-2 head at ``steps``."""
    comp = result.composition
    pairs = [(sh, th) for sh in (0, 1) for th in (0, 1)]
    lines = ["| step | " + " | ".join(f"1-{sh + 1} → 2-{th + 1}" for sh, th in pairs) + " |",
             "|---:|" + "---:|" * len(pairs)]
    for s in steps:
        lines.append(f"| {s} | " + " | ".join(f"{comp.loc[(s, 0, sh, 1, th), 'k']:.3f}"
                                             for sh, th in pairs) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--figure", default=None, help="write the 2-layer figure here (PNG)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        final2, two, t2 = run(Path(tmp) / "toy-2l", 2, args.steps, args.every)
        final1, one, t1 = run(Path(tmp) / "toy-1l", 1, args.steps, args.every)
    rec2, rec1 = final2.config.attnkit_toy, final1.config.attnkit_toy
    start, end = window(two)
    print("## Heads across training: the induction phase change\n")
    print(f"`train_induction_model(checkpoint_every={args.every}, out=...)` (the default recipe, "
          f"seed 0, {args.steps} steps) and the same with `layers=1`; each run read with "
          "`ak.checkpoints(folder)` and scored with `ak.checkpoint_scores(series, "
          f"induction_inputs(final, 8, 64, seed=0), early={EARLY}, late={LATE})` (129 tokens: "
          f"token {EARLY} is in the first copy, token {LATE} in the second). Torch "
          f"{torch.__version__}, one torch thread, 2 cores shared with other jobs (load "
          f"{load:.1f} before, {os.getloadavg()[0]:.1f} after).\n")
    print(f"- Training with checkpoints: 2 layers {rec2['train_seconds']:.1f} s wall, "
          f"{rec2['train_cpu_seconds']:.1f} s CPU, plus {rec2['checkpoint_seconds']:.1f} s writing "
          f"{t2['n']} checkpoints; 1 layer {rec1['train_seconds']:.1f} s wall, "
          f"{rec1['train_cpu_seconds']:.1f} s CPU, plus {rec1['checkpoint_seconds']:.1f} s.")
    print(f"- Scoring every checkpoint: 2 layers {t2['wall']:.1f} s wall ({t2['cpu']:.1f} s CPU) for "
          f"{t2['n']} checkpoints (first input's maps and the composition of the weights kept); "
          f"1 layer {t1['wall']:.1f} s wall ({t1['cpu']:.1f} s CPU).")
    print(f"- Final 2-layer training loss {rec2['final_loss']:.4f} (the shipped model's: "
          f"{toy.induction_model().config.attnkit_toy['final_loss']:.4f}).\n")
    print(f"**Two layers.** The training loss (the second copy's) is near chance (>= 90 % of "
          f"ln 512 = {math.log(512):.2f}) last at step {start} and near zero (<= 10 %) first at "
          f"step {end}: the phase-change window is ({start}, {end}]. Steps at which each head's "
          "score first exceeds 0.5 (between the two checkpoints shown):\n")
    print(crossings(two) + "\n")
    shown = [s for s in two.steps.index if s in (0, 100, 150, 160, 170, 180, 190, 200, 250, 400, args.steps)]
    print(trajectory(two, shown) + "\n")
    p99 = two.meta["composition_baseline"]["k"]["p99"]
    print("K-composition (`checkpoint_scores(..., composition=True)`, `attnkit.composition` of each "
          f"checkpoint's weights; random baseline p99 {p99:.3f} for this shape) of each layer-1 head "
          "into each layer-2 head:\n")
    print(composition_table(two, shown) + "\n")
    print(f"**One layer.** Highest induction score of any head at any step: "
          f"{one.table['induction'].max():.3f} (uniform attention: about 0.011); highest "
          f"previous-token score {one.table['previous'].max():.3f}; lowest late loss "
          f"{one.steps['late_loss'].min():.3f} (chance {math.log(515):.2f}); in-context score "
          f"between {one.steps['icl'].min():.3f} and {one.steps['icl'].max():.3f}; final "
          f"training loss {rec1['final_loss']:.3f}.\n")
    print(crossings(one) + "\n")
    if args.figure:
        fig = two.plot()
        fig.savefig(args.figure, dpi=110)
        print(f"Figure: `{args.figure}` (`result.plot()`).\n")


if __name__ == "__main__":
    main()
