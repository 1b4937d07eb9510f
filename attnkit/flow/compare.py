"""Compare the attention of two models on the same input (DeRose et al. 2020, §4.4):
typically a pre-trained model and its fine-tuned copy, which share a tokenizer.

Layer convention: "layer ``l``" is maps index ``l`` (0-indexed), whose graph edges run from
level ``l + 1`` down to level ``l``; the tokens of layer ``l`` are the positions those
edges reach at level ``l``.
"""

from __future__ import annotations

from typing import Any, Iterable

import networkx as nx
import numpy as np
import pandas as pd

from .._compat import renamed
from ..core.attention import row_shares
from ..core import validate
from ..errors import InputError, TokenizationMismatchError
from ..core.results import HeadResult, head_frame
from ..core.types import AttentionLike, HeadId, Sources, dense_maps
from .graph import attention_graph
from .influence import influence

MODELS = ("both", "a", "b")


class Comparison(HeadResult):
    """Result of :func:`compare`: a :class:`~attnkit.HeadResult` whose table is the per-head
    table (``heads``), with both graphs, their union and the influence of both.

    ``meta`` holds the names and the options (``threshold``, ``heads``, ``sources``,
    ``alpha``); :meth:`plot` draws the union graph (:func:`attnkit.plot.plot_comparison`).

    Parameters
    ----------
    names : (str, str)
        Display names of model a and model b.
    graph_a, graph_b : networkx.DiGraph
        The two attention graphs (see :func:`attention_graph`).
    union : networkx.DiGraph
        Both graphs in one; every node and edge has ``model`` in {"both", "a", "b"}; edges
        carry ``heads_a``/``weights_a``/``weight_a`` and the same for b (empty lists and 0.0
        where absent), plus ``heads`` (union), ``weight`` (larger of the two).
    layers : pandas.DataFrame
        Indexed by ``layer`` (0..L-1) with list columns ``tokens_both``, ``tokens_a``,
        ``tokens_b`` (positions reached in that layer), ``heads_both``, ``heads_a``,
        ``heads_b`` (heads making at least one edge) and their counts ``n_tokens_*``,
        ``n_heads_*``, plus ``edges_both``/``edges_a``/``edges_b``.
    heads : HeadResult
        Indexed by (``layer``, ``head``): ``jsd`` (Jensen-Shannon divergence between the
        two models' attention rows, base 2 so in [0, 1], averaged over all query
        positions), ``jsd_max`` (largest row), ``jsd_source`` (the source rows, last layer
        only, else NaN), ``edges_a``, ``edges_b`` (graph edges the head makes) and
        ``model`` in {"both", "a", "b", "none"}.
    influence : pandas.DataFrame
        Indexed by position: ``token``, ``score_a``, ``score_b``, ``rating_a``,
        ``rating_b``, ``delta`` (= score_b - score_a).
    meta : dict, optional
        Added to ``heads.meta``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> a = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> b = ak.Attention.from_maps(np.array([[[[1, 0], [0.9, 0.1]]], [[[0.9, 0.1], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> cmp = ak.compare(a, b)  # from [CLS]; "a" drops below the threshold in b
    >>> cmp.layers[["n_tokens_both", "n_tokens_a", "n_tokens_b"]].values.tolist()
    [[1, 1, 0], [1, 1, 0]]
    >>> cmp.influence["rating_b"].tolist(), round(float(cmp.heads.loc[(1, 0), "jsd_source"]), 4)
    ([1, 0], 0.1468)
    >>> cmp.value_column(), cmp.meta["names"]  # the per-head table, read as a HeadResult
    ('jsd', ('a', 'b'))
    """

    def __init__(self, *, names: tuple[str, str], graph_a: nx.DiGraph, graph_b: nx.DiGraph,
                 union: nx.DiGraph, layers: pd.DataFrame, heads: HeadResult,
                 influence: pd.DataFrame, meta: dict[str, Any] | None = None) -> None:
        super().__init__(heads.table, {**heads.meta, "names": names, **(meta or {})},
                         value=heads.meta.get("value") or "jsd", plot="comparison")
        self.names = names
        self.graph_a = graph_a
        self.graph_b = graph_b
        self.union = union
        self.layers = layers
        self.heads = heads
        self.influence = influence


