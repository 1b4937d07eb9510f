"""What every attnkit widget shares: the bundled front end, the static fallback in
``_repr_mimebundle_`` (shown by IPython as an output of its own, see :func:`display_beside`),
``save``, and head selection linked to a view that shows heads.

Arrays travel to the browser through one codec (:mod:`attnkit.widgets._codec`), never as
JSON lists of floats.
"""

from __future__ import annotations

import base64
import html
import io
import os
import uuid
import warnings
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anywidget
import numpy as np
import traitlets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from ..core import validate
from ..errors import InputError


@runtime_checkable
class ShowsHead(Protocol):
    """A view that shows one head: ``layer``, ``head``, ``n_layers``, ``n_heads`` and
    ``show(layer, head)`` (a :class:`~attnkit.widgets.Heatmap`)."""

    layer: int
    head: int
    n_layers: int
    n_heads: int

    def show(self, layer: int, head: int) -> None: ...

    def observe(self, handler: Any, names: Any = ...) -> None: ...

STATIC = Path(__file__).resolve().parent.parent / "static"

_MISSING_BUNDLE = """
export default {
  render({ el }) {
    const d = document.createElement("div");
    d.className = "attnkit-error";
    d.textContent = %s;
    el.appendChild(d);
  }
};
"""


def read_bundle(name: str) -> str:
    """The built ES module ``attnkit/static/<name>.js``, or a module that says it is missing."""
    path = STATIC / f"{name}.js"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = (
            f"attnkit's front end is not built ({path} is missing). Run `make js-build` in "
            "the source checkout (needs Node.js), or reinstall attnkit from a wheel."
        )
        warnings.warn(msg, stacklevel=3)
        import json

        return _MISSING_BUNDLE % json.dumps(msg)


def read_css() -> str:
    path = STATIC / "widgets.css"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


# ------------------------------------------------------------- colour scales
#: colour scales of the views that draw attention (Heatmap, HeadGrid); js/src/lib/scale.ts
SCALES = ("linear", "log", "rank")


def sink_positions(att: Any) -> tuple[list[int], str]:
    """Columns attention sinks into (the first token, [CLS], [SEP]) and how to name them
    (of the source, for cross-attention)."""
    roles = np.asarray(getattr(att, "source_roles", att.roles)).astype(str)
    tokens = getattr(att, "source_tokens", att.tokens)
    pos = {0} | set(np.flatnonzero(np.isin(roles, ("cls", "sep"))).tolist())
    names = []
    if roles.size and roles[0] != "cls":
        names.append("the first token")
    for role in ("cls", "sep"):
        if (roles == role).any():
            names.append(str(tokens[int(np.flatnonzero(roles == role)[0])]))
    names = list(dict.fromkeys(names))
    text = " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]
    return sorted(pos), text


def measure_of(att: Any) -> str:
    """What ``att``'s maps hold: its ``measure`` (``"weights"`` when it names none)."""
    return str(getattr(att, "measure", "weights") or "weights")


class SinkAwareScale(traitlets.HasTraits):
    """Traits of a view whose colour scale can leave attention sinks out (``scale``,
    ``exclude_sinks``, ``decades``, and the sinks themselves), and ``measure``: what the
    maps hold (``"weights"``, or another measure of :mod:`attnkit.runtime.measures`)."""

    measure = traitlets.Unicode("weights").tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    sinks = traitlets.List(traitlets.Int()).tag(sync=True)
    sink_names = traitlets.Unicode("").tag(sync=True)
    scale = traitlets.Unicode("linear").tag(sync=True)
    exclude_sinks = traitlets.Bool(False).tag(sync=True)
    decades = traitlets.Float(3.0).tag(sync=True)

    @staticmethod
    def scale_traits(att: Any, scale: str | None, exclude_sinks: bool | None, decades: float) -> dict[str, Any]:
        """Validated trait values; decoders default to a log scale without their sinks."""
        causal = bool(getattr(att, "causal", False))
        scale = scale or ("log" if causal else "linear")
        if scale not in SCALES:
            raise InputError(f"scale must be one of {SCALES}, not {scale!r}.")
        if not decades > 0:
            raise InputError(f"decades must be positive; got {decades}.")
        sinks, names = sink_positions(att)
        return {"measure": measure_of(att), "causal": causal, "sinks": sinks, "sink_names": names, "scale": scale,
                "exclude_sinks": causal if exclude_sinks is None else bool(exclude_sinks),
                "decades": float(decades)}

    @traitlets.validate("scale")
    def _check_scale(self, proposal: dict[str, Any]) -> str:
        if proposal["value"] not in SCALES:
            raise InputError(f"scale must be one of {SCALES}, not {proposal['value']!r}.")
        return proposal["value"]


