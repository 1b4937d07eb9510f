"""The parts of each attention block that the measures read, from the family's record.

The measures decompose one attention block. Besides what the attention function sees
(probabilities and value states, from :mod:`attnkit.runtime.capture`'s recorder), they need the
block's output projection and the normalisation that follows the attention (if any), which
the family's :class:`~attnkit.runtime.archs.Layout` locates; :func:`layer_parts` reads them
from a loaded model.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from ...errors import UnsupportedModelError
from ..archs import Layout, layout_of, submodule


@dataclass
class NormSpec:
    """The normalisation after the attention: ``scale * (u - mean) / sqrt(var + eps) + bias``
    (``kind="layer"``) or ``scale * u / sqrt(mean(u**2) + eps)`` (``kind="rms"``)."""

    kind: str
    scale: Any  # torch.Tensor [d]
    bias: Any  # torch.Tensor [d] or None
    eps: float


@dataclass
class LayerParts:
    """One layer's attention block as the measures see it.

    attention : the module the attention function receives (matches recorder calls).
    w_o : float tensor ``[d, H * head_dim]``: output projection, ``out = w_o @ heads + b_o``.
    b_o : ``[d]`` or None.
    placement : ``"post"``, ``"pre"`` or ``"sandwich"``.
    norm : the normalisation after the attention (``"post"``, ``"sandwich"``), else None.
    tap : the module whose input (``"post"``: ``x + y``; ``"sandwich"``: ``y``) or output
        (``"pre"``: ``y``) holds the attention output ``y``, so the measures read it from
        the forward instead of recomputing it; None where unknown.
    cache : derived matrices (filled by :mod:`~attnkit.runtime.measures._decompose`).
    """

    attention: Any
    w_o: Any
    b_o: Any
    placement: str
    norm: NormSpec | None
    tap: Any = None
    cache: dict = field(default_factory=dict)


def spec(model: Any) -> Layout:
    """The :class:`~attnkit.runtime.archs.Layout` of a :class:`~attnkit.Model`, or a clear refusal."""
    return layout_of(model, what="The attention measures", instead="Use measure='weights'.")


def _norm_spec(module: Any, offset: float) -> NormSpec:
    import torch

    weight = module.weight.detach()
    if isinstance(module, torch.nn.LayerNorm):
        bias = None if module.bias is None else module.bias.detach()
        return NormSpec("layer", weight, bias, float(module.eps))
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if eps is None:
        raise UnsupportedModelError(f"Cannot read the epsilon of {type(module).__name__}.")
    return NormSpec("rms", weight + offset, None, float(eps))


#: Derived matrices per layer, kept across batches: output projection weight (the model's own
#: ``Parameter``, held weakly, so the entry dies with the model and a later model whose
#: weights land at the same address cannot read it) -> (stamp, norm weight (weak), matrices).
#: The stamp holds the weights' version counters, storage, dtype, device and shape: weights
#: changed in place (an optimizer step, ``load_state_dict``, ``model.to``) get new matrices.
#: Writes through ``.data`` bypass the version counter and are not seen.
_CACHE: Any = None


def _stamp(t: Any) -> tuple:
    return (t._version, t.data_ptr(), str(t.dtype), str(t.device), tuple(t.shape))


def _cache_for(weight: Any, norm_weight: Any = None) -> dict:
    """The derived-matrix cache of one layer: ``weight`` is the output projection's weight
    parameter, ``norm_weight`` the following normalisation's (or None)."""
    global _CACHE
    if _CACHE is None:
        from torch.utils.weak import WeakIdKeyDictionary

        _CACHE = WeakIdKeyDictionary()  # identity keys: tensors' == is elementwise
    stamp = (_stamp(weight), None if norm_weight is None else _stamp(norm_weight))
    entry = _CACHE.get(weight)
    if entry is not None:
        old_stamp, norm_ref, matrices = entry
        old_norm = None if norm_ref is None else norm_ref()
        if old_stamp == stamp and old_norm is norm_weight:
            return matrices
    matrices = {}
    _CACHE[weight] = (stamp, None if norm_weight is None else weakref.ref(norm_weight),
                      matrices)
    return matrices


def layer_parts(model: Any) -> list[LayerParts]:
    """The :class:`LayerParts` of every layer of ``model`` (a :class:`~attnkit.Model`)."""
    s = spec(model)
    try:
        layers = list(submodule(model.base, s.layers))
        parts = []
        for layer in layers:
            proj = submodule(layer, s.out_proj)
            w = proj.weight.detach()
            norm_mod = submodule(layer, s.norm) if s.norm else None
            parts.append(LayerParts(
                attention=submodule(layer, s.attention),
                w_o=w.T if s.conv1d else w,
                b_o=None if getattr(proj, "bias", None) is None else proj.bias.detach(),
                placement=s.placement,
                norm=_norm_spec(norm_mod, s.norm_offset) if norm_mod is not None else None,
                tap=norm_mod if norm_mod is not None else submodule(layer, s.attention),
                cache=_cache_for(proj.weight, getattr(norm_mod, "weight", None)),
            ))
    except AttributeError as exc:
        raise UnsupportedModelError(
            f"{model.name} ({s.layers}) does not have the layout attnkit expects for "
            f"{model.model_type!r} models ({exc}); use measure='weights'."
        ) from exc
    return parts
