"""Regenerate the numbers of docs/results.md, "Which heads MRPC decisions depend on".

    PYTHONPATH=. .venv/bin/python docs/scripts/mrpc_heads.py --model runs/minilm-mrpc [--pairs 408]

(docs/results.md: ``--model runs/minilm-mrpc-1600 --pairs 64``, the classifier of
``attnkit finetune --task MRPC --max-items 1600 --epochs 1 --lr 0.0001 --batch-size 16
--max-length 128 --freeze-layers 1 --threads 1 --out runs/minilm-mrpc-1600``.)

The first ``--pairs`` pairs of GLUE MRPC dev, every head of all-MiniLM-L6-v2 zero-ablated on
its own (``ak.ablate``), twice:

- pre-trained: the bundled sentence encoder reads each sentence alone and decides by the
  cosine similarity of the two mean-pooled embeddings, the objective it was trained on
  (``ak.interventions.pair_similarity()``);
- fine-tuned: the classifier written by ``attnkit finetune --task MRPC`` (``--model``) reads
  the pair jointly and decides by its class logits; its decision margin
  (``ak.interventions.class_margin()``: the predicted class's logit minus the other's).

The two objectives have different units, so the comparison is of ranks and shares: the five
heads with the largest effect, each layer's share of the summed |effect|, and the Spearman
correlation of the 72 |effects|.
"""

from __future__ import annotations

import argparse

import numpy as np

import attnkit as ak


def _top(effect, k: int = 5) -> str:
    top = effect.abs().sort_values(ascending=False).head(k)
    return ", ".join(f"{l + 1}-{h + 1} {effect.loc[(l, h)]:+.4f}" for l, h in top.index)


def _layer_shares(effect) -> np.ndarray:
    per_layer = effect.abs().groupby(level="layer").sum().to_numpy()
    return per_layer / per_layer.sum()


def main() -> None:
    from scipy.stats import spearmanr

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="folder of the fine-tuned MRPC classifier")
    p.add_argument("--pairs", type=int, default=408, help="first pairs of MRPC dev")
    p.add_argument("--batch-size", type=int, default=512, help="rows per forward pass")
    args = p.parse_args()

    dev = ak.read_glue("MRPC", "dev", limit=args.pairs)
    pairs = list(dev)
    labels = np.asarray(dev.labels)
    print(f"## MRPC dev: first {len(pairs)} pairs ({labels.mean():.1%} equivalent)")

    pre = ak.load("minilm")
    sentences = [s for pair in pairs for s in pair]  # pair i = inputs 2i, 2i + 1
    sim = ak.ablate(pre, sentences, metric=ak.interventions.pair_similarity(),
                    batch_size=args.batch_size, progress=False)

    fine = ak.load(args.model)
    margin = ak.ablate(fine, pairs, metric=ak.interventions.class_margin(),
                       batch_size=args.batch_size, progress=False)
    predicted = ak.interventions.hooks.forward(fine, ak.interventions.hooks.batch(fine, pairs))
    accuracy = float((predicted.argmax(-1).cpu().numpy() == labels).mean())

    e_pre, e_fine = sim.table["effect"], margin.table["effect"]
    print(f"pre-trained, pair cosine similarity: clean {sim.meta['baseline']:.4f}; largest |effect|: "
          f"{_top(e_pre)}")
    print(f"fine-tuned, decision margin: clean {margin.meta['baseline']:.4f} (accuracy "
          f"{accuracy:.1%}); largest |effect|: {_top(e_fine)}")
    print(f"fine-tuned heads whose ablation lowers the margin: {(e_fine < 0).sum()} of "
          f"{len(e_fine)}; by more than 10 % of it: "
          f"{(e_fine < -0.1 * margin.meta['baseline']).sum()}")
    for name, eff in (("pre-trained", e_pre), ("fine-tuned", e_fine)):
        shares = _layer_shares(eff)
        print(f"{name}: share of summed |effect| by layer 1..6: "
              + ", ".join(f"{s:.2f}" for s in shares))
    rho = spearmanr(e_pre.abs().to_numpy(), e_fine.abs().to_numpy()).statistic
    print(f"spearman |effect| pre-trained vs fine-tuned (72 heads): {rho:.3f}")
    top_pre = set(e_pre.abs().sort_values(ascending=False).head(10).index)
    top_fine = set(e_fine.abs().sort_values(ascending=False).head(10).index)
    both = ", ".join(f"{l + 1}-{h + 1}" for l, h in sorted(top_pre & top_fine)) or "none"
    print(f"heads in both top tens: {len(top_pre & top_fine)} ({both})")


if __name__ == "__main__":
    main()
