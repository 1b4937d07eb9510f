"""Regenerate the numbers of docs/results.md, "Whether heads matter: interventions".

    PYTHONPATH=. .venv/bin/python docs/scripts/interventions.py [--items 32] [--minilm 64]

Toy induction model (attnkit.toys.induction, 2 layers x 2 heads, vocabulary 512): on
``<bos> r r`` inputs (r = 32 distinct random tokens, seed 1), the loss over the predictable
second-copy tokens with heads zero-, mean- and resample-ablated; with the induction edges
(query t -> key t - N + 1) knocked out in both layer-2 heads, and as many random earlier
edges; the share of the gap each head restores when patched into a corrupted input (the
first copy replaced by other tokens, seed 2), beside attribution patching; path patching from
each layer-1 head into the induction heads' queries, keys and values.

Bundled encoder (all-MiniLM-L6-v2, no head): every head's zero-ablation effect on the
embedding's projection (the objective ``attention_importance`` explains for it), beside
Clark et al.'s gradient importance of the same objective, and their rank correlation, on the
first sentences of the EWT dev treebank; attribution patching against exact patching (per
head and per layer) on 16 of them with one word piece replaced.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import attnkit as ak

N = 32


def toy_numbers(items: int) -> None:
    model = ak.toy.induction_model()
    inputs = ak.induction_inputs(model, items, N, seed=1)
    loss = ak.interventions.loss(positions=slice(N + 2, 2 * N + 1))
    print(f"## toy: {items} inputs <bos> r r, N = {N}; loss over positions {N + 2}..{2 * N}; "
          f"chance ln 512 = {math.log(512):.3f}")
    groups = [[(1, 0), (1, 1)], [(1, 0)], [(1, 1)], [(0, 0)], [(0, 1)]]
    for how in ("zero", "mean", "resample"):
        r = ak.ablate(model, inputs, heads=groups, how=how, metric=loss, progress=False)
        cells = ", ".join(f"{'+'.join(f'{l + 1}-{h + 1}' for l, h in g)}: {v:.3f}"
                          for g, v in zip(r.table["heads"], r.table["metric"]))
        print(f"ablate {how}: clean {r.meta['baseline']:.4f}; {cells}")
    heads = [(1, 0), (1, 1)]
    stripe = ak.knockout(model, inputs, f"key = query - {N - 1}", heads=heads,
                         queries=slice(N + 1, 2 * N), metric=loss, progress=False)
    rng = np.random.default_rng(0)
    edges = []
    for _, h in heads:
        for q in range(N + 1, 2 * N):
            k = q - N + 1
            while k == q - N + 1:
                k = int(rng.integers(0, q + 1))
            edges.append((1, h, q, k))
    random = ak.knockout(model, inputs, edges, metric=loss, progress=False)
    print(f"knockout induction edges ({stripe.meta['n_edges']} edges): "
          f"{stripe.meta['clean']:.4f} -> {stripe.meta['knocked_out']:.3f}; random earlier edges "
          f"({random.meta['n_edges']}): {random.meta['clean']:.4f} -> {random.meta['knocked_out']:.4f}")
    other = ak.induction_inputs(model, items, N, seed=2)
    corrupted = [np.concatenate([a[:1], b[1:N + 1], a[N + 1:]]) for a, b in zip(inputs, other)]
    agree = ak.interventions.attribution_agreement(model, inputs, corrupted, metric=loss,
                                                   progress=False)
    print(f"patching: clean {agree.meta['clean']:.4f}, corrupted {agree.meta['corrupted']:.3f}")
    for (layer, head), row in agree.table.iterrows():
        print(f"  head {layer + 1}-{head + 1}: restored {row['patching']:.3f}, "
              f"attribution patching {row['attribution']:.4f}")
    print(f"  spearman {agree.meta['spearman']:.3f}, same top head {agree.meta['top_agree']}")
    for sender in ((0, 0), (0, 1)):
        cells = []
        for via in "qkv":
            r = ak.path_patch(model, inputs, corrupted, sender=sender, receivers=[(1, 0), (1, 1)],
                              via=via, metric=loss, progress=False)
            cells.append(f"{via}: {r.table.loc[0, 'restored']:+.4f}")
        print(f"path patching {sender[0] + 1}-{sender[1] + 1} -> 2-1, 2-2: " + ", ".join(cells))
    hp = ak.patch(model, inputs, corrupted, metric=loss, grain="residual×position", progress=False)
    layer1 = hp.table.loc[1, "restored"]
    print(f"residual x position, entering layer 2: largest share {layer1.max():.3f} at position "
          f"{int(layer1.idxmax())}; first copy (1..{N}) sum {layer1.loc[1:N].sum():.3f}")


def minilm_numbers(n: int) -> None:
    from scipy.stats import spearmanr

    from attnkit.data import find_data

    model = ak.load("minilm")
    tb = ak.read_conllu(find_data("ud-english-ewt/en_ewt-ud-dev.conllu"))
    sents = [s for s in tb if 8 <= len(s.words) <= 30][:n]
    metric = ak.interventions.projection()
    abl = ak.ablate(model, sents, metric=metric, batch_size=256, progress=False)
    imp = ak.attention_importance(model, sents, objective="projection", by="head", progress=False)
    effect = abl.table["effect"]
    print(f"## MiniLM: {len(sents)} EWT dev sentences (8-30 words), projection "
          f"{abl.meta['baseline']:.3f}")
    top = effect.abs().sort_values(ascending=False).head(5)
    print("largest |effect|:", ", ".join(f"{l + 1}-{h + 1} {effect.loc[(l, h)]:+.3f}" for l, h in top.index))
    for col in imp.table.columns:
        rho = spearmanr(effect.abs().to_numpy(), imp.table[col].to_numpy()).statistic
        print(f"spearman |ablation effect| vs gradient importance to {col}: {rho:.3f}")
    rho = spearmanr(effect.abs().to_numpy(), imp.table.mean(axis=1).to_numpy()).statistic
    print(f"spearman |ablation effect| vs mean of the four: {rho:.3f}")
    # attribution patching against exact patching on the real model: each sentence's middle
    # word piece replaced by a random one (same length, so positions match)
    rng = np.random.default_rng(0)
    clean, corrupted = [], []
    for s in sents[:16]:
        ids = np.asarray(model.encode(s).input_ids, dtype=np.int64)
        other = ids.copy()
        other[len(ids) // 2] = rng.integers(1000, 20000)
        clean.append(ids)
        corrupted.append(other)
    for grain in ("head", "layer"):
        agree = ak.interventions.attribution_agreement(model, clean, corrupted, metric=metric,
                                                       grain=grain, batch_size=256, progress=False)
        top = agree.table["patching"].abs().idxmax()
        print(f"attribution vs exact patching, {grain} ({len(clean)} sentences, one word piece "
              f"replaced; projection {agree.meta['clean']:.3f} -> {agree.meta['corrupted']:.3f}): "
              f"spearman {agree.meta['spearman']:.3f}, of magnitudes {agree.meta['spearman_abs']:.3f}, "
              f"same top {agree.meta['top_agree']} (exact top {top})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=32)
    p.add_argument("--minilm", type=int, default=64)
    args = p.parse_args()
    toy_numbers(args.items)
    if args.minilm:
        minilm_numbers(args.minilm)


if __name__ == "__main__":
    main()
