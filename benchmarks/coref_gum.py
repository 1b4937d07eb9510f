"""Coreference heads on GUM dev with the bundled model; writes docs/results.md's section.

    PYTHONPATH=. python benchmarks/coref_gum.py --store-root runs/coref-minilm

Runs :func:`attnkit.apps.pipeline.run_coref` twice — documents cut at the model's maximum
(512 tokens) and at 128 tokens (Clark et al.'s setting) — writes every table and figure
under ``--out``, copies the figures to ``docs/figures/`` and replaces the
``## Coreference (GUM dev)`` section of ``docs/results.md`` (other sections are kept).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attnkit.analysis.coref import BASELINE_NAMES  # noqa: E402
from _report import write_section  # noqa: E402

SECTION = "Coreference (GUM dev)"  # the heading in docs/results.md
COMMAND = "PYTHONPATH=. python benchmarks/coref_gum.py --store-root runs/coref-minilm"

# Clark et al. (2019), Table 2: BERT-base on CoNLL-2012, documents cut at 128 tokens.
PAPER = pd.DataFrame(
    [[27, 29, 29, 19], [52, 47, 67, 40], [69, 70, 77, 60], [65, 64, 73, 58]],
    index=["Nearest", "Head match", "Rule-based", "Head 5-4"],
    columns=["all", "pronoun", "proper", "nominal"],
)


def same_word_share(result, words: dict[str, list[str]]) -> float:
    """Share of the selected head's (all-document) predictions that land on another
    occurrence of the mention's head word (case-insensitive)."""
    ev = result["evaluation"]
    table = result["heads"]["all"]
    sel = table[table["selected"]].iloc[0]
    pred = ev.predicted[:, int(sel["layer"]), int(sel["head"])]
    m = ev.mentions
    same = [words[d][p].lower() == hw.lower() for d, p, hw in zip(m["doc"], pred, m["head_word"])]
    return float(np.mean(same))


def fmt_table(summary: pd.DataFrame, split: str) -> str:
    s = summary[summary["split"] == split]
    lines = ["| Model | All | Pronoun | Proper | Nominal |", "|---|---:|---:|---:|---:|"]
    for _, r in s.iterrows():
        is_head = r["model"] not in BASELINE_NAMES.values()
        name = f"**{r['model']}**" if is_head else r["model"]
        vals = " | ".join("–" if pd.isna(r[c]) else f"{r[c]:.1f}"
                          for c in ("all", "pronoun", "proper", "nominal"))
        lines.append(f"| {name} | {vals} |")
    n = s.iloc[0]
    return "\n".join(lines), int(n["n"]), int(n["lost"])


def counts(result, split_ids) -> str:
    ev = result["evaluation"].subset(split_ids)
    t = ev.mentions["type"].value_counts()
    return ", ".join(f"{k} {int(t.get(k, 0))}" for k in ("pronoun", "proper", "nominal"))