class WholeNumber(traitlets.Int):
    """An ``Int`` trait that takes whole numbers only, as every attnkit index does: a float
    (``0.5``, ``1.0``), a bool, a string or None assigned from Python is an
    :class:`~attnkit.errors.InputError` naming the trait (traitlets' own ``Int`` raises its
    ``TraitError`` for floats and takes ``True`` as 1)."""

    def validate(self, obj: Any, value: Any) -> Any:
        return super().validate(obj, validate.integer(value, self.name or "value"))


class PicksLayerHead(traitlets.HasTraits):
    """Traits of a view with a layer stepper and a head picker whose ``head`` may be ``-1``
    (every head, or their mean): ``n_layers``, ``n_heads``, ``layer``, ``head``, validated
    by :mod:`attnkit.core.validate` (``layer=-1`` is the last layer; ``head=-1`` is the one
    exception to "negative counts from the end": it means every head)."""

    n_layers = traitlets.Int(1).tag(sync=True)
    n_heads = traitlets.Int(1).tag(sync=True)
    layer = WholeNumber(0).tag(sync=True)
    head = WholeNumber(-1).tag(sync=True)

    @traitlets.validate("layer")
    def _check_layer(self, proposal: dict[str, Any]) -> int:
        return validate.index(proposal["value"], self.n_layers, "layer")

    @traitlets.validate("head")
    def _check_head(self, proposal: dict[str, Any]) -> int:
        head = validate.integer(proposal["value"], "head")
        if head == -1:
            return -1
        if head < 0:
            raise InputError(f"head {head} is outside 0..{self.n_heads - 1} (0-indexed); this "
                             "view's head -1 stands for every head.")
        return validate.index(head, self.n_heads, "head")


# ------------------------------------------------------------ static fallback
#: The class of every static picture's <img>; with ``-<key>`` it names the view it stands
#: for (js/src/lib/fallback.ts hides it once that view has drawn).
STATIC_CLASS = "attnkit-static"
#: Where the output's metadata names the view a static picture stands for.
STATIC_META = "attnkit"
STATIC_MIMES = ("image/png", "text/html")


def display_beside(widget: Any, view: AttnkitWidget) -> None:
    """Show ``widget`` in IPython as two outputs: the static picture of ``view`` (``widget``
    itself, or the attnkit view it holds), then ``widget``'s live view.

    A front end that has a widget manager renders only the view of an output that offers
    one (``application/vnd.jupyter.widget-view+json``), and when it cannot (anywidget's
    front end is not installed where the Jupyter server runs, or the model went with its
    kernel) it shows "model not found" instead of the PNG beside it. As an output of its own,
    the picture shows wherever the view does not draw; the view hides it once it has drawn
    (both outputs name ``view._static_key`` in their metadata). The picture's text is the
    view's description; the widget's is empty, so an export without widget state shows the
    picture alone.
    """
    from IPython.display import display

    bundle = widget._repr_mimebundle_()
    if bundle is None:
        return
    data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
    static = {mime: data.pop(mime) for mime in STATIC_MIMES if mime in data}
    if static:
        mark = {STATIC_META: {"static": view._static_key}}
        static["text/plain"] = view._alt_text()
        display(static, metadata=mark, raw=True)
        data["text/plain"] = ""
        meta = {**meta, **mark}
    display(data, metadata=meta, raw=True)


