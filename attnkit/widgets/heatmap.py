"""Heatmap widget: one attention matrix with token labels, hover read-out and zoom."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import traitlets
from matplotlib.figure import Figure

from .._compat import renamed
from ..attention import Attention
from ..errors import InputError, TokenizationMismatchError
from ..plot import attention as plots
from ..plot._prep import head_label
from ._base import AttnkitWidget, check_layer_head, encode_f16


class Heatmap(AttnkitWidget):
    """One head's attention ``[n, n]`` (rows = from/query, columns = to/key).

    Parameters
    ----------
    attentions : the :class:`~attnkit.Attention` whose tokens label the axes.
    layer, head : 0-indexed head to show (displayed 1-indexed as "L-H"); the arrows in the
        header, :meth:`show`, or a linked :class:`HeadGrid` change it.
    maps : optional array drawn instead of ``att.maps``: ``[layer, head, n, n]`` or one
        ``[n, n]`` matrix (e.g. rollout, a difference of two models) on ``att``'s tokens.
    diverging : diverging colours centred on 0 (default: when ``maps`` has negative values).
    vmax : top of the colour scale (default: the shown matrix's max, or max |value| when
        diverging).
    cmap : a colour map name known to the front end ("Blues", "viridis", "magma",
        "RdBu_r", "PuOr_r").

    In the browser: scroll to zoom, drag to pan, double-click to fit; hovering a cell shows
    from-token, to-token and value. Values travel as float16 bytes.
    """

    _bundle_name = "heatmap"

    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    n = traitlets.Int(0).tag(sync=True)
    values = traitlets.Bytes(b"").tag(sync=True)
    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    n_layers = traitlets.Int(1).tag(sync=True)
    n_heads = traitlets.Int(1).tag(sync=True)
    diverging = traitlets.Bool(False).tag(sync=True)
    vmax = traitlets.Float(1.0).tag(sync=True)
    cmap = traitlets.Unicode("").tag(sync=True)
    value_label = traitlets.Unicode("attention").tag(sync=True)

    @renamed(positional=("layer", "head"), att="attentions")
    def __init__(
        self,
        attentions: Attention,
        *,
        layer: int = 0,
        head: int = 0,
        maps: np.ndarray | None = None,
        diverging: bool | None = None,
        vmax: float | None = None,
        cmap: str = "",
        title: str | None = None,
        value_label: str | None = None,
    ) -> None:
        att = attentions
        if not isinstance(att, Attention):
            raise InputError(f"Heatmap takes an attnkit Attention; got {type(att).__name__}.")
        n = len(att)
        if n == 0:
            raise InputError("the Attention has no positions; nothing to draw.")
        if maps is None:
            source = att.maps
        else:
            source = np.asarray(maps, dtype=np.float32)
            if source.ndim == 2:
                source = source[None, None]
            if source.ndim != 4 or source.shape[2:] != (n, n):
                raise InputError(
                    f"maps must be [layer, head, {n}, {n}] or [{n}, {n}] for this Attention's "
                    f"{n} tokens; got shape {np.shape(maps)}."
                )
        if title is None and maps is not None and np.ndim(maps) == 2:
            title = value_label or "map"
        self._init(att.tokens, source, lambda l, h: source[l, h], layer, head, diverging, vmax, cmap,
                   title, value_label or "attention", att.model)

    def _init(
        self,
        tokens: Sequence[str],
        source_shape: np.ndarray | tuple,
        get: Callable[[int, int], np.ndarray],
        layer: int,
        head: int,
        diverging: bool | None,
        vmax: float | None,
        cmap: str,
        title: str | None,
        value_label: str,
        model_name: str,
        name_pair: tuple[str, str] | None = None,
    ) -> None:
        shape = source_shape if isinstance(source_shape, tuple) else source_shape.shape
        L, H = shape[0], shape[1]
        layer, head = check_layer_head(layer, head, L, H)
        self._get = get
        self._fixed_vmax = vmax
        self._fixed_title = title
        self._source_model = model_name
        self._name_pair = name_pair
        self._auto_diverging = diverging is None
        super().__init__(
            tokens=list(tokens), n=len(tokens), n_layers=L, n_heads=H, cmap=cmap,
            value_label=value_label, diverging=bool(diverging),
        )
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self.layer, self.head = layer, head
        self._refresh()
        self.observe(self._on_head, names=["layer", "head"])

    @classmethod
    @renamed(positional=("layer", "head"), att_a="attentions", att_b="other")
    def difference(
        cls,
        attentions: Attention,
        other: Attention,
        *,
        layer: int = 0,
        head: int = 0,
        names: tuple[str, str] | None = None,
        vmax: float | None = None,
        cmap: str = "",
    ) -> "Heatmap":
        """The difference ``attentions − other`` of one head on a diverging scale (red: more
        in A).

        Both must share tokens and shapes (e.g. a pre-trained and a fine-tuned model on the
        same input). ``names`` label A and B (default: the models' names).
        """
        att_a, att_b = attentions, other
        for a in (att_a, att_b):
            if not isinstance(a, Attention):
                raise InputError(f"Heatmap.difference takes two Attention objects; got {type(a).__name__}.")
        if list(att_a.tokens) != list(att_b.tokens):
            raise TokenizationMismatchError(
                "the two attentions have different tokens; compare models that share a "
                "tokenizer, on the same input (or pool both with .to_words())."
            )
        if att_a.maps.shape != att_b.maps.shape:
            raise InputError(
                f"shapes differ: {att_a.maps.shape} vs {att_b.maps.shape}; both models need the "
                "same number of layers and heads."
            )
        a_name, b_name = names or (att_a.model or "A", att_b.model or "B")
        if a_name == b_name:
            a_name, b_name = f"{a_name} (A)", f"{b_name} (B)"
        self = cls.__new__(cls)
        self._init(
            att_a.tokens, att_a.maps.shape, lambda l, h: att_a.maps[l, h] - att_b.maps[l, h],
            layer, head, True, vmax, cmap, None, f"{a_name} \u2212 {b_name}", "", (a_name, b_name),
        )
        return self

    # ------------------------------------------------------------------ API
    def show(self, layer: int, head: int) -> None:
        """Show head (layer, head), 0-indexed."""
        layer, head = check_layer_head(layer, head, self.n_layers, self.n_heads)
        with self.hold_trait_notifications():
            self.layer = layer
            self.head = head

    @property
    def matrix(self) -> np.ndarray:
        """The shown ``[n, n]`` matrix (float32, rows = from, columns = to)."""
        return self._matrix

    def figure(self, *, preview: bool = False) -> Figure:
        return plots.plot_heatmap(
            self._matrix, self.tokens, diverging=self.diverging, vmax=self.vmax,
            cmap=self.cmap or None, title=self.title, value_label=self.value_label,
            max_labels=40 if preview else 64,
        )

    def _alt_text(self) -> str:
        text = " ".join(self.tokens[:40]) + (" …" if len(self.tokens) > 40 else "")
        return f"{self.title}. Heatmap of attention over {self.n} tokens: {text}"

    # ------------------------------------------------------------- internals
    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict[str, Any]) -> int:
        return check_layer_head(proposal["value"], 0, self.n_layers, self.n_heads)[0]

    @traitlets.validate("head")
    def _check_head(self, proposal: dict[str, Any]) -> int:
        return check_layer_head(0, proposal["value"], self.n_layers, self.n_heads)[1]

    def _on_head(self, change: dict[str, Any]) -> None:
        self._refresh()

    def _refresh(self) -> None:
        m = np.asarray(self._get(self.layer, self.head), dtype=np.float32)
        self._matrix = m
        finite = m[np.isfinite(m)]
        diverging = bool(finite.size and finite.min() < 0) if self._auto_diverging else self.diverging
        if self._fixed_vmax is not None:
            top = float(self._fixed_vmax)
        elif diverging:
            top = float(np.abs(finite).max()) if finite.size else 1.0
        else:
            top = float(finite.max()) if finite.size else 1.0
        if not top > 0:
            top = 1.0
        label = head_label(self.layer, self.head)
        if self._fixed_title is not None:
            title = self._fixed_title
        elif self._name_pair:
            title = f"{self._name_pair[0]} \u2212 {self._name_pair[1]}, layer {self.layer + 1} head {self.head + 1} ({label})"
        else:
            who = f"{self._source_model}: " if self._source_model else ""
            title = f"{who}layer {self.layer + 1}, head {self.head + 1} ({label})"
        with self.hold_sync():
            self.diverging = diverging
            self.vmax = top
            self.title = title
            self.values = encode_f16(m)
        self._invalidate_static()