def section(res512, res128, seconds: float) -> str:
    docs512 = res512["documents"]
    docs128 = res128["documents"]
    A, B = res512["splits"]["A"], res512["splits"]["B"]
    out = []
    out.append(
        "Clark et al. (2019) §4.3: for each coreferent mention, does its head word attend "
        "most (argmax of its word-level row, diagonal and [CLS]/[SEP] excluded) to the head "
        "word of one of its antecedents? Model: bundled `all-MiniLM-L6-v2` (6 layers × 12 "
        "heads). Data: UD English GUM dev (`en_gum-ud-dev.conllu`), all 30 documents, "
        "coreference from the MISC `Entity=` brackets, mention heads from the UD tree. "
        "Each document is fed to the model as one word list; accuracies in %."
    )
    out.append("")
    out.append("Regenerate (the attention stores, about 1 GB, are resumable and reused):")
    out.append("")
    out.append(f"    {COMMAND}")
    out.append("")
    out.append("or, from Python / the CLI: `attnkit.apps.pipeline.run_coref(attnkit.load(\"minilm\"), "
               "out=\"runs/coref\")` (add `max_tokens=128` for the paper's setting).")
    out.append("")
    out.append("**Choosing the head fairly.** GUM dev is the only split with coreference "
               "here, so its documents are split into two genre-balanced halves "
               "(`split_documents`: within each genre, documents alternate between halves). "
               "The head with the best overall accuracy on one half is reported on the "
               "other half (A→B and B→A). The *all documents* rows choose and report on the "
               "same 30 documents — as the paper does with head 5-4 — so they flatter the "
               "head; they are there for comparison only.")
    out.append("")
    out.append(f"- Half A ({len(A)} docs): " + ", ".join(f"`{d}`" for d in A))
    out.append(f"- Half B ({len(B)} docs): " + ", ".join(f"`{d}`" for d in B))
    out.append("")
    kept = docs512["kept_words"].sum() / docs512["words"].sum()
    out.append(
        f"**Truncation.** At the model's maximum of 512 tokens every document is cut: "
        f"{docs512['kept_words'].sum()} of {docs512['words'].sum()} words ({kept:.0%}) "
        f"reach the model, and {docs512['lost'].sum()} of {docs512['coreferent'].sum()} "
        f"coreferent mentions are lost (the `lost` column of `coref_heads`; per document in "
        f"`coref_documents.csv`). At 128 tokens (the paper's cut) "
        f"{docs128['kept_words'].sum()} words are kept and {docs128['lost'].sum()} mentions "
        f"lost. Baselines are scored on exactly the same mentions and candidates as the heads."
    )
    out.append("")
    out.append("**Mentions and baselines.** A mention is coreferent when an earlier mention of "
               "its entity (one that ends before it starts) lies in the kept text. As in "
               "CoNLL-2012, GUM's appositions (`appos`) and copular predicates (`pred`) are "
               "not treated as coreference and singletons are not candidate antecedents. "
               "Mention type is the UPOS of the head word (PRON → pronoun, PROPN → proper, "
               "anything else → nominal). Baselines choose among earlier mentions, nearest "
               "head word first: *Nearest*; *Head match* (same lower-cased head word; none → "
               "wrong); *Rule-based sieve* (exact lower-cased string → head word → "
               "number/gender/person agreement from the head's UD FEATS → nearest).")
    out.append("")
    for split, label in (("A->B", "head chosen on half A, reported on half B"),
                         ("B->A", "head chosen on half B, reported on half A"),
                         ("all", "all documents, head chosen on the same documents "
                                 "(optimistic)")):
        tbl, n, lost = fmt_table(res512["summary"], split)
        ids = {"A->B": B, "B->A": A, "all": None}[split]
        out.append(f"### 512 tokens — {label}")
        out.append("")
        out.append(f"{n} mentions ({counts(res512, ids)}); {lost} lost to truncation.")
        out.append("")
        out.append(tbl)
        out.append("")
    out.append("### 128 tokens (the paper's cut)")
    out.append("")
    for split, label in (("A->B", "chosen on A, reported on B"),
                         ("B->A", "chosen on B, reported on A"),
                         ("all", "all documents (optimistic)")):
        tbl, n, lost = fmt_table(res128["summary"], split)
        out.append(f"{label}: {n} mentions, {lost} lost to truncation.")
        out.append("")
        out.append(tbl)
        out.append("")
    out.append("### Clark et al. (2019), Table 2 (BERT-base, CoNLL-2012, 128 tokens)")
    out.append("")
    out.append("| Model | All | Pronoun | Proper | Nominal |")
    out.append("|---|---:|---:|---:|---:|")
    for name, r in PAPER.iterrows():
        out.append(f"| {name} | " + " | ".join(str(v) for v in r) + " |")
    out.append("")
    top = res512["heads"]["all"].table.sort_values("all", ascending=False).head(5)
    out.append("**Reading.** " + reading(res512, res128, top))
    out.append("")
    out.append("![per-type accuracy, best head vs baselines](figures/coref_accuracy.png)")
    out.append("")
    out.append("![accuracy of every head](figures/coref_heads.png)")
    out.append("")
    ex = {k: res["extraction"] for k, res in (("512", res512), ("128", res128))}
    how = "; ".join(f"{k} tokens: {v['computed_batches']} batches extracted, "
                    f"{v['reused_batches']} reused from the store" for k, v in ex.items())
    out.append(f"_Measured {time.strftime('%Y-%m-%d')}: {seconds / 60:.1f} min wall for both "
               f"runs ({how})._")
    out.append("")
    return "\n".join(out)


