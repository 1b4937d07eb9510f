"""The known answers of attnkit's trained toy encoder-decoder and vision models (docs/results.md).

    .venv/bin/python docs/scripts/toy_tasks.py [--pairs 64] [--images 100]

Held-out data (seed 9999: never drawn in training). Prints the per-head alignment table of the
reversal T5 and the share of images whose class-token rollout peaks on the square's patch.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

import attnkit as ak
from attnkit.toys.tasks import (colour_images, colour_model, reversal_accuracy, reversal_gold,
                               reversal_model, reversal_pairs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=64)
    ap.add_argument("--images", type=int, default=100)
    args = ap.parse_args()
    model = reversal_model()
    pairs = reversal_pairs(args.pairs, seed=9999)
    print("reversal: sequences reversed exactly", reversal_accuracy(model, pairs))
    atts = [model.attend(s, t) for s, t in pairs]
    aer = ak.alignment_error_rate(atts, reversal_gold(pairs), progress=False)
    print(aer.table.sort_values("aer").round(3).to_string())
    print("best head", aer.meta["best"])
    shifted = ak.alignment_error_rate(atts, reversal_gold(pairs), rows="input", progress=False)
    print("rows read as inputs, best accuracy", round(float(shifted["accuracy"].max()), 3))
    with tempfile.TemporaryDirectory() as folder:  # the same pairs through a store
        sset = ak.extract(model, pairs, level="token", store=folder, progress=False)
        stored = ak.alignment_error_rate(ak.open_store(folder), reversal_gold(pairs), progress=False)
        diff = max(float(np.abs(sset[i].maps - a.cross.maps).max()) for i, a in enumerate(atts))
        rows = max(float(np.abs(sset[i].maps.sum(-1) - 1).max()) for i in range(len(pairs)))
    best = stored.meta["best"]
    print(f"from the store: best head {best}, accuracy {stored.loc[best, 'accuracy']:.3f}, "
          f"largest |stored - attend| {diff:.2e}, largest |row sum - 1| {rows:.2e}")

    vision = colour_model()
    images, labels, cells = colour_images(args.images, seed=9999)
    hits = chefer_hits = 0
    for image, cell in zip(images, cells):
        att = vision.attend(image)
        grid = ak.vision.patch_grid(att)
        patches = np.flatnonzero(grid[:, 0] >= 0)
        roll = ak.rollout(att)[0]
        hits += grid[patches[int(np.argmax(roll[patches]))]].tolist() == list(cell)
        rel = ak.vision.gradient_rollout(vision, image)[0]
        chefer_hits += grid[patches[int(np.argmax(rel[patches]))]].tolist() == list(cell)
    import torch

    with torch.inference_mode():
        pred = vision.hf(**vision.pad([vision.encode(im) for im in images])).logits.argmax(-1)
    correct = int((pred.numpy() == labels).sum())
    n = len(images)
    print(f"colour: accuracy {correct / n:.3f}, rollout peaks on the square {hits / n:.3f}, "
          f"gradient rollout peaks on the square {chefer_hits / n:.3f} ({n} images)")


if __name__ == "__main__":
    main()