# ---------------------------------------------------------------- the widget
class AttnkitWidget(anywidget.AnyWidget):
    """Base class: a bundled view plus a matplotlib twin for static output and ``save``."""

    _bundle_name: str = ""
    title = traitlets.Unicode("").tag(sync=True)
    #: names the static picture shown beside the view (``display_beside``)
    _static_key = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        self._esm = read_bundle(self._bundle_name)
        self._css = read_css()
        self._png_cache: bytes | None = None
        kwargs.setdefault("_static_key", uuid.uuid4().hex)
        super().__init__(**kwargs)
        self.observe(self._invalidate_static, names=list(self._static_traits()))

    # Subclasses: the figure and the words describing it.
    def figure(self, *, preview: bool = False) -> Figure:
        """The matplotlib figure of what the widget shows. ``preview=True`` trades detail
        (fewer labels, smaller thumbnails) for speed: it is what notebooks embed."""
        raise NotImplementedError

    def _alt_text(self) -> str:
        return self.title or type(self).__name__

    def _static_traits(self) -> set[str]:
        return {name for name in self.trait_names(sync=True) if not name.startswith("_") and name != "selected"}

    def _invalidate_static(self, _change: dict | None = None) -> None:
        self._png_cache = None

    # Static output ---------------------------------------------------------
    def to_png(self) -> bytes:
        """The preview PNG that notebooks show without a running kernel (cached).

        Drawn at 100 dpi and stored with a 256-colour palette, which keeps a 12 × 12 head
        grid near 150 kB instead of ~600 kB; use :meth:`save` for full quality.
        """
        if self._png_cache is None:
            fig = self.figure(preview=True)
            canvas = FigureCanvasAgg(fig)
            fig.set_dpi(100)
            canvas.draw()
            rgb = np.asarray(canvas.buffer_rgba())[..., :3]
            img = Image.fromarray(rgb).quantize(colors=256, method=Image.Quantize.MAXCOVERAGE)
            buf = io.BytesIO()
            img.save(buf, format="png")
            self._png_cache = buf.getvalue()
        return self._png_cache

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict, dict] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, meta = bundle
        try:
            png = self.to_png()
        except Exception as err:  # noqa: BLE001 - a broken static copy must not hide the live widget
            warnings.warn(f"attnkit: could not render the static image ({err!r}).", stacklevel=2)
            return data, meta
        b64 = base64.b64encode(png).decode("ascii")
        data["image/png"] = b64
        alt = html.escape(self._alt_text(), quote=True)
        data["text/html"] = (
            f'<img src="data:image/png;base64,{b64}" alt="{alt}" title="{alt}" '
            f'class="{STATIC_CLASS} {STATIC_CLASS}-{self._static_key}" style="max-width:100%;height:auto" />'
        )
        return data, meta

    def _ipython_display_(self) -> None:
        """IPython (Jupyter, Voila): the static picture and the live view as two outputs."""
        display_beside(self, self)

    def save(self, path: str | Path, *, dpi: int = 200) -> Path:
        """Write the view's static figure to a file.

        Parameters
        ----------
        path : str or Path
            A ``.png``, ``.svg`` or ``.pdf`` file name (the suffix picks the format) in an
            existing folder.
        dpi : int
            Resolution of a PNG.

        Returns
        -------
        Path
            ``path``.

        Raises
        ------
        InputError
            For another suffix or a folder that does not exist.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> view = ak.Heatmap(tiny_model("bert").attend("The cat sat."))
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     view.save(pathlib.Path(folder) / "cat.svg").stat().st_size > 0
        True
        """
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"path must be a file name (str or Path); got {path!r}.")
        path = Path(path)
        fmt = path.suffix.lower().lstrip(".")
        if fmt not in ("png", "svg", "pdf"):
            raise InputError(f"cannot save to path {str(path)!r}: use a .png, .svg or .pdf file "
                             "name.")
        if not path.parent.exists():
            raise InputError(f"cannot save to {path}: folder {path.parent} does not exist.")
        self.figure().savefig(path, format=fmt, dpi=dpi)
        return path


class SelectsHead(AttnkitWidget):
    """A view where clicking picks a head: ``selected`` is ``[layer, head]`` (0-indexed) or ``[]``."""

    selected = traitlets.List(traitlets.Int(), default_value=[], maxlen=2).tag(sync=True)
    n_layers = traitlets.Int(0).tag(sync=True)
    n_heads = traitlets.Int(0).tag(sync=True)

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict) -> list[int]:
        value = list(proposal["value"])
        if value:
            if len(value) != 2:
                raise InputError(f"selected must be [layer, head] or []; got {value!r}.")
            value = list(validate.head_index(value[0], value[1], self.n_layers, self.n_heads,
                                             "selected"))
        return value

    def link(self, heatmap: ShowsHead) -> ShowsHead:
        """Make ``heatmap`` show the selected head, and select the head the heatmap steps to.

        Returns the heatmap, so ``grid.link(ak.Heatmap(att))`` can be displayed directly.
        """
        if not isinstance(heatmap, ShowsHead):
            raise InputError(f"link() takes a Heatmap; got {type(heatmap).__name__}.")
        if (heatmap.n_layers, heatmap.n_heads) != (self.n_layers, self.n_heads):
            raise InputError(
                f"cannot link: this view has {self.n_layers} layers × {self.n_heads} heads, "
                f"the heatmap {heatmap.n_layers} × {heatmap.n_heads}."
            )

        def follow(change: dict) -> None:
            if change["new"]:
                heatmap.show(*change["new"])

        def back(_change: dict) -> None:
            pair = [heatmap.layer, heatmap.head]
            if self.selected != pair:
                self.selected = pair

        self.observe(follow, names="selected")
        heatmap.observe(back, names=["layer", "head"])
        if self.selected:
            heatmap.show(*self.selected)
        return heatmap
