"""Attention graphs over many inputs: the aggregate view DeRose et al. name as their tool's
limitation (it shows one input at a time).

Each input gets its own attention graph and influence (same threshold, heads, source and
alpha); what is aggregated are quantities that mean the same thing across inputs of
different lengths: per-head edge counts, the share of the total influence falling on each
kind of token (or on each token string), and per-head divergence between two models.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterable, Sized
from typing import Any

import numpy as np
import pandas as pd

from .._compat import renamed
from ..core.attention import is_punct
from ..errors import EmptyInputError, InputError
from ..core.results import HeadResult, head_frame
from ..core.types import AttentionLike, Attentions, HeadId, Sources, as_collection, dense_maps
from .compare import check_tokenization, head_edge_counts, js_divergence
from .graph import attention_graph
from .influence import influence

CATEGORIES = ("cls", "sep", "special", "punct", "word")


def _categories(att: AttentionLike) -> np.ndarray:
    """Per position: its role, with word positions split into "punct" and "word"."""
    cat = np.asarray(att.roles, dtype=object).copy()
    cat[[r == "word" and is_punct(t) for t, r in zip(att.tokens, att.roles)]] = "punct"
    return cat


def _stats(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample standard deviation (ddof=1; NaN for one input) along axis 0."""
    mean = values.mean(axis=0)
    std = values.std(axis=0, ddof=1) if len(values) > 1 else np.full(mean.shape, np.nan)
    return mean, std


class FlowSummary(HeadResult):
    """Result of :func:`flow_summary`: a :class:`~attnkit.HeadResult` whose table is the
    per-head table (``heads``), with the per-category, per-token and per-input tables.

    ``meta`` holds the options (``threshold``, ``alpha``, ``heads``, ``sources``) and
    ``n_inputs``; :meth:`plot` draws a layer × head map of ``edges_mean``.

    Parameters
    ----------
    heads : HeadResult
        Indexed by (``layer``, ``head``): ``edges_mean``, ``edges_std`` (graph edges the
        head makes per input) and ``share`` (fraction of inputs where it makes at least
        one).
    categories : pandas.DataFrame
        Indexed by token category ("cls", "sep", "special", "punct", "word"):
        ``share_mean``, ``share_std`` (fraction of an input's total influence score on that
        category), ``rating_mean`` (mean 0-5 rating of its positions), ``positions`` (how
        many positions in all inputs), ``inputs`` (inputs having one).
    tokens : pandas.DataFrame
        Indexed by token string: ``count`` (occurrences), ``inputs``, ``share_mean``,
        ``share_std`` (influence share per occurrence), ``rating_mean``; sorted by
        ``share_mean``, largest first.
    per_input : pandas.DataFrame
        One row per input: ``n``, ``nodes``, ``edges``, ``top_token``, ``top_share``.
    meta : dict, optional
        Added to ``heads.meta``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> a = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> b = ak.Attention.from_maps(np.array([[[[1, 0], [0.9, 0.1]]], [[[0.9, 0.1], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> s = ak.flow_summary([a, b], progress=False)
    >>> # influence shares of [CLS]: 4/3 of 7/3 in a, all of it in b
    >>> s.n_inputs, round(float(s.categories.loc["cls", "share_mean"]), 4)
    (2, 0.7857)
    >>> s.meta["n_inputs"], list(s.columns)  # the per-head table, read as a HeadResult
    (2, ['edges_mean', 'edges_std', 'share'])
    """

    def __init__(self, *, heads: HeadResult, categories: pd.DataFrame, tokens: pd.DataFrame,
                 per_input: pd.DataFrame, meta: dict[str, Any] | None = None) -> None:
        super().__init__(heads.table, {**heads.meta, **(meta or {})},
                         value=heads.meta.get("value") or "edges_mean")
        self.heads = heads
        self.categories = categories
        self.tokens = tokens
        self.per_input = per_input

    @property
    def n_inputs(self) -> int:
        """The number of inputs summarised."""
        return len(self.per_input)


@renamed(positional=("threshold", "alpha", "heads", "source", "progress"), atts="attentions",
         source="sources")
