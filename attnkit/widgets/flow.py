"""FlowView widget: the radial layered view of Attention Flows (DeRose, Wang & Berger 2020).

The view only draws: graphs, influence and head counts come from :mod:`attnkit.flow`
(``attention_graph``, ``influence``, ``compare``, ``head_edge_counts``, ``flow_summary``),
recomputed here when the threshold or the head restriction changes in the browser.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import traitlets
from matplotlib.figure import Figure

from .. import flow
from ..flow.influence import RATINGS, rating_text, rating_top, ratings
from .._compat import renamed
from ..core import validate
from ..errors import InputError
from ..plot.common import mpl_text
from ..plot.flow import plot_flow_radial
from ..core.types import AttentionLike, Attentions, Sources
from ._base import SelectsHead, measure_of
from ._codec import read, wire
from ._flow_wire import encode_graph

#: edges drawn per layer at most (the strongest); the status line says when more exist
MAX_EDGES = 400
#: edges a graph may have to count as readable when the threshold is chosen for the user
READABLE_EDGES = 150
#: thresholds a chosen one is taken from (the slider's 0.01 steps)
THRESHOLDS = tuple(round(0.02 + 0.01 * i, 2) for i in range(59))
#: a chosen threshold is steady when the next step keeps at least this share of its edges ...
STEADY = 0.5
#: ... looked for this many steps above the smallest readable threshold
CLIFF_STEPS = 8


def model_name(att: AttentionLike | None) -> str:
    """The model's name an attention carries ("" when none)."""
    return str(getattr(att, "model", "") or "")


def _remember_threshold_given(init: Callable[..., None]) -> Callable[..., None]:
    """Record on the view whether ``threshold=`` was passed: when it was not, the view
    chooses one from the graph (the signature keeps the contract's default, 0.3)."""

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        self._threshold_given = "threshold" in kwargs
        init(self, *args, **kwargs)

    return wrapper


