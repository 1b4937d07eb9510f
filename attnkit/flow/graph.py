"""The attention graph of DeRose, Wang & Berger (2020), §4.1, and its brushing queries.

Levels: with ``L`` attention layers there are ``L + 1`` node levels. Level 0 holds the
input tokens, level ``l`` the outputs of layer ``l`` (maps index ``l - 1``). A node is
``(level, position)``. An edge runs *down* from ``(l, q)`` to ``(l - 1, k)`` when
``maps[l - 1, h, q, k] > threshold`` for some allowed head ``h``: position ``q`` of layer
``l`` attends (row = from) to position ``k`` of the layer below (column = to).

The graph is traced backward from the source (by default [CLS] after the last layer, or the
last token of a causal model): only nodes reachable from the source along such edges are
kept, as in the paper.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable

import networkx as nx
import numpy as np
import pandas as pd

from .._compat import renamed
from ..core import validate
from ..core.blocks import bands
from ..core.cross import Seq2SeqAttention
from ..errors import InputError
from ..core.types import AttentionLike, HeadId, Sources
from .seq2seq import seq2seq_graph

Node = tuple[int, int]


@renamed(positional=("threshold", "heads", "source"), att="attentions", source="sources")
def attention_graph(
    attentions: AttentionLike,
    *,
    threshold: float = 0.3,
    heads: Iterable[HeadId] | None = None,
    sources: Sources = None,
) -> nx.DiGraph:
    """Trace the attention graph of one input backward from its sources (DeRose et al. 2020).

    Parameters
    ----------
    attentions : Attention or Seq2SeqAttention
        One input's attention, maps ``[L, H, n, n]`` (rows = from, columns = to). Maps of
        a measure other than weights are read as each row's shares
        (:func:`~attnkit.core.attention.row_shares`), and edge weights are those shares. The
        attention of an encoder–decoder pair is traced through the decoder into the encoder
        (:func:`attnkit.flow.seq2seq_graph`).
    threshold : float
        An attention weight must be strictly greater than this to make an edge.
    heads : iterable of (layer, head), optional
        Pairs (0-indexed, ``layer`` = maps index) whose attention may create edges;
        ``None`` allows every head.
    sources : int, list of int, list of (level, position), or None
        Where tracing starts. ``None``: ``(L, first [CLS] position)``, or ``(L, n - 1)``
        for a causal model or an input without [CLS]. An int or a list of ints: positions
        at level ``L``. A list of ``(level, position)`` node ids: those nodes.

    Returns
    -------
    networkx.DiGraph with nodes ``(level, position)`` (attributes ``level``, ``position``,
    ``token``, ``role``) and edges ``(l, q) -> (l - 1, k)`` with attributes ``heads`` (head
    indices of layer ``l - 1``, ascending), ``weights`` (their attention weights, same
    order) and ``weight`` (the largest). Graph attributes: ``tokens``, ``roles``, ``n_layers``,
    ``n_heads``, ``source`` (list of node ids), ``threshold``, ``heads`` (the allowed pairs,
    or None).

    Raises
    ------
    InputError
        For a threshold outside [0, 1), heads or sources outside the model, cross-attention
        alone, or ``heads`` with an encoder–decoder pair.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.2, 0.6]]]])  # 1 layer, 1 head
    >>> g = ak.attention_graph(ak.Attention.from_maps(maps, ["a", "b", "c"]), sources=[2])
    >>> sorted(g.edges)
    [((1, 2), (0, 2))]
    """
    if isinstance(attentions, Seq2SeqAttention):
        if heads is not None:
            raise InputError("heads= does not apply to the graph of an encoder-decoder (its "
                             "edges are the heads' mean); select heads of .encoder, .decoder or "
                             ".cross and trace those.")
        return seq2seq_graph(attentions, threshold=threshold, sources=sources)
    if hasattr(attentions, "n_columns"):
        raise InputError("Cross-attention alone does not make an attention graph (its rows and "
                         "columns are different sequences); pass the whole "
                         "Seq2SeqModel.attend(source, target) result to trace through the "
                         "decoder into the encoder.")
    att = attentions
    n_layers, n_heads = att.n_layers, att.n_heads
    threshold = validate.number(threshold, "threshold")
    if not 0.0 <= threshold < 1.0:
        raise InputError(f"threshold must lie in [0, 1); got {threshold}. Edges need "
                         "attention > threshold, and attention weights are at most 1.")
    allowed, heads_list = _allowed_heads(heads, n_layers, n_heads)
    source_nodes = resolve_source(att, sources=sources)
    with _gc_paused():
        return _trace(att, float(threshold), allowed, heads_list, source_nodes)


@contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while a graph is built.

    Building thousands of small dicts and lists triggers full collections, each of which
    walks every object of the process (with torch and transformers loaded, millions): it
    made graph building 3-5x slower. The graph has no cycles to collect, and the previous
    state is restored on exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _trace(att, threshold, allowed, heads_list, sources) -> nx.DiGraph:
    n_layers, n_heads, n = att.n_layers, att.n_heads, len(att)

    g = nx.DiGraph(tokens=list(att.tokens), roles=[str(r) for r in att.roles],
                   n_layers=n_layers, n_heads=n_heads,
                   source=sources, threshold=threshold, heads=heads_list)
    frontier: dict[int, set[int]] = {}
    for level, pos in sources:
        frontier.setdefault(level, set()).add(pos)
        g.add_node((level, pos), **_node_attrs(att, level, pos))
    for level in range(n_layers, 0, -1):
        rows = np.array(sorted(frontier.get(level, ())), dtype=np.int64)
        head_ids = np.flatnonzero(allowed[level - 1])
        if rows.size == 0 or head_ids.size == 0:
            continue
        r_idx, k_idx, h_idx, w = _hits(att, level - 1, head_ids, rows, threshold)
        if r_idx.size == 0:
            continue
        pair = r_idx * n + k_idx
        starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        bounds = list(zip(starts.tolist(), np.r_[starts[1:], len(pair)].tolist()))
        # bulk conversion to Python lists, then slicing: far faster than per-edge numpy
        hs_all = head_ids[h_idx].tolist()
        w_all = w.tolist()
        w_max = np.maximum.reduceat(w, starts).tolist()
        qs = rows[r_idx[starts]].tolist()
        ks = k_idx[starts].tolist()
        below = frontier.setdefault(level - 1, set())
        new = sorted(set(ks) - below)
        below.update(new)
        g.add_nodes_from(((level - 1, k), _node_attrs(att, level - 1, k)) for k in new)
        g.add_edges_from(
            ((level, q), (level - 1, k),
             {"heads": hs_all[a:b], "weights": w_all[a:b], "weight": wm})
            for q, k, (a, b), wm in zip(qs, ks, bounds, w_max)
        )
    return g


def _hits(att, layer: int, head_ids: np.ndarray, rows: np.ndarray, threshold: float):
    """Every head edge of one layer from the given rows: ``(row index into rows, key,
    index into head_ids, weight)``, sorted by row, key, head.

    Read through :func:`attnkit.core.blocks.bands` (maps of another measure than weights as each
    row's shares) over the columns the rows can see: the heads together when they fit in one
    band, else head by head, band by band, so no ``[n, n]`` map of all heads is held.
    """
    parts = []
    for band in bands(att, layer, head_ids.tolist(), rows=rows, shares=True):
        h, r, k = np.nonzero(band.values > threshold)
        first = int(np.searchsorted(rows, band.span.start))  # band rows are rows[first:...]
        heads = np.searchsorted(head_ids, np.asarray(band.heads))
        parts.append((r + first, k + band.cols.start, heads[h], band.values[h, r, k]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(0)
    r_idx, k_idx, h_idx, w = (np.concatenate([p[i] for p in parts]) for i in range(4))
    order = np.lexsort((h_idx, k_idx, r_idx))
    return r_idx[order], k_idx[order], h_idx[order], w[order].astype(np.float64)


@renamed(positional=("sources",), att="attentions", source="sources")
def resolve_source(attentions: AttentionLike, *, sources: Sources = None) -> list[Node]:
    """The source node ids :func:`attention_graph` starts from.

    Parameters
    ----------
    attentions : AttentionLike
        Attention of one input.
    sources : int, list, (level, position) or list of them, optional
        Positions (at the top level) or node ids; ``None`` is [CLS] (the last token of a
        causal model or of an input without [CLS]).

    Returns
    -------
    list of (int, int)
        ``(level, position)`` node ids, without repeats, in the order given.

    Raises
    ------
    InputError
        For an empty list, or a node outside the graph's levels and positions.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> from attnkit.flow import resolve_source
    >>> att = ak.Attention.from_maps(np.full((2, 1, 3, 3), 1 / 3), ["[CLS]", "a", "[SEP]"])
    >>> resolve_source(att), resolve_source(att, sources=[2, (1, 0)])
    ([(2, 0)], [(2, 2), (1, 0)])
    """
    att, source = attentions, sources
    n_layers = att.n_layers
    n = len(att)
    if source is None:
        cls = np.flatnonzero(np.asarray(att.roles) == "cls")
        pos = n - 1 if att.causal or len(cls) == 0 else int(cls[0])
        return [(n_layers, pos)]
    if isinstance(source, (str, bytes, bool, np.bool_, float)) or not (
            isinstance(source, (int, np.integer, tuple)) or isinstance(source, Iterable)):
        raise InputError(f"sources must be a position, a list of positions or (level, position) "
                         f"node ids; got {source!r}.")
    items = [source] if isinstance(source, (int, np.integer, tuple)) else list(source)
    if not items:
        raise InputError("sources is empty; give a position, a list of positions or node ids.")
    nodes = []
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            try:
                level = validate.index(item[0], n_layers + 1, "sources: level")
                pos = validate.index(item[1], n, "sources: position")
            except InputError as exc:
                raise InputError(f"{exc} (node {item!r}; levels 0..{n_layers}, positions "
                                 f"0..{n - 1})") from None
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            level, pos = n_layers, validate.index(item, n, "sources")
        else:
            raise InputError(f"sources entries must be positions or (level, position) node ids; "
                             f"got {item!r}.")
        if (level, pos) not in nodes:
            nodes.append((level, pos))
    return nodes


def _allowed_heads(heads, n_layers: int, n_heads: int):
    allowed = np.ones((n_layers, n_heads), dtype=bool)
    if heads is None:
        return allowed, None
    allowed[:] = False
    pairs = validate.head_pairs(heads, n_layers, n_heads)
    for layer, head in pairs:
        allowed[layer, head] = True
    return allowed, pairs


def _node_attrs(att: AttentionLike, level: int, pos: int) -> dict:
    return {"level": level, "position": pos, "token": att.tokens[pos],
            "role": str(att.roles[pos])}


def _as_node(g: nx.DiGraph, item) -> Node:
    if isinstance(item, (bool, np.bool_)):  # not position 0 or 1
        raise InputError(f"A node is a (level, position) pair or an input position; got {item!r}.")
    if isinstance(item, (int, np.integer)):
        node = (0, int(item))
    elif isinstance(item, tuple) and len(item) == 2:
        node = (int(item[0]), int(item[1]))
    else:
        raise InputError(f"A node is a (level, position) pair or an input position; got {item!r}.")
    if node not in g:
        raise InputError(f"Node {node} is not in the attention graph (it is not reached from "
                         f"the source {g.graph.get('source')} at this threshold).")
    return node


def _copy_graph_attrs(src: nx.DiGraph, dst: nx.DiGraph) -> nx.DiGraph:
    dst.graph.update(src.graph)
    return dst


@renamed(g="graph")
def subgraph_through(graph: nx.DiGraph, nodes: Iterable[Node | int] | Node | int) -> nx.DiGraph:
    """The paper's brushing: the part of ``g`` that passes through every selected node.

    For one node ``v`` the subgraph through ``v`` holds every edge on a path from the
    source down to ``v`` and every edge on a path from ``v`` down to the inputs. With
    several nodes the result is the *intersection* of their subgraphs (edges present in
    all of them), plus the selected nodes themselves.

    Parameters
    ----------
    graph : networkx.DiGraph
        An attention graph (:func:`attention_graph`).
    nodes : node, int or iterable of them
        ``(level, position)`` node ids, or ints meaning input positions (level 0).

    Returns
    -------
    networkx.DiGraph
        A new graph with the node/edge attributes of ``graph`` and graph attribute
        ``selected`` (the node ids).

    Raises
    ------
    InputError
        When no node is given or a node is not in the graph.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.4, 0.5]]],   # layer 1
    ...                  [[[1, 0, 0], [0, 1, 0], [0.4, 0.6, 0]]]])        # layer 2
    >>> g = ak.attention_graph(ak.Attention.from_maps(maps, ["a", "b", "c"]), sources=[2])
    >>> sorted(g.edges)  # weights above 0.3: c at the top takes from a and b below, ...
    [((1, 0), (0, 0)), ((1, 1), (0, 0)), ((1, 1), (0, 1)), ((2, 2), (1, 0)), ((2, 2), (1, 1))]
    >>> sorted(ak.subgraph_through(g, (1, 1)).edges)  # only what passes through b at level 1
    [((1, 1), (0, 0)), ((1, 1), (0, 1)), ((2, 2), (1, 1))]
    """
    g = graph
    items = [nodes] if isinstance(nodes, (int, np.integer, tuple)) else list(nodes)
    if not items:
        raise InputError("Select at least one node.")
    selected = [_as_node(g, x) for x in items]
    edge_sets = []
    for v in selected:
        up = nx.ancestors(g, v) | {v}
        down = nx.descendants(g, v) | {v}
        edges = {e for e in g.subgraph(up).edges} | {e for e in g.subgraph(down).edges}
        edge_sets.append(edges)
    keep = set.intersection(*edge_sets)
    out = nx.DiGraph()
    for v in selected:
        out.add_node(v, **g.nodes[v])
    for a, b in keep:
        out.add_node(a, **g.nodes[a])
        out.add_node(b, **g.nodes[b])
        out.add_edge(a, b, **g.edges[a, b])
    _copy_graph_attrs(g, out)
    out.graph["selected"] = selected
    return out


@dataclass
class PathQuery:
    """Every path between two nodes of an attention graph (paper §4.4.2).

    Parameters
    ----------
    upper, lower : Node
        The two ``(level, position)`` nodes.
    graph : networkx.DiGraph
        The subgraph made of all those paths (edges with their ``heads``/``weights``).
    tokens : pandas.DataFrame
        The intermediate nodes, one row each, columns ``level``, ``position``, ``token``;
        ordered from the upper node down.
    edges : pandas.DataFrame
        One row per (edge, head): ``layer`` (maps index, the upper level minus 1), ``head``,
        ``from_level``, ``from_position``, ``from_token``, ``to_level``, ``to_position``,
        ``to_token``, ``weight``.
    n_paths : int
        Number of distinct node paths from the upper to the lower node.
    """

    upper: Node
    lower: Node
    graph: nx.DiGraph
    tokens: pd.DataFrame
    edges: pd.DataFrame
    n_paths: int


@renamed(g="graph")
def paths_between(graph: nx.DiGraph, a: Node | int, b: Node | int) -> PathQuery:
    """All paths in ``g`` between nodes ``a`` and ``b`` in different levels.

    The node with the higher level is the start (edges point down). Nodes are
    ``(level, position)`` ids or ints meaning input positions. When no path joins them the
    result is empty (``n_paths == 0``).

    Parameters
    ----------
    graph : networkx.DiGraph
        An attention graph (:func:`attention_graph`).
    a, b : node or int
        The two ends, in different levels.

    Returns
    -------
    PathQuery
        The paths' subgraph, intermediate tokens, edges (one row per head) and count.

    Raises
    ------
    InputError
        When the nodes are in the same level or not in the graph.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.4, 0.5]]],   # layer 1
    ...                  [[[1, 0, 0], [0, 1, 0], [0.4, 0.6, 0]]]])        # layer 2
    >>> g = ak.attention_graph(ak.Attention.from_maps(maps, ["a", "b", "c"]), sources=[2])
    >>> sorted(g.edges)  # weights above 0.3: c at the top takes from a and b below, ...
    [((1, 0), (0, 0)), ((1, 1), (0, 0)), ((1, 1), (0, 1)), ((2, 2), (1, 0)), ((2, 2), (1, 1))]
    >>> q = ak.paths_between(g, (2, 2), 0)  # from c at the top to input a
    >>> q.n_paths, q.tokens["token"].tolist()   # through a and through b at level 1
    (2, ['a', 'b'])
    """
    g = graph
    a, b = _as_node(g, a), _as_node(g, b)
    if a[0] == b[0]:
        raise InputError(f"Nodes {a} and {b} are in the same level; a path query joins "
                         "nodes of different levels.")
    upper, lower = (a, b) if a[0] > b[0] else (b, a)
    between = (nx.descendants(g, upper) | {upper}) & (nx.ancestors(g, lower) | {lower})
    sub = nx.DiGraph()
    if lower in nx.descendants(g, upper):
        for v in between:
            sub.add_node(v, **g.nodes[v])
        for u, v in g.subgraph(between).edges:
            sub.add_edge(u, v, **g.edges[u, v])
    _copy_graph_attrs(g, sub)
    count: dict[Node, int] = {upper: 1}
    for level in range(upper[0] - 1, lower[0] - 1, -1):
        for v in (x for x in sub if x[0] == level):
            count[v] = sum(count.get(u, 0) for u in sub.predecessors(v))
    n_paths = count.get(lower, 0) if len(sub) else 0
    mids = sorted((v for v in sub if v not in (upper, lower)), key=lambda v: (-v[0], v[1]))
    tokens = pd.DataFrame(
        [{"level": v[0], "position": v[1], "token": sub.nodes[v]["token"]} for v in mids],
        columns=["level", "position", "token"],
    )
    rows = []
    for u, v, d in sorted(sub.edges(data=True), key=lambda e: (-e[0][0], e[0][1], e[1][1])):
        for h, w in zip(d["heads"], d["weights"]):
            rows.append({"layer": u[0] - 1, "head": h, "from_level": u[0], "from_position": u[1],
                         "from_token": sub.nodes[u]["token"], "to_level": v[0],
                         "to_position": v[1], "to_token": sub.nodes[v]["token"], "weight": w})
    edges = pd.DataFrame(rows, columns=["layer", "head", "from_level", "from_position",
                                        "from_token", "to_level", "to_position", "to_token",
                                        "weight"])
    return PathQuery(upper=upper, lower=lower, graph=sub, tokens=tokens, edges=edges,
                     n_paths=int(n_paths))
