"""The Clark et al. (2019) pipeline on UD English EWT, timed stage by stage.

    PYTHONPATH=. python benchmarks/clark.py [--out runs/clark] [--baselines]

Stages: extract word-level attention (with input embeddings) of EWT train/dev/test into a
fresh temporary store; syntax heads (chosen on dev, reported on test); the Attn-Only and
Attn+emb probes (trained on train, epoch chosen on dev, reported on test); head clustering
(Jensen–Shannon distances between heads over EWT test, 2-D MDS). ``--baselines``
adds the probe baselines (distances+embeddings MLP; the Attn+emb probe on a randomly
initialised model of the same shape, whose EWT stores it extracts too) as extra stages,
outside the pipeline total.

Writes the tables (CSV and Markdown) and figures under ``--out`` and the timings (wall
time, peak RSS) into the ``## clark`` section of docs/benchmarks.md. ``--stores DIR``
reuses finished stores ``DIR/ewt-{train,dev,test}`` instead of extracting (then extraction
is not timed and docs/benchmarks.md is left alone); ``--keep-stores DIR`` extracts into
``DIR/ewt-{train,dev,test}`` (timed, as usual) and keeps them there.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import attnkit as ak  # noqa: E402
from attnkit.analysis.probe import AttentionProbe, probe_data  # noqa: E402
from attnkit.analysis.syntax import (  # noqa: E402
    head_accuracy, relation_heads, right_branching_uas, word_hits)
from attnkit.data import find_data  # noqa: E402
from _report import write_section  # noqa: E402

SPLITS = ("train", "dev", "test")
#: Paper numbers (Clark et al. 2019, BERT-base on PTB WSJ with Stanford Dependencies), for
#: side-by-side tables. Table 1: UD relation -> (SD relation, head, accuracy, baseline).
PAPER_TABLE1 = {
    "all": ("All", "7-6", 34.5, "26.3 (+1)"),
    "case": ("pobj, arc reversed", "9-6", 76.3, "34.6 (−2)"),
    "det": ("det", "8-11", 94.3, "51.7 (+1)"),
    "nsubj": ("nsubj", "8-2", 58.5, "45.5 (+1)"),
    "amod": ("amod", "4-10", 75.6, "68.3 (+1)"),
    "obj": ("dobj", "8-10", 86.8, "40.0 (−2)"),
    "advmod": ("advmod", "7-6", 48.8, "40.2 (+1)"),
    "aux": ("aux", "4-10", 81.1, "71.5 (+1)"),
    "nmod:poss": ("poss", "7-6", 80.5, "47.7 (+1)"),
    "aux:pass": ("auxpass", "4-10", 82.5, "40.5 (+1)"),
    "ccomp": ("ccomp", "8-1", 48.8, "12.4 (−2)"),
    "mark": ("mark", "8-2", 50.7, "14.5 (+2)"),
    "compound": ("nn", "4-10", 70.4, "70.2 (+1)"),
    "compound:prt": ("prt", "6-7", 99.1, "91.4 (−1)"),
}
#: Relations whose meaning changes when UD subtypes are folded in (no paper counterpart then).
SUBTYPE_ONLY = {"nmod:poss", "aux:pass", "compound:prt", "aux", "compound"}
PAPER_PROBES = {"right-branching": 26.3, "distances+emb": 58,
                "random-init attn + model emb": 30, "attn": 61, "attn+emb": 77}


def peak_rss_mb() -> float:
    """Peak resident memory of this process and its waited-for children (MiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


class Timer:
    def __init__(self):
        self.rows: list[dict] = []

    def __call__(self, stage: str, pipeline: bool = True):
        timer = self

        class _Ctx:
            def __enter__(self):
                self.t = time.perf_counter()
                print(f"[clark] {stage} ...", flush=True)

            def __exit__(self, *exc):
                wall = time.perf_counter() - self.t
                timer.rows.append({"stage": stage, "wall_s": wall, "peak_rss_mib": peak_rss_mb(),
                                   "in_pipeline": pipeline})
                print(f"[clark] {stage}: {wall:.1f} s, peak RSS {peak_rss_mb():.0f} MiB",
                      flush=True)

        return _Ctx()


def random_model(seed: int = 0):
    """A randomly initialised model with the bundled model's shape and tokenizer."""
    import torch
    import transformers

    base = ak.load("minilm")
    torch.manual_seed(seed)
    config = transformers.BertConfig.from_dict(base.hf.config.to_dict())
    config._attn_implementation = "eager"
    hf = transformers.BertModel(config)
    return ak.Model(hf, base.tokenizer, name="random-init all-MiniLM-L6-v2 shape")


def extract_all(model, treebanks: dict, folder: Path, batch_size: int) -> dict:
    return {s: ak.extract(model, treebanks[s], batch_size=batch_size, store=folder / f"ewt-{s}",
                          embeddings=True, progress=True) for s in SPLITS}


def fit_probe(kind: str, data: dict, epochs: int, seed: int):
    probe = AttentionProbe(kind, epochs=epochs, seed=seed).fit(data["train"], select_on=data["dev"])
    ev = probe.evaluate(data["test"])
    return probe, ev


def pct(x: float) -> str:
    return "" if pd.isna(x) else f"{100 * x:.1f}"


def relation_markdown(df: pd.DataFrame, subtypes: bool = True) -> str:
    out = ["| relation | n | head | accuracy | best offset | paper: relation | head | accuracy "
           "| offset |", "|---|---:|---|---:|---:|---|---|---:|---:|"]
    arrows = {"dep->head": "dep→head", "head->dep": "head→dep"}
    for rel, r in df.iterrows():
        paper = PAPER_TABLE1.get(rel) if (subtypes or rel not in SUBTYPE_ONLY) else None
        ptxt = f"{paper[0]} | {paper[1]} | {paper[2]} | {paper[3]}" if paper else " | | |"
        out.append(f"| {rel} | {r['n']} | {r['label']} {arrows.get(r['direction'], '')} | "
                   f"{pct(r['accuracy'])} | {pct(r['offset_accuracy'])} ({int(r['offset']):+d}) | "
                   f"{ptxt} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "runs" / "clark"), help="folder for tables/figures")
    ap.add_argument("--stores", default=None, help="reuse DIR/ewt-{train,dev,test} (no extraction)")
    ap.add_argument("--tmp", default=None, help="where the fresh temporary stores go")
    ap.add_argument("--keep", action="store_true", help="keep the temporary stores")
    ap.add_argument("--keep-stores", default=None,
                    help="extract into DIR/ewt-{train,dev,test} (must not exist yet) and keep them")
    ap.add_argument("--baselines", action="store_true", help="also the probe baselines")
    ap.add_argument("--random-stores", default=None,
                    help="keep/reuse the random-init model's stores in this folder")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (machine is shared)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-bench", action="store_true", help="do not touch docs/benchmarks.md")
    args = ap.parse_args(argv)

    import torch
    import matplotlib

    matplotlib.use("Agg")
    from attnkit.plot.syntax import plot_relation_grid, plot_relation_heads

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timer = Timer()
    t_all = time.perf_counter()

    with timer("read treebanks"):
        ewt = find_data("ud-english-ewt")
        tbs = {s: ak.read_conllu(ewt / f"en_ewt-ud-{s}.conllu") for s in SPLITS}
    tmp = None
    if args.stores:
        sets = {s: ak.AttentionSet.open(Path(args.stores) / f"ewt-{s}") for s in SPLITS}
    else:
        if args.keep_stores:
            tmp = Path(args.keep_stores)
            if any((tmp / f"ewt-{s}").exists() for s in SPLITS):
                ap.error(f"{tmp} already holds EWT stores: extraction would not be timed")
            args.keep = True
        else:
            tmp = Path(tempfile.mkdtemp(prefix="attnkit-clark-", dir=args.tmp))
        with timer("extract train/dev/test (bundled model)"):
            model = ak.load("minilm")
            sets = extract_all(model, tbs, tmp, args.batch_size)
    try:
        pairs = {s: (sets[s], tbs[s]) for s in SPLITS}
        with timer("relation heads (select dev, report test; with/without subtypes)"):
            test_hits = word_hits(*pairs["test"], poss_rule=True)
            dev_hits = word_hits(*pairs["dev"], poss_rule=True)
            rh = relation_heads(test_hits, select_on=dev_hits)
            rh_base = relation_heads(test_hits, select_on=dev_hits, subtypes=False)
            rh_plain = relation_heads(*pairs["test"], select_on=pairs["dev"], poss_rule=False)
        rh.to_csv(out / "relation_heads.csv")
        rh_base.to_csv(out / "relation_heads_nosubtypes.csv")
        rh_plain.to_csv(out / "relation_heads_noposs.csv")
        (out / "relation_heads.md").write_text(relation_markdown(rh) + "\n")
        (out / "relation_heads_nosubtypes.md").write_text(relation_markdown(rh_base, False) + "\n")
        (out / "relation_heads_noposs.md").write_text(relation_markdown(rh_plain) + "\n")
        grid = head_accuracy(hits=test_hits)
        grid.to_csv(out / "head_accuracy_test.csv")
        ax = plot_relation_heads(rh, relations=list(rh.index[:16]))
        ax.figure.savefig(out / "relation_heads.png", dpi=120)
        keep = [r for r in grid.index if grid.meta["n"][r] >= 100]
        ax = plot_relation_grid(grid, relations=keep)
        ax.figure.savefig(out / "relation_grid.png", dpi=120)

        with timer("probe features (train/dev/test)"):
            data = {s: probe_data(*pairs[s]) for s in SPLITS}
        results = [{"probe": "right-branching", "decode": "-",
                    "uas": right_branching_uas(tbs["test"]), "best_epoch": None}]
        for kind in ("attn", "attn+emb"):
            with timer(f"probe {kind} (fit on train, select on dev, test)"):
                probe, ev = fit_probe(kind, data, args.epochs, args.seed)
            probe.history_.to_csv(out / f"probe_{kind.replace('+', '_')}_history.csv")
            for dec, r in ev.iterrows():
                results.append({"probe": kind, "decode": dec, "uas": r["uas"],
                                "best_epoch": probe.best_epoch_})
        with timer("head clustering (JS distances over test, MDS)"):
            dist = ak.head_distances(sets["test"])
            emb = ak.embed_heads(dist)
        dist.to_csv(out / "head_distances_test.csv")
        emb.to_csv(out / "head_embedding_test.csv")
        ax = ak.plot.plot_head_clusters(emb, behaviours=ak.head_behaviours(ak.head_stats(sets["test"])))
        ax.figure.savefig(out / "head_clusters_test.png", dpi=120)
        pipeline_s = sum(r["wall_s"] for r in timer.rows if r["in_pipeline"])

        if args.baselines:
            with timer("baseline distances+emb MLP", pipeline=False):
                probe, ev = fit_probe("dist+emb", data, args.epochs, args.seed)
            for dec, r in ev.iterrows():
                results.append({"probe": "distances+emb", "decode": dec, "uas": r["uas"],
                                "best_epoch": probe.best_epoch_})
            # the bundled model's embeddings, to pair with random attention below
            real_v = {s: [it.V for it in data[s].items] for s in SPLITS}
            del data
            rtmp = Path(args.random_stores) if args.random_stores else Path(
                tempfile.mkdtemp(prefix="attnkit-clark-random-", dir=args.tmp))
            try:
                with timer("baseline random-init model: extract + attn+emb probes", pipeline=False):
                    rsets = extract_all(random_model(args.seed), tbs, rtmp, args.batch_size)
                    rdata = {s: probe_data(rsets[s], tbs[s]) for s in SPLITS}
                    probe, ev = fit_probe("attn+emb", rdata, args.epochs, args.seed)
                    for dec, r in ev.iterrows():
                        results.append({"probe": "random-init attn+emb", "decode": dec,
                                        "uas": r["uas"], "best_epoch": probe.best_epoch_})
                    # same random attention, embeddings of the trained model (the paper's
                    # baseline paired random attention with pre-trained GloVe vectors)
                    for s in SPLITS:
                        rdata[s].items = [replace(it, V=v) for it, v in
                                          zip(rdata[s].items, real_v[s])]
                    probe, ev = fit_probe("attn+emb", rdata, args.epochs, args.seed)
                    for dec, r in ev.iterrows():
                        results.append({"probe": "random-init attn + model emb", "decode": dec,
                                        "uas": r["uas"], "best_epoch": probe.best_epoch_})
                    del rdata
            finally:
                if not args.random_stores:
                    shutil.rmtree(rtmp, ignore_errors=True)
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    res = pd.DataFrame(results)
    res.to_csv(out / "probes.csv", index=False)
    lines = ["| probe | decode | UAS (EWT test) | paper (BERT-base, PTB) |", "|---|---|---:|---:|"]
    for _, r in res.iterrows():
        lines.append(f"| {r['probe']} | {r['decode']} | {pct(r['uas'])} | "
                     f"{PAPER_PROBES.get(r['probe'], '')} |")
    (out / "probes.md").write_text("\n".join(lines) + "\n")
    timings = pd.DataFrame(timer.rows)
    timings.to_csv(out / "timings.csv", index=False)
    total = time.perf_counter() - t_all
    print(rh.round(3).to_string())
    print(res.to_string())
    print(timings.to_string())

    if not args.stores and not args.no_bench:
        load = os.getloadavg()
        body = [
            "The whole Clark et al. pipeline on UD English EWT (12,544 train, 2,001 dev, 2,077 "
            "test sentences) with the bundled all-MiniLM-L6-v2: word-level extraction with "
            "input embeddings into a fresh store, syntax heads (dev → test), and the Attn-Only "
            "and Attn+emb probes (train → dev → test, "
            f"{args.epochs} epochs each), head clustering (test). Measured in one run of",
            "",
            "    PYTHONPATH=. python benchmarks/clark.py"
            + (" --baselines" if args.baselines else ""),
            "",
            f"on {os.cpu_count()} CPU cores, torch threads = {args.threads}, Python "
            f"{platform.python_version()}; load average at the end {load[0]:.1f} / {load[1]:.1f} / "
            f"{load[2]:.1f} (1 / 5 / 15 min; the machine is shared, so wall times include "
            "waiting for CPU).",
            "",
            "| stage | wall (s) | peak RSS so far (MiB) | in pipeline |",
            "|---|---:|---:|---|",
        ]
        for _, r in timings.iterrows():
            body.append(f"| {r['stage']} | {r['wall_s']:.0f} | {r['peak_rss_mib']:.0f} | "
                        f"{'yes' if r['in_pipeline'] else 'no (baseline)'} |")
        in_pipe = timings[timings["in_pipeline"]]
        body += ["", f"**Pipeline total: {pipeline_s / 60:.1f} min** (target < 20 min); "
                     f"peak RSS {in_pipe['peak_rss_mib'].max():.0f} MiB "
                     f"({timings['peak_rss_mib'].max():.0f} MiB with the baselines); whole run "
                     f"incl. baselines {total / 60:.1f} min."]
        write_section("clark", "\n".join(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
