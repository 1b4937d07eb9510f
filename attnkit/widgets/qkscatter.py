"""QKScatter widget: the queries and keys of heads in one picture, drawn with WebGL
(regl-scatterplot), a million points at a time (AttentionViz, Yeh et al. 2023)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from ..analysis.qk import QKEmbedding, QKPoints
from ..core import validate
from ..core.labels import head_label
from ..errors import InputError
from ..plot.qk import KIND_COLORS, plot_qk_embedding
from ._base import AttnkitWidget, WholeNumber
from ._codec import read, wire

#: Bytes of points a widget sends (and a saved notebook or report embeds) at most: at 5 bytes
#: a point, 8 MB is 1.6 million points, of one head or of every head in the matrix view.
MAX_BYTES = 8_000_000
#: Most categories a column is coloured by (numeric columns are cut into this many bins).
MAX_CATEGORIES = 20
#: Categorical colours (Okabe–Ito first, then Tableau 20 tones), visible on light and dark.
PALETTE = ["#E69F00", "#0072B2", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442",
           "#8C564B", "#7F7F7F", "#17BECF", "#BCBD22", "#9467BD", "#E377C2", "#1F77B4",
           "#FF7F0E", "#2CA02C", "#D62728", "#AEC7E8", "#98DF8A", "#C49C94"]
#: Sequential colours of binned numeric columns (viridis, light enough on dark too).
SEQUENTIAL = ["#440154", "#482878", "#3E4A89", "#31688E", "#26828E", "#1F9E89", "#35B779",
              "#6DCD59", "#B4DE2C", "#FDE725"]


def _normalised(xy: np.ndarray) -> np.ndarray:
    """``xy`` fitted into [-0.95, 0.95]², aspect kept (regl-scatterplot's device coordinates)."""
    if len(xy) == 0:
        return xy.astype(np.float32)
    lo, hi = xy.min(0), xy.max(0)
    span = float((hi - lo).max()) or 1.0
    return ((xy - (lo + hi) / 2) / span * 1.9).astype(np.float32)


class QKScatter(AttnkitWidget):
    """Queries and keys of one head, or every head as small multiples, drawn on WebGL.

    Points travel as binary buffers made straight from the embedding's columns (no table of
    the points is made): float16 positions (4 bytes) and a uint8 colour code, 5 bytes a
    point; in the matrix view the points go panel by panel, with one count a panel.
    The view pans and zooms (scroll or drag; ``+``/``-``/arrows/``0`` on the keyboard; where
    drawing every point takes longer than a frame, frames in motion move the last full frame
    and every point is drawn again once the view rests), colours points by any column with a
    legend, shows the hovered token in its sentence (asked from the kernel), syncs a lasso
    selection (Shift + drag) to :attr:`selected` (the points' rows; their table is made only
    when read), and sets :attr:`clicked`; in the matrix view a click (or Enter on the
    focused panel) opens that head, in one head's view a click opens the point's input in
    :meth:`linked_heatmap` (from the store, for an embedding of a store). Without
    JavaScript the notebook shows a PNG of the same picture.

    Parameters
    ----------
    embedding : QKEmbedding
        What :func:`attnkit.qk_embedding` returned.
    layer, head : int, optional
        The head shown first (0-indexed); default the first of the embedding.
    mode : {"head", "matrix"}
        One head, or every head as small multiples (AttentionViz's global view).
    color_by : str
        ``"kind"`` (query or key), ``"position"``, ``"role"``, ``"token"``, or any column
        of the embedding's table (a joined part of speech, ...).
    max_bytes : int
        Most bytes of points sent (and embedded in saved notebooks and reports); beyond it
        a seeded random sample of points is drawn, and the status line says so.
    title : str, optional
        Title above the plot.

    Raises
    ------
    InputError
        For a head not in the embedding, an unknown mode or colour column.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> emb = ak.qk_embedding(tiny_model("gpt2").attend("The cat sat on the mat."), method="pca")
    >>> view = ak.QKScatter(emb, layer=1, head=0)
    >>> view.n_points == len(emb.head(1, 0)), view.categories
    (True, ['query', 'key'])
    """

    _bundle_name = "qkscatter"
    points = traitlets.Dict().tag(sync=True)
    codes = traitlets.Dict().tag(sync=True)
    panels = traitlets.Dict().tag(sync=True)
    panel_heads = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    n_points = traitlets.Int(0).tag(sync=True)
    n_total = traitlets.Int(0).tag(sync=True)
    categories = traitlets.List(traitlets.Unicode()).tag(sync=True)
    colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    color_by = traitlets.Unicode("kind").tag(sync=True)
    columns = traitlets.List(traitlets.Unicode()).tag(sync=True)
    mode = traitlets.Unicode("head").tag(sync=True)
    layer = WholeNumber(0).tag(sync=True)
    head = WholeNumber(0).tag(sync=True)
    selection = traitlets.Dict().tag(sync=True)
    clicked = traitlets.Int(-1).tag(sync=True)

    def __init__(self, embedding: Any, *, layer: int | None = None, head: int | None = None,
                 mode: str = "head", color_by: str = "kind", max_bytes: int = MAX_BYTES,
                 title: str | None = None) -> None:
        max_bytes = validate.size(max_bytes, "max_bytes")
        if not isinstance(embedding, QKEmbedding) or \
                not {"x", "y", "kind", "layer", "head"} <= set(embedding.columns):
            raise InputError("QKScatter takes what attnkit.qk_embedding returned.")
        self._emb = embedding
        self._heads = [tuple(int(v) for v in h) for h in embedding.meta["heads"]]
        if len(self._heads) > 255:
            raise InputError(f"The matrix view holds at most 255 heads; this embedding has {len(self._heads)}.")
        self._max_bytes = int(max_bytes)
        self._rows = np.zeros(0, dtype=np.int64)
        l0 = self._heads[0][0] if layer is None else self._check_layer(layer)
        if head is None:
            h0 = next(h for l, h in self._heads if l == l0)
        else:
            l0, h0 = self._check_head(l0, head)
        self._check_mode(mode)
        self._check_color(color_by)
        super().__init__(layer=int(l0), head=int(h0), mode=mode, color_by=color_by,
                         columns=self._colourable(), panel_heads=[list(h) for h in self._heads],
                         title=title or "Queries and keys")
        self._refresh()
        self.observe(lambda _c: self._refresh(), names=["layer", "head", "mode"])
        self.observe(lambda _c: self._recolour(), names=["color_by"])
        self.observe(self._open_clicked, names=["clicked"])
        self.on_msg(self._on_msg)
        self._linked: Any = None

    # ------------------------------------------------------------------ checks
    def _shape(self) -> tuple[int, int]:
        meta = self._emb.meta
        n_layers = meta.get("n_layers") or max(h[0] for h in self._heads) + 1
        n_heads = meta.get("n_heads") or max(h[1] for h in self._heads) + 1
        return int(n_layers), int(n_heads)

    def _check_layer(self, layer: Any) -> int:
        layer = validate.index(layer, self._shape()[0], "layer")
        layers = sorted({l for l, _ in self._heads})
        if layer not in layers:
            raise InputError(f"layer {layer} is not in this embedding; its layers are {layers} "
                             "(0-indexed).")
        return layer

    def _check_head(self, layer: Any, head: Any) -> tuple[int, int]:
        n_layers, n_heads = self._shape()
        layer, head = validate.head_index(layer, head, n_layers, n_heads)
        if (layer, head) not in self._heads:
            raise InputError(f"Head {(layer, head)} is not in this embedding; it holds {self._heads}.")
        return layer, head

    @traitlets.validate("layer")
    def _valid_layer(self, proposal: dict) -> int:
        layer = self._check_layer(proposal["value"])
        if (layer, self.head) not in self._heads:  # keep a head the embedding has
            with self.hold_trait_notifications():
                self.head = next(h for l, h in self._heads if l == layer)
        return layer

    @traitlets.validate("head")
    def _valid_head(self, proposal: dict) -> int:
        return self._check_head(self.layer, proposal["value"])[1]

    @staticmethod
    def _check_mode(mode: str) -> None:
        if mode not in ("head", "matrix"):
            raise InputError(f"mode must be 'head' or 'matrix', not {mode!r}.")

    def _colourable(self) -> list[str]:
        skip = {"x", "y", "z", "layer", "head"}
        return [str(c) for c in self._emb.columns if c not in skip]

    def _check_color(self, column: str) -> None:
        if column not in self._colourable():
            raise InputError(f"color_by must be one of {self._colourable()}, not {column!r}.")

    @traitlets.validate("mode")
    def _valid_mode(self, proposal: dict) -> str:
        self._check_mode(proposal["value"])
        return proposal["value"]

    @traitlets.validate("color_by")
    def _valid_color(self, proposal: dict) -> str:
        self._check_color(proposal["value"])
        return proposal["value"]

    # ------------------------------------------------------------------ data
    def _panel_of(self) -> np.ndarray:
        """The panel (index into the embedding's heads) of every point."""
        layer, head = self._emb.column("layer"), self._emb.column("head")
        heads = np.asarray(self._heads, dtype=np.int64).reshape(-1, 2)
        width = int(max(heads[:, 1].max(), head.max(initial=0))) + 1
        key = layer * width + head
        order = heads[:, 0] * width + heads[:, 1]
        sort = np.argsort(order)
        return sort[np.searchsorted(order[sort], key)]

    def _shown(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the embedding the view draws (a seeded sample beyond the byte budget),
        and in the matrix view the points a panel (the rows sorted panel by panel)."""
        if self.mode == "head":
            rows = self._emb.head_rows(self.layer, self.head)
        else:
            rows = np.arange(len(self._emb))
        most = max(1, self._max_bytes // 5)
        self.n_total = len(rows)
        if len(rows) > most:
            rng = np.random.default_rng(0)
            rows = np.sort(rng.choice(rows, size=most, replace=False))
        if self.mode == "head":
            return rows, np.zeros(0, dtype=np.int64)
        panel = self._panel_of()[rows]
        order = np.argsort(panel, kind="stable")
        return rows[order], np.bincount(panel, minlength=len(self._heads))

    def _refresh(self) -> None:
        rows, counts = self._shown()
        self._rows = rows
        xy = np.stack([self._emb.column("x", rows), self._emb.column("y", rows)], axis=1)
        if self.mode == "head":
            pts = _normalised(xy)
            panels: dict = {}
        else:
            pts = np.zeros_like(xy)
            ends = np.cumsum(counts)
            for lo, hi in zip(ends - counts, ends):
                pts[lo:hi] = _normalised(xy[lo:hi])
            panels = wire(counts, "uint32")
        self.set_trait("selection", {})
        with self.hold_sync():
            self.points = wire(pts, "float16")
            self.panels = panels
            self.n_points = len(rows)
            self._recolour()

    def _recolour(self) -> None:
        codes, cats, colors = _categories(self._emb.column(self.color_by, self._rows), self.color_by)
        with self.hold_sync():
            self.codes = wire(codes, "uint8")
            self.categories = cats
            self.colors = colors

    # ------------------------------------------------------------------ Python side
    @property
    def selected(self) -> QKPoints:
        """The points of the lasso selection: their rows in the embedding's table
        (``.rows``), and the table of just those points, made when read (``.table``; column
        access and DataFrame methods work on it directly, as on every result).

        Returns
        -------
        QKPoints
            Empty when nothing is selected.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.QKScatter(ak.qk_embedding(tiny_model("gpt2").attend("The cat sat."), method="pca"))
        >>> view.select([0, 1]); view.selected[["kind", "position"]].values.tolist()
        [['query', 0], ['query', 1]]
        >>> view.selected.rows.tolist()
        [0, 1]
        """
        if not self.selection:
            return self._emb.take(np.zeros(0, dtype=np.int64))
        idx = np.asarray(read(self.selection), dtype=np.int64)
        idx = idx[(idx >= 0) & (idx < len(self._rows))]
        return self._emb.take(self._rows[idx])

    def select(self, ids: Sequence[int]) -> None:
        """Select points by their index in the drawn picture (what a lasso does).

        Parameters
        ----------
        ids : sequence of int
            Indices into the drawn points (``0 .. n_points - 1``).

        Returns
        -------
        None

        Raises
        ------
        InputError
            For an index outside the drawn points.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.QKScatter(ak.qk_embedding(tiny_model("gpt2").attend("The cat sat."), method="pca"))
        >>> view.select([2]); len(view.selected)
        1
        """
        idx = validate.positions(ids, self.n_points, "ids")
        self.selection = wire(idx, "uint32") if idx.size else {}

    def point(self, ids: int) -> dict[str, Any]:
        """What the view shows on hover: the point's row and its sentence.

        Parameters
        ----------
        ids : int
            The index of one drawn point.

        Returns
        -------
        dict
            ``layer``, ``head``, ``item``, ``position``, ``token``, ``kind``, ``role``,
            ``tokens`` (the sentence) and ``value`` (the colour column's value).

        Raises
        ------
        InputError
            For an index outside the drawn points.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.QKScatter(ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca"))
        >>> p = view.point(2); p["token"], p["kind"], p["tokens"][p["position"]]
        ('cat', 'query', 'cat')
        """
        i = validate.index(ids, len(self._rows), "ids")
        row = self._row(i)
        out = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items() if k in
               ("layer", "head", "item", "position", "token", "kind", "role")}
        out["kind"] = str(out["kind"])
        out["value"] = str(row[self.color_by])
        out["tokens"] = self._emb.tokens(int(row["item"]))
        return out

    def answer(self, data: dict[str, Any]) -> dict[str, Any]:
        """The kernel's reply to the front end's hover request ``{"type": "point", "index",
        "id"}``: :meth:`point` and the request's ``id`` (or an ``error``).

        Parameters
        ----------
        data : dict
            The request.

        Returns
        -------
        dict
            The reply.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.QKScatter(ak.qk_embedding(tiny_model("bert").attend("The cat sat."), method="pca"))
        >>> view.answer({"type": "point", "index": 99, "id": 3})["error"]
        'ids 99 is outside 0..11 (0-indexed; negative counts from the end).'
        """
        try:
            return {"id": data.get("id"), **self.point(int(data.get("index", -1)))}
        except (InputError, TypeError, ValueError) as err:
            return {"id": data.get("id"), "error": str(err)}

    def _on_msg(self, _widget: Any, content: dict[str, Any], _buffers: Sequence[bytes]) -> None:
        if isinstance(content, dict) and content.get("type") == "point":
            self.send(self.answer(content))

    def _row(self, i: int) -> pd.Series:
        """The table row of drawn point ``i`` (made for that point alone)."""
        return self._emb.take([int(self._rows[i])]).table.iloc[0]

    def _open_clicked(self, change: dict) -> None:
        i = int(change["new"])
        if not 0 <= i < len(self._rows):
            return
        row = self._row(i)
        if self.mode == "matrix":
            with self.hold_trait_notifications():
                self.layer, self.head, self.mode = int(row["layer"]), int(row["head"]), "head"
            # the index named a point of the matrix: forget it, so that clicking the same
            # point again after going back to the matrix opens its head again
            self.clicked = -1
            return
        if self._linked is not None:
            self._show_map(int(row["item"]), int(row["layer"]), int(row["head"]), int(row["position"]),
                           str(row["kind"]))

    def _show_map(self, item: int, layer: int, head: int, position: int, kind: str) -> None:
        from ..core.attention import Attention
        from .heatmap import Heatmap

        emb = self._emb
        # the input's map of this head: read from the store (its maps, or computed from its
        # stored queries and keys), never from the other inputs
        m = emb.item_map(item, layer, head)
        tokens = emb.tokens(item)
        att = Attention.from_maps(m[None, None], tokens, emb.item_roles(item), causal=emb.item_causal(item))
        where = "row" if kind == "query" else "column"
        heat = Heatmap(att, layer=0, head=0,
                       title=f"item {item}, head {head_label(layer, head)}: {where} {position} ({tokens[position]})")
        self._linked.children = [heat]

    def linked_heatmap(self) -> Any:
        """A box that shows, as a :class:`~attnkit.widgets.Heatmap`, the input of the point
        clicked last: its map for the open head (the query's row, the key's column), read
        from the store for an embedding of a store (its stored map, or the map computed
        from its stored queries and keys when the store keeps only those).

        Returns
        -------
        ipywidgets.VBox
            Display it beside the scatter.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.QKScatter(ak.qk_embedding(tiny_model("gpt2").attend("The cat sat."), method="pca"))
        >>> box = view.linked_heatmap(); view.clicked = 1
        >>> type(box.children[0]).__name__
        'Heatmap'
        """
        import ipywidgets

        if self._linked is None:
            self._linked = ipywidgets.VBox([])
        return self._linked

    # ------------------------------------------------------------------ static copy
    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of the view: the open head, or every head (matrix).

        Parameters
        ----------
        preview : bool
            Draw at most 50,000 points a head (what notebooks embed).

        Returns
        -------
        matplotlib.figure.Figure

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> emb = ak.qk_embedding(tiny_model("gpt2").attend("The cat sat."), method="pca")
        >>> len(ak.QKScatter(emb, mode="matrix").figure().axes)
        4
        """
        emb: Any = self._emb
        most = 50_000 * (1 if self.mode == "head" else len(self._heads))
        if preview and len(emb) > most:  # a seeded sample of the points, no table made
            rng = np.random.default_rng(0)
            emb = emb.take(np.sort(rng.choice(len(emb), size=most, replace=False)))
        if self.mode == "head":
            return plot_qk_embedding(emb, layer=self.layer, head=self.head)
        return plot_qk_embedding(emb)

    def _alt_text(self) -> str:
        if self.mode == "matrix":
            return f"Queries (orange) and keys (blue) of {len(self._heads)} heads"
        return f"Queries (orange) and keys (blue) of head {head_label(self.layer, self.head)}"


def _categories(values: Any, name: str) -> tuple[np.ndarray, list[str], list[str]]:
    """Codes (uint8), category labels and colours of a column's values: query/key in their
    colours, numbers cut into at most :data:`MAX_CATEGORIES` bins, other values by frequency
    (the rarest pooled as "other")."""
    if name == "kind":
        cats = ["query", "key"]
        codes = np.asarray(values).astype(str) == "key"
        return codes.astype(np.uint8), cats, [KIND_COLORS["query"], KIND_COLORS["key"]]
    col = values if isinstance(values, pd.Series) else pd.Series(values)
    if pd.api.types.is_numeric_dtype(col) and col.nunique() > MAX_CATEGORIES:
        values = col.to_numpy(dtype=np.float64)
        edges = np.unique(np.nanquantile(values, np.linspace(0, 1, 11)))
        codes = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, max(len(edges) - 2, 0))
        finite = ~np.isnan(values)
        if np.all(values[finite] == np.round(values[finite])):
            # whole numbers (positions, items): each bin named by the first and last value it
            # holds ("0–3", "4–7"), so no value is in two labels; empty bins dropped
            present = np.unique(codes[finite])
            codes = np.searchsorted(present, codes)
            cats = []
            for c in range(len(present)):
                members = values[finite & (codes == c)]
                lo, hi = int(members.min()), int(members.max())
                cats.append(f"{lo}" if lo == hi else f"{lo}–{hi}")
        else:  # half-open bins, the last closed
            k = max(len(edges) - 1, 1)
            cats = [f"[{edges[i]:g}, {edges[i + 1]:g}{']' if i == k - 1 else ')'}" for i in range(k)]
        colors = [SEQUENTIAL[round(i * (len(SEQUENTIAL) - 1) / max(len(cats) - 1, 1))] for i in range(len(cats))]
        codes = np.where(np.isnan(values), len(cats), codes)
        return codes.astype(np.uint8), cats + ["missing"], colors + ["#999999"]
    labels = col.astype(str).where(col.notna(), "missing")
    counts = labels.value_counts()
    top = list(counts.index[: MAX_CATEGORIES - 1]) if len(counts) > MAX_CATEGORIES else list(counts.index)
    if pd.api.types.is_numeric_dtype(col):
        top = sorted(top, key=lambda s: float(s) if s != "missing" else np.inf)
    where = {c: i for i, c in enumerate(top)}
    codes = labels.map(where).fillna(len(top)).to_numpy(dtype=np.int64)
    cats = [str(c) for c in top] + (["other"] if len(counts) > len(top) else [])
    return codes.astype(np.uint8), cats, PALETTE[: len(cats)]