def flow_summary(
    attentions: Attentions,
    *,
    threshold: float = 0.3,
    heads: Iterable[HeadId] | None = None,
    sources: Sources = None,
    alpha: float = 0.5,
    progress: bool = True,
    client: Any = None,
) -> FlowSummary:
    """Aggregate attention graphs, influence and per-head counts over many inputs.

    Parameters
    ----------
    attentions : AttentionSet or iterable of Attention
        E.g. all MRPC dev pairs; read once.
    threshold, heads, sources : as in :func:`attention_graph`
        The same for every input.
    alpha : float
        Passed to :func:`influence`.
    progress : bool
        Show a progress bar over the inputs.
    client : dask.distributed.Client, optional
        Build the graphs on this Dask cluster (workers read a stored set themselves);
        ``None`` builds them here. Same result.

    Returns
    -------
    FlowSummary
        Per-head edge counts (a HeadResult), influence shares per token category and per
        token string, and one row per input. Standard deviations are across inputs
        (ddof=1).

    Raises
    ------
    EmptyInputError
        When there is no input.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert")
    >>> atts = [model.attend(t) for t in ["The cat sat on the mat.", "We read the review."]]
    >>> summary = ak.flow_summary(atts, threshold=0.1, progress=False)
    >>> summary.n_inputs, list(summary.heads.columns)
    (2, ['edges_mean', 'edges_std', 'share'])
    """
    from ..storage.engine import map_items

    # checked per input by attention_graph (validate.head_pairs); listed once here
    heads = heads if heads is None or isinstance(heads, (str, bytes)) else list(heads)
    per_input = map_items(attentions, functools.partial(
        _flow_item, threshold=threshold, heads=heads, sources=sources, alpha=alpha),
        client=client, progress=progress, desc="attention graphs")
    if not per_input:
        raise EmptyInputError("No attention to summarise: the collection is empty.")
    shapes = {r[0].shape for r in per_input}
    if len(shapes) > 1:
        raise InputError(f"All attentions must have the same layers and heads; got {sorted(shapes)}.")
    head_rows = [r[0] for r in per_input]
    cat_rows = [r[1] for r in per_input]
    tok_rows = [t for r in per_input for t in r[2]]
    inputs = [r[3] for r in per_input]

    counts = np.stack(head_rows).astype(np.float64)  # [inputs, L, H]
    mean, std = _stats(counts)
    head_df = head_frame({"edges_mean": mean, "edges_std": std, "share": (counts > 0).mean(axis=0)})

    crow = []
    for c in CATEGORIES:
        shares = np.array([r[c][0] for r in cat_rows], dtype=np.float64)
        present = shares[~np.isnan(shares)]
        ratings = [x for r in cat_rows for x in r[c][1]]
        crow.append({
            "share_mean": present.mean() if len(present) else np.nan,
            "share_std": present.std(ddof=1) if len(present) > 1 else np.nan,
            "rating_mean": float(np.mean(ratings)) if ratings else np.nan,
            "positions": len(ratings), "inputs": len(present),
        })
    cat_df = pd.DataFrame(crow, index=pd.Index(CATEGORIES, name="category"))

    toks = pd.DataFrame(tok_rows, columns=["token", "input", "share", "rating"])
    tok_df = toks.groupby("token").agg(
        count=("share", "size"), inputs=("input", "nunique"), share_mean=("share", "mean"),
        share_std=("share", "std"), rating_mean=("rating", "mean"),
    ).sort_values("share_mean", ascending=False)
    per_input = pd.DataFrame(inputs, index=pd.RangeIndex(len(inputs), name="input"))
    meta = {"threshold": threshold, "alpha": alpha, "n_inputs": len(per_input)}
    return FlowSummary(heads=HeadResult(head_df, meta, value="edges_mean"), categories=cat_df,
                       tokens=tok_df, per_input=per_input,
                       meta={"heads": heads, "sources": sources})


