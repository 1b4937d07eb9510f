"""Regenerate the general-behaviour results of docs/results.md (Clark et al. 2019, §3, §6).

    python docs/scripts/general_behaviour.py --store runs/ewt/ewt-test \
        --treebank ud-english-ewt/en_ewt-ud-test.conllu --out runs/general-ewt-test \
        --figures docs/figures

Reads a word-level AttentionSet store of the bundled model (attnkit.extract), writes CSV
tables, PNG figures and summary.json under --out, and prints the markdown tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

import attnkit as ak
from attnkit.data import find_data
from attnkit.apps.pipeline.general import run_general, write_general


def markdown(df: pd.DataFrame, fmt: str = "{:.3f}") -> str:
    """A pipe table (no tabulate dependency)."""
    cols = [df.index.name or ""] + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in df.iterrows():
        cells = [str(int(v)) if df[c].dtype.kind in "iu" else fmt.format(v)
                 if isinstance(v, (float, np.floating)) else str(v) for c, v in row.items()]
        lines.append("| " + " | ".join([str(idx)] + cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True)
    p.add_argument("--treebank", default="ud-english-ewt/en_ewt-ud-dev.conllu")
    p.add_argument("--model", default="minilm")
    p.add_argument("--out", required=True)
    p.add_argument("--figures", help="also save the figures here, named <tag>-<figure>.png")
    p.add_argument("--tag", default=None,
                   help="figure name prefix (default: from the treebank, e.g. ewt-test)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sset = ak.AttentionSet.open(args.store)
    summary: dict = {"store": str(args.store), "items": len(sset), "model": sset.model}

    model = ak.load(args.model)
    tb = ak.read_conllu(find_data(args.treebank))
    t = time.perf_counter()
    result = run_general(sset, model=model, importance_inputs=tb)
    summary.update(result["summary"], seconds=time.perf_counter() - t)
    written = write_general(result, out)
    # en_ewt-ud-test.conllu -> ewt-test
    tag = args.tag or "-".join(Path(args.treebank).stem.replace("en_", "").split("-ud-"))
    if args.figures:
        Path(args.figures).mkdir(parents=True, exist_ok=True)
        for f in written:
            if f.suffix == ".png":
                shutil.copy(f, Path(args.figures) / f"{tag}-{f.name}")
    imp_out = result["importance"].copy()
    imp_out.index = imp_out.index + 1
    per_layer, beh = result["per_layer"], result["behaviours"]
    (out / "summary.json").write_text(json.dumps(summary, indent=1))

    print(json.dumps(summary, indent=1))
    print(markdown(per_layer))
    print(markdown(imp_out, "{:.3g}"))
    print(markdown(beh.value_counts().to_frame()))


if __name__ == "__main__":
    main()
