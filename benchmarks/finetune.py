"""Fine-tuning recipe for the pre-trained vs fine-tuned comparison (issue 4, item 6).

    python benchmarks/finetune.py --search      # candidates on a hold-out of MRPC train
    python benchmarks/finetune.py               # the chosen recipe: train -> dev, saved

The search trains each candidate on 90 % of MRPC train and scores it on the other 10 %
(stratified, fixed), so the recipe is chosen without looking at dev; the chosen recipe is
then run once on all of train and scored on dev. Every measured run is kept in
``docs/finetune_runs.json`` and the section "## Fine-tuning recipe" of ``docs/results.md``
is rewritten from it (other sections are kept).

Timings on a shared machine depend on what else runs: each run records the 1-minute load
average before and after, and the process CPU time (one torch thread: CPU time is what
the run would take on an idle core).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _report import write_section  # noqa: E402

RUNS = ROOT / "docs" / "finetune_runs.json"
RESULTS = ROOT / "docs" / "results.md"
SECTION = "Fine-tuning recipe"  # the heading in docs/results.md

#: The recipe chosen from the hold-out search (see the table the script writes).
RECIPE = dict(task="MRPC", epochs=3, max_items=None, lr=1e-4, max_length=128, batch_size=16,
              freeze_layers=1, seed=0)

#: Candidates tried on the hold-out (name -> finetune arguments); MRPC unless task given.
CANDIDATES = {
    "f1_lr1e-4_n1700_e3": dict(freeze_layers=1, lr=1e-4, max_items=1700, epochs=3),
    "f1_lr1e-4_n1700_e4": dict(freeze_layers=1, lr=1e-4, max_items=1700, epochs=4),
    "f1_lr1e-4_n2500_e3": dict(freeze_layers=1, lr=1e-4, max_items=2500, epochs=3),
    "f1_lr1e-4_all_e3": dict(freeze_layers=1, lr=1e-4, epochs=3),
    "f4_lr1e-4_n1200_e2": dict(freeze_layers=4, lr=1e-4, max_items=1200, epochs=2),
    "f0_lr1e-4_n1200_e1": dict(freeze_layers=0, lr=1e-4, max_items=1200, epochs=1),
    "f0_lr5e-5_all_e1": dict(freeze_layers=0, lr=5e-5, epochs=1),
}


def run(args: dict, *, holdout: bool, threads: int, out: str | None = None, split_seed: int = 0,
        progress: bool = True) -> dict:
    import torch

    import attnkit as ak
    from attnkit.data.pairs import read_glue
    from attnkit.apps.finetune import finetune

    torch.set_num_threads(threads)
    args = dict(args)
    task = args.pop("task", "MRPC")
    load_before = os.getloadavg()
    train = read_glue(task, "train")
    if holdout:
        train, dev = train.split_off(fraction=0.1, seed=split_seed)
    else:
        dev = read_glue(task, "dev")
    model = ak.load("minilm")
    res = finetune(model, train, evaluate_on=dev, out=out, overwrite=True, progress=progress,
                   eval_each_epoch=holdout, **{"seed": 0, **args})
    row = res.summary()
    row.update(task=task, eval_split=f"hold-out 10% of train (split seed {split_seed})" if holdout else "dev",
               split_seed=split_seed if holdout else None,
               threads=threads, load_before=load_before[0], load_after=os.getloadavg()[0],
               cpus=os.cpu_count(), machine=platform.processor() or platform.machine(),
               date=time.strftime("%Y-%m-%d %H:%M"))
    return row


def load_runs(path: Path = RUNS) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"search": {}, "final": None}


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _rel(path: str | None) -> str | None:
    """A path inside the checkout, relative to it (the docs must not name this machine)."""
    try:
        return str(Path(path).relative_to(ROOT)) if path else path
    except ValueError:
        return path


def mins(s: float) -> str:
    return f"{s / 60:.1f}"


def recipe_text(p: dict) -> str:
    items = "all" if not p.get("max_items") else str(p["max_items"])
    return (f"{p['epochs']:g} epoch(s), {items} items, lr {p['lr']:g}, batch {p['batch_size']}, "
            f"max_length {p['max_length']}, freeze_layers {p['freeze_layers']}")


def section(runs: dict) -> str:
    lines = []
    final = runs.get("final")
    p = RECIPE
    lines += [
        "Model: the bundled all-MiniLM-L6-v2 (6 layers x 12 heads) with a fresh "
        "`BertForSequenceClassification` head (pooler + linear on [CLS]); AdamW, linear "
        "warm-up over 10 % of the steps then linear decay, weight decay 0.01, gradients "
        "clipped to 1, batches of similar length. One torch thread: on this machine's two "
        "shared cores two threads were 3-4x *slower* whenever other jobs ran (they "
        "spin-wait), and one thread was faster even at a load of 3.",
        "",
        f"**Recipe** ({p['task']}): {recipe_text(p)}, seed {p['seed']}.",
        "",
        "Regenerate (about ten minutes on an idle core; writes this section and the model):",
        "",
        "```",
        "python benchmarks/finetune.py --out runs/minilm-mrpc",
        "# the same run without the docs: attnkit finetune --task MRPC "
        f"--epochs {p['epochs']:g} --lr {p['lr']:g} --batch-size {p['batch_size']} "
        f"--max-length {p['max_length']} "
        + (f"--max-items {p['max_items']} " if p.get("max_items") else "") +
        f"--freeze-layers {p['freeze_layers']} --threads 1 --out runs/minilm-mrpc",
        "```",
        "",
    ]
    if final:
        lines += [
            "| task | train items | dev items | dev accuracy | dev F1 | majority rate | majority F1 "
            "| train min | eval min | wall min | CPU min | load before / after (2 cores) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {final['task']} | {final['n_train']} | {final['n_dev']} | {pct(final['accuracy'])} "
            f"| {pct(final['f1'])} | {pct(final['majority_rate'])} | {pct(final['majority_f1'])} "
            f"| {mins(final['train_seconds'])} | {mins(final['eval_seconds'])} "
            f"| {mins(final['wall_seconds'])} | {mins(final['cpu_seconds'])} "
            f"| {final['load_before']:.1f} / {final['load_after']:.1f} |",
            "",
            f"Measured {final['date']}; dev accuracy {100 * (final['accuracy'] - final['majority_rate']):+.1f} "
            "points over always answering the majority class of train (\"equivalent\"). F1 is "
            "that of the \"equivalent\" class, GLUE's MRPC convention. Saved at `"
            f"{_rel(final.get('path'))}` (safetensors, tokenizer, `finetune.json`); "
            "`attnkit.load` opens it as `BertForSequenceClassification`.",
            "",
        ]
    else:
        lines += ["(Not measured yet: run the command above.)", ""]
    prev = runs.get("final_previous")
    if prev:
        lines += [
            f"An earlier recipe ({recipe_text(prev['params'])}) was the first choice: on the "
            f"first hold-out split it tied with the recipe above. Run on dev it scored "
            f"{pct(prev['accuracy'])} % against a majority rate of {pct(prev['majority_rate'])} % "
            f"({100 * (prev['accuracy'] - prev['majority_rate']):+.1f} points, "
            f"{mins(prev['wall_seconds'])} min), short of the +10 points the issue asks for. "
            "The tie was then broken on a second hold-out split of train (split seed 1, the rows "
            "with split 1 in the table below), never on dev; the recipe above won it and was run on dev "
            "once. The dev number above is therefore the second dev evaluation of this search, "
            "and a reader should count it as such.",
            "",
        ]
    search = runs.get("search") or {}
    if search:
        lines += [
            "How the recipe was chosen: each candidate trained on 90 % of MRPC train and was "
            "scored on the other 10 % (366 pairs, stratified; split seed 0 for all, seed 1 for "
            "the tie-break); dev played no part in the choice. Accuracy after each epoch in "
            "brackets. Two processes of one thread each ran side by side.",
            "",
            "| candidate | split | hold-out accuracy | F1 | majority rate | train min | CPU min | load before / after |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in search.values():
            curve = ", ".join(pct(e["accuracy"]) for e in r["epochs_eval"])
            cpu = mins(r["cpu_seconds"]) if r.get("cpu_seconds") is not None else "n/a"
            lines.append(
                f"| {recipe_text(r['params'])} | {r.get('split_seed') or 0} | {pct(r['accuracy'])} ({curve}) "
                f"| {pct(r['f1'])} "
                f"| {pct(r['majority_rate'])} | {mins(r['train_seconds'])} | {cpu} "
                f"| {r['load_before']:.1f} / {r['load_after']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--search", action="store_true", help="run the hold-out candidates not yet measured")
    ap.add_argument("--only", nargs="*", default=None, help="with --search: these candidates, re-measured")
    ap.add_argument("--out", default=str(ROOT / "runs" / "minilm-mrpc"), help="where to save the fine-tuned model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--split-seed", type=int, default=0,
                    help="with --search: which stratified 10%% hold-out (another seed breaks ties)")
    ap.add_argument("--runs", default=str(RUNS), help="JSON file of measured runs (read and updated)")
    ap.add_argument("--docs-only", action="store_true", help="rewrite the docs section from the runs file")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    runs_file = Path(a.runs)
    runs = load_runs(runs_file)
    if a.search:
        names = a.only if a.only is not None else [n for n in CANDIDATES if n not in runs["search"]]
        for name in names:
            key = name if a.split_seed == 0 else f"{name}@split{a.split_seed}"
            runs["search"][key] = run(CANDIDATES[name], holdout=True, threads=a.threads,
                                      split_seed=a.split_seed,
                                      progress=not a.no_progress)
            runs_file.write_text(json.dumps(runs, indent=1))
    elif not a.docs_only:
        runs["final"] = run(RECIPE, holdout=False, threads=a.threads, out=a.out,
                            progress=not a.no_progress)
        runs_file.write_text(json.dumps(runs, indent=1))
    write_section(SECTION, section(runs), doc=RESULTS, header="# Results\n")


if __name__ == "__main__":
    main()
