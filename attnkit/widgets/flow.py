"""FlowView widget: the radial layered view of Attention Flows (DeRose, Wang & Berger 2020).

The view only draws: graphs, influence and head counts come from :mod:`attnkit.flow`
(``attention_graph``, ``influence``, ``compare``, ``head_edge_counts``, ``flow_summary``),
recomputed here when the threshold or the head restriction changes in the browser.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import matplotlib
import networkx as nx
import numpy as np
import traitlets
from matplotlib.figure import Figure

from .. import flow
from .._compat import renamed
from ..attention import Attention
from ..errors import InputError
from ..types import Attentions, Sources
from ..plot._prep import head_label, mpl_text
from ..plot.flow import plot_flow_radial
from ._base import SelectsHead, encode_f16, encode_f32

#: model codes on the wire (node/edge ``model`` attribute of a comparison's union graph)
MODEL_CODE = {"both": 0, "a": 1, "b": 2}


def encode_graph(g: nx.DiGraph) -> dict[str, Any]:
    """The traits describing graph ``g`` (an attention graph or a comparison's union).

    nodes: uint16 ``[N, 3]`` = (level, position, model code); edges: uint16 ``[E, 4]`` =
    (upper level, upper position, lower position, model code), the lower node being at
    level − 1; edge_weight: float16 ``[E]`` (the edge's ``weight``); edge_heads: uint8
    pairs (head, who) in CSR order with offsets uint32 ``[E + 1]``, who = 1 for model a
    (or the only model), 2 for b, 3 for both.
    """
    nodes = sorted(g.nodes)
    node_rows = np.array(
        [(lv, pos, MODEL_CODE[g.nodes[(lv, pos)].get("model", "a")]) for lv, pos in nodes],
        dtype="<u2",
    ).reshape(-1, 3)
    edges = sorted(g.edges(data=True), key=lambda e: (-e[0][0], e[0][1], e[1][1]))
    rows, weights, pairs, offsets = [], [], [], [0]
    for (lu, pu), (_, pv), d in edges:
        rows.append((lu, pu, pv, MODEL_CODE[d.get("model", "a")]))
        weights.append(d["weight"])
        if "heads_a" in d:
            ha, hb = set(d["heads_a"]), set(d["heads_b"])
            for h in sorted(ha | hb):
                pairs.append((h, (h in ha) * 1 + (h in hb) * 2))
        else:
            pairs.extend((h, 1) for h in d["heads"])
        offsets.append(len(pairs))
    return {
        "nodes": node_rows.tobytes(),
        "edges": np.array(rows, dtype="<u2").reshape(-1, 4).tobytes(),
        "edge_weight": encode_f16(np.array(weights, dtype=np.float32)),
        "edge_heads": np.array(pairs, dtype=np.uint8).reshape(-1, 2).tobytes(),
        "edge_head_offsets": np.array(offsets, dtype="<u4").tobytes(),
        "n_nodes": len(nodes),
        "n_edges": len(edges),
        "source": [list(map(int, v)) for v in g.graph.get("source", [])],
    }


class FlowView(SelectsHead):
    """Radial view of the attention graph of one input, or of two models on it.

    The source ([CLS] after the last layer, by default) sits on the innermost ring, each
    earlier layer's output one ring further out, the input tokens outermost, placed around
    the circle by sentence position (clockwise from the top). Edges are those of
    :func:`attnkit.attention_graph`; hover a token to trace what it depends on and what
    depends on it; the head glyphs beside the rings count each head's edges per layer, and
    clicking one restricts that layer's traversal to the clicked heads (click again to
    release). The threshold slider recomputes the graph in the kernel.

    Parameters
    ----------
    attentions : the Attention to trace.
    other : optional second Attention on the same tokens (e.g. the fine-tuned model): the
        view then colours what both graphs share (grey), what only ``att`` has (turquoise)
        and what only ``other`` has (purple), and splits each head glyph in two.
    threshold, alpha, sources : passed to :func:`attnkit.attention_graph` /
        :func:`attnkit.influence` / :func:`attnkit.compare`.
    names : display names of the two models (default: their ``model`` names).

    Use :meth:`collection` for the aggregate view over many inputs.
    """

    _bundle_name = "flow"

    mode = traitlets.Unicode("single").tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    roles = traitlets.List(traitlets.Unicode()).tag(sync=True)
    names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    threshold = traitlets.Float(0.3).tag(sync=True)
    alpha = traitlets.Float(0.5).tag(sync=True)
    restrict = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    source = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    nodes = traitlets.Bytes(b"").tag(sync=True)
    edges = traitlets.Bytes(b"").tag(sync=True)
    edge_weight = traitlets.Bytes(b"").tag(sync=True)
    edge_heads = traitlets.Bytes(b"").tag(sync=True)
    edge_head_offsets = traitlets.Bytes(b"").tag(sync=True)
    n_nodes = traitlets.Int(0).tag(sync=True)
    n_edges = traitlets.Int(0).tag(sync=True)
    revision = traitlets.Int(0).tag(sync=True)  # +1 per recomputation: the view reloads on it
    influence_a = traitlets.Bytes(b"").tag(sync=True)
    influence_b = traitlets.Bytes(b"").tag(sync=True)
    rating_a = traitlets.Bytes(b"").tag(sync=True)
    rating_b = traitlets.Bytes(b"").tag(sync=True)
    head_counts_a = traitlets.Bytes(b"").tag(sync=True)
    head_counts_b = traitlets.Bytes(b"").tag(sync=True)
    # collection mode
    n_inputs = traitlets.Int(0).tag(sync=True)
    head_share = traitlets.Bytes(b"").tag(sync=True)
    categories = traitlets.List(traitlets.Unicode()).tag(sync=True)
    category_share = traitlets.Bytes(b"").tag(sync=True)
    category_std = traitlets.Bytes(b"").tag(sync=True)
    top_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    top_share = traitlets.Bytes(b"").tag(sync=True)

    @renamed(positional=("other",), att="attentions", source="sources")
    def __init__(
        self,
        attentions: Attention,
        *,
        other: Attention | None = None,
        threshold: float = 0.3,
        alpha: float = 0.5,
        sources: Sources = None,
        names: tuple[str, str] | None = None,
        title: str | None = None,
    ) -> None:
        att, source = attentions, sources
        if not isinstance(att, Attention) or (other is not None and not isinstance(other, Attention)):
            raise InputError("FlowView takes attnkit Attention objects (att, and other= to compare).")
        if other is not None:
            flow.check_tokenization(att, other, names or ("att", "other"))
            if att.maps.shape[:2] != other.maps.shape[:2]:
                raise InputError(
                    f"att has {att.n_layers} layers × {att.n_heads} heads but other has "
                    f"{other.n_layers} × {other.n_heads}; comparison needs the same architecture."
                )
        self._att, self._other = att, other
        self._source_arg = source
        self._names_arg = names
        self._fixed_title = title
        self.result: nx.DiGraph | flow.Comparison | None = None
        super().__init__(
            mode="single" if other is None else "compare",
            tokens=list(att.tokens), roles=[str(r) for r in att.roles],
            n_layers=att.n_layers, n_heads=att.n_heads,
            threshold=float(threshold), alpha=float(alpha),
        )
        self._recompute()
        self.observe(lambda _c: self._recompute(), names=["threshold", "alpha", "restrict"])

    # ------------------------------------------------------------ collection
    @classmethod
    @renamed(atts="attentions", source="sources")
    def collection(
        cls,
        attentions: Attentions,
        *,
        threshold: float = 0.3,
        alpha: float = 0.5,
        sources: Sources = None,
        top: int = 15,
        title: str | None = None,
        progress: bool = True,
    ) -> "FlowView":
        """Aggregate view over many inputs (:func:`attnkit.flow_summary`): one ring per layer
        with a wedge per head coloured by how many edges it makes on average, and bars of
        the influence share of each token category and of the ``top`` token strings."""
        summary = flow.flow_summary(attentions, threshold=threshold, alpha=alpha,
                                    sources=sources, progress=progress)
        self = cls.__new__(cls)
        self._att = self._other = None
        self._fixed_title = title
        self.result = summary
        heads = summary.heads
        L = int(heads.index.get_level_values(0).max()) + 1
        H = int(heads.index.get_level_values(1).max()) + 1
        edges_mean = heads["edges_mean"].to_numpy().reshape(L, H)
        share = heads["share"].to_numpy().reshape(L, H)
        cats = summary.categories
        toks = summary.tokens.head(top)
        SelectsHead.__init__(
            self, mode="collection", n_layers=L, n_heads=H, threshold=float(threshold),
            alpha=float(alpha), n_inputs=summary.n_inputs,
            head_counts_a=encode_f32(edges_mean), head_share=encode_f32(share),
            categories=[str(c) for c in cats.index],
            category_share=encode_f32(cats["share_mean"].to_numpy()),
            category_std=encode_f32(cats["share_std"].to_numpy()),
            top_tokens=[str(t) for t in toks.index], top_share=encode_f32(toks["share_mean"].to_numpy()),
            title=title or f"Attention flow over {summary.n_inputs} inputs (threshold {threshold:g}, alpha {alpha:g})",
        )
        return self

    # ------------------------------------------------------------- internals
    @traitlets.validate("threshold")
    def _check_threshold(self, proposal: dict) -> float:
        value = float(proposal["value"])
        if not 0.0 <= value < 1.0:
            raise InputError(f"threshold must lie in [0, 1); got {value}.")
        return value

    @traitlets.validate("restrict")
    def _check_restrict(self, proposal: dict) -> list:
        out = []
        for pair in proposal["value"]:
            if len(pair) != 2:
                raise InputError(f"restrict entries are [layer, head]; got {pair!r}.")
            layer, head = int(pair[0]), int(pair[1])
            if not (0 <= layer < self.n_layers and 0 <= head < self.n_heads):
                raise InputError(
                    f"restricted head {layer}-{head} is outside {self.n_layers} layers × "
                    f"{self.n_heads} heads (0-indexed)."
                )
            if [layer, head] not in out:
                out.append([layer, head])
        return sorted(out)

    def allowed_heads(self) -> list[tuple[int, int]] | None:
        """The (layer, head) pairs the traversal may use: in a layer with restricted heads
        only those, elsewhere every head; ``None`` when nothing is restricted."""
        if not self.restrict:
            return None
        chosen: dict[int, set[int]] = {}
        for layer, head in self.restrict:
            chosen.setdefault(layer, set()).add(head)
        return [(l, h) for l in range(self.n_layers) for h in range(self.n_heads)
                if h in chosen.get(l, range(self.n_heads))]

    def _recompute(self) -> None:
        if self.mode == "collection":
            return
        heads = self.allowed_heads()
        att, other = self._att, self._other
        if other is None:
            g = flow.attention_graph(att, threshold=self.threshold, heads=heads,
                                     sources=self._source_arg)
            inf = flow.influence(g, alpha=self.alpha)
            self.result = g
            update = encode_graph(g)
            update.update(
                influence_a=encode_f32(inf["score"].to_numpy()),
                rating_a=inf["rating"].to_numpy().astype(np.uint8).tobytes(),
                head_counts_a=encode_f32(flow.head_edge_counts(g)),
                names=[att.model or "model"],
            )
            default_title = f"{att.model + ': ' if att.model else ''}attention flow from " \
                            f"{self._source_text(g)}, threshold {self.threshold:g}"
        else:
            cmp = flow.compare(att, other, threshold=self.threshold, heads=heads,
                               sources=self._source_arg, alpha=self.alpha, names=self._names_arg)
            self.result = cmp
            inf = cmp.influence
            update = encode_graph(cmp.union)
            update.update(
                influence_a=encode_f32(inf["score_a"].to_numpy()),
                influence_b=encode_f32(inf["score_b"].to_numpy()),
                rating_a=inf["rating_a"].to_numpy().astype(np.uint8).tobytes(),
                rating_b=inf["rating_b"].to_numpy().astype(np.uint8).tobytes(),
                head_counts_a=encode_f32(flow.head_edge_counts(cmp.graph_a)),
                head_counts_b=encode_f32(flow.head_edge_counts(cmp.graph_b)),
                names=list(cmp.names),
            )
            default_title = f"{cmp.names[0]} vs {cmp.names[1]}: attention flow from " \
                            f"{self._source_text(cmp.union)}, threshold {self.threshold:g}"
        update["title"] = self._fixed_title or default_title
        update["revision"] = self.revision + 1
        with self.hold_sync():
            for k, v in update.items():
                setattr(self, k, v)
        self._invalidate_static()

    def _source_text(self, g: nx.DiGraph) -> str:
        src = g.graph.get("source", [])
        return ", ".join(str(self.tokens[p]) for _, p in src) or "?"

    @property
    def graph(self) -> nx.DiGraph:
        """The drawn graph (a comparison's union graph in comparison mode)."""
        if self.mode == "collection":
            raise InputError("a collection view has no single graph; see .result (a FlowSummary).")
        return self.result.union if self.mode == "compare" else self.result

    def figure(self, *, preview: bool = False) -> Figure:
        if self.mode == "collection":
            return self._collection_figure()
        fig = Figure(figsize=(7.0, 7.0), layout="constrained")
        ax = fig.add_subplot()
        plot_flow_radial(self.graph, ax=ax, title=mpl_text(self.title))
        return fig

    def _collection_figure(self) -> Figure:
        L, H = self.n_layers, self.n_heads
        edges = np.frombuffer(self.head_counts_a, dtype="<f4").reshape(L, H)
        fig = Figure(figsize=(10.0, 4.2), layout="constrained")
        ax1, ax2, ax3 = fig.subplots(1, 3, width_ratios=[1.2, 1, 1])
        im = ax1.imshow(edges, cmap="viridis", aspect="equal")
        ax1.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=6)
        ax1.set_yticks(range(L), [str(l + 1) for l in range(L)], fontsize=6)
        ax1.set_xlabel("head")
        ax1.set_ylabel("layer")
        ax1.set_title("graph edges per input", fontsize=9, loc="left")
        fig.colorbar(im, ax=ax1, shrink=0.7)
        share = np.frombuffer(self.category_share, dtype="<f4")
        std = np.frombuffer(self.category_std, dtype="<f4")
        y = np.arange(len(self.categories))
        ax2.barh(y, np.nan_to_num(share), xerr=np.nan_to_num(std), color="#1a6e9e")
        ax2.set_yticks(y, [mpl_text(c) for c in self.categories], fontsize=8)
        ax2.invert_yaxis()
        ax2.set_title("influence share by token kind", fontsize=9, loc="left")
        tshare = np.frombuffer(self.top_share, dtype="<f4")
        y = np.arange(len(self.top_tokens))
        ax3.barh(y, tshare, color="#7b3294")
        ax3.set_yticks(y, [mpl_text(t) for t in self.top_tokens], fontsize=7)
        ax3.invert_yaxis()
        ax3.set_title("influence share per occurrence", fontsize=9, loc="left")
        fig.suptitle(mpl_text(self.title), fontsize=10, x=0.01, ha="left")
        return fig

    def _alt_text(self) -> str:
        if self.mode == "collection":
            return f"{self.title}. Most influential tokens: {', '.join(self.top_tokens[:8])}."
        ranked = np.argsort(-np.frombuffer(self.influence_a, dtype="<f4"))[:5]
        top = ", ".join(f"{self.tokens[i]}" for i in ranked)
        return (f"{self.title}. Radial attention graph with {self.n_nodes} nodes and "
                f"{self.n_edges} edges over {len(self.tokens)} tokens; most influential: {top}.")
