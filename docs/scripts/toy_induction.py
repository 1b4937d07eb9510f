"""Train the induction toy model with the default recipe, measure its heads, and print the
"Decoder heads" section of docs/results.md.

    python docs/scripts/toy_induction.py --out attnkit/toy_models/induction-2l --seeds 1 2 3

Trains ``attnkit.toys.induction.train_induction_model()`` (seed 0) on one torch thread, saves it to
``--out`` (the copy attnkit ships), scores its heads with ``attnkit.head_scores`` on
repeated random tokens, and, for each extra seed of ``--seeds``, retrains the same recipe to
show how reliably the heads form. Prints markdown.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch

import attnkit as ak
from attnkit.toys import induction as toy


def table(scores: ak.HeadResult) -> str:
    kinds = list(scores.columns)
    lines = ["| head | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for (layer, head), row in scores.table.iterrows():
        lines.append(f"| {layer + 1}-{head + 1} | " + " | ".join(f"{row[k]:.3f}" for k in kinds) + " |")
    uniform = scores.meta["uniform"]
    lines.append("| uniform attention | " + " | ".join(f"{uniform[k]:.3f}" for k in kinds) + " |")
    return "\n".join(lines)


def formed_at(history: list[list[float]], threshold: float = 0.9) -> str:
    """The first logged step whose training-batch accuracy exceeds ``threshold``."""
    for step, _, acc in history:
        if acc > threshold:
            return str(int(step))
    return "not formed"


def measure(model: ak.Model, n: int, length: int) -> ak.HeadResult:
    atts = [model.attend(x) for x in ak.induction_inputs(model, n, length, seed=0)]
    return ak.head_scores(atts, progress=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder to save the seed-0 model in")
    parser.add_argument("--seeds", type=int, nargs="*", default=[], help="extra seeds to retrain")
    parser.add_argument("--n", type=int, default=16, help="inputs to score the heads on")
    parser.add_argument("--length", type=int, default=64, help="random tokens per input")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    model = toy.train_induction_model(progress=True)
    rec = model.config.attnkit_toy
    if args.out:
        toy.save(model, args.out)
    scores = measure(model, args.n, args.length)
    recipe = rec["recipe"]
    print("## Decoder heads: the trained induction toy model\n")
    print(f"Recipe (`attnkit.toys.induction.train_induction_model()`): {recipe}.\n")
    print(f"Trained in {rec['train_seconds']:.1f} s wall, {rec['train_cpu_seconds']:.1f} s CPU "
          f"({rec['torch_threads']} torch thread, torch "
          f"{rec['torch_version']}; load {load:.1f} before on 2 shared cores, "
          f"{os.getloadavg()[0]:.1f} after); last training loss {rec['final_loss']:.4f}; "
          f"training-batch accuracy first above 90 % at step {formed_at(rec['history'])}.\n")
    print("Accuracy on the predictable tokens of fresh inputs (`attnkit.toys.induction.induction_accuracy`, "
          "8 inputs each), by random-sequence length (an input has 2 × length + 1 tokens):\n")
    print("| length | " + " | ".join(rec["accuracy"]) + " |")
    print("|---|" + "---:|" * len(rec["accuracy"]))
    print("| accuracy | " + " | ".join(f"{v:.1%}" for v in rec["accuracy"].values()) + " |\n")
    print(f"Head scores (`attnkit.head_scores`) on `attnkit.induction_inputs(model, {args.n}, "
          f"{args.length}, seed=0)`; rows counted: {scores.meta['n_rows']}:\n")
    print(table(scores) + "\n")
    if args.seeds:
        print("Other seeds, same recipe (step at which the training-batch accuracy first "
              "exceeds 90 %, then the best head of each kind):\n")
        print("| seed | formed at step | train s (wall / CPU) | best previous | score | best induction | score "
              "| accuracy (length 64) |")
        print("|---|---:|---:|---|---:|---|---:|---:|")
        for seed in args.seeds:
            other = toy.train_induction_model(seed=seed, progress=False)
            s = measure(other, args.n, args.length)
            orec = other.config.attnkit_toy
            (pl, ph), (il, ih) = s.best("previous"), s.best("induction")
            print(f"| {seed} | {formed_at(orec['history'])} | {orec['train_seconds']:.0f} / {orec['train_cpu_seconds']:.0f} "
                  f"| {pl + 1}-{ph + 1} | {s.loc[(pl, ph), 'previous']:.3f} | {il + 1}-{ih + 1} "
                  f"| {s.loc[(il, ih), 'induction']:.3f} | {orec['accuracy'].get('64', np.nan):.1%} |",
                  flush=True)


if __name__ == "__main__":
    main()