def _compare_item(i: int, a: AttentionLike, b: AttentionLike, threshold: float, heads: Any,
                  sources: Sources, alpha: float, names: tuple[str, str] | None) -> tuple:
    """Pair ``i``'s per-head divergence and edge counts and both models' influence shares
    per token category (see :func:`compare_sets`)."""
    pair_names = names if names is not None else (getattr(a, "model", "") or "a",
                                                  getattr(b, "model", "") or "b")
    try:
        check_tokenization(a, b, names=pair_names)
    except Exception as exc:
        raise type(exc)(f"Input {i}: {exc}") from None
    ga = attention_graph(a, threshold=threshold, heads=heads, sources=sources)
    gb = attention_graph(b, threshold=threshold, heads=heads, sources=sources)
    cats = _categories(a)
    row = []
    for g in (ga, gb):
        s = influence(g, alpha=alpha)["score"].to_numpy()
        s = s / s.sum() if s.sum() > 0 else np.zeros_like(s)
        row.append([s[cats == c].sum() if (cats == c).any() else np.nan for c in CATEGORIES])
    return (js_divergence(dense_maps(a), dense_maps(b)).mean(-1), head_edge_counts(ga),
            head_edge_counts(gb), row, pair_names)


def _flow_item(i: int, att: AttentionLike, threshold: float, heads: Any, sources: Sources,
               alpha: float) -> tuple:
    """Input ``i``'s per-head edge counts, influence share and ratings per token category,
    per-token rows and summary row (see :func:`flow_summary`)."""
    g = attention_graph(att, threshold=threshold, heads=heads, sources=sources)
    inf = influence(g, alpha=alpha)
    total = inf["score"].sum()
    share = inf["score"].to_numpy() / total if total > 0 else np.zeros(len(inf))
    cats = _categories(att)
    rating = inf["rating"].to_numpy()
    row = {}
    for c in CATEGORIES:
        mask = cats == c
        row[c] = (share[mask].sum() if mask.any() else np.nan, rating[mask].tolist())
    toks = [(tok, i, share[pos], rating[pos]) for pos, tok in enumerate(att.tokens)]
    top = int(np.argmax(share)) if len(share) else 0
    summary = {"n": len(att), "nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
               "top_token": att.tokens[top] if total > 0 else None,
               "top_share": float(share[top]) if total > 0 else 0.0}
    return head_edge_counts(g), row, toks, summary


class SetComparison(HeadResult):
    """Result of :func:`compare_sets`: a :class:`~attnkit.HeadResult` whose table is the
    per-head table (``heads``), with the per-category influence shares of both models.

    ``meta`` holds the names, the options (``threshold``, ``heads``, ``sources``,
    ``alpha``) and ``n_inputs``; :meth:`plot` draws a layer × head map of ``jsd_mean``.

    Parameters
    ----------
    heads : HeadResult
        Indexed by (``layer``, ``head``): ``jsd_mean``, ``jsd_std`` (per input mean over
        query rows, then across inputs), ``edges_a_mean``, ``edges_b_mean``, ``share_a``,
        ``share_b`` (fraction of inputs where the head makes an edge).
    categories : pandas.DataFrame
        Indexed by token category: ``share_a``, ``share_b`` (mean influence share),
        ``delta_mean``, ``delta_std`` (paired difference b - a).
    names : (str, str)
        Display names of the two models.
    n_inputs : int
        Number of paired inputs.
    meta : dict, optional
        Added to ``heads.meta``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> a = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> b = ak.Attention.from_maps(np.array([[[[1, 0], [0.9, 0.1]]], [[[0.9, 0.1], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> c = ak.compare_sets([a, a], [b, b], progress=False)
    >>> c.n_inputs, c.categories.loc["cls", ["share_a", "share_b"]].round(4).tolist()
    (2, [0.5714, 1.0])
    >>> c.meta["names"], c.value_column()  # the per-head table, read as a HeadResult
    (('a', 'b'), 'jsd_mean')
    """

    def __init__(self, *, heads: HeadResult, categories: pd.DataFrame, names: tuple[str, str],
                 n_inputs: int, meta: dict[str, Any] | None = None) -> None:
        super().__init__(heads.table, {**heads.meta, "names": names, "n_inputs": n_inputs,
                                       **(meta or {})},
                         value=heads.meta.get("value") or "jsd_mean")
        self.heads = heads
        self.categories = categories
        self.names = names
        self.n_inputs = n_inputs


