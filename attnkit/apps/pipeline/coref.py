"""The coreference-head analysis end to end: GUM documents → attention → tables and figures.

``run_coref(model)`` reads GUM dev (the only split of the shared data with coreference),
feeds each document to the model as one word list (cut at ``max_tokens``, by default the
model's maximum), and scores every head and the baselines. Because GUM dev is all there is,
the head is chosen on one half of the documents and reported on the other
(:func:`~attnkit.analysis.coref.split_documents`, genre-balanced), both ways round; the
all-document table, where the head is chosen and reported on the same documents, is kept
too and labelled so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ...analysis.coref import (coref_heads, coref_predictions, coref_rows, coref_summary,
                              split_documents)
from ...data.coref import Document, read_coref
from ...data.paths import find_data
from ...errors import InputError

GUM_DEV = "ud-english-gum/en_gum-ud-dev.conllu"


def fit_documents(model: Any, docs: Sequence[Document], max_tokens: int) -> list[Document]:
    """Each document cut to the whole words that fit in ``max_tokens`` positions of
    ``model`` (special tokens included), e.g. 128 as in Clark et al. (2019)."""
    if max_tokens > model.max_length:
        raise InputError(f"max_tokens={max_tokens} exceeds {model.name}'s maximum of "
                         f"{model.max_length} tokens.")
    out = []
    for d in docs:
        enc = model.encode(d)
        wid = np.array(enc.word_ids)
        n_special = int((wid < 0).sum())
        pieces = np.bincount(wid[wid >= 0], minlength=len(enc.words))
        complete = pieces[: int(wid.max()) + 1] if (wid >= 0).any() else pieces[:0]
        if enc.truncated and len(complete):
            complete = complete[:-1]  # the last word seen may have lost pieces
        fits = int((np.cumsum(complete) + n_special <= max_tokens).sum())
        if fits < 1:
            raise InputError(f"Not one word of {d.id!r} fits in {max_tokens} tokens.")
        out.append(d.cut(fits) if fits < d.n_words else d)
    return out


def run_coref(
    model: Any,
    source: str | Path | Sequence[Document] | None = None,
    out: str | Path | None = None,
    *,
    store: str | Path | None = None,
    max_tokens: int | None = None,
    max_docs: int | None = None,
    batch_size: int = 4,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the coreference-head analysis of ``model`` and (with ``out``) write its outputs.

    Parameters
    ----------
    model : a :class:`attnkit.Model` (e.g. ``attnkit.load("minilm")``).
    source : CoNLL-U file with ``Entity=`` coreference, or documents from
        :func:`~attnkit.data.read_coref`. Default: GUM dev from the data folder.
    out : folder for ``coref_heads_<split>.csv`` (every head and baseline; ``A_to_B``,
        ``B_to_A``, ``all``),
        ``coref_summary.csv`` (the paper's Table 2 view, all splits), ``coref_mentions.csv``,
        ``coref_documents.csv`` and the figures ``coref_accuracy.png`` /
        ``coref_heads.png``. ``None`` writes nothing.
    store : folder for the attention store (resumable); ``None`` keeps it in memory.
    max_tokens : cut documents to this many tokens (default: the model's maximum).
    max_docs : use only the first documents (quick runs).

    Returns
    -------
    dict with ``heads`` (split name → :func:`coref_heads` table), ``summary`` (one table:
    split, model, accuracies in %), ``evaluation`` (:class:`CorefEvaluation`), ``documents``
    (truncation per document), ``splits`` (the two halves' ids), ``max_tokens`` and
    ``extraction`` (batches computed now / reused from ``store``).
    Split names: ``"A->B"`` = head chosen on half A, reported on half B; ``"B->A"`` the
    other way round; ``"all"`` chosen and reported on every document (optimistic).
    """
    from ...storage.extraction import extract

    if source is None:
        source = find_data(GUM_DEV)
    docs = read_coref(source) if isinstance(source, (str, Path)) else list(source)
    if max_docs is not None:
        docs = docs[:max_docs]
    if len(docs) < 2:
        raise InputError("run_coref() needs at least two documents (one per half).")
    limit = max_tokens or model.max_length
    fed = fit_documents(model, docs, max_tokens) if max_tokens else docs
    sset = extract(model, fed, batch_size=batch_size, level="word", store=store,
                   progress=progress)
    ev = coref_predictions(sset, docs)
    half_a, half_b = split_documents(docs)
    ev_a, ev_b = ev.subset(half_a), ev.subset(half_b)
    heads = {
        "A->B": coref_heads(ev_b, select_on=ev_a),
        "B->A": coref_heads(ev_a, select_on=ev_b),
        "all": coref_heads(ev),
    }
    parts = []
    for split, table in heads.items():
        s = coref_summary(table).table.reset_index()
        s.insert(0, "split", split)
        s["lost"] = table.meta["lost"]
        parts.append(s)
    summary = pd.concat(parts, ignore_index=True)
    result = {"heads": heads, "summary": summary, "evaluation": ev,
              "documents": ev.documents, "splits": {"A": half_a, "B": half_b},
              "max_tokens": limit, "extraction": dict(sset.run_info)}
    if out is not None:
        write_coref(result, out)
    return result


def write_coref(result: dict[str, Any], out: str | Path) -> list[Path]:
    """Write the tables and figures of :func:`run_coref` under ``out``; returns the paths."""
    from matplotlib.figure import Figure

    from ...plot.coref import plot_coref_accuracy, plot_coref_heads

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for split, table in result["heads"].items():
        p = out / f"coref_heads_{split.replace('->', '_to_')}.csv"
        coref_rows(table).to_csv(p, index=False)
        written.append(p)
    for name, df in (("coref_summary.csv", result["summary"]),
                     ("coref_mentions.csv", result["evaluation"].mentions),
                     ("coref_documents.csv", result["documents"])):
        df.to_csv(out / name, index=False)
        written.append(out / name)
    fig = Figure(figsize=(13, 3.8))
    axes = fig.subplots(1, 2)
    cut = f"documents cut at {result['max_tokens']} tokens"
    for ax, (split, a, b) in zip(axes, (("A->B", "A", "B"), ("B->A", "B", "A"))):
        plot_coref_accuracy(result["heads"][split], ax=ax,
                            title=f"Head chosen on half {a}, reported on half {b} ({cut})")
    fig.tight_layout()
    fig.savefig(out / "coref_accuracy.png", dpi=120)
    fig = Figure(figsize=(7, 4))
    plot_coref_heads(result["heads"]["A->B"], ax=fig.subplots(),
                     title=f"Every head on half B; box: the head chosen on half A ({cut})")
    fig.tight_layout()
    fig.savefig(out / "coref_heads.png", dpi=120)
    written += [out / "coref_accuracy.png", out / "coref_heads.png"]
    return written
