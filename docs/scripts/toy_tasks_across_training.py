"""Train the reversal T5 and the colour-square ViT with checkpoints, score their heads at every
step, and print the "The other toys across training" part of docs/results.md.

    python docs/scripts/toy_tasks_across_training.py

Trains ``train_reversal_model(checkpoint_every=50)`` and ``train_colour_model(checkpoint_every=20)``
(the default recipes, seed 0, one torch thread) into a temporary folder, reads each run with
``attnkit.checkpoints`` and scores every checkpoint with ``attnkit.checkpoint_scores`` and a
per-head score that fits the task: ``reversal_score`` (the cross-attention mass of the row
predicting target word j on source word n - 1 - j, on 32 held-out pairs) and ``colour_score``
([CLS]'s attention to the square's patch, on 64 held-out images). Reports, per head, the step at
which the score crosses 0.5 (``attnkit.crossing_steps``), beside the training loss. Prints
markdown.
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
from attnkit.toys import tasks

HELD_OUT = 20_000


def table(result: ak.training.SeriesResult, value: str) -> str:
    cross = ak.crossing_steps(result, value=value, above=0.5).table
    lines = [f"| head | {value} crosses 0.5 at | stays above | at step 0 | at the end |",
             "|---|---:|---|---:|---:|"]
    for (layer, head), row in cross.iterrows():
        at = ("never" if math.isnan(row["step"])
              else f"({int(row['previous_step'])}, {int(row['step'])}]")
        lines.append(f"| {layer + 1}-{head + 1} | {at} | {'yes' if row['stays'] else 'no'} | "
                     f"{row['first']:.3f} | {row['final']:.3f} |")
    return "\n".join(lines)


def losses(result: ak.training.SeriesResult, every: int) -> str:
    loss = result.steps["training_loss"].dropna()
    shown = [s for s in loss.index if s % (every * 4) == 0 or s == loss.index[-1]]
    return ", ".join(f"{s}: {loss[s]:.3f}" for s in shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reversal-steps", type=int, default=1500)
    parser.add_argument("--colour-steps", type=int, default=600)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = []
        start = time.perf_counter()
        rev = tasks.train_reversal_model(steps=args.reversal_steps, checkpoint_every=50,
                                         out=Path(tmp) / "reversal", progress=False)
        trained = time.perf_counter() - start
        pairs = tasks.reversal_pairs(32, seed=HELD_OUT)
        start = time.perf_counter()
        r = ak.checkpoint_scores(ak.checkpoints(Path(tmp) / "reversal"), pairs, kinds=(),
                                 score=tasks.reversal_score, progress=False)
        scored = time.perf_counter() - start
        out += [f"Reversal T5 ({args.reversal_steps} steps, a checkpoint every 50; trained in "
                f"{trained:.0f} s, {len(r.steps)} checkpoints scored in {scored:.0f} s; load "
                f"{os.getloadavg()[0]:.1f}; held-out sequence accuracy "
                f"{rev.config.attnkit_toy['sequence_accuracy']:.2f}):", "",
                table(r, "reversal"), "", f"Training loss: {losses(r, 50)}.", ""]
        start = time.perf_counter()
        col = tasks.train_colour_model(steps=args.colour_steps, checkpoint_every=20,
                                       out=Path(tmp) / "colour", progress=False)
        trained = time.perf_counter() - start
        images, _, _ = tasks.colour_images(64, seed=HELD_OUT)
        start = time.perf_counter()
        c = ak.checkpoint_scores(ak.checkpoints(Path(tmp) / "colour"), list(images), kinds=(),
                                 score=tasks.colour_score, progress=False)
        scored = time.perf_counter() - start
        out += [f"Colour ViT ({args.colour_steps} steps, a checkpoint every 20; trained in "
                f"{trained:.0f} s, {len(c.steps)} checkpoints scored in {scored:.0f} s; load "
                f"{os.getloadavg()[0]:.1f}; held-out accuracy "
                f"{col.config.attnkit_toy['accuracy']:.2f}):", "",
                table(c, "square"), "", f"Training loss: {losses(c, 20)}.", ""]
        print("\n".join(out))


if __name__ == "__main__":
    main()