@renamed(positional=("names",), att_a="attentions", att_b="other")
def check_tokenization(attentions: AttentionLike, other: AttentionLike, *,
                       names: tuple[str, str] = ("a", "b")) -> None:
    """Check that two attentions have the same tokens at the same positions.

    Parameters
    ----------
    attentions, other : Attention
        The two attentions.
    names : (str, str)
        Their names, for the message.

    Returns
    -------
    None
        When the tokens agree.

    Raises
    ------
    TokenizationMismatchError
        Listing the differing positions with both strings.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> from attnkit.flow.compare import check_tokenization
    >>> one = np.ones((1, 1, 1, 1))
    >>> check_tokenization(ak.Attention.from_maps(one, ["cat"]), ak.Attention.from_maps(one, ["dog"]))
    Traceback (most recent call last):
    ...
    attnkit.errors.TokenizationMismatchError: ... Differences: position 0: 'cat' (a) vs 'dog' (b). ...
    """
    ta, tb = list(attentions.tokens), list(other.tokens)
    if ta == tb:
        return
    diffs = []
    for pos in range(max(len(ta), len(tb))):
        a = ta[pos] if pos < len(ta) else None
        b = tb[pos] if pos < len(tb) else None
        if a != b:
            show = lambda x: "(none)" if x is None else repr(x)  # noqa: E731
            diffs.append(f"position {pos}: {show(a)} ({names[0]}) vs {show(b)} ({names[1]})")
    more = f"; and {len(diffs) - 10} more" if len(diffs) > 10 else ""
    raise TokenizationMismatchError(
        f"The two inputs are tokenized differently ({names[0]}: {len(ta)} tokens, "
        f"{names[1]}: {len(tb)} tokens); comparing attention needs the same tokens at the "
        f"same positions. Differences: {'; '.join(diffs[:10])}{more}. Compare a model with "
        "its fine-tuned copy (same tokenizer) on the same text, or pool both with "
        ".to_words() when their words agree."
    )


