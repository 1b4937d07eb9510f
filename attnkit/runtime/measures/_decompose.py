"""The attention block of one layer, split into one vector per (output, input) token pair.

Notation (one input of ``n`` tokens, model width ``d``, ``H`` heads of size ``k``):

- ``x_j``: the residual stream entering the layer at position ``j``;
- ``α^h_ij``: head ``h``'s attention probability from ``i`` to ``j``;
- ``v^h_j``: head ``h``'s value state of ``j`` (bias included; for a pre-norm model it is
  computed from the normalised ``x_j``);
- ``W_O^h``: the ``d × k`` slice of the output projection that reads head ``h``;
- ``f^h_j = W_O^h v^h_j``: what token ``j`` hands to the output through head ``h``;
- ``y_i = Σ_h Σ_j α^h_ij f^h_j + b_O``: the attention output.

:class:`BlockDecomposition` writes the block output ``z_i`` (post-norm ``LN(x_i + y_i)``,
pre-norm ``x_i + y_i``, sandwich ``x_i + N(y_i)``) as ``z_i = Σ_j T_i(x_j) + c_i`` where
``c_i`` gathers the biases, which belong to no token. A normalisation is linear once its
statistics (mean and standard deviation, or root mean square, of the whole row ``i``) are
fixed, so each norm is applied to each term with row ``i``'s own statistics:
``L_i(u) = P(u) / σ_i`` with ``P(u) = scale ⊙ (u - mean(u))`` (LayerNorm) or
``P(u) = scale ⊙ u`` (RMSNorm; ``σ_i`` is then the root mean square). ``P`` does not depend
on ``i``, so it is folded into the output projection once (``W'^h = P W_O^h``):

    T_i(x_j) = s_i Σ_h α^h_ij g^h_j + δ_ij w_i,   g^h_j = W'^h v^h_j

with ``s_i = 1/σ_i`` and ``w_i = P(x_i)/σ_i`` (post-norm), ``s_i = 1/σ_i`` and ``w_i = x_i``
(sandwich), ``s_i = 1`` and ``w_i = x_i`` (pre-norm, ``W' = W_O``).

Everything accepts an optional leading batch dimension (a padded batch: padded keys have
zero attention, so they get zero terms; padded rows are to be dropped by the caller).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...errors import InputError
from ._arch import LayerParts, NormSpec

#: Elements of one block of ``[items, rows, n, d]`` term vectors (4 MiB in float32): small
#: enough to stay in cache between the product that makes it and the reduction that reads
#: it (a single 64 MiB block made ALTI several times slower).
CHUNK_ELEMENTS = 1 << 20


def _per_head(w_o: Any, n_heads: int, dtype: Any) -> Any:
    """The output projection as ``[H, k, d]``: ``[h] = (W_O^h)ᵀ``."""
    d = w_o.shape[0]
    return w_o.to(dtype).reshape(d, n_heads, -1).permute(1, 2, 0).contiguous()


def _derived(parts: LayerParts, name: str, dtype: Any, make: Any) -> Any:
    """A matrix derived from the layer's weights, made once per weights and dtype."""
    key = (name, str(dtype))
    if key not in parts.cache:
        parts.cache[key] = make()
    return parts.cache[key]


