"""Attention flow (Abnar & Zuidema 2020): exact maximum flow through the layered attention graph.

The flow network has ``L + 1`` levels of ``n`` nodes (level 0 = input tokens, level ``l`` =
output of layer ``l``); an edge runs from ``(l, q)`` down to ``(l - 1, k)`` with capacity
``Â_l[q, k]`` (:func:`~attnkit.flow.rollout.residual_attention`: heads averaged, half
identity, rows renormalised). ``attention_flow`` is the maximum-flow value from a node of
the top level to each input token.

How it is computed (exact, and fast)
------------------------------------
Every (source, sink) pair is its own max-flow problem. Only the source's row of the top
matrix and the sink's column of the bottom matrix matter, so each problem is a network of
``(L - 1) * n + 2`` nodes. Many problems are solved at once as one disjoint union hung
between a super-source and a super-sink, with scipy's compiled Dinic algorithm
(:func:`scipy.sparse.csgraph.maximum_flow`), which needs integer capacities.

Scaling capacities to integers alone would not be exact, so the integer solver is used
inside an *iterative refinement* that keeps a float flow ``f`` and a certified bracket
``lower <= maxflow <= upper``:

1. ``lower`` = value of the current float flow ``f`` (feasible for the real capacities);
   ``upper`` = real capacity of the best cut found so far; ``gap = upper - lower`` bounds
   the flow still missing.
2. Each round solves, with integers, the max flow of the *residual* network of ``f``, its
   capacities clipped at ``gap`` (no single edge can carry more than what is missing),
   scaled by ``S ~ 2**bits / gap`` (a power of two; ``bits`` is 23-30, as many as int32
   allows for the number of problems solved together) and rounded down. Rounding down keeps the
   integer flow feasible, so ``f += flow / S`` stays a valid flow of the real network.
3. The nodes the integer solver can still reach from the source form a cut; its real
   capacity gives a new ``upper``.

Each round shrinks the gap by about ``2**bits / (edges in the cut)``; it stops when
``gap <= rtol * lower`` (default ``1e-11``), usually after 2 rounds. The result is the
float flow value, whose distance from the true maximum flow is at most the certified gap
(plus float64 rounding), i.e. it is the exact value for all practical purposes, and it is
checked against :func:`networkx.maximum_flow_value` in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from .._compat import renamed
from ..core import validate
from ..errors import InputError
from ..core.types import AttentionLike
from .rollout import residual_attention

_MAX_CHUNK = 256
_MAX_ENTRIES = 3_000_000  # CSR entries per union graph (memory ~ 100 bytes per entry)


@renamed(positional=("sources", "residual", "rtol", "return_bounds"), att="attentions")
def attention_flow(
    attentions: AttentionLike,
    *,
    sources: int | Iterable[int] | str | None = None,
    residual: float = 0.5,
    rtol: float = 1e-11,
    return_bounds: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Maximum attention flow from top-level positions to every input token.

    Parameters
    ----------
    attentions : the :class:`~attnkit.Attention` of one input (maps ``[L, H, n, n]``).
    sources : where the flow starts, at the last level (the output of the last layer).
        ``None``: the default source of :func:`~attnkit.flow.attention_graph` (the first
        [CLS], or the last token of a causal model or an input without [CLS]); an int: that
        position; a list of ints: those positions; ``"all"``: every position.
    residual : weight of the identity in ``Â = (1 - residual) A + residual I``.
    rtol : relative size of the certified gap at which the refinement stops.
    return_bounds : also return the certified upper bounds.

    Returns
    -------
    float64 ``[n]`` for ``None`` or an int, ``[len(sources), n]`` for a list (``[n, n]`` for
    ``"all"``): entry ``[i, k]`` is the max-flow value from node ``(L, sources[i])`` to input
    token ``(0, k)`` through the network of :func:`flow_network`. Values are not
    normalised (each lies in ``[0, 1]``; a row does not sum to 1). With
    ``return_bounds=True``, a pair ``(values, upper)`` where
    ``values <= true max flow <= upper``.

    Cost: one max-flow problem per (source, token) pair; [CLS] alone at 64 tokens and 12
    layers takes about 3 s on 2 shared CPU cores (docs/benchmarks.md), so ``"all"`` on long
    inputs takes ``n`` times as long.

    Raises
    ------
    InputError
        For ``residual`` outside [0, 1], a source outside the input, or maps that are
        empty, negative or not finite.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]])  # 2 layers, 1 head
    >>> att = ak.Attention.from_maps(maps, ["[CLS]", "a"])
    >>> # Â1 = [[1, 0], [.25, .75]], Â2 = [[.75, .25], [.25, .75]]; from "a" at the top:
    >>> # to [CLS] .25 through each middle node, to "a" .75 through "a" only
    >>> ak.attention_flow(att, sources=1).tolist()
    [0.5, 0.75]
    """
    att = attentions
    caps = residual_attention(att, residual=residual)
    n = caps.shape[1]
    single = sources is None or isinstance(sources, (int, np.integer))
    if sources is None:
        from .graph import resolve_source

        sources = resolve_source(att)[0][1]
    src = _positions(sources, n)
    s = np.repeat(src, n)
    t = np.tile(np.arange(n), len(src))
    lower, upper = layered_max_flow(caps, starts=s, ends=t, rtol=rtol)
    lower = lower.reshape(len(src), n)
    upper = upper.reshape(len(src), n)
    if single:
        lower, upper = lower[0], upper[0]
    return (lower, upper) if return_bounds else lower


