"""Run a measure on a batch: one forward with :mod:`attnkit.runtime.capture`'s recorders.

:class:`MeasureRecorder` is handed every layer's
:class:`~attnkit.runtime.capture.AttentionCall` (probabilities, value states, the attention module)
and, for the measures that decompose the whole block, the forward's hidden states (the
residual stream entering each layer) and each block's attention output (read by a forward
hook on the module the architecture table names); it computes each item's maps with the pure functions
of :mod:`~attnkit.runtime.measures.norm`, :mod:`~attnkit.runtime.measures.norm_residual` and
:mod:`~attnkit.runtime.measures.alti`. ``grad×attn`` needs a backward pass and runs through
:func:`~attnkit.runtime.measures.grad_attn.grad_attn` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._compat import renamed
from ...core import validate
from ...errors import CaptureError, InputError, UnsupportedModelError
from . import alti, norm, norm_residual
from ._arch import layer_parts
from ._decompose import BlockDecomposition

#: Every measure, in the order the docs list them.
MEASURES = validate.MEASURES
_ALIASES = {"grad*attn": "grad×attn", "gradxattn": "grad×attn", "grad_attn": "grad×attn",
            "norm_residual": "norm+residual"}
_BLOCK = {"norm+residual": norm_residual.norm_residual_maps, "alti": alti.alti_maps}


@renamed(positional=("measure",))
def check_measure(*, measure: str = "weights") -> str:
    """The canonical name of ``measure`` (``"grad*attn"`` is accepted for ``"grad×attn"``).

    Parameters
    ----------
    measure : str
        One of :data:`MEASURES`, or an accepted spelling of one.

    Returns
    -------
    str
        The name as :data:`MEASURES` spells it.

    Raises
    ------
    InputError
        For an unknown measure.

    Examples
    --------
    >>> from attnkit.runtime.measures import check_measure
    >>> check_measure(measure="grad*attn")
    'grad×attn'
    """
    name = _ALIASES.get(measure, measure) if isinstance(measure, str) else measure
    if name not in MEASURES:
        raise InputError(f"measure must be one of {MEASURES}, not {measure!r}.")
    return name


@renamed(positional=("measure",))
def n_heads(model: Any, *, measure: str = "weights") -> int:
    """Heads of the maps ``measure`` gives: the model's heads, or 1 for the "mixed"
    measures (``norm+residual``, ``alti``).

    Parameters
    ----------
    model : Model
        The model.
    measure : str
        One of :data:`MEASURES`.

    Returns
    -------
    int
        Heads per layer of its maps.

    Raises
    ------
    InputError
        For an unknown measure.

    Examples
    --------
    >>> from attnkit.runtime.measures import n_heads
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert", heads=4)
    >>> n_heads(model, measure="norm"), n_heads(model, measure="alti")
    (4, 1)
    """
    if not hasattr(model, "n_heads") or isinstance(model, str):
        validate.model(model)  # says what a model is and how to load one
    return 1 if check_measure(measure=measure) in _BLOCK else int(model.n_heads)


class MeasureRecorder:
    """Per-item maps ``[L, H', n_i, n_i]`` of a forward-only measure (float32 numpy): the
    recorder :func:`measure_maps` hands to :meth:`attnkit.Model.record`.

    Parameters
    ----------
    model : Model
        The model being run (its :func:`~attnkit.runtime.measures._arch.layer_parts`).
    measure : str
        ``"weights"``, ``"norm"``, ``"norm+residual"`` or ``"alti"``.
    lengths : sequence of int
        Token count of each item of the batch (padding is stripped).

    Examples
    --------
    >>> from attnkit.runtime.measures import MeasureRecorder
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert")
    >>> encodings = [model.encode("The cat sat.")]
    >>> rec = MeasureRecorder(model, "norm", [len(e) for e in encodings])
    >>> try:
    ...     out = model.record(encodings, [rec])
    ... finally:
    ...     rec.close()
    >>> rec.maps[0].shape == (2, 2, len(encodings[0]), len(encodings[0]))
    True
    """

    needs_lse = False
    #: Every probability of every layer is read: capture computes the layer's output from
    #: them (one pass) and hands them over instead of computing them twice.
    needs_probabilities = True

    def __init__(self, model: Any, measure: str, lengths: Sequence[int]) -> None:
        self.measure = check_measure(measure=measure)
        if self.measure == "grad×attn":
            raise InputError("grad×attn needs a backward pass; use attnkit.runtime.measures.grad_attn.")
        self.parts = layer_parts(model) if self.measure != "weights" else []
        self.layer_of = {id(p.attention): i for i, p in enumerate(self.parts)}
        self.lengths = list(lengths)
        self.n_layers = int(model.n_layers)
        heads = n_heads(model, measure=self.measure)
        self.maps = [np.zeros((self.n_layers, heads, n, n), dtype=np.float32) for n in self.lengths]
        self.forward_options = {"output_hidden_states": True} if self.measure in _BLOCK else {}
        self._pending: dict[int, tuple[Any, Any]] = {}
        self._taps: dict[int, Any] = {}
        self._hooks: list[Any] = []
        self.layers_seen = 0
        if self.measure in _BLOCK:  # read each block's attention output off the forward
            for layer, p in enumerate(self.parts):
                if p.tap is None:
                    continue
                if p.placement == "pre":
                    hook = p.tap.register_forward_hook(
                        lambda m, a, out, layer=layer: self._taps.__setitem__(
                            layer, out[0] if isinstance(out, tuple) else out))
                else:
                    hook = p.tap.register_forward_pre_hook(
                        lambda m, a, layer=layer: self._taps.__setitem__(layer, a[0]))
                self._hooks.append(hook)

    def close(self) -> None:
        """Remove the forward hooks (also after a failed forward).

        Returns
        -------
        None

        Examples
        --------
        >>> from attnkit.runtime.measures import MeasureRecorder
        >>> from attnkit.testing import tiny_model
        >>> rec = MeasureRecorder(tiny_model("bert"), "norm+residual", [5])
        >>> rec.close()  # its hooks are gone: the model runs as before
        >>> len(rec.maps)
        1
        """
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()

    def _layer(self, call: Any) -> int:
        if not self.parts:
            return int(call.layer)
        layer = self.layer_of.get(id(call.module))
        if layer is None:
            raise UnsupportedModelError(
                f"An attention call came from {type(call.module).__name__}, which is not one of "
                "the layers attnkit.runtime.measures._arch found; the model's layout is not supported."
            )
        return layer

    def __call__(self, call: Any) -> None:
        import torch

        layer = self._layer(call)
        if layer >= self.n_layers:
            raise CaptureError(f"attention layer {layer} is beyond the model's {self.n_layers}.")
        probs = torch.cat([call.probabilities(rows) for rows in call.row_blocks()], dim=2)
        self.layers_seen += 1
        if self.measure in _BLOCK:
            self._pending[layer] = (probs, call.value)
            return
        if self.measure == "norm":
            probs = norm.norm_maps(probs, call.value.float(), self.parts[layer].w_o.float())
        self._store(layer, probs)

    def _store(self, layer: int, maps: Any) -> None:
        """Per-item slices (padding stripped) of a batch's ``[B, H', T, T]`` maps."""
        arr = maps.cpu().numpy()
        for i, n in enumerate(self.lengths):
            self.maps[i][layer] = arr[i, :, :n, :n]

    def finish(self, output: Any) -> None:
        """Decompose the blocks now that the residual stream (hidden states) is known
        (:meth:`attnkit.Model.record` calls it after the forward).

        Parameters
        ----------
        output : transformers ModelOutput
            The forward's output, with ``hidden_states``.

        Returns
        -------
        None

        Raises
        ------
        CaptureError
            When the output has no hidden states for a measure that needs them.

        Examples
        --------
        >>> from attnkit.runtime.measures import MeasureRecorder
        >>> from attnkit.testing import tiny_model
        >>> rec = MeasureRecorder(tiny_model("bert"), "norm", [5])
        >>> rec.finish(None)  # nothing pending: "norm" is stored layer by layer
        >>> rec.close()
        """
        if not self._pending:
            return
        hidden = getattr(output, "hidden_states", None)
        if hidden is None or len(hidden) < self.n_layers:
            raise CaptureError(
                f"The model did not return its hidden states, which {self.measure} needs."
            )
        fn = _BLOCK[self.measure]
        for layer, (probs, values) in sorted(self._pending.items()):
            x = hidden[layer].float()
            y = self._taps.get(layer)
            if y is not None:
                y = y.float() - x if self.parts[layer].placement == "post" else y.float()
            # the padded batch at once: padded keys have zero attention, hence zero terms
            block = BlockDecomposition(probs, values.float(), x, self.parts[layer], y=y)
            self._store(layer, fn(block))
        self._pending.clear()
        self._taps.clear()


@renamed(positional=("measure",))
def measure_maps(model: Any, encodings: Sequence[Any], *, measure: str = "weights") -> list[np.ndarray]:
    """Per-item float32 maps ``[L, H', n_i, n_i]`` of ``measure`` on a batch (one forward;
    one backward too for ``grad×attn``, with its default objective).

    Parameters
    ----------
    model : Model
        The model to run.
    encodings : sequence of Encoding
        One batch (:meth:`attnkit.Model.encode`).
    measure : str
        One of :data:`MEASURES`.

    Returns
    -------
    list of ndarray
        One float32 ``[L, H', n_i, n_i]`` per encoding (``H' = 1`` for the mixed
        measures); rows are *from*, columns *to*.

    Raises
    ------
    UnsupportedModelError
        When the model's attention does not go through transformers' attention interface
        (no recorder can see its value states), or its layout is not in
        :data:`~attnkit.runtime.measures._arch.ARCHS`.

    Examples
    --------
    >>> from attnkit.runtime.measures import measure_maps
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("bert")
    >>> [m.shape for m in measure_maps(model, [model.encode("The cat sat.")], measure="alti")]
    [(2, 1, 6, 6)]
    """
    validate.model(model)
    measure = check_measure(measure=measure)
    if measure == "grad×attn":
        from .grad_attn import grad_attn

        return [a.maps for a in grad_attn(model, list(encodings), progress=False,
                                          batch_size=max(1, len(encodings)))]
    if measure != "weights" and model.capture != "interface":
        raise UnsupportedModelError(
            f"measure={measure!r} reads each layer's value states through attnkit's attention "
            f"function, but {model.name} keeps its eager attention path. Use measure='weights' "
            "or 'grad×attn'."
        )
    if getattr(model, "family", "text") == "vision" and any(
            "pixel_values" not in getattr(e, "meta", {}) for e in encodings):
        raise InputError(f"encodings: {model.name} is a vision model; give it image encodings "
                         "(model.encode(image)), not encoded text.")
    rec = MeasureRecorder(model, measure, [len(e) for e in encodings])
    try:
        model.record(encodings, [rec])
    finally:
        rec.close()
    if rec.layers_seen != model.n_layers:
        raise CaptureError(
            f"{model.name} ran {rec.layers_seen} attention layers through attnkit's function "
            f"but has {model.n_layers}."
        )
    return rec.maps