@renamed(positional=("threshold", "alpha", "heads", "source", "names", "progress"),
         set_a="attentions", set_b="other", source="sources")
def compare_sets(
    attentions: Attentions,
    other: Attentions,
    *,
    threshold: float = 0.3,
    heads: Iterable[HeadId] | None = None,
    sources: Sources = None,
    alpha: float = 0.5,
    names: tuple[str, str] | None = None,
    progress: bool = True,
    client: Any = None,
) -> SetComparison:
    """Compare two models over the same inputs, pair by pair.

    Parameters
    ----------
    attentions, other : AttentionSet or iterable of Attention
        Input ``i`` of one is paired with input ``i`` of the other; every pair must share
        its tokenization.
    threshold, heads, sources, alpha : as in :func:`compare`
    names : (str, str), optional
        Display names of the two models.
    progress : bool
        Show a progress bar over the pairs.
    client : dask.distributed.Client, optional
        Compare the pairs on this Dask cluster (workers read stored sets themselves);
        ``None`` here. Same result.

    Returns
    -------
    SetComparison
        Per-head divergence and edge counts (a HeadResult) and per-category influence
        shares of both models.

    Raises
    ------
    TokenizationMismatchError
        For the first pair tokenized differently (the message names the input).
    EmptyInputError
        When there are no pairs or the sets differ in length.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> texts = ["The cat sat on the mat.", "We read the review."]
    >>> a = [tiny_model("bert", seed=0).attend(t) for t in texts]
    >>> b = [tiny_model("bert", seed=1).attend(t) for t in texts]
    >>> ak.compare_sets(a, b, progress=False).n_inputs
    2
    """
    from ..storage.engine import map_items

    set_a, set_b = as_collection(attentions), as_collection(other)
    if isinstance(set_a, Sized) and isinstance(set_b, Sized) and len(set_a) != len(set_b):
        raise EmptyInputError(f"The sets have {len(set_a)} and {len(set_b)} inputs; "
                              "compare_sets pairs input i of one with input i of the other.")
    # checked per input by attention_graph (validate.head_pairs); listed once here
    heads = heads if heads is None or isinstance(heads, (str, bytes)) else list(heads)
    pairs = map_items(set_a, functools.partial(
        _compare_item, threshold=threshold, heads=heads, sources=sources, alpha=alpha, names=names),
        other=set_b, client=client, progress=progress, desc="pairs")
    if not pairs:
        raise EmptyInputError("No pairs to compare: the sets are empty.")
    if names is None:
        names = pairs[0][4]
    jsds, ea, eb, shares = ([p[k] for p in pairs] for k in range(4))
    jsd_all = np.stack(jsds)
    edges_a, edges_b = np.stack(ea).astype(float), np.stack(eb).astype(float)
    jm, js = _stats(jsd_all)
    heads_df = head_frame({
        "jsd_mean": jm, "jsd_std": js,
        "edges_a_mean": edges_a.mean(0), "edges_b_mean": edges_b.mean(0),
        "share_a": (edges_a > 0).mean(0), "share_b": (edges_b > 0).mean(0),
    })
    sh = np.array(shares, dtype=np.float64)  # [inputs, 2, categories]
    delta = sh[:, 1] - sh[:, 0]
    with warnings.catch_warnings():  # categories absent from every input give NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        cat_df = pd.DataFrame({
            "share_a": np.nanmean(sh[:, 0], axis=0), "share_b": np.nanmean(sh[:, 1], axis=0),
            "delta_mean": np.nanmean(delta, axis=0),
            "delta_std": np.nanstd(delta, axis=0, ddof=1),
        }, index=pd.Index(CATEGORIES, name="category"))
    pair_names = (str(names[0]), str(names[1]))
    heads_res = HeadResult(heads_df, {"names": pair_names, "threshold": threshold},
                           value="jsd_mean")
    return SetComparison(heads=heads_res, categories=cat_df, names=pair_names,
                         n_inputs=len(jsd_all),
                         meta={"heads": heads, "sources": sources, "alpha": alpha})