def repeat_heads(values: Any, n_heads: int) -> Any:
    """Value states ``[..., H_kv, n, k]`` repeated over the query heads that share them
    (query head ``h`` reads value head ``h // (H // H_kv)``, as transformers' ``repeat_kv``)."""
    h_kv = values.shape[-3]
    if n_heads % h_kv:
        raise InputError(f"{n_heads} query heads cannot share {h_kv} value heads.")
    return values.repeat_interleave(n_heads // h_kv, dim=-3) if h_kv != n_heads else values


def head_output_norms(values: Any, w_o: Any, n_heads: int) -> Any:
    """``‖f^h_j‖₂``: ``[..., H, n]``, as ``sqrt(v M_h v)`` with ``M_h = (W_O^h)ᵀ W_O^h``
    (``k × k``), without forming the ``[H, n, d]`` vectors."""
    import torch

    v = repeat_heads(values, n_heads)
    w = _per_head(w_o, n_heads, v.dtype)
    m = torch.matmul(w, w.transpose(1, 2))  # [H, k, k]
    return (torch.matmul(v, m) * v).sum(-1).clamp(min=0).sqrt()


def _center(u: Any, norm: NormSpec, dim: int = -1) -> Any:
    return u - u.mean(dim, keepdim=True) if norm.kind == "layer" else u


def _project(u: Any, norm: NormSpec) -> Any:
    """``P(u)`` along the last axis (see module docstring)."""
    return norm.scale.to(u.dtype) * _center(u, norm)


class BlockDecomposition:
    """``z_i = Σ_j T_i(x_j) + c_i`` for one layer (see the module docstring).

    Parameters
    ----------
    probs : tensor ``[(B,) H, n, n]``, attention probabilities (rows = from).
    values : tensor ``[(B,) H_kv, n, k]``, value states.
    residual : tensor ``[(B,) n, d]``, the residual stream entering the layer.
    parts : the layer's :class:`~attnkit.runtime.measures._arch.LayerParts`.
    y : tensor ``[(B,) n, d]``, optional
        The attention output (after the output projection, bias included) as the forward
        computed it; recomputed from ``probs`` and ``values`` when omitted.

    Attributes
    ----------
    whole : ``[(B,) n, d]`` the block output ``z``, computed the way the model computes it.
    """

    def __init__(self, probs: Any, values: Any, residual: Any, parts: LayerParts,
                 y: Any = None) -> None:
        import torch

        self.batched = probs.dim() == 4
        if not self.batched:
            probs, values, residual = probs[None], values[None], residual[None]
            y = None if y is None else y[None]
        dtype = probs.dtype
        self.probs = probs
        self.residual = residual.to(dtype)
        self.parts = parts
        self.n_heads = H = probs.shape[1]
        self.v = repeat_heads(values.to(dtype), H)  # [B, H, n, k]
        B, n = self.residual.shape[:2]
        self.w = _derived(parts, "w", dtype, lambda: _per_head(parts.w_o, H, dtype))
        self.bias = None if parts.b_o is None else parts.b_o.to(dtype)
        if y is None:  # the attention output: heads' contexts through the output projection
            ctx = torch.matmul(probs, self.v).transpose(1, 2).reshape(B, n, -1)
            y = torch.matmul(ctx, parts.w_o.to(dtype).T)
            if self.bias is not None:
                y = y + self.bias
        y = y.to(dtype)
        norm = parts.norm
        self.stat = None
        self.w_proj = self.w  # W' = P W_O, per head [H, k, d]
        if parts.placement == "pre":
            self._whole = self.residual + y
        elif parts.placement in ("post", "sandwich"):
            assert norm is not None
            total = self.residual + y if parts.placement == "post" else y
            centered = _center(total, norm)
            self.stat = (centered.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()
            normed = norm.scale.to(dtype) * centered / self.stat
            if parts.placement == "post":
                self._whole = normed if norm.bias is None else normed + norm.bias.to(dtype)
            else:
                self._whole = self.residual + normed
            self.w_proj = _derived(parts, "w_proj", dtype,
                                   lambda: norm.scale.to(dtype) * _center(self.w, norm))
        else:
            raise InputError(f"unknown placement {parts.placement!r}")

    @property
    def whole(self) -> Any:
        return self._out(self._whole)

    @property
    def n(self) -> int:
        return self.probs.shape[-1]

    def _out(self, t: Any) -> Any:
        return t if self.batched else t[0]

    def _scale_and_diag(self) -> tuple[Any, Any]:
        """``(s, w)`` of the module docstring: ``s [B, n]`` (None for 1), ``w [B, n, d]``."""
        placement, norm, stat = self.parts.placement, self.parts.norm, self.stat
        if placement == "pre" or norm is None or stat is None:
            return None, self.residual
        s = 1.0 / stat[..., 0]
        if placement == "post":
            return s, _project(self.residual, norm) * s.unsqueeze(-1)
        return s, self.residual

    def projected_outputs(self) -> Any:
        """``g^h_j = W'^h v^h_j`` as ``[H, B, n, d]`` (one batched product per head)."""
        import torch

        B, H, n, k = self.v.shape
        vh = self.v.transpose(0, 1).reshape(H, B * n, k)
        return torch.bmm(vh, self.w_proj).view(H, B, n, -1)

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
        g = self.projected_outputs()
        s, w = self._scale_and_diag()
        for b0 in range(0, B, b_step):
            items = slice(b0, min(B, b0 + b_step))
            for start in range(0, n, r_step):
                rows = slice(start, min(n, start + r_step))
                local = torch.arange(rows.stop - rows.start)
                t = torch.einsum("bhij,hbjd->bijd", self.probs[items, :, rows], g[:, items])
                if s is not None:
                    t *= s[items, rows, None, None]
                t[:, local, local + start] += w[items, rows]
                yield items, rows, t

    def term_norms(self) -> Any:
        """``‖T_i(x_j)‖₂`` for every pair: ``[(B,) n, n]``, without forming the ``[n, n, d]``
        terms: ``‖Σ_h α^h_ij g^h_j‖² = α_ijᵀ G_j α_ij`` with each token's ``H × H`` Gram
        matrix ``G_j[h, h'] = ⟨g^h_j, g^h'_j⟩ = v^h_j · (W'^hᵀ W'^h') v^h'_j``; the diagonal
        adds the residual's terms ``2 s_i ⟨A_ii, w_i⟩ + ‖w_i‖²``."""
        import torch

        B, H, n, k = self.v.shape
        s, w = self._scale_and_diag()
        wp = self.w_proj  # [H, k, d]
        cross = _derived(self.parts, "cross", wp.dtype,  # [(h k), (h' l)]: W'^hᵀ W'^h'
                         lambda: torch.matmul(wp.reshape(H * k, -1), wp.reshape(H * k, -1).T))
        vh = self.v.transpose(0, 1).reshape(H, B * n, k)
        u = torch.bmm(vh, cross.view(H, k, H * k)).view(H, B * n, H, k)  # (v^h M^{hh'})_l
        vb = self.v.permute(0, 2, 1, 3).reshape(B * n, H, k)
        gram = torch.einsum("hngl,ngl->nhg", u, vb).view(B, n, H, H)  # [B, n(j), H, H]
        p = self.probs.permute(0, 3, 2, 1).contiguous()  # [B, n(j), n(i), H]
        sq = (torch.matmul(p, gram) * p).sum(-1).transpose(1, 2)  # [B, n(i), n(j)]
        # ⟨A_ii, w_i⟩ = Σ_h α^h_ii v^h_i · (W'^h w_i)
        wq = torch.matmul(w, wp.reshape(H * k, -1).T).view(B, n, H, k)  # W'^h w_i
        diag_alpha = torch.diagonal(self.probs, dim1=-2, dim2=-1).transpose(1, 2)  # [B, n, H]
        aw = (diag_alpha * (wq * self.v.transpose(1, 2)).sum(-1)).sum(-1)  # [B, n]
        idx = torch.arange(n)
        if s is not None:
            sq = sq * (s * s).unsqueeze(-1)
            aw = aw * s
        sq[:, idx, idx] += 2 * aw + (w * w).sum(-1)
        return self._out(sq.clamp(min=0).sqrt())

    def rest(self) -> Any:
        """``c_i = z_i - Σ_j T_i(x_j)``: ``[(B,) n, d]``, the part of the output that comes
        from biases (the output projection's, the norm's) and belongs to no token."""
        import torch

        c = torch.zeros_like(self._whole)
        norm = self.parts.norm
        if self.bias is not None:
            b = self.bias.expand_as(c)
            c = b if norm is None or self.parts.placement == "pre" else _project(b, norm) / self.stat
        if self.parts.placement == "post" and norm is not None and norm.bias is not None:
            c = c + norm.bias.to(c.dtype)
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
