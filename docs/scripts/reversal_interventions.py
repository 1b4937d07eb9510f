"""Regenerate the numbers of docs/results.md, "Which cross heads the reversal T5 depends on".

    PYTHONPATH=. .venv/bin/python docs/scripts/reversal_interventions.py [--per-length 32]

The trained reversal T5 (attnkit.toys.tasks, 2 + 2 layers x 4 heads, shipped in
attnkit/toy_models/reversal-t5) writes a sequence of n random words backwards: to predict
target word j (decoder position j) it must read source word n - 1 - j (source position
n - 1 - j; one token per word). On held-out pairs of every length 4..8 (``--per-length`` pairs
each, seeds 20004..20008), the metric is the teacher-forced loss over the n predicted words (the decoder
positions 1..n; the end-of-sequence token left out); chance is ln 32.

- every head of each stack (encoder, decoder, cross) zero-ablated on its own, and each
  layer's cross heads together;
- knockout of the anti-diagonal cross edges (decoder position j -> source position
  n - 1 - j, j = 0..n-1) in chosen cross heads, beside as many random cross edges (same heads
  and queries, a random other source word);
- activation patching of each cross head, and attribution patching beside it, with one source
  word replaced by another (the clean target).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import attnkit as ak
from attnkit.core.labels import head_label
from attnkit.toys.tasks import reversal_model, reversal_pairs

LENGTHS = range(4, 9)


def label(layer: int, head: int) -> str:
    return head_label(layer, head)


def groups(per_length: int) -> dict[int, list[tuple[str, str]]]:
    """Held-out pairs by length (seeds 20004..20008, one per length; training drew seeds 1..1500)."""
    out = {}
    for n in LENGTHS:
        out[n] = reversal_pairs(per_length, min_length=n, max_length=n, seed=20_000 + n)
    return out


def words_loss(n: int):
    return ak.interventions.loss(positions=slice(1, n + 1))


def pooled(per: dict[int, float], counts: dict[int, int]) -> float:
    """The mean over every pair (each length group's mean weighted by its pairs)."""
    return sum(per[n] * counts[n] for n in per) / sum(counts.values())


def ablation(model, data) -> None:
    counts = {n: len(p) for n, p in data.items()}
    print("## ablation (zero), loss over the predicted words; mean over all pairs")
    for stack in ("encoder", "decoder", "cross"):
        per: dict[int, np.ndarray] = {}
        base: dict[int, float] = {}
        for n, pairs in data.items():
            r = ak.ablate(model, pairs, stack=stack, metric=words_loss(n), progress=False)
            per[n], base[n] = r.table["metric"].to_numpy(), r.meta["baseline"]
        values = sum(per[n] * counts[n] for n in per) / sum(counts.values())
        clean = pooled(base, counts)
        cells = ", ".join(f"{label(l, h)}: {v:.3f}" for (l, h), v in zip(r.table.index, values))
        print(f"{stack}: clean {clean:.4f}; {cells}")
    for layer in range(model.n_decoder_layers):
        heads = [(layer, h) for h in range(model.n_decoder_heads)]
        per_n = {n: ak.ablate(model, pairs, stack="cross", heads=heads, metric=words_loss(n),
                              progress=False).table.loc[0, "metric"] for n, pairs in data.items()}
        print(f"cross layer {layer + 1}, all heads together: {pooled(per_n, counts):.3f}")
    both = [(l, h) for l in range(model.n_decoder_layers) for h in range(model.n_decoder_heads)]
    per_n = {n: ak.ablate(model, pairs, stack="cross", heads=both, metric=words_loss(n),
                          progress=False).table.loc[0, "metric"] for n, pairs in data.items()}
    print(f"every cross head together: {pooled(per_n, counts):.3f}")


def knockouts(model, data, heads: list[tuple[int, int]], name: str, seed: int = 0) -> None:
    counts = {n: len(p) for n, p in data.items()}
    rng = np.random.default_rng(seed)
    anti, rand, clean = {}, {}, {}
    n_edges = [0, 0]
    for n, pairs in data.items():
        diag = [(l, h, j, n - 1 - j) for l, h in heads for j in range(n)]
        other = []
        for l, h, j, k in diag:
            choices = [x for x in range(n) if x != k]  # another source word
            other.append((l, h, j, int(rng.choice(choices))))
        a = ak.knockout(model, pairs, diag, stack="cross", metric=words_loss(n), progress=False)
        b = ak.knockout(model, pairs, other, stack="cross", metric=words_loss(n), progress=False)
        anti[n], rand[n], clean[n] = a.meta["knocked_out"], b.meta["knocked_out"], a.meta["clean"]
        n_edges[0] += a.meta["n_edges"]
        n_edges[1] += b.meta["n_edges"]
    print(f"knockout in {name}: clean {pooled(clean, counts):.4f}; anti-diagonal "
          f"({n_edges[0]} edges) {pooled(anti, counts):.3f}; random ({n_edges[1]} edges) "
          f"{pooled(rand, counts):.4f}")


def patching(model, per_length: int) -> None:
    """One source word replaced (position 2 of 6-word pairs) by a word not in the pair."""
    from attnkit.toys.induction import toy_words

    n = 6
    pairs = reversal_pairs(per_length, min_length=n, max_length=n, seed=20_099)
    vocab = toy_words(32)
    rng = np.random.default_rng(1)
    corrupted = []
    for source, target in pairs:
        words = source.split()
        words[2] = str(rng.choice([w for w in vocab if w not in words]))
        corrupted.append((" ".join(words), target))
    r = ak.interventions.attribution_agreement(model, pairs, corrupted, stack="cross",
                                               metric=words_loss(n), progress=False)
    print(f"## patching cross heads, {len(pairs)} pairs of {n} words, source word 2 replaced: "
          f"loss clean {r.meta['clean']:.4f}, corrupted {r.meta['corrupted']:.3f}")
    for (l, h), row in r.table.iterrows():
        print(f"{label(l, h)}: restored {row['patching']:.3f}, attribution {row['attribution']:.3f}")
    print(f"spearman {r.meta['spearman']:.3f}, top agree {r.meta['top_agree']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-length", type=int, default=32, help="pairs of each length 4..8")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    model = reversal_model()
    data = groups(args.per_length)
    print(f"# {model.name}: {sum(len(p) for p in data.values())} pairs, lengths "
          f"{min(LENGTHS)}..{max(LENGTHS)}; chance ln 32 = {math.log(32):.3f}")
    ablation(model, data)
    every = [(l, h) for l in range(model.n_decoder_layers) for h in range(model.n_decoder_heads)]
    knockouts(model, data, every, "every cross head")
    for layer in range(model.n_decoder_layers):
        knockouts(model, data, [(layer, h) for h in range(model.n_decoder_heads)],
                  f"cross layer {layer + 1}")
    knockouts(model, data, [(0, 2)], "cross head 1-3 alone")
    patching(model, args.per_length)


if __name__ == "__main__":
    main()
