"""ImageAttention: a vision transformer's attention drawn over the image it read.

The image (uint8 ``[H, W, 3]``, as :meth:`attnkit.runtime.vision.VisionModel.attend` keeps it in
``meta["image"]``) is drawn with one query's row of an overlay on its patch grid: the
attention of a head (or the mean of a layer's heads), rollout, or any ``[n, n]`` matrix
(gradient rollout, a measure's maps) or fixed ``[n]`` relevance the caller adds. Clicking a
patch (or moving with the arrow keys) chooses the query; the class token is the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import traitlets
from matplotlib.figure import Figure

from ..core.blocks import head_mean, read
from ..core import validate
from ..errors import InputError
from ..flow.rollout import rollout
from ..core.types import AttentionLike
from ._base import AttnkitWidget, PicksLayerHead, WholeNumber, measure_of
from ._codec import f16, wire

#: the overlay of a head's (or the heads' mean) attention; ``"rollout"`` is added by default
ATTENTION = "attention"


def _grid(att: Any) -> tuple[list[int], int, int]:
    meta = getattr(att, "meta", {}) or {}
    grid = meta.get("grid")
    image = meta.get("image")
    if grid is None or image is None:
        raise InputError("ImageAttention takes the attention of an image "
                         "(attnkit.runtime.vision.VisionModel.attend: meta holds 'grid' and 'image').")
    first = int(meta.get("first_patch", 1))
    rows, cols = int(grid[0]), int(grid[1])
    if first + rows * cols != len(att):
        raise InputError(f"The attention has {len(att)} positions but its grid {rows} x {cols} "
                         f"after {first} special tokens needs {first + rows * cols}.")
    return [rows, cols], first, int(meta.get("patch_size", 0))


class ImageAttention(PicksLayerHead, AttnkitWidget):
    """Attention of a vision transformer over its image: one query's row on the patch grid.

    Parameters
    ----------
    attentions : Attention or LazyAttention
        The attention of one image (:meth:`attnkit.runtime.vision.VisionModel.attend`).
    overlays : mapping of str to array or attention, optional
        More overlays, by name: ``[n, n]`` matrices (row = query, e.g.
        :func:`attnkit.runtime.vision.gradient_rollout`), fixed ``[n]`` relevances, or attention of
        the same image (another measure: its layers and heads are picked like the attention's).
    overlay : str
        The overlay shown first: ``"attention"``, ``"rollout"`` or a key of ``overlays``.
    layer : int, optional
        0-indexed layer of the attention overlays (default: the last).
    head : int, optional
        0-indexed head; ``None`` shows the mean of the layer's heads.
    query : int
        The position whose row is drawn (default 0: the class token).
    opacity : float
        Opacity of the overlay over the image, in ``[0, 1]``.
    cmap : str
        Colour map known to the front end (default "magma").
    title : str, optional
        Title (default: the model's name).

    Raises
    ------
    InputError
        For attention that is not of an image, overlays of the wrong shape, an unknown
        overlay name, or a layer, head or query outside the attention.

    Notes
    -----
    What travels: the image as uint8 bytes and the shown overlay's ``[n, n]`` matrix as
    float16 bytes, so choosing a query redraws in the browser without the kernel; another
    layer, head or overlay is computed by the kernel. The colour bar spans 0 to the largest
    value of the query's row over the patches; the special tokens' values are listed beside
    it (they have no patch). Keyboard: arrows move the query patch, Home picks the class token.

    Examples
    --------
    >>> import numpy as np, attnkit as ak
    >>> from attnkit.testing import tiny_vision
    >>> att = tiny_vision("vit").attend(np.zeros((32, 32, 3), dtype=np.uint8))
    >>> view = ak.ImageAttention(att, overlay="rollout")
    >>> view.grid, view.matrix["shape"], view.image["dtype"]
    ([4, 4], [17, 17], 'uint8')
    >>> view.query = 5  # the patch at row 1, column 0
    >>> view.row().shape
    (17,)
    """

    _bundle_name = "image"

    image = traitlets.Dict().tag(sync=True)
    grid = traitlets.List(traitlets.Int()).tag(sync=True)
    first_patch = traitlets.Int(1).tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    query = WholeNumber(0).tag(sync=True)
    overlay = traitlets.Unicode(ATTENTION).tag(sync=True)
    overlays = traitlets.List(traitlets.Unicode()).tag(sync=True)
    layered = traitlets.Bool(True).tag(sync=True)
    matrix = traitlets.Dict().tag(sync=True)
    opacity = traitlets.Float(0.6).tag(sync=True)
    cmap = traitlets.Unicode("magma").tag(sync=True)
    value_label = traitlets.Unicode("attention").tag(sync=True)

    def __init__(self, attentions: AttentionLike, *, overlays: Mapping[str, Any] | None = None,
                 overlay: str = ATTENTION, layer: int | None = None, head: int | None = None,
                 query: int = 0, opacity: float = 0.6, cmap: str = "magma",
                 title: str | None = None) -> None:
        att = attentions
        if not isinstance(att, AttentionLike):
            raise InputError(f"ImageAttention takes attention of an image; got {type(att).__name__}.")
        grid, first, _ = _grid(att)
        n = len(att)
        self._att = att
        self._extra: dict[str, Any] = {"rollout": None}  # computed when first shown
        for name, value in dict(overlays or {}).items():
            if name == ATTENTION:
                raise InputError("'attention' names the built-in overlay; give yours another name.")
            self._extra[str(name)] = self._check_overlay(str(name), value, n)
        if not 0.0 <= float(opacity) <= 1.0:
            raise InputError(f"opacity must lie in [0, 1]; got {opacity}.")
        names = [ATTENTION, *self._extra]
        if overlay not in names:
            raise InputError(f"overlay must be one of {names}, not {overlay!r}.")
        query = validate.index(query, n, "query")
        image = np.asarray(att.meta["image"], dtype=np.uint8)
        if image.ndim != 3 or image.shape[2] != 3:
            raise InputError(f"meta['image'] must be uint8 [H, W, 3]; got shape {image.shape}.")
        self._image = image
        self._ready = False
        super().__init__(
            image=wire(image, "uint8"), grid=grid, first_patch=first,
            tokens=[str(t) for t in att.tokens], overlays=names, opacity=float(opacity), cmap=cmap,
            title=title if title is not None else (getattr(att, "model", "") or "image attention"),
        )
        self.overlay = overlay
        self._fit_head()
        L = self.n_layers
        self.layer = L - 1 if layer is None else validate.index(layer, L, "layer")
        self.head = -1 if head is None else validate.index(head, self.n_heads, "head")
        self.query = query
        self._ready = True
        self._refresh()
        self.observe(self._on_change, names=["layer", "head", "overlay"])

    # ------------------------------------------------------------------ API
    def row(self) -> np.ndarray:
        """The shown overlay's row of the current query: float32 ``[n]`` over every position
        (special tokens first, then the patches row by row).

        Returns
        -------
        ndarray
            Float32 ``[n]``.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> from attnkit.testing import tiny_vision
        >>> att = tiny_vision("deit").attend(np.zeros((32, 32, 3), dtype=np.uint8))
        >>> row = ak.ImageAttention(att, layer=0, head=1).row()
        >>> bool(np.allclose(row, att.maps[0, 1, 0], atol=1e-3))  # float16 on the wire
        True
        """
        m = self._matrix
        return m[0 if m.shape[0] == 1 else self.query]

    def figure(self, *, preview: bool = False) -> Figure:
        """The static figure: the image with the query's row over its patches and a colour
        bar (what reports, notebooks without a kernel and :meth:`save` show).

        Parameters
        ----------
        preview : bool
            A smaller figure (what notebooks embed).

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> from attnkit.testing import tiny_vision
        >>> att = tiny_vision("vit").attend(np.zeros((32, 32, 3), dtype=np.uint8))
        >>> len(ak.ImageAttention(att).figure().axes)  # the image and the colour bar
        2
        """
        rows, cols = self.grid
        values = self.row()[self.first_patch:].reshape(rows, cols)
        size = 3.2 if preview else 4.8
        fig = Figure(figsize=(size * 1.25, size))
        ax = fig.add_subplot(1, 1, 1)
        h, w = self._image.shape[:2]
        ax.imshow(self._image, extent=(0, w, h, 0))
        top = float(values.max()) if values.size and values.max() > 0 else 1.0
        shown = ax.imshow(values, extent=(0, w, h, 0), cmap=self.cmap or "magma", alpha=self.opacity,
                          vmin=0.0, vmax=top, interpolation="nearest")
        if self.query >= self.first_patch:
            p = self.query - self.first_patch
            ph, pw = h / rows, w / cols
            from matplotlib.patches import Rectangle

            ax.add_patch(Rectangle(((p % cols) * pw, (p // cols) * ph), pw, ph, fill=False,
                                   edgecolor="#00e5ff", linewidth=2))
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(self._caption(), loc="left", fontsize=9)
        fig.colorbar(shown, ax=ax, fraction=0.046, pad=0.04, label=self.value_label)
        return fig

    # ------------------------------------------------------------- internals
    def _caption(self) -> str:
        who = self.tokens[self.query]
        where = f"query {who}" if self.query < self.first_patch else f"query patch {who}"
        if not self.layered:
            return f"{self.title}: {self.overlay}, {where}"
        heads = "mean of heads" if self.head < 0 else f"head {self.head + 1}"
        return f"{self.title}: {self.overlay}, layer {self.layer + 1}, {heads}, {where}"

    def _alt_text(self) -> str:
        return f"{self._caption()}, over a {self.grid[0]} x {self.grid[1]} patch grid"

    @staticmethod
    def _check_overlay(name: str, value: Any, n: int) -> Any:
        if isinstance(value, AttentionLike):
            if len(value) != n:
                raise InputError(f"overlay {name!r} has {len(value)} positions; the image has {n}.")
            return value
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape not in ((n,), (n, n)):
            raise InputError(f"overlay {name!r} must be [{n}] or [{n}, {n}] (or attention of the "
                             f"same image); got shape {arr.shape}.")
        if not np.isfinite(arr).all():
            raise InputError(f"overlay {name!r} holds NaN or infinite values.")
        return arr[None] if arr.ndim == 1 else arr

    def _source(self) -> Any:
        if self.overlay == ATTENTION:
            return self._att
        value = self._extra[self.overlay]
        if value is None and self.overlay == "rollout":
            value = self._extra["rollout"] = rollout(self._att).astype(np.float32)
        return value

    def _fit_head(self) -> None:
        src = self._source()
        layered = isinstance(src, AttentionLike)
        # an overlay without layers (rollout) keeps the attention's layer and head chosen, for
        # the way back (they are hidden meanwhile)
        L, H = (src.n_layers, src.n_heads) if layered else (self._att.n_layers, self._att.n_heads)
        with self.hold_trait_notifications():
            self.layered = layered
            self.n_layers, self.n_heads = L, H
            if self.layer >= L:
                self.layer = L - 1
            if self.head >= H:
                self.head = -1
            self.value_label = (measure_of(src) if layered and measure_of(src) != "weights"
                                else ("attention" if layered else self.overlay))

    @traitlets.validate("overlay")
    def _check_name(self, proposal: dict[str, Any]) -> str:
        if proposal["value"] not in self.overlays:
            raise InputError(f"overlay must be one of {self.overlays}, not {proposal['value']!r}.")
        return proposal["value"]

    @traitlets.validate("query")
    def _check_query(self, proposal: dict[str, Any]) -> int:
        q = int(proposal["value"])
        if not 0 <= q < len(self.tokens):
            raise InputError(f"query {q} is outside positions 0..{len(self.tokens) - 1}.")
        return q

    def _on_change(self, change: dict[str, Any]) -> None:
        if change["name"] == "overlay":
            self._fit_head()
        self._refresh()

    def _refresh(self) -> None:
        if not self._ready:
            return
        src = self._source()
        if isinstance(src, AttentionLike):
            n = len(src)
            if self.head < 0:
                m = head_mean(src, self.layer, shares=True).astype(np.float32)
            else:
                m = read(src, self.layer, [self.head], slice(0, n), slice(0, n))[0]
        else:
            m = src
        self._matrix = np.asarray(m, dtype=np.float32)
        self.matrix = f16(self._matrix)
        self._invalidate_static()
