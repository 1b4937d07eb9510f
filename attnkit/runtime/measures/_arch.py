"""Where each architecture keeps what the measures need: one table, nothing else.

The measures decompose one attention block. Besides what the attention function sees
(probabilities and value states, from :mod:`attnkit.runtime.capture`'s recorder), they need the
block's output projection and the normalisation that follows the attention (if any).
:data:`ARCHS` says where those are, per ``config.model_type``; :func:`layer_parts` reads them
from a loaded model. Paths are dotted attribute paths: ``layers`` from the bare model
(:attr:`attnkit.Model.base`), the others from one layer.

Placement of the normalisation around the attention block:

``"post"``
    ``z = LN(x + Attn(x))`` (BERT, RoBERTa, DistilBERT).
``"pre"``
    ``z = x + Attn(LN(x))`` (GPT-2, GPT-NeoX, Llama, Qwen2, Mistral, gpt-oss, ViT, DeiT, CLIP's
    vision tower); the pre-norm is part
    of the value states the recorder sees, so only the residual sum is decomposed. For
    GPT-NeoX's parallel residual the block is ``x + Attn(LN(x))`` without the MLP branch.
``"sandwich"``
    ``z = x + N(Attn(N'(x)))`` (Gemma 2: an RMSNorm on the attention output before the
    residual sum).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from ...errors import UnsupportedModelError


@dataclass(frozen=True)
class ArchSpec:
    """Where one architecture keeps its attention block's parts (see module docstring)."""

    layers: str
    attention: str
    out_proj: str
    placement: str
    norm: str | None = None
    conv1d: bool = False  # the projection stores its weight as [in, out] (GPT-2's Conv1D)
    norm_offset: float = 0.0  # RMSNorm scale is (offset + weight) (Gemma)


_BERT = ArchSpec("encoder.layer", "attention.self", "attention.output.dense", "post",
                 "attention.output.LayerNorm")
_DECODER = ArchSpec("layers", "self_attn", "self_attn.o_proj", "pre")
#: ViT and DeiT: ``x + Attn(layernorm_before(x))``
_VIT = ArchSpec("layers", "attention", "attention.o_proj", "pre")
#: CLIP's vision tower (:attr:`attnkit.runtime.vision.VisionModel.base` of CLIPModel and
#: CLIPVisionModel alike): ``x + Attn(layer_norm1(x))``
_CLIP = ArchSpec("encoder.layers", "self_attn", "self_attn.out_proj", "pre")

#: ``config.model_type`` -> where its parts are.
ARCHS: dict[str, ArchSpec] = {
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
    "distilbert": ArchSpec("transformer.layer", "attention", "attention.out_lin", "post",
                           "sa_layer_norm"),
    "gpt2": ArchSpec("h", "attn", "attn.c_proj", "pre", conv1d=True),
    "gpt_neox": ArchSpec("layers", "attention", "attention.dense", "pre"),
    "llama": _DECODER,
    "qwen2": _DECODER,
    "mistral": _DECODER,
    "gpt_oss": _DECODER,
    "gemma2": ArchSpec("layers", "self_attn", "self_attn.o_proj", "sandwich",
                       "post_attention_layernorm", norm_offset=1.0),
    "vit": _VIT,
    "deit": _VIT,
    "clip": _CLIP,
    "clip_vision_model": _CLIP,
}


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


def spec(model: Any) -> ArchSpec:
    """The :class:`ArchSpec` of a :class:`~attnkit.Model`, or a clear refusal."""
    kind = getattr(model, "model_type", "") or getattr(model.config, "model_type", "")
    if kind not in ARCHS:
        raise UnsupportedModelError(
            f"The attention measures do not know where {kind or type(model).__name__!r} keeps "
            f"its output projection and normalisation; supported: {', '.join(sorted(ARCHS))}. "
            "Use measure='weights', or add the model to attnkit.runtime.measures._arch.ARCHS."
        )
    return ARCHS[kind]


def _get(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


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
        layers = list(_get(model.base, s.layers))
        parts = []
        for layer in layers:
            proj = _get(layer, s.out_proj)
            w = proj.weight.detach()
            norm_mod = _get(layer, s.norm) if s.norm else None
            parts.append(LayerParts(
                attention=_get(layer, s.attention),
                w_o=w.T if s.conv1d else w,
                b_o=None if getattr(proj, "bias", None) is None else proj.bias.detach(),
                placement=s.placement,
                norm=_norm_spec(norm_mod, s.norm_offset) if norm_mod is not None else None,
                tap=norm_mod if norm_mod is not None else _get(layer, s.attention),
                cache=_cache_for(proj.weight, getattr(norm_mod, "weight", None)),
            ))
    except AttributeError as exc:
        raise UnsupportedModelError(
            f"{model.name} ({s.layers}) does not have the layout attnkit expects for "
            f"{model.model_type!r} models ({exc}); use measure='weights'."
        ) from exc
    return parts
