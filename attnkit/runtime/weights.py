"""Reading a model's heads: per-head weights, normalisations as linear maps, component names.

:func:`head_weights` gives one layer's ``W_Q, W_K, W_V`` per (query or key/value) head and
``W_O^h`` per head, float64 on the CPU, wherever the family keeps them (its
:class:`~attnkit.runtime.archs.Stream` and :class:`~attnkit.runtime.archs.Layout` records).

Normalisations are linear once their statistics are fixed: a layer norm of row ``p`` is
``N_p(u) = scale ⊙ (u - mean(u)) / σ_p + bias`` (RMSNorm: ``scale ⊙ u / σ_p``) with ``σ_p``
the standard deviation (root mean square) of the whole row as the forward computed it
(:class:`LinearNorm`). :func:`apply_rotary` rotates queries or keys with the layer's own
rotary function.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from ..errors import InputError, UnsupportedModelError
from ..core.labels import head_label, mlp_label
from .archs import Stream, layout_of, stream_of, submodule


def stream_spec(model: Any) -> Stream:
    """The :class:`~attnkit.runtime.archs.Stream` of a :class:`~attnkit.Model` whose heads'
    outputs attnkit can record, or a clear refusal.

    Parameters
    ----------
    model : Model
        The model.

    Returns
    -------
    Stream

    Raises
    ------
    UnsupportedModelError
        For a family without a stream record, or one whose attention does not run through
        attnkit's attention function.

    Examples
    --------
    >>> from attnkit.runtime.weights import stream_spec
    >>> from attnkit.testing import tiny_model
    >>> stream_spec(tiny_model("gpt2")).qkv
    'gpt2'
    """
    spec = stream_of(model, what="Reading heads' weights")
    if getattr(model, "capture", "interface") != "interface":
        raise UnsupportedModelError(
            f"{model.name} keeps its eager attention path, so its heads' outputs cannot be "
            "recorded; this needs a model loaded with attnkit.load whose attention runs through "
            "transformers' attention interface.")
    return spec


@dataclass
class LinearNorm:
    """A normalisation as a linear map once its row statistics are fixed (module docstring).

    Parameters
    ----------
    kind : str
        ``"layer"`` (centre, then divide by the standard deviation) or ``"rms"``.
    scale : torch.Tensor
        Float64 ``[d]`` (Gemma's ``1 + weight``).
    bias : torch.Tensor or None
        Float64 ``[d]``.
    eps : float
        Added to the variance.
    """

    kind: str
    scale: Any
    bias: Any
    eps: float

    @classmethod
    def of(cls, module: Any) -> LinearNorm:
        """The :class:`LinearNorm` of a ``LayerNorm`` or RMSNorm module.

        Parameters
        ----------
        module : torch.nn.Module
            The norm.

        Returns
        -------
        LinearNorm

        Examples
        --------
        >>> import torch
        >>> from attnkit.runtime.weights import LinearNorm
        >>> LinearNorm.of(torch.nn.LayerNorm(4)).kind
        'layer'
        """
        import torch

        weight = module.weight.detach().double().cpu()
        if isinstance(module, torch.nn.LayerNorm):
            bias = None if module.bias is None else module.bias.detach().double().cpu()
            return cls("layer", weight, bias, float(module.eps))
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        if eps is None:
            raise UnsupportedModelError(f"Cannot read the epsilon of {type(module).__name__}.")
        offset = 1.0 if type(module).__name__.startswith("Gemma") else 0.0
        return cls("rms", weight + offset, None, float(eps))

    def center(self, u: Any) -> Any:
        return u - u.mean(-1, keepdim=True) if self.kind == "layer" else u

    def sigma(self, x: Any) -> Any:
        """Row statistics ``σ [P]`` of rows ``x [P, d]``."""
        c = self.center(x)  # (torch.var_mean is ten times slower on CPU rows)
        return ((c * c).mean(-1) + self.eps).sqrt()

    def apply(self, u: Any, sigma: Any) -> Any:
        """``scale ⊙ centre(u) / σ`` for components ``u [..., P, d]`` and row statistics
        ``σ [P]`` (or ``u [..., N, T, d]`` and ``σ [N, T]``; no bias)."""
        return self.scale * self.center(u) / sigma[..., None]

    def apply_(self, u: Any, sigma: Any) -> Any:
        """:meth:`apply` in place on ``u`` (returned), for tensors outside autograd: no copy
        of ``u``, the same map up to rounding.

        Examples
        --------
        >>> import torch
        >>> from attnkit.runtime.weights import LinearNorm
        >>> norm = LinearNorm.of(torch.nn.LayerNorm(4)).to(torch.zeros(1))
        >>> u, sigma = torch.randn(3, 2, 4), torch.tensor([0.5, 2.0])
        >>> bool(torch.allclose(norm.apply_(u.clone(), sigma), norm.apply(u, sigma)))
        True
        """
        if self.kind == "layer":
            u.sub_(u.mean(-1, keepdim=True))
        return u.mul_(self.scale / sigma[..., None])

    def to(self, like: Any) -> LinearNorm:
        """This norm with its tensors in the dtype and on the device of ``like`` (a forward's
        activations), for linearising that forward's own norms in its precision.

        Examples
        --------
        >>> import torch
        >>> from attnkit.runtime.weights import LinearNorm
        >>> LinearNorm.of(torch.nn.LayerNorm(4)).to(torch.zeros(1)).scale.dtype
        torch.float32
        """
        def cast(t: Any) -> Any:
            return None if t is None else t.to(dtype=like.dtype, device=like.device)

        return LinearNorm(self.kind, cast(self.scale), cast(self.bias), self.eps)

    def matrix(self, w: Any) -> Any:
        """``W diag(scale) C`` (``C`` the centring of a layer norm): a read matrix
        ``[m, d]`` through the norm, to be divided by ``σ`` per row."""
        m = w * self.scale
        return m - m.mean(-1, keepdim=True) if self.kind == "layer" else m


@dataclass
class HeadWeights:
    """One layer's attention weights per head, float64 on the CPU.

    ``wq [H, k, d]``, ``wk``, ``wv [H_kv, k, d]`` (rows read the normalised stream; biases
    ``[H, k]`` / ``[H_kv, k]`` or None), ``wo [H, d, k]`` (``W_O^h``) and ``bo [d]`` or None,
    ``norm`` the pre-attention norm (pre-norm models) or None.
    """

    wq: Any
    bq: Any
    wk: Any
    bk: Any
    wv: Any
    bv: Any
    wo: Any
    bo: Any
    norm: LinearNorm | None

    @property
    def groups(self) -> int:
        return self.wq.shape[0] // self.wk.shape[0]


def _lin(module: Any, conv1d: bool = False) -> tuple[Any, Any]:
    w = module.weight.detach().double().cpu()
    b = getattr(module, "bias", None)
    return (w.T if conv1d else w), (None if b is None else b.detach().double().cpu())


def layer_modules(model: Any) -> list[Any]:
    """The transformer layers of ``model``, in order.

    Parameters
    ----------
    model : Model
        The model.

    Returns
    -------
    list of torch.nn.Module

    Examples
    --------
    >>> from attnkit.runtime.weights import layer_modules
    >>> from attnkit.testing import tiny_model
    >>> len(layer_modules(tiny_model("bert")))
    2
    """
    stream_spec(model)
    return list(submodule(model.base, layout_of(model).layers))


def head_weights(model: Any, layer: int) -> HeadWeights:
    """The per-head weights of layer ``layer`` (0-indexed) of ``model``.

    Parameters
    ----------
    model : Model
        The model.
    layer : int
        0-indexed.

    Returns
    -------
    HeadWeights

    Examples
    --------
    >>> from attnkit.runtime.weights import head_weights
    >>> from attnkit.testing import tiny_model
    >>> w = head_weights(tiny_model("llama", heads=4, kv_heads=2, hidden=16), 0)
    >>> tuple(w.wq.shape), tuple(w.wk.shape), tuple(w.wo.shape), w.groups
    ((4, 4, 16), (2, 4, 16), (4, 16, 4), 2)
    """
    spec, arch = stream_spec(model), layout_of(model)
    mod = layer_modules(model)[layer]
    H = model.n_heads
    if spec.qkv == "split":
        (wq, bq), (wk, bk), (wv, bv) = (_lin(submodule(mod, p)) for p in (spec.q, spec.k, spec.v))
    elif spec.qkv == "gpt2":
        w, b = _lin(submodule(mod, spec.q), conv1d=True)  # [3d, d]
        d = w.shape[1]
        wq, wk, wv = w[:d], w[d:2 * d], w[2 * d:]
        bq, bk, bv = (None, None, None) if b is None else (b[:d], b[d:2 * d], b[2 * d:])
    else:  # neox: rows [H, 3, k]
        w, b = _lin(submodule(mod, spec.q))
        d = w.shape[1]
        w3 = w.view(H, 3, -1, d)
        wq, wk, wv = (w3[:, i].reshape(-1, d) for i in range(3))
        b3 = None if b is None else b.view(H, 3, -1)
        bq, bk, bv = (None, None, None) if b3 is None else (b3[:, i].reshape(-1) for i in range(3))
    d = wq.shape[1]
    k = wq.shape[0] // H
    wo, bo = _lin(submodule(mod, arch.out_proj), conv1d=arch.conv1d)  # [d, H k]

    def heads(t: Any) -> Any:
        return None if t is None else t.reshape(-1, k, *t.shape[1:])

    norm = LinearNorm.of(submodule(mod, spec.attn_norm)) if spec.attn_norm else None
    import torch

    for what, t in (("query", wq), ("key", wk), ("value", wv), ("output", wo),
                    ("query bias", bq), ("key bias", bk), ("value bias", bv), ("output bias", bo)):
        if t is not None and not bool(torch.isfinite(t).all()):
            raise InputError(
                f"layer {layer}'s {what} weights of {getattr(model, 'name', 'the model')} hold NaN "
                "or infinite values: the weight file is damaged or the model overflowed in "
                "float16. Reload it (attnkit.load(..., dtype='float32'))."
            )
    return HeadWeights(heads(wq), heads(bq), heads(wk), heads(bk), heads(wv), heads(bv),
                       wo.view(d, H, k).permute(1, 0, 2).contiguous(), bo, norm)


def component_names(model: Any, layer: int) -> list[str]:
    """The components of the stream entering layer ``layer`` (0-indexed), in order.

    Parameters
    ----------
    model : Model
        The model.
    layer : int
        0-indexed; ``0`` has only the embeddings and ``"bias"``.

    Returns
    -------
    list of str

    Examples
    --------
    >>> from attnkit.runtime.weights import component_names
    >>> from attnkit.testing import tiny_model
    >>> component_names(tiny_model("gpt2"), 1)
    ['embed', 'pos_embed', '1-1', '1-2', '1-mlp', 'bias']
    """
    spec = stream_spec(model)
    names = ["embed"] + [n for n, _ in spec.embeds if n != "embed"]
    for m in range(layer):
        names += [head_label(m, h) for h in range(model.n_heads)] + [mlp_label(m)]
    return names + ["bias"]


def torch_matmul(a: Any, b: Any) -> Any:
    """``a [m, d] @ b [H, d, k]`` -> ``[H, m, k]``."""
    import torch

    return torch.matmul(a, b)


#: Elements a chunk of :func:`apply_rotary` rotates at once (8 MiB of float64).
ROTATE_CHUNK = 1 << 20


def apply_rotary(model: Any, t: Any, rotary: Any, positions: Any) -> Any:
    """Rotate ``t [C, P, k]`` (queries or keys at ``positions``) **in place** with the layer's
    own rotary function and ``(cos, sin)``; a linear map per position. Components go through
    the function a chunk at a time (:data:`ROTATE_CHUNK` elements), so the temporaries it
    makes stay small whatever ``C × P``.

    Parameters
    ----------
    model : Model
        The model.
    t : torch.Tensor
        ``[C, P, k]`` float64; overwritten.
    rotary : tuple of torch.Tensor or None
        ``(cos, sin)`` ``[1, n, r]`` as the layer received them; None leaves ``t`` as is.
    positions : torch.Tensor
        Int ``[P]``.

    Returns
    -------
    torch.Tensor
        ``t``, rotated.

    Examples
    --------
    >>> import torch
    >>> from attnkit.runtime.weights import apply_rotary
    >>> from attnkit.testing import tiny_model
    >>> apply_rotary(tiny_model("bert"), torch.ones(1, 2, 4), None, torch.arange(2)).shape
    torch.Size([1, 2, 4])
    """
    if rotary is None:
        return t
    attn = submodule(layer_modules(model)[0], layout_of(model).attention)
    fn = getattr(sys.modules[type(attn).__module__], "apply_rotary_pos_emb", None)
    if fn is None:
        raise UnsupportedModelError(
            f"{model.model_type} rotates queries and keys but its modeling module has no "
            "apply_rotary_pos_emb; query-key attribution cannot apply its rotation.")
    cos, sin = (r[:, positions] for r in rotary)  # [1, P, r]
    step = max(1, ROTATE_CHUNK // max(1, t[0].numel()))
    for c0 in range(0, t.shape[0], step):
        chunk = t[c0: c0 + step, None]
        out, _ = fn(chunk, chunk[:1], cos, sin)  # the function rotates both arguments alike
        t[c0: c0 + step] = out[:, 0]
    return t
