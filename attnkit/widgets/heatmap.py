"""Heatmap widget: one head's map at any length, tiled: a pooled overview up front, exact tiles
from the kernel as the view zooms in, hover read-out of the exact weight of any cell."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import traitlets
from matplotlib.figure import Figure

from .._compat import renamed
from ..core import validate
from ..errors import AttnkitError, InputError, TokenizationMismatchError
from ..plot import attention as plots
from ..core.labels import head_label
from ..core.types import AttentionLike
from . import _pyramid as pyr
from ._base import AttnkitWidget, SinkAwareScale, WholeNumber, measure_of
from ._codec import f16, message, wire
from ._progressive import Progressive, fills_in

REDUCES = ("max", "mean")
#: bytes of pyramid levels an offline copy embeds when ``embed`` is not given and the
#: environment sets none (``attnkit report`` sets ``ATTNKIT_EMBED_BYTES``)
EMBED_ENV = "ATTNKIT_EMBED_BYTES"
#: cells (n²) from which a Heatmap in a kernel fills its overview in band by band by default
OVERVIEW_CELLS = 1 << 24


class _Stack:
    """``[layer, head, n, n]`` arrays as a block source (maps passed instead of attention's)."""

    def __init__(self, maps: np.ndarray) -> None:
        self.maps = maps

    def block(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        return self.maps[layer, head, rows, cols]


class _Difference:
    """``a - b`` read block by block."""

    def __init__(self, a: AttentionLike, b: AttentionLike) -> None:
        self.a, self.b = a, b

    def block(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        return (np.asarray(self.a.block(layer, head, rows, cols), dtype=np.float32)
                - np.asarray(self.b.block(layer, head, rows, cols), dtype=np.float32))


def _value_label(att: AttentionLike) -> str:
    """What a cell's value is called: "attention" for weights, else the measure's name."""
    measure = measure_of(att)
    return "attention" if measure == "weights" else measure


def embed_budget(embed: int | None) -> int:
    """Bytes to embed for offline copies: ``embed``, else ``$ATTNKIT_EMBED_BYTES``, else 0."""
    if embed is not None:
        return max(0, int(embed))
    try:
        return max(0, int(os.environ.get(EMBED_ENV, "0")))
    except ValueError:
        return 0


class Heatmap(Progressive, SinkAwareScale, AttnkitWidget):
    """One head's attention ``[n, n]`` (rows = from/query, columns = to/key), at any ``n``;
    or a rectangle: cross-attention ``[target, source]``.

    Parameters
    ----------
    attentions : AttentionLike
        Dense :class:`~attnkit.Attention` (tiles cut from its array) or lazy attention
        (tiles computed on demand through ``block``); its tokens label the axes.
        :class:`~attnkit.core.cross.CrossAttention` draws target rows over source columns: the
        rows labelled with its ``row_tokens``, the columns with its ``col_tokens``.
    layer, head : int
        0-indexed head to show (displayed 1-indexed as "L-H"); the arrows in the header,
        :meth:`show`, or a linked :class:`HeadGrid` change it.
    maps : ndarray, optional
        Drawn instead of the attention: ``[layer, head, n, n]`` or one ``[n, n]`` matrix
        (rollout, a difference of two models) on the attention's tokens (``[..., target,
        source]`` on a cross-attention's).
    scale : {"linear", "log", "rank"}, optional
        Colour scale: linear from 0 to the top; log over ``decades`` decades below the top;
        each cell's rank within its row. Default: ``"log"`` for causal (decoder) attention,
        whose sinks leave every other weight near 0, else ``"linear"``.
    exclude_sinks : bool, optional
        Leave the first token, [CLS] and [SEP] columns out of the scale (they are drawn at
        its top). Default: True for causal attention.
    decades : float
        Range of the log scale.
    reduce : {"max", "mean"}
        How bins of the zoomed-out levels pool their cells (max keeps thin patterns).
    diverging : bool, optional
        Diverging colours centred on 0 (default: when the values are negative somewhere).
    vmax : float, optional
        Top of the colour scale (default: the head's largest value, sinks excluded if asked).
    cmap : str
        Colour map known to the front end ("Blues", "viridis", "magma", "RdBu_r", "PuOr_r").
    overview : int
        Bins per side of the overview sent up front (the map itself when ``n <= overview``).
    embed : int, optional
        Bytes of finer levels to keep in the widget's state for copies without a kernel
        (exported reports, notebooks saved with widget state). Default:
        ``$ATTNKIT_EMBED_BYTES`` (``attnkit report`` sets it), else 0.
    title : str, optional
        Title (default: model and head).
    value_label : str, optional
        What the values are, for the colour bar and hover (default "attention", or the
        name of the maps' measure).
    progressive : bool, optional
        Return at once and read the head in a worker thread, the overview filling in band
        by band (rows not read yet blank, the progress in the status line) while the kernel
        runs other cells; :meth:`wait` blocks until it is whole, :meth:`cancel` stops. The
        pass is the one a :class:`HeadGrid` of the same attention reads (kept for both).
        Default: inside a Jupyter kernel from ``OVERVIEW_CELLS`` cells (n² ≥ 4096²) on,
        unless ``$ATTNKIT_PROGRESSIVE`` is ``0`` (as in ``attnkit report``).

    Raises
    ------
    InputError
        When the attention has no positions, ``maps`` do not fit its tokens, the head is
        outside the model, or ``scale``/``reduce``/``decades``/``overview`` are not allowed.

    Notes
    -----
    Memory: one head's overview and one band of rows at a time (``attnkit.core.blocks.BAND_ELEMENTS``
    floats); no ``[n, n]`` map is kept. A head is read once for its overview, its scale tops
    and the thumbnail a :class:`HeadGrid` of the same attention shows (kept for both views). In the browser: click the map (or hold Ctrl) and
    scroll to zoom, drag to pan, double-click to fit; hovering a cell shows from-token,
    to-token and its exact weight (fetched from the kernel when zoomed out).

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit import Attention
    >>> from attnkit.widgets import Heatmap
    >>> maps = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]  # causal: row i over 0..i
    >>> hm = Heatmap(Attention.from_maps(maps, ["<s>", "a", "b", "c"]))
    >>> hm.causal, hm.scale, hm.exclude_sinks, hm.sink_names  # decoder defaults
    (True, 'log', True, '<s>')
    >>> tile = hm.answer({"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 0, "tj": 0})
    >>> tile["array"]["dtype"], tile["array"]["shape"]  # what a zoomed-in view receives
    ('float32', [4, 4])
    >>> from attnkit.core.cross import CrossAttention
    >>> cross = CrossAttention(np.array([[[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]]]),
    ...                        ["<pad>", "Hallo"], ["cls", "word"], [-1, 0], ["Hallo"],
    ...                        ["▁Hello", "▁you", "</s>"], ["word", "word", "sep"], [0, 1, -1],
    ...                        ["Hello", "you"])
    >>> rect = Heatmap(cross)  # target rows, source columns
    >>> rect.n, rect.n_cols, rect.col_tokens, rect.matrix.shape
    (2, 3, ['▁Hello', '▁you', '</s>'], (2, 3))
    """

    _bundle_name = "heatmap"

    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    n = traitlets.Int(0).tag(sync=True)
    layer = WholeNumber(0).tag(sync=True)
    head = WholeNumber(0).tag(sync=True)
    n_layers = traitlets.Int(1).tag(sync=True)
    n_heads = traitlets.Int(1).tag(sync=True)
    pyramid = traitlets.Dict().tag(sync=True)
    overview_max = traitlets.Dict().tag(sync=True)
    overview_mean = traitlets.Dict().tag(sync=True)
    top = traitlets.Float(1.0).tag(sync=True)
    top_nosink = traitlets.Float(1.0).tag(sync=True)
    reduce = traitlets.Unicode("max").tag(sync=True)
    diverging = traitlets.Bool(False).tag(sync=True)
    vmax = traitlets.Float(None, allow_none=True).tag(sync=True)
    cmap = traitlets.Unicode("").tag(sync=True)
    value_label = traitlets.Unicode("attention").tag(sync=True)
    embedded = traitlets.List(traitlets.Dict()).tag(sync=True)
    embed_note = traitlets.Unicode("").tag(sync=True)
    #: Columns of a rectangular map (cross-attention) and their tokens; 0 and [] for a
    #: square one, whose columns are its rows (``n``, ``tokens``).
    n_cols = traitlets.Int(0).tag(sync=True)
    col_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rows_ready = traitlets.Int(0).tag(sync=True)  # rows of overview bins computed

    @renamed(positional=("layer", "head"), att="attentions")
    def __init__(
        self,
        attentions: AttentionLike,
        *,
        layer: int = 0,
        head: int = 0,
        maps: np.ndarray | None = None,
        scale: str | None = None,
        exclude_sinks: bool | None = None,
        decades: float = 3.0,
        reduce: str = "max",
        diverging: bool | None = None,
        vmax: float | None = None,
        cmap: str = "",
        overview: int = pyr.OVERVIEW,
        embed: int | None = None,
        title: str | None = None,
        value_label: str | None = None,
        progressive: bool | None = None,
    ) -> None:
        embed = None if embed is None else validate.size(embed, "embed")
        overview = validate.integer(overview, "overview", minimum=16)
        att = attentions
        if not isinstance(att, AttentionLike):
            raise InputError(f"Heatmap takes attention (Attention or LazyAttention); got {type(att).__name__}.")
        n, cols = pyr.extent(att)
        if n == 0 or cols == 0:
            raise InputError("the attention has no positions; nothing to draw.")
        source: Any = att
        shape = (att.n_layers, att.n_heads)
        if maps is not None:
            arr = np.asarray(maps, dtype=np.float32)
            if arr.ndim == 2:
                arr = arr[None, None]
            if arr.ndim != 4 or arr.shape[2:] != (n, cols):
                raise InputError(
                    f"maps must be [layer, head, {n}, {cols}] or [{n}, {cols}] for these "
                    f"{n} x {cols} tokens; got shape {np.shape(maps)}."
                )
            source, shape = _Stack(arr), arr.shape[:2]
            if title is None and np.ndim(maps) == 2:
                title = value_label or "map"
        self._init(att, source, shape, layer, head, scale=scale, exclude_sinks=exclude_sinks,
                   decades=decades, reduce=reduce, diverging=diverging, vmax=vmax, cmap=cmap,
                   overview=overview, embed=embed, title=title,
                   value_label=value_label or _value_label(att), model_name=getattr(att, "model", "") or "",
                   progressive=progressive)

    def _init(self, att: AttentionLike, source: Any, shape: tuple[int, int], layer: int, head: int, *,
              scale: str | None, exclude_sinks: bool | None, decades: float, reduce: str,
              diverging: bool | None, vmax: float | None, cmap: str, overview: int,
              embed: int | None, title: str | None, value_label: str, model_name: str,
              name_pair: tuple[str, str] | None = None, progressive: bool | None = None) -> None:
        L, H = int(shape[0]), int(shape[1])
        layer, head = validate.head_index(layer, head, L, H)
        scaled = self.scale_traits(att, scale, exclude_sinks, decades)
        if reduce not in REDUCES:
            raise InputError(f"reduce must be 'max' or 'mean', not {reduce!r}.")
        if int(overview) < 16:
            raise InputError(f"overview must be at least 16 bins; got {overview}.")
        n, cols = pyr.extent(att)
        rect = hasattr(att, "n_columns")
        self._cols = cols
        self._source = source
        self._diverging = diverging
        self._shown: tuple[int, int] | None = None
        self._fixed_title = title
        self._source_model = model_name
        self._name_pair = name_pair
        self._overview_bins = int(overview)
        self._embed = embed_budget(embed)
        self._level = pyr.top_level(max(n, cols), self._overview_bins)
        # read with the overview: what a HeadGrid of this attention shows of the head
        self._reductions = [] if rect else pyr.view_reductions(n, L * H, scaled["sinks"],
                                                               level=self._level)
        self._overview: pyr.Overview | None = None
        self._lock = threading.Lock()
        self._rows = 0  # rows of overview bins read
        # a long square head fills in band by band (a rectangle, dense cross-attention, is read at once)
        self._progressive = not rect and fills_in(progressive, n * n, OVERVIEW_CELLS)
        super().__init__(
            tokens=[str(t) for t in att.tokens], n=n, n_layers=L, n_heads=H, reduce=reduce,
            vmax=vmax, cmap=cmap, value_label=value_label,
            pyramid={"top": self._level, "size": pyr.TILE}, **scaled,
            **({"n_cols": cols, "col_tokens": [str(t) for t in att.col_tokens]}  # type: ignore[attr-defined]
               if rect else {}),
        )
        self.layer, self.head = layer, head
        self._refresh()
        self.observe(self._on_head, names=["layer", "head"])
        self.on_msg(self._on_msg)

    @classmethod
    @renamed(positional=("layer", "head"), att_a="attentions", att_b="other")
    def difference(
        cls,
        attentions: AttentionLike,
        other: AttentionLike,
        *,
        layer: int = 0,
        head: int = 0,
        names: tuple[str, str] | None = None,
        vmax: float | None = None,
        cmap: str = "",
        embed: int | None = None,
    ) -> Heatmap:
        """The difference ``attentions − other`` of one head on a diverging scale (red: more
        in ``attentions``).

        Blocks of the difference are computed on demand, so lazy attention works too.

        Parameters
        ----------
        attentions, other : AttentionLike
            The same tokens and numbers of layers and heads (e.g. a pre-trained and a
            fine-tuned model on the same input).
        layer, head : int
            0-indexed head to show first.
        names : (str, str), optional
            Labels of the two (default: the models' names).
        vmax : float, optional
            Top of the colour scale (default: max ``|attentions − other|`` of the shown head).
        cmap : str
            A diverging colour map name (default "RdBu_r").
        embed : int, optional
            Bytes of finer levels kept for copies without a kernel, as in :class:`Heatmap`.

        Returns
        -------
        Heatmap
            Showing ``attentions − other``; :meth:`show` moves both to another head.

        Raises
        ------
        TokenizationMismatchError
            When the two have different tokens.
        InputError
            When they have different numbers of layers or heads.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> a = ak.Attention.from_maps(np.array([[[[1, 0], [0.5, 0.5]]]]), ["x", "y"])
        >>> b = ak.Attention.from_maps(np.array([[[[1, 0], [0.2, 0.8]]]]), ["x", "y"])
        >>> ak.Heatmap.difference(a, b, names=("A", "B")).matrix.round(2).tolist()
        [[0.0, 0.0], [0.3, -0.3]]
        """
        embed = None if embed is None else validate.size(embed, "embed")
        att_a, att_b = attentions, other
        for a in (att_a, att_b):
            if not isinstance(a, AttentionLike):
                raise InputError(f"Heatmap.difference takes two attentions; got {type(a).__name__}.")
        if list(att_a.tokens) != list(att_b.tokens):
            raise TokenizationMismatchError(
                "the two attentions have different tokens; compare models that share a "
                "tokenizer, on the same input (or pool both with .to_words())."
            )
        if (att_a.n_layers, att_a.n_heads) != (att_b.n_layers, att_b.n_heads):
            raise InputError(
                f"shapes differ: {att_a.n_layers}×{att_a.n_heads} vs {att_b.n_layers}×{att_b.n_heads} "
                "heads; both models need the same number of layers and heads."
            )
        a_name, b_name = names or (getattr(att_a, "model", "") or "A", getattr(att_b, "model", "") or "B")
        if a_name == b_name:
            a_name, b_name = f"{a_name} (A)", f"{b_name} (B)"
        self = cls.__new__(cls)
        self._init(att_a, _Difference(att_a, att_b), (att_a.n_layers, att_a.n_heads), layer, head,
                   scale="linear", exclude_sinks=False, decades=3.0, reduce="max", diverging=True,
                   vmax=vmax, cmap=cmap, overview=pyr.OVERVIEW, embed=embed, title=None,
                   value_label=f"{a_name} \u2212 {b_name}", model_name="", name_pair=(a_name, b_name))
        return self

    # ------------------------------------------------------------------ API
    def show(self, layer: int, head: int) -> None:
        """Show another head.

        Parameters
        ----------
        layer, head : int
            0-indexed.

        Returns
        -------
        None

        Raises
        ------
        InputError
            For a head outside the model.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("bert").attend("The cat sat on the mat.")
        >>> view = ak.Heatmap(att)
        >>> view.show(1, 1)
        >>> view.layer, view.head
        (1, 1)
        """
        layer, head = validate.head_index(layer, head, self.n_layers, self.n_heads)
        with self.hold_trait_notifications():
            self.layer = layer
            self.head = head

    @property
    def matrix(self) -> np.ndarray:
        """The shown ``[n, n]`` matrix (``[target, source]`` for cross-attention; float32,
        rows = from, columns = to), read in full: ``n * n * 4`` bytes (use :meth:`block`
        for parts of long maps)."""
        return self.block(slice(0, self.n), slice(0, self._cols))

    def block(self, rows: slice, cols: slice) -> np.ndarray:
        """Cells ``[rows, cols]`` of the shown head, read from the attention (dense or lazy).

        Parameters
        ----------
        rows, cols : slice
            Query (from) and key (to) positions.

        Returns
        -------
        ndarray
            float32 ``[len(rows), len(cols)]``.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> att = ak.Attention.from_maps(np.array([[[[1, 0], [0.25, 0.75]]]]), ["x", "y"])
        >>> ak.Heatmap(att).block(slice(1, 2), slice(0, 2)).tolist()
        [[0.25, 0.75]]
        """
        rows, cols = validate.span(rows, "rows"), validate.span(cols, "cols")
        return pyr.block(self._source, self.layer, self.head, rows, cols)

    @property
    def overview(self) -> np.ndarray:
        """The overview the view draws first: ``[m, m]``, bins of ``2**level`` cells pooled
        by ``reduce`` (the exact map when ``n`` fits in it)."""
        assert self._overview is not None
        return self._overview.max if self.reduce == "max" else self._overview.mean

    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of the shown head (what reports and saved files show): the
        overview, on the view's colour scale.

        Parameters
        ----------
        preview : bool
            Label at most 40 tokens per axis instead of 64 (what notebooks embed).

        Returns
        -------
        matplotlib.figure.Figure
            Not attached to pyplot (nothing is shown or kept open).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> att = tiny_model("bert").attend("The cat sat on the mat.")
        >>> fig = ak.Heatmap(att, title="1-1").figure()
        >>> fig.axes[0].get_title(loc="left")
        '1-1'
        """
        ov = self._overview
        assert ov is not None
        top = self._scale_top()
        return plots.plot_heatmap(
            self.overview, self.tokens, diverging=self.diverging, vmax=top,
            cmap=self.cmap or None, title=self.title, value_label=self.value_label,
            max_labels=40 if preview else 64, bin_size=1 << ov.level,
            scale="linear" if self.diverging else self.scale, decades=self.decades,
            causal=self.causal, col_tokens=self.col_tokens or None,
        )

    def _alt_text(self) -> str:
        text = " ".join(self.tokens[:40]) + (" …" if len(self.tokens) > 40 else "")
        if self.n_cols:
            cols = " ".join(self.col_tokens[:40]) + (" …" if len(self.col_tokens) > 40 else "")
            return (f"{self.title}. Heatmap of cross-attention from {self.n} target tokens "
                    f"({text}) to {self.n_cols} source tokens ({cols})")
        return f"{self.title}. Heatmap of attention over {self.n} tokens: {text}"

    # ------------------------------------------------------------- internals
    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict[str, Any]) -> int:
        return validate.index(proposal["value"], self.n_layers, "layer")

    @traitlets.validate("head")
    def _check_head(self, proposal: dict[str, Any]) -> int:
        return validate.index(proposal["value"], self.n_heads, "head")

    @traitlets.validate("reduce")
    def _check_reduce(self, proposal: dict[str, Any]) -> str:
        if proposal["value"] not in REDUCES:
            raise InputError(f"reduce must be 'max' or 'mean', not {proposal['value']!r}.")
        return proposal["value"]

    def _scale_top(self) -> float:
        if self.vmax is not None:
            return float(self.vmax)
        top = self.top_nosink if self.exclude_sinks and not self.diverging else self.top
        return top if top > 0 else 1.0

    def _on_head(self, _change: dict[str, Any]) -> None:
        if (self.layer, self.head) != self._shown:  # layer and head set together: one refresh
            self._refresh()

    def _refresh(self) -> None:
        """Read the shown head's overview: at once, or (progressive) band by band in a
        worker thread, the view showing the rows read so far."""
        self._shown = (self.layer, self.head)
        layer, head = self.layer, self.head
        if not self._progressive:
            ov = self._read(layer, head)
            assert ov is not None  # nothing stops the pass
            with self._lock:
                self._overview, self._rows = ov, ov.max.shape[0]
            self._sync("done")
            return
        self._halt()  # the head filling in before stops here (its last state synced)
        m = pyr.side(self.n, self._level)
        with self._lock:
            blank = np.full((m, m), np.nan, dtype=np.float32)
            self._overview, self._rows = pyr.Overview(self._level, blank, blank.copy(), 0.0, 0.0, 0.0), 0
        self._sync("running")  # the view appears at once, every row blank
        self._start(lambda step: self._fill(layer, head, step), "attnkit-heatmap")

    def _read(self, layer: int, head: int, each_rows: pyr.RowsSeen | None = None) -> pyr.Overview | None:
        """The head's overview and scale tops, in its one pass (with what a HeadGrid reads).
        Max pooling keeps the sign of the largest magnitude: the same as plain max for
        weights, and negative extremes survive in differences."""
        if self.n_cols:
            return pyr.rect_overview(self._source, layer, head, self.n, self.n_cols, np.asarray(self.sinks),
                                     level=self._level, signed=True)
        return pyr.overview_bands(self._source, layer, head, self.n, np.asarray(self.sinks), level=self._level,
                                  signed=True, reductions=self._reductions, each_rows=each_rows)

    def _fill(self, layer: int, head: int, step: Callable[[], bool]) -> bool:
        """The worker's work: the head's one pass (``blocks.summarize_bands``), each band's
        rows of bins pushed to the views as they are read."""
        def rows(r0: int, r1: int, so_far: pyr.Overview) -> bool:
            with self._lock:
                ov = self._overview
                assert ov is not None
                ov.max[r0:r1], ov.mean[r0:r1] = so_far.max[r0:r1], so_far.mean[r0:r1]
                ov.top, ov.top_nosink, ov.low = so_far.top, so_far.top_nosink, so_far.low
                self._rows = max(self._rows, r1)
            maxes, means = self._wire(so_far.max[r0:r1], so_far.mean[r0:r1])
            self._push("band", layer=layer, head=head, row0=r0, row1=r1, rows=so_far.max.shape[0],
                       max=maxes, mean=means, top=so_far.top, top_nosink=so_far.top_nosink)
            return step()

        ov = self._read(layer, head, rows)
        if ov is None:
            return False
        with self._lock:
            self._overview, self._rows = ov, ov.max.shape[0]
        return True

    def _complete(self) -> bool:
        return self._overview is not None and self._rows == self._overview.max.shape[0]

    def _wire(self, maxes: np.ndarray, means: np.ndarray) -> tuple[dict, dict]:
        """Overview values as sent: exact float32 at level 0 (no means), else float16."""
        if self._level == 0:
            return wire(maxes, "float32"), {}
        return f16(maxes), f16(means)

    def _state(self, computing: str) -> dict[str, Any]:
        """The view's traits of the overview read so far (one consistent snapshot)."""
        with self._lock:
            ov, rows = self._overview, self._rows
            assert ov is not None
            maxes, means = self._wire(ov.max, ov.mean)
            top, top_nosink, low = ov.top, ov.top_nosink, ov.low
        diverging = self._diverging if self._diverging is not None else low < 0
        label = head_label(self.layer, self.head)
        if self._fixed_title is not None:
            title = self._fixed_title
        elif self._name_pair:
            title = f"{self._name_pair[0]} \u2212 {self._name_pair[1]}, layer {self.layer + 1} head {self.head + 1} ({label})"
        else:
            who = f"{self._source_model}: " if self._source_model else ""
            title = f"{who}layer {self.layer + 1}, head {self.head + 1} ({label})"
        embedded, note = self._embedded() if computing == "done" else ([], "")
        return {"diverging": bool(diverging), "top": top, "top_nosink": top_nosink, "title": title,
                "overview_max": maxes, "overview_mean": means, "embedded": embedded, "embed_note": note,
                "rows_ready": rows, "computing": computing}

    def _embedded(self) -> tuple[list[dict], str]:
        """Tiles of the levels below the overview, finest last, while they fit the budget."""
        if self._embed <= 0 or self._level == 0:
            return [], ""
        n, out, used, finest = self.n, [], 0, self._level
        for k in range(self._level - 1, -1, -1):
            m, mc = pyr.side(n, k), pyr.side(self._cols, k)
            cost = m * mc * (4 if k == 0 else 2)
            if used + cost > self._embed:
                break
            for ti in range(-(-m // pyr.TILE)):
                for tj in range(-(-mc // pyr.TILE)):
                    if self.causal and tj > ti:
                        continue  # all above the diagonal: empty
                    arr = pyr.tile(self._source, self.layer, self.head, n, k, ti, tj,
                                   reduce=self.reduce, signed=True, cols=self._cols)
                    out.append({"k": k, "ti": ti, "tj": tj, "reduce": self.reduce,
                                "array": wire(arr, "float32") if k == 0 else f16(arr)})
            used += cost
            finest = k
        if finest == 0:
            return out, "every cell embedded"
        cells = 1 << finest
        return out, (f"embedded down to {cells}\u00d7{cells} tokens per cell "
                     f"({used / 1e6:.1f} MB); closer views need a running kernel")

    # --------------------------------------------------------------- messages
    def _on_msg(self, _widget: Any, content: dict[str, Any], _buffers: Sequence[bytes]) -> None:
        if not isinstance(content, dict) or content.get("type") != "tile":
            return
        self.send(*message(self.answer(content)))

    def answer(self, data: dict[str, Any]) -> dict[str, Any]:
        """The kernel's reply to the front end's tile request (what a zoomed-in view draws).

        Parameters
        ----------
        data : dict
            The message's data: ``{"type": "tile", "layer", "head", "k", "ti", "tj",
            "reduce", "what"}``: head, pyramid level ``k`` (bins of ``2**k`` cells), tile
            row and column, pooling (``"max"``/``"mean"``) and ``"value"`` or ``"rank"``.

        Returns
        -------
        dict
            The request's fields plus ``"array"`` (float32 values or row ranks through
            :mod:`attnkit.widgets._codec`: ``{dtype, shape, buffer}``), or ``"error"`` (a
            message) for a request outside the map.

        Examples
        --------
        >>> import numpy as np, attnkit as ak
        >>> att = ak.Attention.from_maps(np.array([[[[1, 0], [0.25, 0.75]]]]), ["x", "y"])
        >>> reply = ak.Heatmap(att).answer({"type": "tile", "layer": 0, "head": 0, "k": 0, "ti": 0, "tj": 0})
        >>> reply["array"]["shape"], "error" in reply
        ([2, 2], False)
        """
        reply = {k: data.get(k) for k in ("id", "type", "layer", "head", "k", "ti", "tj", "reduce", "what", "exclude")}
        try:
            layer, head = validate.head_index(data.get("layer"), data.get("head"), self.n_layers, self.n_heads)
            k, ti, tj = (int(data.get(x, -1)) for x in ("k", "ti", "tj"))
            if not 0 <= k <= self._level:
                raise InputError(f"level {k} is outside 0..{self._level}.")
            reduce = data.get("reduce", "max")
            if reduce not in REDUCES:
                raise InputError(f"reduce must be 'max' or 'mean', not {reduce!r}.")
            if data.get("what", "value") == "rank":
                arr = pyr.rank_tile(self._source, layer, head, self.n, k, ti, tj,
                                    sinks=np.asarray(self.sinks), causal=self.causal,
                                    exclude_sinks=bool(data.get("exclude")), reduce=reduce,
                                    cols=self._cols)
            else:
                arr = pyr.tile(self._source, layer, head, self.n, k, ti, tj, reduce=reduce,
                               signed=True, cols=self._cols)
            reply["array"] = wire(arr, "float32")
        except (AttnkitError, TypeError, ValueError) as err:
            reply["error"] = str(err)
        return reply
