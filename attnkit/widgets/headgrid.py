"""HeadGrid widget: every layer × head as a thumbnail, click to select a head."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from .._compat import renamed
from .._progress import progress as progress_bar
from ..core.blocks import EdgePool, summarize
from ..core import validate
from ..errors import InputError
from ..plot import attention as plots
from ..core.results import head_table
from ..core.types import AttentionLike
from ._base import SelectsHead, SinkAwareScale
from ._codec import wire
from ._progressive import Progressive, fills_in
from ._pyramid import extent, thumb_side, top_level, view_reductions

#: decades of the thumbnails' log codes: code c > 0 stands for top · 10**(DECADES * (c/255 - 1))
DECADES = 6.0

def _order(L: int, H: int, metric: np.ndarray | None) -> list[tuple[int, int]]:
    """Heads in the order they are computed: the largest metric first (NaN last), else
    layer by layer."""
    pairs = [(l, h) for l in range(L) for h in range(H)]
    if metric is None:
        return pairs
    flat = np.asarray(metric, dtype=np.float64).reshape(-1)
    key = np.where(np.isnan(flat), -np.inf, flat)
    return [pairs[i] for i in np.argsort(-key, kind="stable")]


def log_codes(thumbs: np.ndarray, top: np.ndarray) -> np.ndarray:
    """uint8 codes of ``thumbs`` ``[L, H, t, t]`` on a log axis below each head's ``top``
    ``[L, H]``: 255 is the top, each code ``DECADES / 255`` decades (5.6 %) below the next;
    0 is 0 or anything more than ``DECADES`` decades below the top."""
    safe = np.where(top > 0, top, 1.0)[:, :, None, None]
    with np.errstate(divide="ignore"):
        rel = np.log10(np.maximum(thumbs, 0) / safe)
    codes = np.rint(255.0 * (1.0 + rel / DECADES))
    return np.clip(np.nan_to_num(codes, nan=0.0, neginf=0.0), 0, 255).astype(np.uint8)


class HeadGrid(Progressive, SinkAwareScale, SelectsHead):
    """All heads of ``att`` as thumbnails labelled "L-H" (1-indexed), like bertviz's model
    view but drawn on one canvas from uint8 codes.

    Parameters
    ----------
    attentions : AttentionLike
        Dense :class:`~attnkit.Attention` or lazy attention. Each thumbnail is the head's
        max-pooled overview (the numbers of ``att.pooled(layer, head, size)``), read band by
        band (a lazy map is never held whole) in one pass per head that also reads what a
        :class:`Heatmap` of the head shows first (kept for it). Cross-attention
        (:class:`~attnkit.core.cross.CrossAttention`) gives rectangular thumbnails, target rows
        over source columns.
    metric : DataFrame, Series or ndarray, optional
        Per-head values drawn as a coloured bar under each thumbnail and shown on hover:
        indexed by ``(layer, head)`` (e.g. ``head_stats``) or an array ``[layer, head]``.
    value : str, optional
        The DataFrame column to use (needed when it has several numeric columns).
    scale : {"linear", "log", "rank"}, optional
        Colour scale of the thumbnails, as in :class:`Heatmap` (default: ``"log"`` for
        causal attention, else ``"linear"``); the view has a control to change it.
    exclude_sinks : bool, optional
        Leave the first token, [CLS] and [SEP] columns out of each head's scale (default:
        True for causal attention).
    normalize : {"head", "global"}
        ``"head"`` colours each head up to its own maximum, so diffuse heads show their
        pattern; ``"global"`` uses one top for every head.
    size : int
        Cells per thumbnail side at most (default 128); fewer when the grid has so many heads
        that the thumbnails would pass ``THUMB_BYTES``.
    progress : bool
        Show a progress bar while the thumbnails are computed (not while the grid fills in:
        the view shows its progress itself).
    progressive : bool, optional
        Return at once and compute the heads in a worker thread, the view filling in head by
        head (the largest ``metric`` first, when one is given) while the kernel runs other
        cells; :meth:`wait` blocks until every head is there, :meth:`cancel` stops. Default:
        inside a Jupyter kernel for inputs of at least
        ``attnkit.widgets._progressive.PROGRESSIVE_CELLS`` heads × n²
        (unless ``$ATTNKIT_PROGRESSIVE`` is ``0``, as in ``attnkit report``).
    decades : float
        Range of the log scale, in decades below each head's top.
    cmap : str
        Colour map known to the front end (default "Blues").
    title : str, optional
        Title (default: model, layers × heads, tokens).

    Raises
    ------
    InputError
        When the attention has no positions, or ``scale``/``normalize``/``size``/``metric``
        are not allowed.

    Notes
    -----
    ``selected`` is ``[layer, head]`` (0-indexed) after a click, ``[]`` before; observe it,
    or :meth:`link` a :class:`Heatmap` to follow it. A grid that fills in keeps ``ready`` (a
    ``[layer, head]`` mask of the heads computed) and ``computing`` (``"running"``, ``"done"``,
    or ``"stopped"`` with the reason) in its state: a copy saved half-way shows the heads it
    has and says the rest is missing.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> from attnkit.widgets import HeadGrid, Heatmap
    >>> att = tiny_model("bert").attend("The cat sat on the mat.")
    >>> grid = HeadGrid(att, progress=False)
    >>> grid.thumbs["dtype"], grid.thumbs["shape"]  # uint8 codes [layer, head, t, t]
    ('uint8', [2, 2, 9, 9])
    >>> hm = grid.link(Heatmap(att))
    >>> grid.selected = [1, 0]
    >>> (hm.layer, hm.head)
    (1, 0)
    >>> from attnkit.testing import tiny_seq2seq
    >>> cross = tiny_seq2seq("t5").attend("The cat sat on the mat.", "A cat.").cross
    >>> rect = HeadGrid(cross, progress=False)
    >>> rect.thumbs["shape"], rect.n_tokens, rect.n_cols  # [layer, head, target, source]
    ([2, 2, 5, 8], 5, 8)
    """

    _bundle_name = "headgrid"

    size = traitlets.Int(0).tag(sync=True)
    n_tokens = traitlets.Int(0).tag(sync=True)
    thumbs = traitlets.Dict().tag(sync=True)
    head_max = traitlets.Dict().tag(sync=True)
    metric = traitlets.Dict().tag(sync=True)
    metric_name = traitlets.Unicode("").tag(sync=True)
    metric_cmap = traitlets.Unicode("viridis").tag(sync=True)
    cmap = traitlets.Unicode("Blues").tag(sync=True)
    normalize = traitlets.Unicode("head").tag(sync=True)
    ready = traitlets.Dict().tag(sync=True)
    #: Rectangular maps (cross-attention): thumbnail columns and source tokens (0 when
    #: square: ``size`` and ``n_tokens`` then count both).
    size_cols = traitlets.Int(0).tag(sync=True)
    n_cols = traitlets.Int(0).tag(sync=True)

    @renamed(positional=("metric", "value"), att="attentions")
    def __init__(
        self,
        attentions: AttentionLike,
        *,
        metric: pd.DataFrame | pd.Series | np.ndarray | None = None,
        value: str | None = None,
        scale: str | None = None,
        exclude_sinks: bool | None = None,
        normalize: str = "head",
        decades: float = 3.0,
        size: int = 128,
        cmap: str = "Blues",
        title: str | None = None,
        progress: bool = True,
        progressive: bool | None = None,
    ) -> None:
        size = validate.size(size, "size")
        att = attentions
        if not isinstance(att, AttentionLike):
            raise InputError(f"HeadGrid takes attention (Attention or LazyAttention); got {type(att).__name__}.")
        if scale in ("head", "global"):  # the old meaning of scale=
            warnings.warn(f"HeadGrid(scale={scale!r}) is deprecated: use normalize={scale!r} "
                          "(scale= now names the colour scale).", DeprecationWarning, stacklevel=2)
            normalize, scale = scale, None
        scaled = self.scale_traits(att, scale, exclude_sinks, decades)
        if normalize not in ("head", "global"):
            raise InputError(f"normalize must be 'head' or 'global', not {normalize!r}.")
        n, cols = extent(att)
        if n == 0 or cols == 0:
            raise InputError("the attention has no positions; nothing to draw.")
        if int(size) < 1:
            raise InputError(f"thumbnail size must be at least 1; got {size}.")
        L, H = att.n_layers, att.n_heads
        self._rect = hasattr(att, "n_columns")
        t = thumb_side(max(n, cols), L * H, size)
        self._side = t  # a rectangle's thumbnails: min(t, n) x min(t, cols)
        t, tc = (min(t, n), min(t, cols)) if self._rect else (t, t)
        self._thumbs = np.zeros((L, H, t, tc), dtype=np.float32)  # the static figure's source
        self._head_max = np.zeros((L, H), dtype=np.float32)
        self._ready = np.zeros((L, H), dtype=np.uint8)
        # the overview a Heatmap of a long map draws is read in the same pass (shorter maps
        # are their own overview, read again in no time)
        self._reductions = view_reductions(n, L * H, scaled["sinks"], thumb=t, overview=top_level(n) > 0)
        self._att = att
        self._metric_table = None
        metric_wire, metric_name = {}, ""
        if metric is not None:
            table, metric_name = head_table(metric, value, shape=(L, H))
            self._metric_table = table
            metric_wire = wire(table, "float32")
        if title is None:
            who = getattr(att, "model", "") or ""
            tokens = f"{n} target \u00d7 {cols} source tokens" if self._rect else f"{n} tokens"
            title = f"{who + ': ' if who else ''}{L} layers \u00d7 {H} heads, {tokens}"
        progressive = fills_in(progressive, L * H * n * n)
        self._lock = threading.Lock()
        order = _order(L, H, self._metric_table)
        if not progressive:
            bar = progress_bar(total=L * H, show=progress and L * H * n * n > 1 << 26,
                               desc="head thumbnails", unit="head")
            for l in range(L):
                for h, got in enumerate(self._summary(l, range(H))):
                    self._keep(l, h, got)
                bar.update(H)
            bar.close()
        super().__init__(
            n_layers=L, n_heads=H, size=t, n_tokens=n, metric=metric_wire, metric_name=metric_name,
            cmap=cmap, normalize=normalize, title=title, **scaled, **self._state(progressive and "running" or "done"),
            **({"size_cols": tc, "n_cols": cols} if self._rect else {}),
        )
        self._tokens = list(att.tokens)
        if progressive:
            self._start(lambda step: self._fill(order, step), "attnkit-headgrid")

    # ----------------------------------------------------------- filling in
    def _summary(self, layer: int, heads: Any) -> list[dict]:
        """What the grid reads of ``heads`` of one layer (:meth:`_keep` takes each): one pass
        of :func:`~attnkit.core.blocks.summarize`; a rectangle (dense cross-attention) is pooled
        straight from its maps (``pooled``)."""
        if self._rect:
            key = EdgePool(self._thumbs.shape[-1]).key
            return [{key: self._att.pooled(layer, h, self._side)} for h in heads]
        return summarize(self._att, layer, heads, self._reductions)

    def _keep(self, l: int, h: int, got: dict) -> np.ndarray:
        """Store head (l, h)'s thumbnail from its summary; returns its log codes."""
        thumb = got[EdgePool(self._thumbs.shape[-1]).key]
        top = np.float32(thumb.max()) if thumb.size else np.float32(0)
        with self._lock:
            self._thumbs[l, h] = thumb
            self._head_max[l, h] = top
            self._ready[l, h] = 1
        return log_codes(thumb[None, None], np.array([[top]]))[0, 0]

    def _state(self, computing: str) -> dict[str, Any]:
        """Trait values of what is computed so far (one consistent snapshot)."""
        with self._lock:
            codes = log_codes(self._thumbs, self._head_max)
            head_max, ready = self._head_max.copy(), self._ready.copy()
        return {"thumbs": wire(codes, "uint8"), "head_max": wire(head_max, "float32"),
                "ready": {} if ready.all() else wire(ready, "uint8"), "computing": computing}

    def _complete(self) -> bool:
        return bool(self._ready.all())

    def _fill(self, order: list[tuple[int, int]], step: Callable[[], bool]) -> bool:
        """The worker's work: one head at a time through ``blocks.summarize`` (kept for a
        Heatmap of the same attention), each pushed to the views as it is done."""
        total = len(order)
        for i, (l, h) in enumerate(order, 1):
            if not step():
                return False
            codes = self._keep(l, h, self._summary(l, [h])[0])
            self._push("thumb", layer=l, head=h, max=float(self._head_max[l, h]), done=i, total=total,
                       array=wire(codes, "uint8"))
        return True

    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of every head's thumbnail (what reports and saved files show).

        Parameters
        ----------
        preview : bool
            Thumbnails of at most 56 cells per side (what notebooks embed).

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot (nothing is shown or kept open).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("bert").attend("The cat sat on the mat.")
        >>> fig = ak.HeadGrid(att, progress=False).figure(preview=True)
        >>> len(fig.axes[0].images)  # the thumbnails of all heads drawn as one image
        1
        """
        return plots.plot_head_grid(
            self._thumbs, metric=self._metric_table, metric_name=self.metric_name or "metric",
            scale=self.normalize, size=min(self.size, 56) if preview else self.size,
            cmap=self.cmap, title=self.title, color_scale=self.scale, decades=self.decades,
        )

    def _alt_text(self) -> str:
        text = " ".join(self._tokens[:40]) + (" …" if len(self._tokens) > 40 else "")
        if self._rect:
            cols = list(getattr(self._att, "col_tokens", []))
            src = " ".join(cols[:40]) + (" …" if len(cols) > 40 else "")
            return f"Cross-attention of every head ({self.title}) from: {text}; to: {src}"
        return f"Attention of every head ({self.title}) on: {text}"
