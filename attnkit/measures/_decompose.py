"""The attention block of one layer, split into one vector per (output, input) token pair.

Notation (one input of ``n`` tokens, model width ``d``, ``H`` heads of size ``k``):

- ``x_j``: the residual stream entering the layer at position ``j``;
- ``α^h_ij``: head ``h``'s attention probability from ``i`` to ``j``;
- ``v^h_j``: head ``h``'s value state of ``j`` (bias included; for a pre-norm model it is
  computed from the normalised ``x_j``);
- ``W_O^h``: the ``d × k`` slice of the output projection that reads head ``h``;
- ``f^h_j = W_O^h v^h_j``: what token ``j`` hands to the output through head ``h``
  (:func:`head_outputs`);
- ``y_i = Σ_h Σ_j α^h_ij f^h_j + b_O``: the attention output.

:class:`BlockDecomposition` writes the block output ``z_i`` (post-norm ``LN(x_i + y_i)``,
pre-norm ``x_i + y_i``, sandwich ``x_i + N(y_i)``) as ``z_i = Σ_j T_i(x_j) + c_i`` where
``c_i`` gathers the biases, which belong to no token. A normalisation is linear once its
statistics (mean and standard deviation, or root mean square, of the whole row ``i``) are
fixed, so each norm is applied to each term with row ``i``'s own statistics:
``L_i(u) = scale ⊙ (u - mean(u)) / σ_i`` (LayerNorm) or ``scale ⊙ u / r_i`` (RMSNorm).
"""

from __future__ import annotations

from typing import Any, Iterator

from ..errors import InputError
from ._arch import LayerParts, NormSpec

#: Elements of one chunk of ``[rows, n, d]`` term vectors (16 MiB in float32).
CHUNK_ELEMENTS = 1 << 22


def head_outputs(values: Any, w_o: Any, n_heads: int) -> Any:
    """``f[h, j] = W_O^h v^h_j``: float ``[H, n, d]``.

    Parameters
    ----------
    values : tensor ``[H_kv, n, k]``, the value states as the attention function receives
        them. With grouped-query attention (``H_kv < H``) query head ``h`` reads value head
        ``h // (H // H_kv)``, as transformers' ``repeat_kv`` does.
    w_o : tensor ``[d, H * k]``, the output projection (``out = w_o @ concat(heads) + b``).
    n_heads : ``H``.
    """
    import torch

    h_kv, n, k = values.shape
    if n_heads % h_kv or w_o.shape[1] != n_heads * k:
        raise InputError(
            f"value states [{h_kv}, {n}, {k}] do not fit {n_heads} heads and an output "
            f"projection of shape {tuple(w_o.shape)}."
        )
    v = values.repeat_interleave(n_heads // h_kv, dim=0) if h_kv != n_heads else values
    w = w_o.to(v.dtype).reshape(w_o.shape[0], n_heads, k)
    return torch.einsum("hnk,dhk->hnd", v, w)


def _linear_norm(u: Any, norm: NormSpec, stat: Any) -> Any:
    """The norm's linear part applied to ``u [..., r, (n,) d]`` with row statistics ``stat``
    (``[r, 1]`` or ``[r, 1, 1]``: σ or rms of each row's whole)."""
    scale = norm.scale.to(u.dtype)
    if norm.kind == "layer":
        u = u - u.mean(-1, keepdim=True)
    return scale * u / stat


def _row_stat(total: Any, norm: NormSpec) -> Any:
    if norm.kind == "layer":
        return (total.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
    return (total.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()


class BlockDecomposition:
    """``z_i = Σ_j T_i(x_j) + c_i`` for one layer and one input (see the module docstring).

    Parameters
    ----------
    probs : tensor ``[H, n, n]``, attention probabilities (rows = from).
    values : tensor ``[H_kv, n, k]``, value states.
    residual : tensor ``[n, d]``, the residual stream entering the layer.
    parts : the layer's :class:`~attnkit.measures._arch.LayerParts`.

    Attributes
    ----------
    f : ``[H, n, d]`` head outputs (:func:`head_outputs`).
    whole : ``[n, d]`` the block output ``z``, computed the way the model computes it.
    """

    def __init__(self, probs: Any, values: Any, residual: Any, parts: LayerParts) -> None:
        import torch

        self.probs = probs
        self.residual = residual.to(probs.dtype)
        self.parts = parts
        self.f = head_outputs(values.to(probs.dtype), parts.w_o, probs.shape[0])
        y = torch.einsum("hij,hjd->id", probs, self.f)
        self.bias = None if parts.b_o is None else parts.b_o.to(probs.dtype)
        if self.bias is not None:
            y = y + self.bias
        norm = parts.norm
        if parts.placement == "pre":
            self.stat = None
            self.whole = self.residual + y
        elif parts.placement == "post":
            assert norm is not None
            total = self.residual + y
            self.stat = _row_stat(total, norm)
            self.whole = _linear_norm(total, norm, self.stat)
            if norm.bias is not None:
                self.whole = self.whole + norm.bias.to(probs.dtype)
        elif parts.placement == "sandwich":
            assert norm is not None
            self.stat = _row_stat(y, norm)
            self.whole = self.residual + _linear_norm(y, norm, self.stat)
        else:
            raise InputError(f"unknown placement {parts.placement!r}")

    @property
    def n(self) -> int:
        return self.probs.shape[-1]

    def chunks(self) -> Iterator[tuple[slice, Any]]:
        """``(rows, T)`` with ``T[r, j] = T_i(x_j)`` for ``i`` in ``rows``: float
        ``[len(rows), n, d]``, row blocks of at most :data:`CHUNK_ELEMENTS` elements."""
        import torch

        n, d = self.n, self.residual.shape[-1]
        step = max(1, CHUNK_ELEMENTS // max(1, n * d))
        placement, norm = self.parts.placement, self.parts.norm
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            idx = torch.arange(rows.start, rows.stop)
            t = torch.einsum("hij,hjd->ijd", self.probs[:, rows], self.f)
            local = torch.arange(len(idx))
            if placement in ("pre", "post"):
                t[local, idx] += self.residual[rows]
            if placement != "pre":
                assert norm is not None
                t = _linear_norm(t, norm, self.stat[rows].unsqueeze(-1))
            if placement == "sandwich":
                t[local, idx] += self.residual[rows]
            yield rows, t

    def rest(self) -> Any:
        """``c_i = z_i - Σ_j T_i(x_j)``: ``[n, d]``, the part of the output that comes from
        biases (the output projection's, the norm's) and belongs to no token."""
        import torch

        c = torch.zeros_like(self.whole)
        if self.bias is not None:
            b = self.bias.expand_as(c)
            c = b if self.parts.placement == "pre" else _linear_norm(b, self.parts.norm, self.stat)
        if self.parts.placement == "post" and self.parts.norm.bias is not None:
            c = c + self.parts.norm.bias.to(c.dtype)
        return c
