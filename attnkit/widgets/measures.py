"""MeasureSwitch: one view of one input under several attention measures, in one place.

Buttons above the view flip between the measures (:mod:`attnkit.runtime.measures`): weights, norm,
norm+residual, ALTI, grad×attn, …. Each measure's view is built once, with the same options,
and what the user chose in one (the head shown, the selected head, the threshold) carries
over to the next, so the layout stays put and only the values change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ipywidgets
import traitlets

from ..core.attention import Attention
from ..core import validate
from ..errors import InputError
from ._base import display_beside
from .headgrid import HeadGrid

#: Traits a view keeps when the measure changes (those it has).
CARRIED = ("layer", "head", "selected", "threshold", "alpha", "restrict")


class MeasureSwitch(ipywidgets.VBox):
    """A view (``HeadGrid``, ``Heatmap``, ``FlowView``, …) with a measure switch.

    Parameters
    ----------
    attentions : mapping
        Measure name -> :class:`~attnkit.Attention` of the same input (same tokens), e.g.
        ``{m: model.attend(text, measure=m) for m in ("weights", "norm", "alti")}``.
    view : type or callable
        Builds the view of one measure: ``view(attention, **options)``;
        :class:`~attnkit.HeadGrid` (default), :class:`~attnkit.Heatmap` or
        :class:`~attnkit.FlowView`.
    measure : str
        The measure shown first; when ``attentions`` has no ``"weights"`` (the default),
        the first of them.
    **options
        Passed to ``view`` for every measure (a ``head`` beyond a mixed measure's single
        head becomes its head 0). A Heatmap's ``value_label`` defaults to the measure's
        name.

    Raises
    ------
    InputError
        When ``attentions`` is empty, holds something other than Attention objects, or
        inputs with different tokens.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert")
    >>> atts = {m: model.attend("The cat sat.", measure=m) for m in ("weights", "norm")}
    >>> switch = ak.MeasureSwitch(atts, view=ak.Heatmap, layer=1, head=1)
    >>> switch.measure = "norm"
    >>> switch.measure, (switch.view.layer, switch.view.head), switch.view.value_label
    ('norm', (1, 1), 'norm')
    """

    def __init__(
        self,
        attentions: Mapping[str, Attention],
        *,
        view: Callable[..., Any] = HeadGrid,
        measure: str = "weights",
        **options: Any,
    ) -> None:
        items = dict(attentions)
        if not items:
            raise InputError("MeasureSwitch needs at least one measure's Attention.")
        first = None
        for name, att in items.items():
            if not isinstance(att, Attention):
                raise InputError(f"attentions[{name!r}] is a {type(att).__name__}, not an Attention.")
            if first is not None and list(att.tokens) != list(first.tokens):
                raise InputError(f"attentions[{name!r}] is on other tokens than the first measure; "
                                 "show measures of one input.")
            first = first or att
        if measure == "weights" and measure not in items:
            measure = next(iter(items))
        if measure not in items:
            raise InputError(f"measure {measure!r} is not one of {list(items)}.")
        self._factory, self._attentions, self._options = view, items, options
        self.views: dict[str, Any] = {}
        self.buttons = ipywidgets.ToggleButtons(options=list(items), value=measure,
                                                description="measure", style={"button_width": "auto"})
        # Every measure's view is built and stacked, the buttons linked to the stack in the
        # browser (jslink): switching works in an exported report too, with no kernel.
        self.stack = ipywidgets.Stack([self._build(name) for name in items],
                                      selected_index=list(items).index(measure))
        self._link = ipywidgets.jslink((self.buttons, "index"), (self.stack, "selected_index"))
        super().__init__([self.buttons, self.stack])
        self.buttons.observe(self._switch, names="value")

    def _build(self, name: str) -> Any:
        if name not in self.views:
            options = dict(self._options)
            att = self._attentions[name]
            if "head" in options:  # a mixed measure has one head per layer
                options["head"] = min(int(options["head"]), att.n_heads - 1)
            if getattr(self._factory, "__name__", "") == "Heatmap":
                options.setdefault("value_label", name)
            self.views[name] = self._factory(self._attentions[name], **options)
        return self.views[name]

    def _switch(self, change: dict) -> None:
        old = self.views.get(change["old"])
        new = self._build(change["new"])
        self.stack.selected_index = list(self._attentions).index(change["new"])
        if old is not None:
            for trait in CARRIED:
                if old.has_trait(trait) and new.has_trait(trait):
                    try:
                        setattr(new, trait, getattr(old, trait))
                    except (InputError, traitlets.TraitError):
                        continue  # e.g. head 7 of a per-head measure on a mixed one

    @property
    def measure(self) -> str:
        """The measure shown; set it to switch."""
        return str(self.buttons.value)

    @measure.setter
    def measure(self, name: str) -> None:
        if name not in self._attentions:
            raise InputError(f"measure {name!r} is not one of {list(self._attentions)}.")
        self.buttons.value = name

    @property
    def view(self) -> Any:
        """The view of the measure shown."""
        return self.views[self.measure]

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The live widget, plus the shown view's static image for exports without a kernel."""
        bundle = super()._repr_mimebundle_(**kwargs)
        static = getattr(self.view, "_repr_mimebundle_", None)
        if bundle is None or static is None:
            return bundle
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        extra = static(**kwargs)
        extra = extra[0] if isinstance(extra, tuple) else extra
        for key in ("image/png", "text/html"):
            if extra and key in extra:
                data[key] = extra[key]
        return bundle

    def _ipython_display_(self) -> None:
        """IPython: the shown view's static picture and the switch as two outputs."""
        display_beside(self, self.view)

    def save(self, path: str | Path, *, dpi: int = 200) -> Path:
        """Save the view of the measure shown (as its view's ``save`` does).

        Parameters
        ----------
        path : str or Path
            A ``.png``, ``.svg`` or ``.pdf`` file name in an existing folder.
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
        >>> model = tiny_model("bert")
        >>> switch = ak.MeasureSwitch({m: model.attend("The cat sat.", measure=m)
        ...                            for m in ("weights", "norm")})
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     switch.save(pathlib.Path(folder) / "grid.png").stat().st_size > 0
        True
        """
        dpi = validate.size(dpi, "dpi")
        return self.view.save(path, dpi=dpi)
