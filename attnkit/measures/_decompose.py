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
``L_i(u) = P(u) / σ_i`` with ``P(u) = scale ⊙ (u - mean(u))`` (LayerNorm) or
``P(u) = scale ⊙ u`` (RMSNorm; ``σ_i`` is then the root mean square). ``P`` does not depend
on ``i``, so it is applied once to each ``f^h_j`` and ``x_j`` rather than to every term.

Everything accepts an optional leading batch dimension (a padded batch: padded keys have
zero attention, so they get zero terms; padded rows are to be dropped by the caller).
"""

from __future__ import annotations

from typing import Any, Iterator

from ..errors import InputError
from ._arch import LayerParts, NormSpec

#: Elements of one chunk of ``[batch, rows, n, d]`` term vectors (1 MiB in float32): small
#: enough to stay in cache between the product that makes it and the reduction that reads
#: it (a chunk of 64 MiB made ALTI about 3x slower on a loaded 2-core machine).
CHUNK_ELEMENTS = 1 << 18


def head_outputs(values: Any, w_o: Any, n_heads: int) -> Any:
    """``f[..., h, j] = W_O^h v^h_j``: float ``[..., H, n, d]``.

    Parameters
    ----------
    values : tensor ``[..., H_kv, n, k]``, the value states as the attention function
        receives them. With grouped-query attention (``H_kv < H``) query head ``h`` reads
        value head ``h // (H // H_kv)``, as transformers' ``repeat_kv`` does.
    w_o : tensor ``[d, H * k]``, the output projection (``out = w_o @ concat(heads) + b``).
    n_heads : ``H``.
    """
    import torch

    h_kv, n, k = values.shape[-3:]
    if n_heads % h_kv or w_o.shape[1] != n_heads * k:
        raise InputError(
            f"value states [{h_kv}, {n}, {k}] do not fit {n_heads} heads and an output "
            f"projection of shape {tuple(w_o.shape)}."
        )
    v = values.repeat_interleave(n_heads // h_kv, dim=-3) if h_kv != n_heads else values
    w = w_o.to(v.dtype).reshape(w_o.shape[0], n_heads, k)
    return torch.einsum("...hnk,dhk->...hnd", v, w)


def _project(u: Any, norm: NormSpec) -> Any:
    """``P(u)``: the row-independent part of the norm's linear map (see module docstring)."""
    if norm.kind == "layer":
        u = u - u.mean(-1, keepdim=True)
    return norm.scale.to(u.dtype) * u