@renamed(p="a", q="b")
def js_divergence(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (base 2, in [0, 1]) between distributions along the last
    axis.

    Parameters
    ----------
    a, b : array_like
        Distributions along the last axis, same shape.

    Returns
    -------
    numpy.ndarray
        Float64 of the leading shape.

    Examples
    --------
    >>> from attnkit.flow.compare import js_divergence
    >>> # ½ KL(p ‖ m) + ½ KL(q ‖ m), m = [.75, .25]: ln-value 0.2158 / ln 2
    >>> round(float(js_divergence([0.5, 0.5], [1, 0])), 4), float(js_divergence([1, 0], [0, 1]))
    (0.3113, 1.0)
    """
    p = np.asarray(a, dtype=np.float64)
    q = np.asarray(b, dtype=np.float64)
    m = 0.5 * (p + q)

    def kl(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(x > 0, x * np.log2(x / m), 0.0)
        return t.sum(axis=-1)

    return np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0)


@renamed(positional=("threshold", "heads", "source", "alpha", "names"), att_a="attentions",
         att_b="other", source="sources")
def compare(
    attentions: AttentionLike,
    other: AttentionLike,
    *,
    threshold: float = 0.3,
    heads: Iterable[HeadId] | None = None,
    sources: Sources = None,
    alpha: float = 0.5,
    names: tuple[str, str] | None = None,
) -> Comparison:
    """Compare two models' attention on the same input, or two measures of one model's
    (:mod:`attnkit.runtime.measures`, read as each row's shares).

    Parameters
    ----------
    attentions, other : Attention
        The two attentions ("a" and "b"), on the same tokens.
    threshold, heads, sources : as in :func:`attention_graph`
        Both graphs are traced with the same settings.
    alpha : float
        Passed to :func:`influence`.
    names : (str, str), optional
        Display names; default the attentions' ``model`` names (or "a"/"b"), with the
        measure for two measures of one model (e.g. ``"minilm (weights)"``).

    Returns
    -------
    Comparison
        Both graphs, their union, per-layer and per-head tables, influence of both.

    Raises
    ------
    TokenizationMismatchError
        When the tokens differ.
    InputError
        When the models have different numbers of layers or heads.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> a = ak.Attention.from_maps(np.array([[[[1, 0], [1, 0]]]]), ["x", "y"], model="A")
    >>> b = ak.Attention.from_maps(np.array([[[[1, 0], [0, 1]]]]), ["x", "y"], model="B")
    >>> cmp = ak.compare(a, b, sources=[1])
    >>> cmp.names, round(float(cmp.heads.loc[(0, 0), "jsd"]), 3)
    (('A', 'B'), 0.5)
    """
    att_a, att_b = attentions, other
    if names is None:
        na, nb = getattr(att_a, "model", "") or "a", getattr(att_b, "model", "") or "b"
        ma, mb = getattr(att_a, "measure", "weights"), getattr(att_b, "measure", "weights")
        if na == nb and ma != mb:  # two measures of one model
            names = (f"{na} ({ma})", f"{nb} ({mb})")
        else:
            names = (na, nb) if na != nb else (f"{na} (a)", f"{nb} (b)")
    names = (str(names[0]), str(names[1]))
    check_tokenization(att_a, att_b, names=names)
    if (att_a.n_layers, att_a.n_heads) != (att_b.n_layers, att_b.n_heads):
        raise InputError(
            f"The models differ in shape: {names[0]} has {att_a.n_layers} layers x "
            f"{att_a.n_heads} heads, {names[1]} has {att_b.n_layers} x {att_b.n_heads}; "
            "per-layer and per-head comparison needs the same architecture."
        )
    heads = None if heads is None else validate.head_pairs(heads, att_a.n_layers, att_a.n_heads)
    ga = attention_graph(att_a, threshold=threshold, heads=heads, sources=sources)
    gb = attention_graph(att_b, threshold=threshold, heads=heads, sources=sources)
    union = _union(ga, gb, names)
    layers = _layers(ga, gb)
    head_df = _heads(att_a, att_b, ga, gb)
    ia, ib = influence(ga, alpha=alpha), influence(gb, alpha=alpha)
    inf = pd.DataFrame({"token": ia["token"], "score_a": ia["score"], "score_b": ib["score"],
                        "rating_a": ia["rating"], "rating_b": ib["rating"],
                        "delta": ib["score"] - ia["score"]}, index=ia.index)
    options = {"threshold": threshold, "heads": heads, "sources": sources, "alpha": alpha}
    return Comparison(names=names, graph_a=ga, graph_b=gb, union=union, layers=layers,
                      heads=HeadResult(head_df, {"names": names, "threshold": threshold},
                                       value="jsd"),
                      influence=inf, meta=options)


def _which(in_a: bool, in_b: bool) -> str:
    return "both" if in_a and in_b else ("a" if in_a else "b")


def _union(ga: nx.DiGraph, gb: nx.DiGraph, names) -> nx.DiGraph:
    u = nx.DiGraph()
    u.graph.update(ga.graph)
    u.graph["models"] = names
    for v in set(ga) | set(gb):
        attrs = dict(ga.nodes[v]) if v in ga else dict(gb.nodes[v])
        u.add_node(v, **attrs, model=_which(v in ga, v in gb))
    for e in set(ga.edges) | set(gb.edges):
        da = ga.edges[e] if ga.has_edge(*e) else None
        db = gb.edges[e] if gb.has_edge(*e) else None
        ha, wa = (da["heads"], da["weights"]) if da else ([], [])
        hb, wb = (db["heads"], db["weights"]) if db else ([], [])
        wmax_a = max(wa) if wa else 0.0
        wmax_b = max(wb) if wb else 0.0
        u.add_edge(*e, model=_which(da is not None, db is not None),
                   heads_a=list(ha), weights_a=list(wa), weight_a=wmax_a,
                   heads_b=list(hb), weights_b=list(wb), weight_b=wmax_b,
                   heads=sorted(set(ha) | set(hb)), weight=max(wmax_a, wmax_b))
    return u


def _layer_sets(g: nx.DiGraph, n_layers: int):
    tokens: list[set[int]] = [set() for _ in range(n_layers)]
    heads: list[set[int]] = [set() for _ in range(n_layers)]
    edges: list[set[tuple[Any, Any]]] = [set() for _ in range(n_layers)]
    for u, v, hs in g.edges(data="heads"):
        layer = u[0] - 1
        tokens[layer].add(v[1])
        heads[layer].update(hs)
        edges[layer].add((u, v))
    return tokens, heads, edges


def _layers(ga: nx.DiGraph, gb: nx.DiGraph) -> pd.DataFrame:
    n_layers = ga.graph["n_layers"]
    ta, ha, ea = _layer_sets(ga, n_layers)
    tb, hb, eb = _layer_sets(gb, n_layers)
    rows = []
    for layer in range(n_layers):
        row: dict[str, Any] = {}
        for kind, a, b in (("tokens", ta[layer], tb[layer]), ("heads", ha[layer], hb[layer])):
            row[f"{kind}_both"] = sorted(a & b)
            row[f"{kind}_a"] = sorted(a - b)
            row[f"{kind}_b"] = sorted(b - a)
        for kind in ("tokens", "heads"):
            for m in MODELS:
                row[f"n_{kind}_{m}"] = len(row[f"{kind}_{m}"])
        row["edges_both"] = len(ea[layer] & eb[layer])
        row["edges_a"] = len(ea[layer] - eb[layer])
        row["edges_b"] = len(eb[layer] - ea[layer])
        rows.append(row)
    return pd.DataFrame(rows, index=pd.RangeIndex(n_layers, name="layer"))


@renamed(g="graph")
def head_edge_counts(graph: nx.DiGraph) -> np.ndarray:
    """How many edges of an attention graph each head makes.

    Parameters
    ----------
    graph : networkx.DiGraph
        From :func:`attention_graph`.

    Returns
    -------
    numpy.ndarray
        Int ``[L, H]``.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> a = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> b = ak.Attention.from_maps(np.array([[[[1, 0], [0.9, 0.1]]], [[[0.9, 0.1], [0.5, 0.5]]]]), ["[CLS]", "a"])
    >>> from attnkit.flow.compare import head_edge_counts
    >>> head_edge_counts(ak.attention_graph(a)).tolist()  # layer 0: [CLS]->[CLS], a->[CLS], a->a
    [[3], [2]]
    """
    out = np.zeros((graph.graph["n_layers"], graph.graph["n_heads"]), dtype=np.int64)
    for u, _, hs in graph.edges(data="heads"):
        out[u[0] - 1, hs] += 1
    return out


def _heads(att_a: AttentionLike, att_b: AttentionLike, ga: nx.DiGraph,
           gb: nx.DiGraph) -> pd.DataFrame:
    n_layers, n_heads = att_a.n_layers, att_a.n_heads
    jsd = js_divergence(row_shares(dense_maps(att_a), getattr(att_a, "measure", "weights")),
                        row_shares(dense_maps(att_b), getattr(att_b, "measure", "weights")))  # [L, H, n]
    src_rows = [pos for level, pos in ga.graph["source"] if level == n_layers]
    jsd_src = np.full((n_layers, n_heads), np.nan)
    if src_rows:
        jsd_src[-1] = jsd[-1][:, src_rows].mean(axis=1)
    ca, cb = head_edge_counts(ga), head_edge_counts(gb)
    model = np.where((ca > 0) & (cb > 0), "both",
                     np.where(ca > 0, "a", np.where(cb > 0, "b", "none")))
    return head_frame({"jsd": jsd.mean(-1), "jsd_max": jsd.max(-1), "jsd_source": jsd_src,
                       "edges_a": ca, "edges_b": cb, "model": model})
