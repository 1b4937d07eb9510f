"""A circuit: the edges kept from edge scores, as a graph, and how faithful it is.

:func:`circuit` keeps the edges of largest ``|score|`` of an
:func:`~attnkit.interventions.eap.edge_attribution` table (the ``top`` of them, those above
those whose ``|score|`` is above ``min_score``, or both) as a ``networkx.MultiDiGraph`` over
components: nodes ``"embed"``, ``"pos_embed"``, ``"L-H"``, ``"L-kvG"`` (a key/value head
shared by several query heads, grouped-query attention), ``"L-mlp"``, ``"logits"``
(attributes ``layer``, 0-indexed with the embeddings at −1 and the logits at ``n_layers``,
and ``kind``), one edge per kept ``(upstream, downstream input)`` keyed by the input
(``"q"``, ``"k"``, ``"v"``, ``"in"``, ``"out"``) with its ``score``.

:func:`circuit_faithfulness` runs the clean inputs with every edge *outside* the circuit
patched to the corrupted run (:mod:`attnkit.interventions.edges`) and reports

    faithfulness = (M(circuit) − M(x′)) / (M(x) − M(x′)),

1 when the circuit alone carries the whole clean–corrupted difference, 0 when it carries
none; and the same share for the circuit's top ``k`` edges by ``|score|``, for each ``k`` asked
(the faithfulness curve).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core import validate
from .._compat import renamed
from ..core.labels import parse_head_label, parse_kv_label
from ..core.results import Result
from ..errors import InputError
from . import hooks
from .edges import clean_and_corrupted, edge_graph, pair_batches
from .metrics import Metric, check_gap, resolve

#: Graph attributes every circuit carries.
GRAPH_KEYS = ("metric", "method", "n_layers", "n_heads", "n_kv_heads", "tokens")


def component_kind(name: str) -> str:
    """``"embed"``, ``"head"``, ``"kv"`` (a key/value head shared by several query heads),
    ``"mlp"`` or ``"logits"`` of a component name.

    Parameters
    ----------
    name : str
        A component (``"embed"``, ``"2-1"``, ``"2-kv1"``, ``"1-mlp"``, ``"logits"``).

    Returns
    -------
    str

    Examples
    --------
    >>> from attnkit.interventions.circuit import component_kind
    >>> [component_kind(n) for n in ("pos_embed", "2-1", "2-kv1", "1-mlp", "logits")]
    ['embed', 'head', 'kv', 'mlp', 'logits']
    """
    if name == "logits":
        return "logits"
    if name.endswith("-mlp"):
        return "mlp"
    if parse_kv_label(name) is not None:
        return "kv"
    return "head" if parse_head_label(name) is not None else "embed"


def split_input(downstream: str) -> tuple[str, str]:
    """``(component, input)`` of a downstream input name.

    Parameters
    ----------
    downstream : str
        ``"2-1.k"``, ``"1-mlp.in"`` or ``"logits"``.

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> from attnkit.interventions.circuit import split_input
    >>> split_input("2-1.k"), split_input("logits")
    (('2-1', 'k'), ('logits', 'out'))
    """
    if downstream == "logits":
        return "logits", "out"
    comp, _, via = downstream.rpartition(".")
    return comp, via


def _check_scores(scores: Any) -> pd.DataFrame:
    table = getattr(scores, "table", scores)
    if not isinstance(table, pd.DataFrame) or "score" not in table.columns or \
            list(table.index.names) != ["upstream", "downstream"]:
        raise InputError("scores must be the result of ak.edge_attribution (a table indexed by "
                         "(upstream, downstream) with a 'score' column); got "
                         f"{type(scores).__name__}.")
    if len(table) == 0:
        raise InputError("scores is empty: there is no edge to keep.")
    return table


@renamed(threshold="min_score")
def circuit(scores: Any, *, top: int | None = None, min_score: float | None = None) -> Any:
    """The edges of largest ``|score|`` as a circuit graph (see
    :mod:`attnkit.interventions.circuit`).

    Parameters
    ----------
    scores : Result
        :func:`~attnkit.interventions.eap.edge_attribution`'s table.
    top : int, optional
        Keep the ``top`` edges of largest ``|score|``.
    min_score : float, optional
        Keep the edges whose ``|score|`` is strictly greater than this, in the metric's units
        (not the contract's ``threshold``, an attention weight). With ``top`` too, an edge
        must pass both.

    Returns
    -------
    networkx.MultiDiGraph
        Nodes with ``layer`` and ``kind``; edges ``(upstream, component, key=input)`` with
        ``score`` and ``input``; ``graph`` holds ``metric``, ``method``, ``n_layers``,
        ``n_heads``, ``n_kv_heads``, ``tokens``, ``clean``, ``corrupted``.

    Raises
    ------
    InputError
        When neither ``top`` nor ``min_score`` is given, or they keep no edge.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> s = ak.edge_attribution(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."],
    ...                         metric=ak.interventions.loss())
    >>> G = ak.circuit(s, top=5)
    >>> G.number_of_edges(), G.graph["method"], G.nodes["logits"]["kind"]
    (5, 'eap', 'logits')
    """
    import networkx as nx

    table = _check_scores(scores)
    if top is None and min_score is None:
        raise InputError("circuit: give top= (how many edges to keep) or min_score= (the "
                         "|score| an edge must exceed), or both.")
    mag = table["score"].abs().to_numpy()
    keep = np.ones(len(table), dtype=bool)
    if min_score is not None:
        t = validate.number(min_score, "min_score", low=0.0)
        keep &= mag > t
    if top is not None:
        k = validate.integer(top, "top", minimum=1)
        order = np.argsort(-mag, kind="stable")[:k]
        ranked = np.zeros(len(table), dtype=bool)
        ranked[order] = True
        keep &= ranked
    if not keep.any():
        raise InputError(
            f"min_score={min_score} keeps no edge: the largest |score| is {mag.max():.4g}; "
            "lower it or use top=.")
    meta = getattr(scores, "meta", {})
    kept = table[keep].assign(_mag=mag[keep]).sort_values("_mag", ascending=False, kind="stable")
    G = nx.MultiDiGraph(**{k: meta.get(k) for k in GRAPH_KEYS},
                        clean=meta.get("clean"), corrupted=meta.get("corrupted"))
    for (up, down), row in kept.iterrows():
        comp, via = split_input(down)
        G.add_node(up, layer=int(row["layer_up"]), kind=component_kind(up))
        G.add_node(comp, layer=int(row["layer_down"]), kind=component_kind(comp))
        G.add_edge(up, comp, key=via, score=float(row["score"]), input=via)
    return G


def edges_of(graph: Any) -> list[tuple[str, str, float]]:
    """``(upstream, downstream input, score)`` of every edge of a circuit, by ``|score|``
    (largest first).

    Parameters
    ----------
    graph : networkx.MultiDiGraph
        A circuit (:func:`circuit`).

    Returns
    -------
    list of tuple

    Raises
    ------
    InputError
        For anything that is not a circuit, or an empty one.

    Examples
    --------
    >>> import networkx as nx
    >>> from attnkit.interventions.circuit import edges_of
    >>> G = nx.MultiDiGraph()
    >>> G.add_edge("1-1", "2-1", key="k", score=-0.5, input="k")
    'k'
    >>> G.add_edge("2-1", "logits", key="out", score=0.9, input="out")
    'out'
    >>> edges_of(G)
    [('2-1', 'logits', 0.9), ('1-1', '2-1.k', -0.5)]
    """
    import networkx as nx

    if not isinstance(graph, nx.MultiDiGraph):
        raise InputError("circuit must be a circuit graph (a networkx.MultiDiGraph from "
                         f"ak.circuit or ak.acdc); got {type(graph).__name__}.")
    out = []
    for u, v, key, data in graph.edges(keys=True, data=True):
        via = data.get("input", key)
        down = "logits" if v == "logits" else f"{v}.{via}"
        out.append((u, down, float(data.get("score", 0.0))))
    return sorted(out, key=lambda e: -abs(e[2]))


def circuit_faithfulness(
    model: Any,
    circuit: Any,
    clean: Any,
    corrupted: Any,
    *,
    metric: str | Metric | Any = "auto",
    sizes: Any = None,
    batch_size: int = 32,
    progress: bool = True,
) -> Result:
    """The share of the clean–corrupted gap a circuit keeps when every other edge is
    patched to the corrupted run, and the curve of that share against the edges kept.

    Parameters
    ----------
    model : Model
        The model the circuit is of (:mod:`attnkit.interventions.edges` lists the families).
    circuit : networkx.MultiDiGraph or Result
        A circuit (:func:`circuit`, :func:`~attnkit.interventions.acdc.acdc`), or an
        :func:`~attnkit.interventions.eap.edge_attribution` table (every edge, ranked by score).
    clean, corrupted : sequence
        Matched inputs, the same number of tokens pair by pair.
    metric : str, Metric or callable
        What to measure.
    sizes : sequence of int, optional
        Numbers of edges ``k`` of the curve (each keeps the top ``k`` by ``|score|``);
        default every ``k`` from 0 to the circuit's edges (at most 64 of them, spaced
        geometrically beyond).
    batch_size : int
        Rows per forward pass (edge sets × inputs); the pairs run at most ``batch_size`` at
        a time, so memory grows with ``batch_size``, not with the pairs.
    progress : bool
        Kept for the contract (a few forward passes).

    Returns
    -------
    Result
        Indexed by ``edges`` (``k``), columns ``faithfulness`` and ``metric``. ``meta``:
        ``faithfulness`` (of the whole circuit), ``n_edges``, ``n_total`` (edges of the
        model), ``metric``, ``clean``, ``corrupted``, ``kept`` (the circuit's value of the
        metric), ``n_items``.

    Raises
    ------
    InputError
        For an empty circuit, edges the model does not have, inputs that do not align, or a
        metric that does not tell clean from corrupted.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> clean, corrupted = ["The cat sat."], ["A cat sat."]
    >>> s = ak.edge_attribution(model, clean, corrupted, metric=ak.interventions.loss())
    >>> f = ak.circuit_faithfulness(model, ak.circuit(s, top=3), clean, corrupted,
    ...                             metric=ak.interventions.loss())
    >>> f.table.index.tolist(), abs(float(f.table.loc[0, "faithfulness"])) < 1e-4
    ([0, 1, 2, 3], True)
    """
    validate.model(model, family="text")
    del progress
    size = validate.integer(batch_size, "batch_size", minimum=1)
    if isinstance(circuit, Result) or isinstance(circuit, pd.DataFrame):
        table = _check_scores(circuit)
        order = np.argsort(-table["score"].abs().to_numpy(), kind="stable")
        named = [(str(table.index[i][0]), str(table.index[i][1])) for i in order]
    else:
        named = [(u, d) for u, d, _ in edges_of(circuit)]
        if not named:
            raise InputError("circuit has no edge; keep at least one (ak.circuit(scores, top=1)).")
    m = resolve(metric, model)
    bc, bx = pair_batches(model, clean, corrupted)
    g = edge_graph(model)
    kept = g.index(named, "circuit")
    everything = [(u, d) for u in range(g.valid.shape[0]) for d in range(g.valid.shape[1])
                  if g.valid[u, d]]
    n = len(kept)
    if sizes is None:
        ks = list(range(n + 1)) if n <= 64 else sorted(
            {0, n, *np.unique(np.geomspace(1, n, 63).astype(int)).tolist()})
    else:
        ks = validate.indices(sizes, n + 1, "sizes")
        if not ks:
            raise InputError("sizes is empty; give at least one number of edges.")
    sets = []
    for k in ks:
        keep = set(kept[:k])
        sets.append([e for e in everything if e not in keep])
    if n not in ks:  # the whole circuit, measured with the curve
        sets.append([e for e in everything if e not in set(kept)])
    # at most batch_size pairs at a time; the metric is a mean over the inputs, so each
    # chunk counts by its share of them
    measured = np.zeros(len(sets))
    m_clean = m_corrupted = 0.0
    for s, e in hooks.chunks(bc.size, size):
        runs = clean_and_corrupted(model, bc.rows(s, e), bx.rows(s, e), m,
                                   check=bc.size <= size)
        part = (e - s) / bc.size
        measured += part * runs.measure(sets, batch_size=size)
        m_clean += part * runs.m_clean
        m_corrupted += part * runs.m_corrupted
        del runs  # before the next chunk's runs
    check_gap(m, m_clean, m_corrupted)
    gap = m_clean - m_corrupted
    values = measured[:len(ks)]
    share = (values - m_corrupted) / gap
    full = values[ks.index(n)] if n in ks else measured[-1]
    table = pd.DataFrame({"faithfulness": share, "metric": values},
                         index=pd.Index(ks, name="edges"))
    meta = {"faithfulness": float((full - m_corrupted) / gap), "kept": float(full),
            "n_edges": n, "n_total": len(everything), "metric": m.name, "clean": m_clean,
            "corrupted": m_corrupted, "n_items": bc.size,
            "higher_is_better": m.higher_is_better}
    return Result(table, meta)