def _row_stat(total: Any, norm: NormSpec) -> Any:
    if norm.kind == "layer":
        return (total.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
    return (total.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()


class BlockDecomposition:
    """``z_i = Σ_j T_i(x_j) + c_i`` for one layer (see the module docstring).

    Parameters
    ----------
    probs : tensor ``[(B,) H, n, n]``, attention probabilities (rows = from).
    values : tensor ``[(B,) H_kv, n, k]``, value states.
    residual : tensor ``[(B,) n, d]``, the residual stream entering the layer.
    parts : the layer's :class:`~attnkit.measures._arch.LayerParts`.

    Attributes
    ----------
    f : ``[(B,) H, n, d]`` head outputs (:func:`head_outputs`).
    whole : ``[(B,) n, d]`` the block output ``z``, computed the way the model computes it.
    """

    @property
    def whole(self) -> Any:
        return self._out(self._whole)

    def __init__(self, probs: Any, values: Any, residual: Any, parts: LayerParts) -> None:
        import torch

        self.batched = probs.dim() == 4
        if not self.batched:
            probs, values, residual = probs[None], values[None], residual[None]
        self.probs = probs
        self.residual = residual.to(probs.dtype)
        self.parts = parts
        self.f = head_outputs(values.to(probs.dtype), parts.w_o, probs.shape[1])
        y = torch.einsum("bhij,bhjd->bid", probs, self.f)
        self.bias = None if parts.b_o is None else parts.b_o.to(probs.dtype)
        if self.bias is not None:
            y = y + self.bias
        norm = parts.norm
        self.stat = None
        if parts.placement == "pre":
            self._whole = self.residual + y
        elif parts.placement == "post":
            assert norm is not None
            total = self.residual + y
            self.stat = _row_stat(total, norm)
            self._whole = _project(total, norm) / self.stat
            if norm.bias is not None:
                self._whole = self._whole + norm.bias.to(probs.dtype)
        elif parts.placement == "sandwich":
            assert norm is not None
            self.stat = _row_stat(y, norm)
            self._whole = self.residual + _project(y, norm) / self.stat
        else:
            raise InputError(f"unknown placement {parts.placement!r}")

    @property
    def n(self) -> int:
        return self.probs.shape[-1]

    def _out(self, t: Any) -> Any:
        return t if self.batched else t[0]

    def chunks(self) -> Iterator[tuple[slice, slice, Any]]:
        """``(items, rows, T)`` with ``T[b, r, j, :] = T_i(x_j)`` of item ``items[b]`` and
        row ``i = rows[r]``: float ``[len(items), len(rows), n, d]`` (``items`` is
        ``slice(0, 1)`` without a batch dimension). Blocks hold at most
        :data:`CHUNK_ELEMENTS` elements, so that each is made and read while in cache."""
        import torch

        B, n, d = self.residual.shape
        per_item = n * n * d
        if per_item <= CHUNK_ELEMENTS:
            b_step, r_step = max(1, CHUNK_ELEMENTS // per_item), n
        else:
            b_step, r_step = 1, max(1, CHUNK_ELEMENTS // (n * d))
        g, s, w = self._scaled_parts()
        for b0 in range(0, B, b_step):
            items = slice(b0, min(B, b0 + b_step))
            for start in range(0, n, r_step):
                rows = slice(start, min(n, start + r_step))
                local = torch.arange(rows.stop - rows.start)
                t = torch.einsum("bhij,bhjd->bijd", self.probs[items, :, rows], g[items])
                if s is not None:
                    t *= s[items, rows, None, None]
                t[:, local, local + start] += w[items, rows]
                yield items, rows, t

    def _scaled_parts(self) -> tuple[Any, Any, Any]:
        """``(g, s, w)`` with ``T_ij = s_i Σ_h α^h_ij g^h_j + δ_ij w_i``: ``g [B, H, n, d]``,
        ``s [B, n]`` (or None for 1), ``w [B, n, d]``."""
        placement, norm = self.parts.placement, self.parts.norm
        if placement == "pre":
            return self.f, None, self.residual
        g = _project(self.f, norm)
        s = 1.0 / self.stat[..., 0]
        if placement == "post":
            return g, s, _project(self.residual, norm) * s.unsqueeze(-1)
        return g, s, self.residual

    def term_norms(self) -> Any:
        """``‖T_i(x_j)‖₂`` for every pair: ``[(B,) n, n]``, without forming the ``[n, n, d]``
        terms: ``‖Σ_h α^h_ij g^h_j‖² = α_ijᵀ G_j α_ij`` with each token's ``H × H`` Gram
        matrix ``G_j = [⟨g^h_j, g^h'_j⟩]``; the diagonal adds the residual's terms."""
        import torch

        g, s, w = self._scaled_parts()
        gt = g.transpose(1, 2).contiguous()  # [B, n, H, d]
        gram = torch.matmul(gt, gt.transpose(-1, -2))  # [B, n(j), H, H]
        p = self.probs.permute(0, 3, 2, 1).contiguous()  # [B, n(j), n(i), H]
        sq = (torch.matmul(p, gram) * p).sum(-1).transpose(1, 2)  # [B, n(i), n(j)]
        diag_a = torch.einsum("bhii,bhid->bid", self.probs, g)  # A_ii
        n = self.n
        idx = torch.arange(n)
        if s is not None:
            sq = sq * (s * s).unsqueeze(-1)
            diag_a = diag_a * s.unsqueeze(-1)
        sq[:, idx, idx] += 2 * (diag_a * w).sum(-1) + (w * w).sum(-1)
        return self._out(sq.clamp(min=0).sqrt())

    def rest(self) -> Any:
        """``c_i = z_i - Σ_j T_i(x_j)``: ``[(B,) n, d]``, the part of the output that comes
        from biases (the output projection's, the norm's) and belongs to no token."""
        import torch

        c = torch.zeros_like(self._whole)
        if self.bias is not None:
            b = self.bias.expand_as(c)
            c = b if self.parts.placement == "pre" else _project(b, self.parts.norm) / self.stat
        if self.parts.placement == "post" and self.parts.norm.bias is not None:
            c = c + self.parts.norm.bias.to(c.dtype)
        return self._out(c)

    def empty(self) -> Any:
        """A zero ``[B, n, n]`` tensor to fill with one value per term (batched always;
        :meth:`result` drops the batch dimension where the input had none)."""
        import torch

        B, n = self.residual.shape[:2]
        return torch.zeros((B, n, n), dtype=self._whole.dtype, device=self._whole.device)

    def result(self, t: Any) -> Any:
        """``t [B, ...]`` without its batch dimension when the input had none."""
        return self._out(t)