def _get(summary: pd.DataFrame, split: str, kind: str) -> float:
    """Overall accuracy of one row of a run_coref summary ("Head" = the selected head)."""
    rows = summary[summary["split"] == split]
    if kind == "Head":
        rows = rows[~rows["model"].isin(list(BASELINE_NAMES.values()))]
    else:
        rows = rows[rows["model"].str.startswith(kind)]
    return float(rows["all"].iloc[0])


def reading(res512, res128, top) -> str:
    heads = ", ".join(f"{r['name']} ({100 * r['all']:.1f})" for _, r in top.iterrows())
    share = res512["_same_word"]
    sel = res512["heads"]["all"].meta["selected"]

    def both(res, kind):
        return f"{_get(res['summary'], 'A->B', kind):.1f} / {_get(res['summary'], 'B->A', kind):.1f}"

    return (
        f"The best MiniLM heads on all documents (512 tokens) are {heads}. Chosen on one "
        f"half and reported on the other (A→B / B→A), the best head reaches "
        f"{both(res512, 'Head')} %: above the nearest-mention baseline "
        f"({both(res512, 'Nearest')}) but well below head match ({both(res512, 'Head match')}) "
        f"and the sieve ({both(res512, 'Rule-based')}). At the paper's 128-token cut the "
        f"chosen head ({both(res128, 'Head')}) is on a par with head match "
        f"({both(res128, 'Head match')}), still far from the sieve "
        f"({both(res128, 'Rule-based')}); BERT-base's head 5-4 beat head match by 13 points "
        f"and came within 4 of the sieve on CoNLL-2012. {share:.0%} of head {sel}'s argmax "
        f"words (all documents, 512 tokens) are another occurrence of the mention's own head "
        f"word: it behaves mostly as a same-word head rather than a resolver. The baselines "
        f"score higher on GUM than on CoNLL-2012 (the sieve: "
        f"{_get(res512['summary'], 'all', 'Rule-based'):.0f} vs 69), so compare each model "
        f"with the baselines on its own data."
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store-root", default=None,
                    help="prefix of the attention stores (<root>-512, <root>-128); "
                         "default: keep attention in memory")
    ap.add_argument("--out", default=None,
                    help="folder for the CSV tables and figures (default: <store-root>-out, "
                         "else runs/coref)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--results", default=str(ROOT / "docs" / "results.md"))
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = f"{args.store_root}-out" if args.store_root else str(ROOT / "runs" / "coref")

    import torch

    import attnkit
    from attnkit.data.coref import read_coref
    from attnkit.data.paths import find_data
    from attnkit.apps.pipeline.coref import GUM_DEV, run_coref

    torch.set_num_threads(args.threads)
    model = attnkit.load("minilm")
    docs = read_coref(find_data(GUM_DEV))
    words = {d.id: [w for w in d.words] for d in docs}
    t0 = time.perf_counter()
    results = {}
    for label, max_tokens in (("512", None), ("128", 128)):
        store = f"{args.store_root}-{label}" if args.store_root else None
        out = Path(args.out) / f"tokens-{label}"
        res = run_coref(model, docs, out, store=store, max_tokens=max_tokens)
        res["_same_word"] = same_word_share(res, words)
        results[label] = res
    seconds = time.perf_counter() - t0
    figs = ROOT / "docs" / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    for f in ("coref_accuracy.png", "coref_heads.png"):
        shutil.copy(Path(args.out) / "tokens-512" / f, figs / f)
    write_section(SECTION, section(results["512"], results["128"], seconds),
                  doc=Path(args.results), header="# Results\n")
    print(results["512"]["summary"].round(1).to_string())
    print(results["128"]["summary"].round(1).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
