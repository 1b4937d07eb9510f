"""HeadGrid widget: every layer × head as a thumbnail, click to select a head."""

from __future__ import annotations

import numpy as np
import pandas as pd
import traitlets
from matplotlib.figure import Figure

from .._compat import renamed
from ..attention import Attention
from ..errors import InputError
from ..plot import attention as plots
from ..plot._prep import downsample_max, head_table
from ._base import SelectsHead, encode_f32, quantize_u8


class HeadGrid(SelectsHead):
    """All heads of ``att`` as thumbnails labelled "L-H" (1-indexed), like bertviz's model
    view but drawn on one canvas from uint8 bytes.

    Parameters
    ----------
    attentions : the :class:`~attnkit.Attention` to show.
    metric : optional per-head values drawn as a coloured bar under each thumbnail and shown
        on hover: a DataFrame/Series indexed by ``(layer, head)`` (e.g. ``head_stats``) or an
        array ``[layer, head]``.
    value : the DataFrame column to use (needed when it has several numeric columns).
    scale : ``"head"`` (default) colours each head from 0 to its own maximum, so diffuse
        heads show their pattern; ``"global"`` uses 0–1 for every head.
    size : thumbnails of more than ``size`` tokens are max-pooled to at most ``size`` cells
        per side (default 128: the pixel size of a thumbnail on a hi-DPI screen).

    ``selected`` is ``[layer, head]`` (0-indexed) after a click, ``[]`` before; observe it,
    or :meth:`link` a :class:`Heatmap` to follow it.
    """

    _bundle_name = "headgrid"

    size = traitlets.Int(0).tag(sync=True)
    n_tokens = traitlets.Int(0).tag(sync=True)
    thumbs = traitlets.Bytes(b"").tag(sync=True)
    head_max = traitlets.Bytes(b"").tag(sync=True)
    metric = traitlets.Bytes(b"").tag(sync=True)
    metric_name = traitlets.Unicode("").tag(sync=True)
    metric_cmap = traitlets.Unicode("viridis").tag(sync=True)
    cmap = traitlets.Unicode("Blues").tag(sync=True)
    scale = traitlets.Unicode("head").tag(sync=True)

    @renamed(positional=("metric", "value"), att="attentions")
    def __init__(
        self,
        attentions: Attention,
        *,
        metric: pd.DataFrame | pd.Series | np.ndarray | None = None,
        value: str | None = None,
        scale: str = "head",
        size: int = 128,
        cmap: str = "Blues",
        title: str | None = None,
    ) -> None:
        att = attentions
        if not isinstance(att, Attention):
            raise InputError(f"HeadGrid takes an attnkit Attention; got {type(att).__name__}.")
        if scale not in ("head", "global"):
            raise InputError(f"scale must be 'head' or 'global', not {scale!r}.")
        if len(att) == 0:
            raise InputError("the Attention has no positions; nothing to draw.")
        L, H = att.n_layers, att.n_heads
        thumbs = downsample_max(att.maps, int(size))
        head_max = thumbs.reshape(L, H, -1).max(axis=2)
        top = head_max[:, :, None, None] if scale == "head" else 1.0
        self._thumbs = thumbs  # what the browser shows, as floats: the static figure's source
        self._metric_table = None
        metric_bytes, metric_name = b"", ""
        if metric is not None:
            table, metric_name = head_table(metric, value, shape=(L, H))
            self._metric_table = table
            metric_bytes = encode_f32(table)
        if title is None:
            title = f"{att.model + ': ' if att.model else ''}{L} layers \u00d7 {H} heads, {len(att)} tokens"
        super().__init__(
            n_layers=L, n_heads=H, size=thumbs.shape[-1], n_tokens=len(att),
            thumbs=quantize_u8(thumbs, top), head_max=encode_f32(head_max),
            metric=metric_bytes, metric_name=metric_name, cmap=cmap, scale=scale, title=title,
        )
        self._tokens = list(att.tokens)

    def figure(self, *, preview: bool = False) -> Figure:
        return plots.plot_head_grid(
            self._thumbs, metric=self._metric_table, metric_name=self.metric_name or "metric",
            scale=self.scale, size=min(self.size, 56) if preview else self.size,
            cmap=self.cmap, title=self.title,
        )

    def _alt_text(self) -> str:
        text = " ".join(self._tokens[:40]) + (" …" if len(self._tokens) > 40 else "")
        return f"Attention of every head ({self.title}) on: {text}"
