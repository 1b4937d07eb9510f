"""CircuitView and RoutesView: circuits and information-flow routes as layered graphs.

Both draw one layered graph (rows bottom to top, nodes in a row, edges between them) with one
front end (``js/src/lib/layered.ts``):

- :class:`CircuitView` draws a circuit, the ``networkx.MultiDiGraph`` of ``ak.circuit``
  (components by layer: embeddings at the bottom, each layer's heads in a row with its MLP
  last, the logits on top; each edge ``up -> down`` keyed by the input it enters, ``"q"``,
  ``"k"``, ``"v"``, ``"in"`` or ``"out"``), or two circuits side by side with their shared
  and unique edges, as Attention Flows compares a pre-trained and a fine-tuned model;
- :class:`RoutesView` draws the routes of :func:`attnkit.flow_routes` over the tokens: one
  row per level, one column per token the routes reach.

The views only draw: the graphs come from the analyses. Tokens and component names reach the
browser as text; numbers as binary arrays.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
import traitlets
from matplotlib.figure import Figure

from ..core import validate
from ..core.labels import head_label, parse_head_label, parse_kv_label
from ..errors import InputError
from ..plot.common import mpl_text
from ._base import SelectsHead
from ._codec import read, wire

#: The inputs an edge of a circuit can enter, in the wire's order (``edge_port``).
PORTS = ("", "q", "k", "v", "in", "out")
#: Node kinds of a circuit (``ak.circuit``'s schema; ``"kv"``: a key/value head shared by
#: several query heads, grouped-query attention).
KINDS = ("embed", "head", "kv", "mlp", "logits")
#: Colours of the static figure: positive, negative; in both, only the first, only the second.
SIGN_COLORS = ("#2166ac", "#b2182b")
GROUP_COLORS = ("#8c8c8c", "#1a9e9e", "#7b3294")
#: Routes: through heads, the residual, both (as js/src/lib/layered.ts).
ROUTE_COLORS = ("#1a6e9e", "#9a9a9a", "#1a9e9e")
#: Dash of an edge by the input it enters (q solid, k dashed, v dotted), as the front end draws.
DASHES = {"q": "solid", "k": (0, (5, 2)), "v": (0, (1, 2))}


class _LayeredGraph(SelectsHead):
    """The traits both views send: nodes (label, row, order within the row, the head it is),
    edges (ends, score, input, group, the head they select, tooltip text)."""

    node_labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    node_rows = traitlets.Dict().tag(sync=True)
    node_order = traitlets.Dict().tag(sync=True)
    node_heads = traitlets.Dict().tag(sync=True)
    node_marks = traitlets.Dict().tag(sync=True)
    mark_name = traitlets.Unicode("").tag(sync=True)
    row_labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    edge_from = traitlets.Dict().tag(sync=True)
    edge_to = traitlets.Dict().tag(sync=True)
    edge_score = traitlets.Dict().tag(sync=True)
    edge_port = traitlets.Dict().tag(sync=True)
    edge_group = traitlets.Dict().tag(sync=True)
    edge_heads = traitlets.Dict().tag(sync=True)
    edge_text = traitlets.List(traitlets.Unicode()).tag(sync=True)
    group_names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    signed = traitlets.Bool(True).tag(sync=True)
    shared_x = traitlets.Bool(False).tag(sync=True)
    slots = traitlets.Int(0).tag(sync=True)
    selected_edge = traitlets.Int(-1).tag(sync=True)
    n_edges = traitlets.Int(0).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)

    def _put(self, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> None:
        """Put ``nodes`` (label, row, order, head, mark) and ``edges`` (src, dst, score, port,
        group, head, text) on the wire."""
        heads = np.array([n["head"] for n in nodes], dtype=np.int32).reshape(-1, 2)
        eheads = np.array([e["head"] for e in edges], dtype=np.int32).reshape(-1, 2)
        self.set_trait("n_edges", len(edges))
        with self.hold_sync():
            self.node_labels = [str(n["label"]) for n in nodes]
            self.node_rows = wire([n["row"] for n in nodes], "int32")
            self.node_order = wire([n["order"] for n in nodes], "float32")
            self.node_heads = wire(heads, "int32")
            self.node_marks = wire([n.get("mark", 0.0) for n in nodes], "float32")
            self.edge_from = wire([e["src"] for e in edges], "int32")
            self.edge_to = wire([e["dst"] for e in edges], "int32")
            self.edge_score = wire([e["score"] for e in edges], "float32")
            self.edge_port = wire([PORTS.index(e["port"]) for e in edges], "uint8")
            self.edge_group = wire([e["group"] for e in edges], "uint8")
            self.edge_heads = wire(eheads, "int32")
            self.edge_text = [str(e["text"]) for e in edges]
        self._nodes, self._edges = nodes, edges

    @traitlets.validate("selected_edge")
    def _check_edge(self, proposal: dict) -> int:
        value = validate.integer(proposal["value"], "selected_edge")
        if value == -1:
            return -1
        return validate.index(value, max(1, self.n_edges), "selected_edge") if self.n_edges \
            else -1

    @traitlets.observe("selected_edge")
    def _edge_picked(self, change: dict) -> None:
        i = change["new"]
        if i >= 0:
            head = self._edges[i]["head"]
            if head[0] >= 0 and self.selected != list(head):
                self.selected = list(head)

    def select_edge(self, up: Any, down: Any, key: Any = None) -> int:
        """Select the drawn edge from node ``up`` to node ``down`` (entering input ``key``,
        for a circuit), as a click on it does: a linked heatmap shows the head it enters.

        Parameters
        ----------
        up, down : node ids
            The edge's ends as in the graph.
        key : str, optional
            The input (``"q"``, ``"k"``, ``"v"``, ...) where two edges join the same nodes.

        Returns
        -------
        int
            The edge's index in the view (``selected_edge``).

        Raises
        ------
        InputError
            When the view draws no such edge.

        Examples
        --------
        >>> import networkx as nx, attnkit as ak
        >>> g = nx.MultiDiGraph(n_layers=1, n_heads=1, tokens=None, metric="m", method="hand")
        >>> g.add_node("embed", layer=-1, kind="embed"); g.add_node("1-1", layer=0, kind="head")
        >>> g.add_node("logits", layer=1, kind="logits")
        >>> _ = g.add_edge("embed", "1-1", key="v", score=0.5, input="v")
        >>> _ = g.add_edge("1-1", "logits", key="out", score=1.0, input="out")
        >>> view = ak.CircuitView(g)
        >>> view.select_edge("embed", "1-1", "v"), view.selected  # edges are drawn strongest first
        (1, [0, 0])
        """
        for i, e in enumerate(self._edges):
            if e["ids"][:2] == (up, down) and (key is None or e["ids"][2] == key):
                self.selected_edge = i
                return i
        raise InputError(f"this view draws no edge {up!r} -> {down!r}"
                         + (f" into {key!r}" if key is not None else "") + ".")

    def link(self, heatmap: Any) -> Any:
        """Link a view: a :class:`~attnkit.Heatmap` shows the head of the selected edge (and
        selects the head the heatmap steps to, as :meth:`SelectsHead.link`); a
        :class:`~attnkit.ScoreView` shows why the head a selected *key* edge enters attends,
        at the input's last position (a CircuitView given ``model`` and ``inputs``).

        Returns the view, so ``circuit_view.link(ak.Heatmap(att))`` can be displayed directly.
        """
        from .score import ScoreView

        if not isinstance(heatmap, ScoreView):
            return super().link(heatmap)
        if getattr(self, "_model", None) is None:
            raise InputError("Linking a ScoreView needs the model and inputs: "
                             "CircuitView(graph, model=model, inputs=text).")
        self._scores = heatmap
        return heatmap

    # the static figure ------------------------------------------------------
    def _positions(self) -> tuple[np.ndarray, np.ndarray]:
        rows = np.asarray(read(self.node_rows), dtype=np.float64)
        order = np.asarray(read(self.node_order), dtype=np.float64)
        x = np.zeros(len(rows))
        if self.slots > 0:
            x = order.copy()
        elif self.shared_x:
            ranks = {v: i for i, v in enumerate(sorted(set(order.tolist())))}
            x = np.array([ranks[v] for v in order.tolist()], dtype=np.float64)
        else:
            width = max([int((rows == r).sum()) for r in set(rows.tolist())] or [1])
            for r in set(rows.tolist()):
                idx = np.flatnonzero(rows == r)
                idx = idx[np.argsort(order[idx], kind="stable")]
                x[idx] = (np.arange(len(idx)) + 0.5) * width / len(idx)
        return x, rows

    def figure(self, *, preview: bool = False) -> Figure:
        """The layered graph as a matplotlib figure (what reports and saved files show).

        Parameters
        ----------
        preview : bool
            Accepted for the widgets' common signature; the figure is the same.

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> g = ak.flow_routes(tiny_model("llama"), "The cat sat.", threshold=0.1)
        >>> len(ak.RoutesView(g).figure().axes)
        1
        """
        x, rows = self._positions()
        n_rows = len(self.row_labels)
        width = max(8.0, min(14.0, 2.0 + 0.6 * (x.max() + 1 if len(x) else 1)))
        fig = Figure(figsize=(width, 1.2 + 0.9 * n_rows), layout="constrained")
        ax = fig.add_subplot()
        scores = [abs(e["score"]) for e in self._edges]
        top = max(scores) if scores else 1.0
        top = top if top > 0 else 1.0
        off = {"q": -0.05, "k": 0.0, "v": 0.05}
        for e in self._edges:
            (x0, y0), (x1, y1) = (x[e["src"]], rows[e["src"]]), (x[e["dst"]], rows[e["dst"]])
            x1 = x1 + off.get(e["port"], 0.0)
            colors = ROUTE_COLORS if self.shared_x else GROUP_COLORS
            color = (SIGN_COLORS[0] if e["score"] >= 0 else SIGN_COLORS[1]) if self.signed \
                else colors[e["group"] % 3]
            ax.plot([x0, x1], [y0, y1], color=color, lw=0.6 + 4.0 * abs(e["score"]) / top,
                    ls=DASHES.get(e["port"], "solid"), alpha=0.85, zorder=1)
        marks = np.asarray(read(self.node_marks), dtype=np.float64)
        for i, n in enumerate(self._nodes):
            ax.scatter([x[i]], [rows[i]], s=60, color="white", edgecolor="#333", zorder=2)
            if marks[i] > 0:
                ax.scatter([x[i] + 0.18], [rows[i]], s=25, marker="s", color="#d95f02",
                           zorder=3)
            ax.annotate(mpl_text(n["label"]), (x[i], rows[i]), xytext=(0, -11 if
                        self.shared_x else 8), textcoords="offset points", ha="center",
                        va="top" if self.shared_x else "bottom", fontsize=7,
                        rotation=60 if self.shared_x and rows[i] == 0 else 0)
        ax.set_yticks(range(n_rows), [mpl_text(s) for s in self.row_labels])
        ax.set_xticks([])
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
        ax.set_ylim(-0.8, n_rows - 0.4)
        ax.set_title(mpl_text(self.title), loc="left", fontsize=10)
        names = (["positive score", "negative score"] if self.signed else
                 ["heads", "residual", "heads and residual"] if self.shared_x else
                 ["in both"] + [f"only in {n}" for n in self.group_names])
        palette: tuple[str, ...] = SIGN_COLORS if self.signed else (
            ROUTE_COLORS if self.shared_x else GROUP_COLORS)
        for name, color in zip(names, palette):
            ax.plot([], [], color=color, lw=2, label=mpl_text(name))
        ax.legend(loc="upper right", fontsize=7, frameon=False)
        return fig

    def _alt_text(self) -> str:
        return f"{self.title}: {len(self._nodes)} nodes, {len(self._edges)} edges."


def _check_circuit(graph: Any, name: str) -> nx.MultiDiGraph:
    if not isinstance(graph, nx.MultiDiGraph):
        raise InputError(f"{name} must be a circuit: the networkx.MultiDiGraph of ak.circuit; "
                         f"got {type(graph).__name__}.")
    if graph.number_of_edges() == 0:
        raise InputError(f"{name} has no edges: there is nothing to draw (a threshold that "
                         "keeps nothing?).")
    for node, data in graph.nodes(data=True):
        if data.get("kind") not in KINDS or not isinstance(data.get("layer"), (int, np.integer)):
            raise InputError(f"{name}'s node {node!r} needs a kind in {KINDS} and an integer "
                             f"layer (ak.circuit's schema); it has {dict(data)!r}.")
    for u, v, k, data in graph.edges(keys=True, data=True):
        score = data.get("score")
        if k not in PORTS[1:] or not isinstance(score, (int, float, np.floating, np.integer)) \
                or not math.isfinite(float(score)):
            raise InputError(f"{name}'s edge {u!r} -> {v!r} needs a key in {PORTS[1:]} and a "
                             f"finite score (ak.circuit's schema); it has key {k!r}, "
                             f"{dict(data)!r}.")
    return graph


class CircuitView(_LayeredGraph):
    """A circuit drawn as a layered graph, or two circuits compared.

    Components sit by layer: the embeddings at the bottom, each layer's heads in a row (its
    MLP last), the logits on top. An edge ends at the input it enters: a head's query, key
    and value inputs are three ports (q left and solid, k middle and dashed, v right and
    dotted); under grouped-query attention a key/value head shared by several query heads
    (``"L-kvG"``) sits between them with its key and value ports. Edges are coloured by the
    sign of their score (blue positive, red negative) and their width is ``|score|``; hovering
    shows the score. Clicking an edge (or Enter on it: arrow keys step through the edges,
    strongest first) selects the head it enters (for a shared key/value head, the first query
    head it serves), which a
    linked :class:`~attnkit.Heatmap` shows (:meth:`link`); with ``model`` and ``inputs``, a
    key edge also shows why that head attends in a linked :class:`~attnkit.ScoreView`
    (:meth:`link` takes either). With ``other``, edges in both circuits are grey, those only in
    ``graph`` turquoise and those only in ``other`` purple, as Attention Flows compares
    two models.

    Parameters
    ----------
    graph : networkx.MultiDiGraph
        The circuit (``ak.circuit``'s schema: nodes with ``layer`` and ``kind``; edges keyed
        by the input, with ``score``; ``graph`` attributes ``n_layers``, ``n_heads`` and,
        under grouped-query attention, ``n_kv_heads``).
    other : networkx.MultiDiGraph, optional
        A second circuit of the same model to compare with.
    names : (str, str), optional
        Display names of the two circuits.
    model : Model, optional
        The model, for the score view of a key edge.
    inputs : str, Encoding or token ids, optional
        The input the score view explains.
    title : str, optional
        Title above the view.

    Raises
    ------
    InputError
        For a graph that is not a circuit, has no edges, or differs from ``other`` in shape.

    Examples
    --------
    >>> import networkx as nx, attnkit as ak
    >>> g = nx.MultiDiGraph(n_layers=2, n_heads=2, tokens=None, metric="m", method="hand")
    >>> for name, layer, kind in [("embed", -1, "embed"), ("1-1", 0, "head"),
    ...                           ("2-2", 1, "head"), ("logits", 2, "logits")]:
    ...     g.add_node(name, layer=layer, kind=kind)
    >>> _ = g.add_edge("1-1", "2-2", key="k", score=0.8, input="k")
    >>> _ = g.add_edge("embed", "2-2", key="v", score=-0.3, input="v")
    >>> _ = g.add_edge("2-2", "logits", key="out", score=1.2, input="out")
    >>> view = ak.CircuitView(g)
    >>> view.n_edges, view.row_labels
    (3, ['embeddings', 'layer 1', 'layer 2', 'logits'])
    """

    _bundle_name = "circuit"

    def __init__(self, graph: nx.MultiDiGraph, *, other: nx.MultiDiGraph | None = None,
                 names: tuple[str, str] | None = None, model: Any = None, inputs: Any = None,
                 title: str | None = None) -> None:
        a = _check_circuit(graph, "graph")
        b = None if other is None else _check_circuit(other, "other")
        L = int(a.graph.get("n_layers", 1 + max(d["layer"] for _, d in a.nodes(data=True))))
        H = int(a.graph.get("n_heads", 1))
        r = H // int(a.graph.get("n_kv_heads") or H)  # query heads per key/value head
        if b is not None and (int(b.graph.get("n_layers", L)), int(b.graph.get("n_heads", H))) \
                != (L, H):
            raise InputError("graph and other come from models of different shapes "
                             f"({L} x {H} and {b.graph.get('n_layers')} x "
                             f"{b.graph.get('n_heads')}); compare circuits of one model shape.")
        if names is not None and (isinstance(names, str) or len(names) != 2):
            raise InputError(f"names must be two strings; got {names!r}.")
        if (model is None) != (inputs is None):
            raise InputError("model and inputs go together: pass both for the score view of "
                             "key edges, or neither.")
        if model is not None:
            validate.model(model)
        self._model, self._inputs = model, inputs
        self._scores: Any = None
        super().__init__(n_layers=L, n_heads=H)
        nm = list(names) if names is not None else [
            str(a.graph.get("name", "circuit A")), str((b.graph if b is not None else {}).get(
                "name", "circuit B"))]
        self.group_names = nm if b is not None else []
        self.signed = b is None
        self.slots = H + 1
        self.row_labels = ["embeddings"] + [f"layer {m + 1}" for m in range(L)] + ["logits"]
        nodes: list[dict[str, Any]] = []
        where: dict[Any, int] = {}
        graphs = [a] if b is None else [a, b]
        for g in graphs:
            for node, d in g.nodes(data=True):
                if node in where:
                    continue
                pair = parse_head_label(str(node)) if d["kind"] == "head" else None
                head = pair[1] if pair else -1
                # head h in column h, the MLP after the heads, embeddings and logits between
                # the middle heads; a shared key/value head between the query heads it serves
                # (and selects the first of them)
                middle = (H - 1) / 2
                order = float(head) if head >= 0 else (float(H) if d["kind"] == "mlp" else middle)
                kv = parse_kv_label(str(node)) if d["kind"] == "kv" else None
                if kv is not None:
                    head, order = kv[1] * r, kv[1] * r + (r - 1) / 2
                if d["kind"] == "embed":
                    order = middle + {"embed": -0.25, "pos_embed": 0.25, "type_embed": 0.5}.get(
                        str(node), 0.0)
                where[node] = len(nodes)
                nodes.append({"label": str(node), "row": int(d["layer"]) + 1, "order": order,
                              "head": (int(d["layer"]), head) if head >= 0 else (-1, -1)})
        edges: list[dict[str, Any]] = []
        keys_a = {(u, v, k): d for u, v, k, d in a.edges(keys=True, data=True)}
        keys_b = {} if b is None else {(u, v, k): d for u, v, k, d in b.edges(keys=True, data=True)}
        for key in list(keys_a) + [k for k in keys_b if k not in keys_a]:
            u, v, k = key
            da, db = keys_a.get(key), keys_b.get(key)
            group = 0 if b is None or (da and db) else (1 if da else 2)
            score = float((da or db)["score"])  # type: ignore[index]
            text = f"{u} → {v}.{k}: score {score:+.4g}"
            if b is not None:
                text = (f"{u} → {v}.{k}: " + "; ".join(
                    f"{n} {float(d['score']):+.4g}" if d else f"not in {n}"
                    for n, d in zip(nm, (da, db))))
            head = nodes[where[v]]["head"]
            kv = parse_kv_label(str(v))
            if kv is not None:
                text += (" (the key/value head of " + ", ".join(
                    head_label(kv[0], h) for h in range(kv[1] * r, (kv[1] + 1) * r)) + ")")
            edges.append({"src": where[u], "dst": where[v], "score": score, "port": k,
                          "group": group, "head": head, "text": text, "ids": key})
        edges.sort(key=lambda e: -abs(e["score"]))
        self._put(nodes, edges)
        if title is None:
            what = a.graph.get("metric")
            title = (f"Circuit: {len(edges)} edges" + (f" for {what}" if what else "")
                     if b is None else f"Circuits compared: {nm[0]} and {nm[1]}")
        self.title = title
        shared = sum(e["group"] == 0 for e in edges)
        self.note = (f"{shared} shared, {sum(e['group'] == 1 for e in edges)} only in {nm[0]}, "
                     f"{sum(e['group'] == 2 for e in edges)} only in {nm[1]}" if b is not None
                     else "")
        self.observe(self._key_edge, names="selected_edge")

    def _key_edge(self, change: dict) -> None:
        i = change["new"]
        if i < 0 or self._scores is None or self._edges[i]["port"] != "k":
            return
        from ..analysis.score_attribution import score_attribution

        layer, head = self._edges[i]["head"]
        self._scores.update(score_attribution(self._model, self._inputs, layer=layer, head=head,
                                              queries=[-1]))


class RoutesView(_LayeredGraph):
    """Information-flow routes (:func:`attnkit.flow_routes`) drawn over the tokens.

    One row per level (the embeddings at the bottom, each layer's output above), one column
    per token the routes reach, in input order (tokens label the bottom row, the prediction
    sits on top). Edges run from the token a part comes from up to the position it reaches:
    through heads (blue), the residual (grey) or both (turquoise), width the importance;
    hovering names the heads and their shares. A square beside a node marks a layer whose MLP
    is above the threshold there. Clicking an edge through heads (or Enter on it; arrow keys
    step through the edges, strongest first) selects its strongest head, which a linked
    :class:`~attnkit.Heatmap` shows (:meth:`link`).

    Parameters
    ----------
    graph : networkx.DiGraph
        A graph of :func:`attnkit.flow_routes`.
    title : str, optional
        Title above the view.

    Raises
    ------
    InputError
        For a graph that is not flow routes, or routes without edges.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> g = ak.flow_routes(tiny_model("llama"), "The cat sat.", threshold=0.1)
    >>> view = ak.RoutesView(g)
    >>> view.n_edges == g.number_of_edges(), view.row_labels[0]
    (True, 'embeddings')
    """

    _bundle_name = "routes"

    def __init__(self, graph: nx.DiGraph, *, title: str | None = None) -> None:
        if not isinstance(graph, nx.DiGraph) or graph.graph.get("method") != "flow_routes":
            raise InputError("RoutesView draws the graph of ak.flow_routes; got "
                             f"{type(graph).__name__}.")
        if graph.number_of_edges() == 0:
            raise InputError(f"These routes have no edges: no part's importance is above the "
                             f"threshold {graph.graph['threshold']:g}; trace again with a lower "
                             "one (ak.flow_routes(..., threshold=0.04)).")
        L, H = int(graph.graph["n_layers"]), int(graph.graph["n_heads"])
        super().__init__(n_layers=L, n_heads=H)
        self.shared_x = True
        self.signed = False
        self.group_names = ["heads", "residual", "heads and residual"]
        self.row_labels = ["embeddings"] + [f"layer {m + 1}" for m in range(L)]
        self.mark_name = "MLP share"
        tau = float(graph.graph["threshold"])
        nodes: list[dict[str, Any]] = []
        where: dict[Any, int] = {}
        for node in sorted(graph.nodes, key=lambda nd: (nd[0], nd[1])):
            d = graph.nodes[node]
            where[node] = len(nodes)
            mlp = float(d.get("mlp", 0.0))
            nodes.append({"label": str(d["token"]), "row": int(node[0]), "order": float(node[1]),
                          "head": (-1, -1), "mark": mlp if mlp > tau else 0.0})
        edges: list[dict[str, Any]] = []
        groups = {"head": 0, "residual": 1, "head+residual": 2}
        for u, v, d in graph.edges(data=True):
            parts = [f"{lab} {w:.3f}" for lab, w in zip(d["labels"], d["weights"])]
            if d["residual"]:
                parts.append(f"residual {d['residual']:.3f}")
            strongest = (v[0], d["heads"][int(np.argmax(d["weights"]))]) if d["heads"] \
                else (-1, -1)
            text = (f"{graph.nodes[v]['token']} (position {v[1]}, level {v[0]}) → "
                    f"{graph.nodes[u]['token']} (position {u[1]}, level {u[0]}): "
                    + ", ".join(parts))
            edges.append({"src": where[v], "dst": where[u], "score": float(d["weight"]),
                          "port": "", "group": groups[d["kind"]], "head": strongest,
                          "text": text, "ids": (u, v, None)})
        edges.sort(key=lambda e: -abs(e["score"]))
        self._put(nodes, edges)
        src = graph.graph["source"]
        self.title = title if title is not None else (
            f"Information-flow routes to {graph.nodes[src]['token']!s} (position {src[1]}), "
            f"importance > {tau:g}")
        self.note = f"positions counted from 0 · heads and layers from 1 (e.g. {head_label(0, 0)})"