class FlowView(SelectsHead):
    """Radial view of the attention graph of one input, or of two models on it.

    The source ([CLS] after the last layer, by default) sits on the innermost ring, each
    earlier layer's output one ring further out, the input tokens outermost, placed around
    the circle by sentence position (clockwise from the top). Edges are those of
    :func:`attnkit.attention_graph`; hover a token to trace what it depends on and what
    depends on it; the head glyphs beside the rings count each head's edges per layer, and
    clicking one restricts that layer's traversal to the clicked heads (click again to
    release). The threshold slider recomputes the graph in the kernel.

    Use :meth:`collection` for the aggregate view over many inputs.

    Parameters
    ----------
    attentions : AttentionLike
        The attention to trace: dense Attention, or LazyAttention (its edges are found band
        by band, see :func:`attnkit.attention_graph`).
    other : AttentionLike, optional
        A second attention on the same tokens (e.g. the fine-tuned model): the view then
        colours what both graphs share (grey), what only ``attentions`` has (turquoise) and
        what only ``other`` has (purple), and splits each head glyph in two.
    threshold : float
        An attention weight must be above this to make an edge. When it is not passed, the
        view chooses it from the graph: the smallest of ``THRESHOLDS`` whose graph has at
        most ``edges`` edges, and the status line says which (``threshold_note``). Pass
        ``threshold=`` (e.g. the contract's 0.3) to fix it.
    edges : int
        The most edges a chosen threshold may leave (default ``READABLE_EDGES``); unused
        when ``threshold`` is passed.
    alpha : float
        Layer decay of influence, passed to :func:`attnkit.influence` /
        :func:`attnkit.compare`.
    sources : int, sequence, str or None
        Where the graph starts (default: [CLS] after the last layer).
    names : (str, str), optional
        Display names of the two models (default: their ``model`` names).
    rating : {"clamp", "relative"}
        ``"clamp"`` (default, the paper's display: influence clamped at 5) or
        ``"relative"`` (fifths of the largest influence among words); see :func:`ratings`.
    max_edges : int
        Edges drawn per layer at most, the strongest (long inputs make graphs of thousands
        of edges); the status line says how many were left out.
    title : str, optional
        Title above the view (default: says the source and threshold).

    Raises
    ------
    InputError
        When the inputs are not attention, differ in shape, or ``rating``, ``edges`` or
        ``max_edges`` are not allowed.
    TokenizationMismatchError
        When ``other`` has other tokens.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> from attnkit.widgets import FlowView
    >>> view = FlowView(tiny_model("bert").attend("The cat sat on the mat."))
    >>> view.threshold_note.startswith("chosen"), view.n_edges <= 150
    (True, True)
    """

    _bundle_name = "flow"

    mode = traitlets.Unicode("single").tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    roles = traitlets.List(traitlets.Unicode()).tag(sync=True)
    names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    threshold = traitlets.Float(0.3).tag(sync=True)
    measure = traitlets.Unicode("weights").tag(sync=True)  # what the traced maps hold
    threshold_note = traitlets.Unicode("").tag(sync=True)
    alpha = traitlets.Float(0.5).tag(sync=True)
    restrict = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    source = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    nodes = traitlets.Dict().tag(sync=True)
    edges = traitlets.Dict().tag(sync=True)
    edge_weight = traitlets.Dict().tag(sync=True)
    edge_heads = traitlets.Dict().tag(sync=True)
    edge_head_offsets = traitlets.Dict().tag(sync=True)
    n_nodes = traitlets.Int(0).tag(sync=True)
    n_edges = traitlets.Int(0).tag(sync=True)
    n_edges_total = traitlets.Int(0).tag(sync=True)
    revision = traitlets.Int(0).tag(sync=True)  # +1 per recomputation: the view reloads on it
    influence_a = traitlets.Dict().tag(sync=True)
    influence_b = traitlets.Dict().tag(sync=True)
    rating_a = traitlets.Dict().tag(sync=True)
    rating_b = traitlets.Dict().tag(sync=True)
    rating_note = traitlets.Unicode("").tag(sync=True)
    rating_top = traitlets.Float(5.0).tag(sync=True)  # the influence a full rating bar stands for
    head_counts_a = traitlets.Dict().tag(sync=True)
    head_counts_b = traitlets.Dict().tag(sync=True)
    # collection mode
    n_inputs = traitlets.Int(0).tag(sync=True)
    head_share = traitlets.Dict().tag(sync=True)
    categories = traitlets.List(traitlets.Unicode()).tag(sync=True)
    category_share = traitlets.Dict().tag(sync=True)
    category_std = traitlets.Dict().tag(sync=True)
    top_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    top_share = traitlets.Dict().tag(sync=True)

    @renamed(positional=("other",), att="attentions", source="sources")
    @_remember_threshold_given
    def __init__(
        self,
        attentions: AttentionLike,
        *,
        other: AttentionLike | None = None,
        threshold: float = 0.3,
        edges: int = READABLE_EDGES,
        alpha: float = 0.5,
        sources: Sources = None,
        names: tuple[str, str] | None = None,
        rating: str = "clamp",
        max_edges: int = MAX_EDGES,
        title: str | None = None,
    ) -> None:
        edges = validate.size(edges, "edges")
        max_edges = validate.size(max_edges, "max_edges")
        att, source = attentions, sources
        if not isinstance(att, AttentionLike) or (other is not None and not isinstance(other, AttentionLike)):
            raise InputError("FlowView takes attention (Attention or LazyAttention; other= to compare).")
        if other is not None:
            flow.check_tokenization(att, other, names=names or ("att", "other"))
            if (att.n_layers, att.n_heads) != (other.n_layers, other.n_heads):
                raise InputError(
                    f"att has {att.n_layers} layers × {att.n_heads} heads but other has "
                    f"{other.n_layers} × {other.n_heads}; comparison needs the same architecture."
                )
        if rating not in RATINGS:
            raise InputError(f"rating must be one of {RATINGS}, not {rating!r}.")
        if int(max_edges) < 1:
            raise InputError(f"max_edges must be at least 1; got {max_edges}.")
        if int(edges) < 1:
            raise InputError(f"edges must be at least 1; got {edges}.")
        self._att, self._other = att, other
        self._source_arg = source
        self._names_arg = names
        self._fixed_title = title
        self._rating = rating
        self._max_edges = int(max_edges)
        self.result: nx.DiGraph | flow.Comparison | None = None
        note = ""
        self._chosen: tuple[float, str] | None = None
        if not getattr(self, "_threshold_given", True):
            threshold, note = self._choose_threshold(int(edges))
            self._chosen = (float(threshold), note)
        super().__init__(
            mode="single" if other is None else "compare",
            tokens=list(att.tokens), roles=[str(r) for r in att.roles],
            n_layers=att.n_layers, n_heads=att.n_heads,
            threshold=float(threshold), alpha=float(alpha), threshold_note=note,
            measure=measure_of(att),
            rating_note=rating_text(rating),
        )
        self._recompute()
        self.observe(self._threshold_moved, names="threshold")
        self.observe(lambda _c: self._recompute(), names=["threshold", "alpha", "restrict"])

    def _choose_threshold(self, readable: int) -> tuple[float, str]:
        """The smallest of ``THRESHOLDS`` whose graph has at most ``readable`` edges
        (edges only disappear as the threshold grows: a binary search), moved up off a cliff
        to a steady one (its neighbours give about as many edges), and a note saying so."""
        counts: dict[float, int] = {}

        def edges(t: float) -> int:
            if t not in counts:
                counts[t] = flow.attention_graph(self._att, threshold=t, sources=self._source_arg).number_of_edges()
            return counts[t]

        lo, hi = 0, len(THRESHOLDS) - 1
        if edges(THRESHOLDS[hi]) > readable:
            t = THRESHOLDS[hi]
            return t, f"chosen: even {t:g} gives {edges(t)} edges"
        while lo < hi:  # the first index whose graph is readable
            mid = (lo + hi) // 2
            if edges(THRESHOLDS[mid]) <= readable:
                hi = mid
            else:
                lo = mid + 1
        t = THRESHOLDS[lo]
        if lo == 0:
            return t, f"chosen: {edges(t)} edges at the smallest threshold tried"
        # Off the cliff: the smallest readable threshold often sits where one step changes most
        # edges (0.20 -> 136, 0.21 -> 14). Move up to the first threshold whose neighbours
        # keep its edge count within a factor 1/STEADY (or 3 edges): a nudge then changes little.
        def steady(i: int) -> bool:
            e, lower, upper = edges(THRESHOLDS[i]), edges(THRESHOLDS[i - 1]), edges(THRESHOLDS[i + 1])
            return lower - e <= max(3, e * (1 / STEADY - 1)) and e - upper <= max(3, e * (1 - STEADY))

        pick = next((i for i in range(lo, min(len(THRESHOLDS) - 1, lo + CLIFF_STEPS)) if steady(i)), lo)
        t, below = THRESHOLDS[pick], THRESHOLDS[pick - 1]
        note = f"chosen for a readable graph: {edges(t)} edges ({below:g} would give {edges(below)}"
        if pick + 1 < len(THRESHOLDS):
            above = THRESHOLDS[pick + 1]
            note += f", {above:g} {edges(above)}"
        return t, note + ")"

    def _threshold_moved(self, _change: dict) -> None:
        """The chosen threshold's note holds only for that threshold (its edge counts)."""
        if self._chosen is not None:
            t, note = self._chosen
            self.threshold_note = note if abs(self.threshold - t) < 1e-9 else ""

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
    ) -> FlowView:
        """Aggregate view over many inputs (:func:`attnkit.flow_summary`).

        One ring per layer with a wedge per head coloured by how many edges it makes on
        average, and bars of the influence share of each token category and of the ``top``
        token strings.

        Parameters
        ----------
        attentions : AttentionSet or iterable of Attention
            The inputs.
        threshold, alpha : float
            As in :func:`attnkit.flow_summary`.
        sources : int, sequence, str or None
            Where each input's graph starts (default: [CLS] after the last layer).
        top : int
            How many token strings get a bar.
        title : str, optional
            Title above the view.
        progress : bool
            Show a progress bar over inputs.

        Returns
        -------
        FlowView
            In ``mode="collection"``; ``result`` holds the :class:`~attnkit.flow.FlowSummary`.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> aset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read it."], progress=False)
        >>> view = ak.FlowView.collection(aset, threshold=0.2, progress=False)
        >>> view.mode, view.n_inputs
        ('collection', 2)
        """
        top = validate.size(top, "top")
        summary = flow.flow_summary(attentions, threshold=threshold, alpha=alpha,
                                    sources=sources, progress=progress)
        self = cls.__new__(cls)
        self._att = self._other = None  # type: ignore[assignment]  # a collection view has no one input
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
            head_counts_a=wire(edges_mean, "float32"), head_share=wire(share, "float32"),
            categories=[str(c) for c in cats.index],
            category_share=wire(cats["share_mean"].to_numpy(), "float32"),
            category_std=wire(cats["share_std"].to_numpy(), "float32"),
            top_tokens=[str(t) for t in toks.index], top_share=wire(toks["share_mean"].to_numpy(), "float32"),
            title=title or f"Attention flow over {summary.n_inputs} inputs (threshold {threshold:g}, alpha {alpha:g})",
        )
        return self

    # ------------------------------------------------------------- internals
    @traitlets.validate("threshold")
    def _check_threshold(self, proposal: dict) -> float:
        value = float(proposal["value"])
        if not 0.0 <= value < 1.0:
            raise InputError(f"threshold must lie in [0, 1); got {value}.")
        if getattr(self, "_att", None) is not None and value != self.threshold:
            self.threshold_note = ""  # set by hand now
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
        """The (layer, head) pairs the traversal may use.

        In a layer with restricted heads (clicked glyphs, or ``restrict`` set from Python)
        only those, elsewhere every head.

        Returns
        -------
        list of (int, int) or None
            0-indexed pairs; None when nothing is restricted.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("bert").attend("The cat sat on the mat.")
        >>> view = ak.FlowView(att)
        >>> view.allowed_heads() is None
        True
        >>> view.restrict = [[0, 1]]  # layer 0: only head 1; layer 1: both heads
        >>> view.allowed_heads()
        [(0, 1), (1, 0), (1, 1)]
        """
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
        sources = [p for lv, p in self._source_nodes()]
        if other is None:
            g = flow.attention_graph(att, threshold=self.threshold, heads=heads,
                                     sources=self._source_arg)
            inf = flow.influence(g, alpha=self.alpha)
            self.result = g
            update = encode_graph(g, max_edges=self._max_edges)
            update.update(
                influence_a=wire(inf["score"].to_numpy(), "float32"),
                rating_a=wire(ratings(inf["score"].to_numpy(), self.roles, sources, self._rating), "uint8"),
                rating_top=rating_top(inf["score"].to_numpy(), self.roles, sources, self._rating),
                head_counts_a=wire(flow.head_edge_counts(g), "float32"),
                names=[model_name(att) or "model"],
            )
            default_title = f"{model_name(att) + ': ' if model_name(att) else ''}attention flow from " \
                            f"{self._source_text(g)}, threshold {self.threshold:g}"
        else:
            cmp = flow.compare(att, other, threshold=self.threshold, heads=heads,
                               sources=self._source_arg, alpha=self.alpha, names=self._names_arg)
            self.result = cmp
            inf = cmp.influence
            update = encode_graph(cmp.union, max_edges=self._max_edges)
            update.update(
                influence_a=wire(inf["score_a"].to_numpy(), "float32"),
                influence_b=wire(inf["score_b"].to_numpy(), "float32"),
                rating_a=wire(ratings(inf["score_a"].to_numpy(), self.roles, sources, self._rating), "uint8"),
                rating_b=wire(ratings(inf["score_b"].to_numpy(), self.roles, sources, self._rating), "uint8"),
                rating_top=max(rating_top(inf[c].to_numpy(), self.roles, sources, self._rating)
                               for c in ("score_a", "score_b")),
                head_counts_a=wire(flow.head_edge_counts(cmp.graph_a), "float32"),
                head_counts_b=wire(flow.head_edge_counts(cmp.graph_b), "float32"),
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

    def _source_nodes(self) -> list[tuple[int, int]]:
        return flow.resolve_source(self._att, sources=self._source_arg)

    def _source_text(self, g: nx.DiGraph) -> str:
        src = g.graph.get("source", [])
        return ", ".join(str(self.tokens[p]) for _, p in src) or "?"

    @property
    def graph(self) -> nx.DiGraph:
        """The drawn graph (a comparison's union graph in comparison mode)."""
        if self.mode == "collection":
            raise InputError("a collection view has no single graph; see .result (a FlowSummary).")
        if isinstance(self.result, flow.Comparison):
            return self.result.union
        assert isinstance(self.result, nx.DiGraph)
        return self.result

    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of the view (what reports and saved files show): the radial
        graph, or the collection's head wedges and influence shares.

        Parameters
        ----------
        preview : bool
            Accepted for the widgets' common signature; the figure is the same.

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot (nothing is shown or kept open).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("bert").attend("The cat sat on the mat.")
        >>> fig = ak.FlowView(att, threshold=0.2).figure()
        >>> len(fig.axes)
        1
        """
        if self.mode == "collection":
            return self._collection_figure()
        fig = Figure(figsize=(7.0, 7.0), layout="constrained")
        ax = fig.add_subplot()
        plot_flow_radial(self.graph, ax=ax, title=mpl_text(self.title))
        return fig

    def _collection_figure(self) -> Figure:
        L, H = self.n_layers, self.n_heads
        edges = np.asarray(read(self.head_counts_a), dtype=np.float64).reshape(L, H)
        fig = Figure(figsize=(10.0, 4.2), layout="constrained")
        ax1, ax2, ax3 = fig.subplots(1, 3, width_ratios=[1.2, 1, 1])
        im = ax1.imshow(edges, cmap="viridis", aspect="equal")
        ax1.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=6)
        ax1.set_yticks(range(L), [str(l + 1) for l in range(L)], fontsize=6)
        ax1.set_xlabel("head")
        ax1.set_ylabel("layer")
        ax1.set_title("graph edges per input", fontsize=9, loc="left")
        fig.colorbar(im, ax=ax1, shrink=0.7)
        share = read(self.category_share)
        std = read(self.category_std)
        y = np.arange(len(self.categories))
        ax2.barh(y, np.nan_to_num(share), xerr=np.nan_to_num(std), color="#1a6e9e")
        ax2.set_yticks(y, [mpl_text(c) for c in self.categories], fontsize=8)
        ax2.invert_yaxis()
        ax2.set_title("influence share by token kind", fontsize=9, loc="left")
        tshare = read(self.top_share)
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
        ranked = np.argsort(-read(self.influence_a))[:5]
        top = ", ".join(f"{self.tokens[i]}" for i in ranked)
        return (f"{self.title}. Radial attention graph with {self.n_nodes} nodes and "
                f"{self.n_edges} edges over {len(self.tokens)} tokens; most influential: {top}.")
