"""InterventionView: a head map of ablation effects linked to the selected head's attention,
where clicking an edge (or a stripe of edges) knocks it out in the kernel (Geva et al. 2023)
and shows the metric's change and the later layers' maps before → after as a difference.

The knockout is :func:`attnkit.knockout` itself (same edges, same metric, same inputs), so
the number the view shows is the one a script gets. The maps are one input's
(``inputs[item]``): before and after come from the same pass through attnkit's attention
function, the blocked edges in its mask (:class:`attnkit.interventions.knockout.Blocker`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from ..core import validate
from ..core.labels import head_label
from ..core.results import HeadResult, head_table
from ..errors import AttnkitError, InputError, UnsupportedModelError
from ..interventions import ablate, knockout
from ..interventions import hooks
from ..interventions.knockout import Blocker, edge_masks
from ..interventions.metrics import Metric
from ..plot import attention as plots
from ._base import SelectsHead
from ._codec import f16, message, wire

#: How a click chooses edges: the cell, its key's whole column, or its offset diagonal.
STRIPES = ("edge", "column", "diagonal")
#: Inputs longer than this are refused (the view keeps one input's maps; long inputs are
#: for :func:`attnkit.knockout` directly).
MAX_TOKENS = 1024
#: Cells of attention the widget state may carry (float16): every head's map when they fit,
#: else the selected head's only (the others come from the kernel).
MAP_CELLS = 4 << 20


class _Maps:
    """A capture recorder keeping float32 ``[H, n, n]`` probabilities of input 0 of each
    layer in ``layers`` (with any knocked-out edge blocked: it reads the call's mask)."""

    def __init__(self, layers: Sequence[int], n: int) -> None:
        self.layers = set(layers)
        self.n = n
        self.maps: dict[int, np.ndarray] = {}

    def __call__(self, call: Any) -> None:
        if call.layer in self.layers:
            p = call.probabilities()[0, :, : self.n, : self.n]
            self.maps[call.layer] = p.detach().float().cpu().numpy()


def stripe_edges(layer: int, head: int, query: int, key: int, stripe: str, n: int,
                 causal: bool) -> tuple[list[tuple[int, int, int, int]], list[int]]:
    """The edges a click on cell ``(query, key)`` of head ``(layer, head)`` knocks out, and
    the query rows left alone because the edge was their only key.

    Parameters
    ----------
    layer, head : int
        The head (0-indexed).
    query, key : int
        The cell (0-indexed positions).
    stripe : {"edge", "column", "diagonal"}
        The cell alone; every query's edge to ``key``; every edge at the offset
        ``query - key``.
    n : int
        Positions every input has.
    causal : bool
        Keys after the query are never read.

    Returns
    -------
    tuple
        ``(edges, kept)``: ``(layer, head, query, key)`` tuples and the rows kept.

    Examples
    --------
    >>> from attnkit.widgets.intervention import stripe_edges
    >>> stripe_edges(1, 0, 3, 1, "diagonal", 5, True)
    ([(1, 0, 2, 0), (1, 0, 3, 1), (1, 0, 4, 2)], [])
    >>> stripe_edges(0, 1, 2, 0, "column", 3, True)
    ([(0, 1, 1, 0), (0, 1, 2, 0)], [0])
    """
    if stripe == "edge":
        pairs = [(query, key)]
    elif stripe == "column":
        pairs = [(q, key) for q in range(key if causal else 0, n)]
    else:
        off = query - key
        pairs = [(q, q - off) for q in range(n) if 0 <= q - off < n]
    # a row whose only key is the blocked one would be left without any: keep it
    alone = [q for q, k in pairs if n == 1 or (causal and q == 0 and k == 0)]
    edges = [(layer, head, q, k) for q, k in pairs if q not in alone]
    return edges, alone


def _pool_signed(a: np.ndarray, side: int) -> tuple[np.ndarray, int]:
    """``[k, n, n]`` pooled into bins of ``b`` cells a side keeping each bin's value of
    largest magnitude (a difference keeps its sign), with ``b`` so that ``n / b <= side``."""
    n = a.shape[-1]
    b = max(1, -(-n // side))
    if b == 1:
        return a, 1
    m = -(-n // b)
    pad = np.zeros((a.shape[0], m * b, m * b), dtype=a.dtype)
    pad[:, :n, :n] = a
    blocks = pad.reshape(a.shape[0], m, b, m, b).transpose(0, 1, 3, 2, 4).reshape(a.shape[0], m, m, b * b)
    idx = np.abs(blocks).argmax(-1)
    return np.take_along_axis(blocks, idx[..., None], -1)[..., 0], b


class InterventionView(SelectsHead):
    """Whether a head, an edge or a stripe of edges matters, one click from its attention.

    Left, a layer × head map of each head's ablation effect on ``metric``
    (:func:`attnkit.ablate`, computed unless ``effects`` is given); a click (or arrows and
    Enter) selects a head. Middle, that head's attention on ``inputs[item]``. Clicking a
    cell of it knocks that edge out in the kernel (:func:`attnkit.knockout` on all the
    inputs, the same edge in each): Shift + click its key's whole column, Alt + click its
    diagonal (every edge at that offset), or the *edge / column / diagonal* buttons; with the
    map focused, arrows move a cursor and Enter knocks out. The status line then shows the
    metric before → after and the change; right, every head of the later layers as its map
    after minus before (diverging colours), a click opens that head's difference.

    Without a kernel (an exported report, a notebook reopened from its saved state) the
    effects map and the attention still draw from the widget's state, the last knockout's
    result too, and a click says that a knockout needs a running kernel.

    Parameters
    ----------
    model : Model
        A text model loaded with :func:`attnkit.load` (its attention must run through
        attnkit's attention function).
    inputs : sequence
        Texts or token ids (or one of them): what the metric is measured on.
    metric : str, Metric or callable
        What to measure (:mod:`attnkit.interventions.metrics`), as for :func:`attnkit.knockout`.
    effects : HeadResult, DataFrame or ndarray, optional
        Per-head effects ``[layer, head]`` (default: ``attnkit.ablate(model, inputs,
        how=how, metric=metric)``'s ``effect``).
    how : str
        The ablation of the default effects (``"zero"``, ``"mean"``, ``"resample"``).
    item : int
        Which input the maps show (0-indexed).
    layer, head : int, optional
        The head selected first (default the one of largest absolute effect).
    title : str, optional
        Title (default "knock out edges: <metric>").
    progress : bool
        Show a progress bar while the effects are computed.

    Raises
    ------
    InputError
        For effects of another shape than the model's heads, an item out of range, or an
        input longer than :data:`MAX_TOKENS` tokens.
    UnsupportedModelError
        For a model whose attention does not run through attnkit's function, or an
        encoder–decoder.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat on the mat."], progress=False)
    >>> view.effects.shape, view.selected == list(view.selected)
    ((2, 2), True)
    """

    _bundle_name = "intervention"

    effects_values = traitlets.Dict().tag(sync=True)
    effect_name = traitlets.Unicode("").tag(sync=True)
    metric_name = traitlets.Unicode("").tag(sync=True)
    higher_is_better = traitlets.Bool(True).tag(sync=True)
    baseline = traitlets.Float(0.0).tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    maps = traitlets.Dict().tag(sync=True)
    map_heads = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    stripe = traitlets.Unicode("edge").tag(sync=True)
    knocked = traitlets.Dict().tag(sync=True)
    diffs = traitlets.Dict().tag(sync=True)
    diff_heads = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    diff_bin = traitlets.Int(1).tag(sync=True)

    def __init__(
        self,
        model: Any,
        inputs: Any,
        *,
        metric: str | Metric | Any = "auto",
        effects: HeadResult | pd.DataFrame | np.ndarray | None = None,
        how: str = "zero",
        item: int = 0,
        layer: int | None = None,
        head: int | None = None,
        title: str | None = None,
        progress: bool = True,
    ) -> None:
        if hooks.is_seq2seq(model):  # three stacks of heads: the view shows one
            raise UnsupportedModelError(
                f"model: InterventionView shows the heads of a one-stack model; {model.name} is "
                "an encoder-decoder: use ak.knockout / ak.ablate with stack='encoder', "
                "'decoder' or 'cross'.")
        hooks.sites(model)
        b = hooks.batch(model, inputs)
        items = [inputs] if isinstance(inputs, str) or (isinstance(inputs, np.ndarray) and inputs.ndim == 1) else list(inputs)
        item = validate.index(item, b.size, "item")
        L, H = int(model.n_layers), int(model.n_heads)
        n = int(b.lengths[item])
        if n > MAX_TOKENS:
            raise InputError(f"inputs[{item}] has {n} tokens; InterventionView shows at most "
                             f"{MAX_TOKENS} (use attnkit.knockout on long inputs).")
        if effects is None:
            effects = ablate(model, items, how=how, metric=metric, progress=progress)
        if isinstance(effects, HeadResult):
            table, name = effects.grid(effects.value_column()), effects.value_column()
            meta = effects.meta
        else:
            try:
                table, name = head_table(effects, "effect" if isinstance(effects, pd.DataFrame)
                                         and "effect" in effects.columns else None)
            except InputError as err:
                raise InputError(f"effects: {err}") from None
            meta = {}
        table = np.asarray(table, dtype=np.float64)
        if table.shape != (L, H):
            raise InputError(f"effects has shape {table.shape}; the model has {L} layers × {H} "
                             "heads.")
        if layer is None and head is None:
            finite = np.where(np.isfinite(table), np.abs(table), -np.inf)
            layer, head = (int(x) for x in np.unravel_index(int(np.argmax(finite)), table.shape))
        layer, head = validate.head_index(0 if layer is None else layer, 0 if head is None else head, L, H)
        self._model = model
        self._inputs = items
        self._item = item
        self._n = n
        self._n_min = int(min(b.lengths))
        self._table = table
        self._one = hooks.batch(model, [items[item]])
        self._before: dict[int, np.ndarray] = {}
        self._metric = metric
        self._edges: list[tuple[int, int, int, int]] = []
        self._diffs = np.zeros((0, n, n), dtype=np.float32)
        tokens = [str(t) for t in model.encode(items[item]).tokens]
        metric_name = str(meta.get("metric", "")) or getattr(metric, "name", str(metric))
        all_fit = L * H * n * n <= MAP_CELLS
        heads = [[l, h] for l in range(L) for h in range(H)] if all_fit else [[layer, head]]
        super().__init__(
            n_layers=L, n_heads=H, effects_values=wire(table, "float32"), effect_name=name,
            metric_name=metric_name, higher_is_better=bool(meta.get("higher_is_better", True)),
            baseline=float(meta.get("baseline", float("nan"))), tokens=tokens,
            causal=bool(model.causal), maps=f16(self._stack(heads)), map_heads=heads,
            selected=[layer, head], title=title or f"knock out edges: {metric_name}",
        )
        self.observe(self._on_selected, names="selected")
        self.on_msg(self._on_msg)

    # ------------------------------------------------------------------- data
    @property
    def effects(self) -> np.ndarray:
        """The effects map, float64 ``[layer, head]``."""
        return self._table

    def _maps(self, layers: Sequence[int], masks: dict[int, Any] | None = None) -> dict[int, np.ndarray]:
        rec = _Maps(layers, self._n)
        hooks.forward(self._model, self._one, recorders=[Blocker(masks or {}), rec])
        return rec.maps

    def _stack(self, heads: Sequence[Sequence[int]]) -> np.ndarray:
        need = sorted({l for l, _ in heads} - set(self._before))
        if need:
            self._before.update(self._maps(need))
        return np.stack([self._before[l][h] for l, h in heads]).astype(np.float32)

    def attention(self, layer: int, head: int) -> np.ndarray:
        """One head's attention on ``inputs[item]``, float32 ``[query, key]`` (no knockout).

        Parameters
        ----------
        layer, head : int
            The head (0-indexed).

        Returns
        -------
        ndarray
            ``[n, n]``, rows sum to 1.

        Raises
        ------
        InputError
            For a head out of range.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat."], progress=False)
        >>> view.attention(1, 0).shape
        (7, 7)
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        return self._stack([[layer, head]])[0]

    def _on_selected(self, change: dict) -> None:
        pair = list(change["new"] or [])
        if pair and pair not in self.map_heads:
            self.maps, self.map_heads = f16(self._stack([pair])), [pair]

    def show(self, layer: int, head: int) -> None:
        """Select head ``(layer, head)``: its map opens in the middle.

        Parameters
        ----------
        layer, head : int
            The head (0-indexed).

        Returns
        -------
        None

        Raises
        ------
        InputError
            For a head out of range.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat."], progress=False)
        >>> view.show(1, 1); view.selected
        [1, 1]
        """
        self.selected = list(validate.head_index(layer, head, self.n_layers, self.n_heads))

    # -------------------------------------------------------------- knockout
    def knock_out(self, layer: int, head: int, *, query: int, key: int,
                  stripe: str | None = None) -> dict[str, Any]:
        """Knock out the edge ``query → key`` of head ``(layer, head)`` (or its stripe) with
        :func:`attnkit.knockout` on all the inputs, and keep the later layers' maps of
        ``inputs[item]`` after minus before (what a click on the map does).

        Parameters
        ----------
        layer, head : int
            The head (0-indexed).
        query, key : int
            The clicked cell (0-indexed positions; in a causal model ``key <= query``).
        stripe : {"edge", "column", "diagonal"}, optional
            The cell alone, every query's edge to ``key``, or every edge at the offset
            ``query - key`` (default the view's ``stripe``).

        Returns
        -------
        dict
            ``layer``, ``head``, ``query``, ``key``, ``stripe``, ``n_edges`` (per input),
            ``kept`` (rows left alone: the edge was their only key), ``metric``, ``before``,
            ``after``, ``change``, ``relative_change`` (:func:`attnkit.knockout`'s ``meta``),
            and ``downstream``: ``[layer, head, largest |after - before|]`` of every head of
            the later layers. Also set as :attr:`knocked`, with the differences in ``diffs``.

        Raises
        ------
        InputError
            For a head or position out of range, an unknown stripe, or edges that would
            leave a row without any key.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> model = tiny_model("gpt2")
        >>> view = ak.InterventionView(model, ["The cat sat on the mat."], progress=False)
        >>> r = view.knock_out(0, 1, query=5, key=2)
        >>> direct = ak.knockout(model, ["The cat sat on the mat."], [(0, 1, 5, 2)], progress=False)
        >>> r["after"] == direct.meta["knocked_out"], r["n_edges"], len(r["downstream"])
        (True, 1, 2)
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        stripe = validate.choice(self.stripe if stripe is None else stripe, "stripe", STRIPES)
        n_min = self._n_min  # positions every input has: the same edges in each
        q = validate.index(query, n_min, "query")
        k = validate.index(key, n_min, "key")
        if self.causal and k > q:
            raise InputError(f"key {k} is after query {q}: a causal model never reads a later key.")
        edges, kept = stripe_edges(layer, head, q, k, stripe, n_min, self.causal)
        if not edges:
            raise InputError(f"key: the {stripe} through ({q}, {k}) leaves no edge to knock out "
                             "(its rows have no other key).")
        result = knockout(self._model, self._inputs, edges, metric=self._metric, progress=False)
        later = list(range(layer + 1, self.n_layers))
        downstream: list[list[Any]] = []
        diff_heads: list[list[int]] = []
        diffs = np.zeros((0, self._n, self._n), dtype=np.float32)
        if later:
            masks, _ = edge_masks(self._model, self._one, edges)
            after = self._maps(later, masks)
            self._stack([[l, 0] for l in later])
            diff_heads = [[l, h] for l in later for h in range(self.n_heads)]
            diffs = np.stack([after[l][h] - self._before[l][h] for l, h in diff_heads])
            downstream = [[l, h, float(np.abs(d).max())] for (l, h), d in zip(diff_heads, diffs)]
        side = max(8, int(np.sqrt(MAP_CELLS / max(1, len(diff_heads)))))
        pooled, b = _pool_signed(diffs, side)
        meta = result.meta
        out = {"layer": layer, "head": head, "query": q, "key": k, "stripe": stripe,
               "n_edges": len(edges), "kept": kept, "metric": meta["metric"],
               "before": meta["clean"], "after": meta["knocked_out"], "change": meta["change"],
               "relative_change": meta["relative_change"], "n_items": meta["n_items"],
               "higher_is_better": meta["higher_is_better"], "downstream": downstream}
        self._edges = edges
        self._diffs = diffs
        with self.hold_sync():
            self.diffs = f16(pooled) if len(diff_heads) else {}
            self.diff_heads = diff_heads
            self.diff_bin = b
            self.knocked = out
        return out

    def difference(self, layer: int, head: int) -> np.ndarray:
        """Head ``(layer, head)``'s map after the last knockout minus before, float32
        ``[query, key]`` (a head of a later layer than the knocked-out edges).

        Parameters
        ----------
        layer, head : int
            The head (0-indexed).

        Returns
        -------
        ndarray
            ``[n, n]``; each row sums to 0.

        Raises
        ------
        InputError
            Before any knockout, or for a head that is not downstream of it.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat."], progress=False)
        >>> _ = view.knock_out(0, 0, query=4, key=4, stripe="diagonal")
        >>> view.difference(1, 0).shape
        (7, 7)
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        if [layer, head] not in self.diff_heads:
            raise InputError(f"layer: head {head_label(layer, head)} is not after the knocked-out "
                             "edges (knock an edge out of an earlier layer first).")
        return self._diffs[self.diff_heads.index([layer, head])]

    # ---------------------------------------------------------------- messages
    def _on_msg(self, _widget: Any, content: dict[str, Any], _buffers: Sequence[bytes]) -> None:
        if not isinstance(content, dict) or content.get("type") != "knockout":
            return
        self.send(*message(self.answer(content)))

    def answer(self, data: dict[str, Any]) -> dict[str, Any]:
        """The kernel's reply to the front end's knockout request (a click on the map).

        Parameters
        ----------
        data : dict
            ``{"type": "knockout", "layer", "head", "query", "key", "stripe"}``.

        Returns
        -------
        dict
            The request's fields plus ``"result"`` (what :meth:`knock_out` returns), or
            ``"error"`` (a message).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat."], progress=False)
        >>> reply = view.answer({"type": "knockout", "layer": 0, "head": 0, "query": 9, "key": 1})
        >>> reply["error"]
        'query 9 is outside 0..6 (0-indexed; negative counts from the end).'
        """
        reply = {k: data.get(k) for k in ("id", "type", "layer", "head", "query", "key", "stripe")}
        try:
            reply["result"] = self.knock_out(data.get("layer"), data.get("head"),  # type: ignore[arg-type]
                                             query=data.get("query"), key=data.get("key"),  # type: ignore[arg-type]
                                             stripe=data.get("stripe"))
        except (AttnkitError, TypeError, ValueError) as err:
            reply["error"] = str(err)
        return reply

    # ------------------------------------------------------------------ figure
    def figure(self, *, preview: bool = False) -> Figure:
        """The static picture: the effects map, the selected head's attention (the
        knocked-out edges outlined) and the later heads' differences of the last knockout.

        Parameters
        ----------
        preview : bool
            Fewer token labels and difference panels.

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat."], progress=False)
        >>> len(view.figure().axes) >= 2
        True
        """
        from ..plot.common import figure_axes

        kn = self.knocked
        shown = list(self.diff_heads)[: 8 if preview else 16]
        fig, _ = figure_axes(None, (13.0 if shown else 9.5, 4.2))
        fig.clear()
        grid = fig.add_gridspec(1, 3 if shown else 2, width_ratios=[1, 1.4, 1.3] if shown else [1, 1.4])
        ax = fig.add_subplot(grid[0])
        plots.plot_head_map(self._table, self.effect_name or "effect", ax=ax, diverging=True,
                            title=f"{self.effect_name or 'effect'} on {self.metric_name}")
        layer, head = self.selected or [kn.get("layer", 0), kn.get("head", 0)]
        ax = fig.add_subplot(grid[1])
        title = f"head {head_label(layer, head)}, input {self._item}"
        if kn:
            title += (f"\n{kn['stripe']} ({kn['query']}, {kn['key']}) of {head_label(kn['layer'], kn['head'])} "
                      f"knocked out: {kn['metric']} {kn['before']:.3g} \u2192 {kn['after']:.3g}")
        plots.plot_heatmap(self.attention(layer, head), self.tokens, ax=ax, title=title,
                           causal=self.causal, max_labels=16 if preview else 40)
        if kn and [kn["layer"], kn["head"]] == [layer, head]:
            from matplotlib.patches import Rectangle

            for _, _, q, k in self._edges:
                ax.add_patch(Rectangle((k - 0.5, q - 0.5), 1, 1, fill=False, ec="#d62728", lw=1.2))
        if shown:
            cols = 4 if len(shown) > 4 else len(shown)
            rows = -(-len(shown) // cols)
            sub = grid[2].subgridspec(rows, cols)
            top = max(float(np.abs(self._diffs).max()), 1e-12)
            for i, (l, h) in enumerate(shown):
                a = fig.add_subplot(sub[i // cols, i % cols])
                a.imshow(self._diffs[self.diff_heads.index([l, h])], cmap="RdBu_r", vmin=-top,
                         vmax=top, interpolation="nearest")
                a.set_xticks([])
                a.set_yticks([])
                a.set_title(head_label(l, h), fontsize=8)
            fig.text(0.99, 0.99, f"after \u2212 before (\u00b1{top:.2g})", ha="right", va="top", fontsize=8)
        return fig

    def _alt_text(self) -> str:
        kn = self.knocked
        base = (f"{self.title}: {self.effect_name or 'effect'} per head of {self.n_layers} layers × "
                f"{self.n_heads} heads")
        if not kn:
            return base + "; no edge knocked out yet."
        return (base + f"; {kn['stripe']} ({kn['query']}, {kn['key']}) of head "
                f"{head_label(kn['layer'], kn['head'])} knocked out: {kn['metric']} "
                f"{kn['before']:.4g} → {kn['after']:.4g} ({kn['change']:+.4g}).")