@renamed(positional=("residual",), att="attentions")
def flow_network(attentions: AttentionLike, *, residual: float = 0.5) -> nx.DiGraph:
    """The flow network of :func:`attention_flow` as a networkx graph.

    Nodes ``(level, position)`` with attributes ``level``, ``position``, ``token``; an edge
    ``(l, q) -> (l - 1, k)`` with attribute ``capacity = Â_l[q, k]`` for every positive
    entry. ``networkx.maximum_flow_value(g, (L, s), (0, k))`` equals
    ``attention_flow(att, s)[k]``. Holds ``(L + 1) n`` nodes and up to ``L n**2`` edges:
    meant for checking and small inputs.

    Parameters
    ----------
    attentions : AttentionLike
        The attention of one input.
    residual : float
        Weight of the identity in ``Â = (1 - residual) A + residual I``.

    Returns
    -------
    networkx.DiGraph

    Raises
    ------
    InputError
        As :func:`attnkit.flow.rollout.residual_attention`.

    Examples
    --------
    >>> import networkx as nx
    >>> import numpy as np, attnkit as ak
    >>> maps = np.array([[[[1, 0], [0.5, 0.5]]], [[[0.5, 0.5], [0.5, 0.5]]]])  # 2 layers, 1 head
    >>> att = ak.Attention.from_maps(maps, ["[CLS]", "a"])
    >>> g = ak.flow.maxflow.flow_network(att)
    >>> g.number_of_nodes(), nx.maximum_flow_value(g, (2, 1), (0, 0))
    (6, 0.5)
    """
    att = attentions
    caps = residual_attention(att, residual=residual)
    n_layers, n, _ = caps.shape
    g = nx.DiGraph(tokens=list(att.tokens), n_layers=n_layers, residual=residual)
    for level in range(n_layers + 1):
        for pos in range(n):
            g.add_node((level, pos), level=level, position=pos, token=att.tokens[pos])
    for level in range(n_layers, 0, -1):
        q, k = np.nonzero(caps[level - 1] > 0)
        g.add_edges_from(
            ((level, int(a)), (level - 1, int(b)), {"capacity": float(caps[level - 1, a, b])})
            for a, b in zip(q, k)
        )
    return g


@renamed(positional=("sources", "sinks", "rtol", "max_rounds"), caps="maps", sources="starts",
         sinks="ends")
