"""The ``attnkit`` command: ``analyze`` (Clark et al. tables and figures), ``report``
(a notebook as one offline HTML file), ``store`` (info, verify, repair, migrate) and ``finetune``
(a classifier on a GLUE task)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..errors import AttnkitError
from .finetune.command import add_parser as add_finetune_parser

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _treebank_path(arg: str | None, split: str) -> tuple[Path, bool]:
    """(CoNLL-U file, is_fallback). A folder is searched for ``*-ud-<split>.conllu``."""
    from ..data import find_data, sample_treebank
    from ..errors import DataNotFoundError

    if arg:
        p = Path(arg)
        if p.is_dir():
            hits = sorted(p.glob(f"*-ud-{split}.conllu"))
            if not hits:
                raise DataNotFoundError(f"No *-ud-{split}.conllu file in {p}.")
            return hits[0], False
        return p, False
    try:
        return find_data(f"ud-english-ewt/en_ewt-ud-{split}.conllu"), False
    except DataNotFoundError as exc:
        _say(f"note: {exc}\nnote: falling back to attnkit's 12 bundled sample sentences.")
        return sample_treebank(), True


def cmd_analyze(args: argparse.Namespace) -> int:
    import attnkit as ak

    out = Path(args.out)
    path, fallback = _treebank_path(args.treebank, args.split)
    t0 = time.time()
    _say(f"model {args.model}; treebank {path}")
    tb = ak.read_conllu(path, limit=args.limit)
    model = ak.load(args.model)
    out.mkdir(parents=True, exist_ok=True)  # only once the inputs are known good: a bad one writes nothing
    store = None if args.no_store else out / "store" / f"{path.stem}"
    sset = ak.extract(model, tb, batch_size=args.batch_size, level="word", store=store)
    from .pipeline import run_general

    _say("head statistics, clusters and gradient importance ...")
    sample = list(tb[: args.importance_items])
    run_general(sset, out, model=model, importance_inputs=sample)
    _say(f"wrote head_stats.csv, head_distances.csv, per_layer.csv and figures under {out}")

    _say("syntax heads per relation ...")
    report_path = path.with_name(path.name.replace(f"-{args.split}.", "-test."))
    if args.split != "test" and report_path != path and report_path.exists():
        test_tb = ak.read_conllu(report_path, limit=args.limit)
        test_store = None if args.no_store else out / "store" / report_path.stem
        test_set = ak.extract(model, test_tb, batch_size=args.batch_size, store=test_store)
        table = ak.relation_heads(test_set, test_tb, select_on=(sset, tb), min_count=args.min_count)
        _say(f"heads chosen on {path.name}, reported on {report_path.name}")
    else:
        table = ak.relation_heads(sset, tb, min_count=args.min_count)
        _say("no test split beside the treebank: heads chosen and reported on the same sentences")
    table.to_csv(out / "relation_heads.csv", float_format="%.4f")
    ax = ak.plot.plot_relation_heads(table)
    # a figure of its own (no ax given), so its figure is the root Figure, never a SubFigure
    cast("Figure", ax.figure).savefig(out / "relation_heads.png", dpi=110, bbox_inches="tight")
    _say(f"wrote relation_heads.csv and relation_heads.png under {out}")

    if args.coref:
        _say(f"coreference heads on {args.coref} ...")
        ak.pipeline.run_coref(model, args.coref, out=out / "coref",
                              store=None if args.no_store else out / "store" / "coref",
                              max_tokens=args.coref_max_tokens)
        _say(f"wrote coreference tables and figures under {out / 'coref'}")
    if fallback:
        _say("For the full analysis get UD English EWT (https://universaldependencies.org) and "
             "pass --treebank or set ATTNKIT_DATA.")
    _say(f"done in {time.time() - t0:.0f} s")
    return 0


def _cell_progress(index: int, total: int, cell, seconds: float | None) -> None:
    """One stderr line when a notebook cell starts, one when a slow one (1 s or more) ends."""
    width = len(str(total))
    if seconds is None:
        first = next((ln.strip() for ln in cell.source.splitlines() if ln.strip()), "")
        _say(f"  [{index:>{width}}/{total}] {first[:70]}{' ...' if len(first) > 70 else ''}")
    elif seconds >= 1:
        _say(f"  [{index:>{width}}/{total}] done in {seconds:.0f} s")


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    nb = Path(args.notebook)
    out = Path(args.output) if args.output else nb.with_suffix(".html")
    t0 = time.time()
    if args.execute:
        _say(f"executing {nb} (a fresh kernel of {sys.executable}) ...")
    path = write_report(
        nb,
        out,
        execute=args.execute,
        timeout=args.timeout or None,
        allow_errors=args.allow_errors,
        save_notebook=args.save_notebook,
        on_cell=_cell_progress if args.execute and not args.quiet else None,
    )
    if args.save_notebook:
        _say(f"wrote {args.save_notebook}")
    _say(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.time() - t0:.0f} s; "
         f"open it from disk, no network needed: file://{path.resolve()}")
    return 0


def cmd_store(args: argparse.Namespace) -> int:
    from ..storage import store as st
    from ..storage.store_v1 import is_v1, migrate

    if args.action == "migrate":
        t0 = time.time()
        path = Path(args.path)
        new = migrate(path, args.output, keep_old=not args.remove_old)
        kept = "" if args.output or args.remove_old else f"; the original is kept at {path}.v1"
        _say(f"migrated {path} to format {st.FORMAT} at {new} in {time.time() - t0:.0f} s, every "
             f"value checked against the original{kept}")
        return 0
    loc = st.Location.of(args.path)
    if loc.local and is_v1(Path(loc.url)):
        print(f"{loc}: format 1 (read-only in this attnkit; convert with `attnkit store migrate`)")
        return 0
    if args.action == "info":
        from ..storage.corpus import AttentionSet

        sset = AttentionSet(st.StoreReader(loc, require_complete=False))
        info = sset.info
        done = len(sset._backend.committed)
        print(f"{loc}: attnkit store format {info['format']}, model {info['model']} "
              f"({info['n_layers']} layers x {info['n_heads']} heads), {info['level']} level, "
              f"{info['n_items']} items in {info['n_batches']} batches ({done} committed), "
              f"maps {'kept' if info.get('keep_maps', True) else 'not kept'}, embeddings "
              f"{'kept' if info.get('embeddings') else 'not kept'}, summaries "
              f"{', '.join(info.get('summaries', [])) or 'none'}")
        return 0
    if args.action == "repair":
        return _repair(loc)
    reader = st.StoreReader(loc, require_complete=False)
    bad = {}
    for b in sorted(reader.committed):
        problems = reader.verify_batch(b)
        if problems:
            bad[b] = problems
    missing = len(reader.layout.batches) - len(reader.committed)
    bad_index = reader.verify_index()
    for doc in st.damaged_metadata(loc):
        bad_index.append(doc)
        print(f"metadata {doc}: damaged; `attnkit store repair {loc}` restores it")
    for name in bad_index:
        print(f"index {name}: damaged; extract again with the same inputs rewrites it")
    for b, problems in bad.items():
        items = st._describe_items(reader.layout.batches[b], reader.meta)
        print(f"batch {b}: damaged {', '.join(problems)}; items {items}")
    print(f"{loc}: {len(reader.committed) - len(bad)} batches intact, {len(bad)} damaged, "
          f"{missing} not computed yet")
    if bad or missing:
        print("Run attnkit.extract with the same model, inputs and store to recompute them.")
    return 1 if bad or bad_index else 0


def _repair(loc) -> int:
    from ..storage import store as st

    done = st.repair(loc)
    for doc in done.restored:
        print(f"metadata {doc}: restored from {st.META_BACKUP}")
    for doc in done.lost:
        print(f"metadata {doc}: damaged and no copy to restore it from; extract into a new store")
    if done.unreadable:
        print(f"store unreadable: {done.unreadable}")
    for name in done.damaged_index:
        print(f"index {name}: damaged; extract again with the same inputs rewrites it")
    for b, problems in done.damaged.items():
        print(f"batch {b}: damaged {', '.join(problems)} (uncommitted); items {done.items.get(b, '?')}")
    if done.missing:
        print(f"batches not computed: {len(done.missing)} ({', '.join(map(str, done.missing[:12]))}"
              f"{' ...' if len(done.missing) > 12 else ''})")
    if done.to_recompute:
        print(f"{loc}: repaired what could be rebuilt; run attnkit.extract with the same model, "
              "inputs and store to recompute the rest.")
        return 1
    print(f"{loc}: intact ({len(done.restored)} metadata files restored).")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnkit", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="head statistics and Clark et al. analyses on a treebank")
    a.add_argument("--model", default="minilm", help="'minilm' (bundled), HF id or folder")
    a.add_argument("--treebank", help="CoNLL-U file or UD folder (default: EWT from the data folder)")
    a.add_argument("--split", default="dev", help="split to analyse when --treebank is a folder")
    a.add_argument("--out", default="reports/analysis", help="output folder")
    a.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    a.add_argument("--batch-size", type=int, default=32)
    a.add_argument("--importance-items", type=int, default=100,
                   help="sentences used for gradient importance (backward passes are slow)")
    a.add_argument("--no-store", action="store_true", help="keep attention in memory only")
    a.add_argument("--min-count", type=int, default=100,
                   help="relations with at least this many words in the reported split")
    a.add_argument("--coref", help="GUM-style CoNLL-U with Entity= coreference: also run the "
                   "coreference-head analysis on it")
    a.add_argument("--coref-max-tokens", type=int, default=None,
                   help="cut documents to this many tokens (default: the model's maximum)")
    a.set_defaults(func=cmd_analyze)
    r = sub.add_parser(
        "report",
        help="a notebook as ONE self-contained HTML file with live widgets, offline",
        description="Write a notebook as one self-contained HTML file that opens from disk with "
        "no network and draws every widget live (static PNGs without JavaScript).",
    )
    r.add_argument("notebook", help="the .ipynb file")
    r.add_argument("-o", "--output", help="HTML file to write (default: beside the notebook, .html)")
    r.add_argument("--execute", action="store_true",
                   help="run the notebook first, in a fresh kernel of this Python, from the "
                   "notebook's folder; the environment passes through (e.g. ATTNKIT_QUICK=1)")
    r.add_argument("--timeout", type=int, default=0,
                   help="per-cell time limit in seconds when executing (default 0: none)")
    r.add_argument("--allow-errors", action="store_true",
                   help="keep going past failing cells and show their errors in the report")
    r.add_argument("--save-notebook", metavar="PATH", help="also write the executed notebook here")
    r.add_argument("-q", "--quiet", action="store_true",
                   help="no per-cell progress lines while executing")
    r.set_defaults(func=cmd_report)
    s = sub.add_parser(
        "store",
        help="inspect, verify, repair or migrate an attention store",
        description="Stores written by attnkit.extract: `info` says what one holds, `verify` "
        "re-reads every array of every committed batch (maps, embeddings, summaries) against "
        "its checksums, `repair` restores damaged metadata, forgets damaged batches and lists "
        "what extract must recompute, `migrate` converts a store of format 1 (.npy batches) "
        "to format 2 (checksummed Zarr). See docs/reliability.md.",
    )
    s.add_argument("action", choices=["info", "verify", "repair", "migrate"])
    s.add_argument("path", help="store folder or fsspec URL")
    s.add_argument("-o", "--output", help="migrate: write the new store here and leave PATH alone")
    s.add_argument("--remove-old", action="store_true",
                   help="migrate: delete the original once the copy is checked (default: keep PATH.v1)")
    s.set_defaults(func=cmd_store)
    add_finetune_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except AttnkitError as exc:
        _say(f"attnkit: error: {exc}")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