def layered_max_flow(maps: np.ndarray, *, starts: np.ndarray | Sequence[int],
                     ends: np.ndarray | Sequence[int],
                     rtol: float = 1e-11, max_rounds: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Max-flow values in a layered network, for many (start, end) pairs at once.

    Parameters
    ----------
    maps : array_like
        Float ``[L, n, n]`` capacities (non-negative): ``maps[l - 1, q, k]`` is the
        capacity of the edge from ``(l, q)`` to ``(l - 1, k)`` (:func:`residual_attention`).
    starts, ends : array_like of int
        Pair ``i`` asks for the max flow from ``(L, starts[i])`` to ``(0, ends[i])``.
    rtol : float
        Relative size of the certified gap at which the refinement stops.
    max_rounds : int
        Refinement rounds at most (see the module docstring for the method).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``(lower, upper)``, float64 ``[len(sources)]`` each: ``lower`` is the value of a
        feasible flow found, ``upper`` the capacity of a cut; the true max flow lies between
        them and ``upper - lower <= rtol * lower`` unless ``max_rounds`` ran out.

    Raises
    ------
    InputError
        For capacities of the wrong shape, negative or not finite, or positions outside
        ``0..n-1``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.flow.maxflow import layered_max_flow
    >>> caps = np.array([[[1, 0], [0.25, 0.75]], [[0.75, 0.25], [0.25, 0.75]]])
    >>> lower, upper = layered_max_flow(caps, starts=[1, 1], ends=[0, 1])
    >>> lower.tolist(), bool(np.all(upper - lower <= 1e-11 * lower))
    ([0.5, 0.75], True)
    """
    caps = np.asarray(maps, dtype=np.float64)
    if caps.ndim != 3 or caps.shape[1] != caps.shape[2]:
        raise InputError(f"maps (the capacities) must have shape [L, n, n]; got {caps.shape}.")
    if not np.all(np.isfinite(caps)) or np.any(caps < 0):
        raise InputError("maps (the capacities) must be finite and non-negative.")
    max_rounds = validate.size(max_rounds, "max_rounds")
    n_layers, n, _ = caps.shape
    sources = validate.positions(np.asarray(starts).ravel() if np.ndim(starts) > 1 else starts, n,
                                 "starts")
    sinks = validate.positions(np.asarray(ends).ravel() if np.ndim(ends) > 1 else ends, n, "ends")
    if sources.shape != sinks.shape:
        raise InputError("starts and ends must have the same length.")
    if n_layers == 1:
        v = caps[0][sources, sinks].copy()
        return v, v.copy()
    net = _Template(caps)
    lower = np.empty(len(sources))
    upper = np.empty(len(sources))
    chunk = int(max(1, min(_MAX_CHUNK, _MAX_ENTRIES // max(net.n_entries, 1))))
    for start in range(0, len(sources), chunk):
        sl = slice(start, start + chunk)
        lower[sl], upper[sl] = net.solve(sources[sl], sinks[sl], rtol, max_rounds)
    return lower, upper


def _positions(sources, n: int) -> np.ndarray:
    if isinstance(sources, str):
        if sources != "all":
            raise InputError(f"sources must be None, positions or 'all'; got {sources!r}.")
        return np.arange(n)
    return validate.positions(sources, n, "sources", empty=False)


@dataclass
class _Template:
    """CSR layout of one (source, sink) problem, shared by every problem of a union.

    Local nodes: 0 = the sink ``(0, t)``, ``1 + (m - 1) n + v`` = ``(m, v)`` for the middle
    levels ``m = 1..L-1``, ``Nc - 1`` = the source ``(L, s)``. Original edges: the source's
    ``n`` top edges, the positive middle edges, the ``n`` bottom edges into the sink.
    """

    caps: np.ndarray

    def __post_init__(self) -> None:
        caps = self.caps
        n_layers, n, _ = caps.shape
        self.n = n
        self.n_nodes = nc = 2 + (n_layers - 1) * n
        mid = lambda m, v: 1 + (m - 1) * n + v  # noqa: E731
        src_local, snk_local = nc - 1, 0
        k = np.arange(n)
        eu = [np.full(n, src_local)]
        ev = [mid(n_layers - 1, k)]
        mid_caps = []
        for m in range(n_layers - 1, 1, -1):
            q, w = np.nonzero(caps[m - 1] > 0)
            eu.append(mid(m, q))
            ev.append(mid(m - 1, w))
            mid_caps.append(caps[m - 1][q, w])
        eu.append(mid(1, k))
        ev.append(np.full(n, snk_local))
        self.eu = np.concatenate(eu).astype(np.int64)
        self.ev = np.concatenate(ev).astype(np.int64)
        self.mid_caps = np.concatenate(mid_caps) if mid_caps else np.zeros(0)
        n_edges = len(self.eu)
        self.n_edges = n_edges
        # entries: forward (u, v), backward (v, u), source -> super-source, sink -> super-sink
        rows = np.concatenate([self.eu, self.ev, [src_local, snk_local]])
        cols = np.concatenate([self.ev, self.eu, [-1, nc]])  # -1 / nc sort first / last
        order = np.lexsort((cols, rows))
        pos = np.empty_like(order)
        pos[order] = np.arange(len(order))
        self.pos_fwd = pos[:n_edges]
        self.pos_bwd = pos[n_edges:2 * n_edges]
        self.pos_src = pos[2 * n_edges]
        self.pos_snk = pos[2 * n_edges + 1]
        self.ent_col = cols[order]
        self.row_counts = np.bincount(rows, minlength=nc)
        self.n_entries = len(order)
        self._layouts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def layout(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """indptr, indices of a union of ``b`` problems (super-source 0, super-sink last)."""
        if b not in self._layouts:
            nc = self.n_nodes
            n_total = b * nc + 2
            counts = np.concatenate([[b], np.tile(self.row_counts, b), [b]])
            indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
            comp = (1 + np.arange(b) * nc)[:, None] + self.ent_col[None, :]
            comp[:, self.pos_src] = 0
            comp[:, self.pos_snk] = n_total - 1
            indices = np.concatenate([
                1 + np.arange(b) * nc + (nc - 1),  # super-source -> each source
                comp.ravel(),
                1 + np.arange(b) * nc,  # super-sink -> each sink (reverse edges)
            ]).astype(np.int32)
            self._layouts = {b: (indptr, indices)}  # keep only the latest size
        return self._layouts[b]

    def solve(self, sources, sinks, rtol, max_rounds):
        caps = self.caps
        n = self.n
        b_all = len(sources)
        c = np.empty((b_all, self.n_edges))
        c[:, :n] = caps[-1][sources]
        c[:, n:self.n_edges - n] = self.mid_caps
        c[:, self.n_edges - n:] = caps[0][:, sinks].T
        f = np.zeros_like(c)
        lower = np.zeros(b_all)
        upper = np.minimum(c[:, :n].sum(1), c[:, -n:].sum(1))
        for _ in range(max_rounds):
            gap = np.maximum(upper - lower, 0.0)
            todo = np.flatnonzero((gap > rtol * lower) & (gap > 1e-250))
            if todo.size == 0:
                break
            self._round(c, f, todo, gap[todo], upper)
            lower = f[:, :n].sum(1)
        return lower, np.maximum(upper, lower)

    def _round(self, c_all, f_all, todo, gap, upper) -> None:
        """One integer max-flow round on the residual networks of problems ``todo``."""
        b = len(todo)
        nc = self.n_nodes
        c, f = c_all[todo], f_all[todo]
        # scipy's capacities and flow value are int32: b problems of <= 2**bits + 1 each
        bits = min(30, int(np.floor(np.log2((2.0 ** 31 - 1) / b - 1))))
        scale = np.exp2(np.floor(np.log2(2.0 ** bits / gap)))
        g = gap[:, None]
        s = scale[:, None]
        sup = np.floor(gap * scale) + 1  # never saturated: the component's flow <= gap * scale
        data = np.zeros((b, self.n_entries), dtype=np.int32)
        # values are >= 0, so the truncating cast rounds down
        data[:, self.pos_fwd] = (np.minimum(c - f, g) * s).astype(np.int32)
        data[:, self.pos_bwd] = (np.minimum(f, g) * s).astype(np.int32)
        data[:, self.pos_snk] = sup
        ends = np.zeros(b, dtype=np.int32)
        all_data = np.concatenate([sup.astype(np.int32), data.ravel(), ends])
        indptr, indices = self.layout(b)
        n_total = b * nc + 2
        graph = sp.csr_matrix((all_data, indices, indptr), shape=(n_total, n_total))
        graph.has_sorted_indices = True
        res = maximum_flow(graph, 0, n_total - 1, method="dinic")
        flow = res.flow
        if not (np.array_equal(flow.indptr, indptr) and np.array_equal(flow.indices, indices)):
            flow_data = _lookup(flow, indptr, indices)  # scipy changed its output layout
        else:
            flow_data = np.asarray(flow.data)
        comp_flow = flow_data[b:-b].reshape(b, self.n_entries)
        net = comp_flow[:, self.pos_fwd].astype(np.float64)
        f += net / s
        np.clip(f, 0.0, c, out=f)
        f_all[todo] = f
        # the nodes still reachable from the super-source in the integer residual graph
        resid = (all_data.astype(np.int64) - flow_data) > 0
        rgraph = sp.csr_matrix((resid.astype(np.int8), indices.copy(), indptr.copy()), shape=graph.shape)
        rgraph.eliminate_zeros()  # in place: hence the copies of the cached layout
        reach = np.zeros(n_total, dtype=bool)
        reach[breadth_first_order(rgraph, 0, directed=True, return_predecessors=False)] = True
        reach = reach[1:-1].reshape(b, nc)
        crossing = reach[:, self.eu] & ~reach[:, self.ev]
        cut = np.where(crossing, c, 0.0).sum(1)
        upper[todo] = np.minimum(upper[todo], cut)


def _lookup(flow, indptr, indices) -> np.ndarray:
    """Values of a CSR ``flow`` at the entries of the layout ``(indptr, indices)``."""
    flow = flow.tocsr()
    flow.sort_indices()
    n = flow.shape[0]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(flow.indptr))
    keys = rows * n + flow.indices
    want = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) * n + indices
    pos = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
    hit = keys[pos] == want if len(keys) else np.zeros(len(want), bool)
    return np.where(hit, np.asarray(flow.data)[pos] if len(keys) else 0, 0).astype(np.int64)
