"""``measure="alti"``: Aggregation of Layer-wise Token-to-token Interactions.

Ferrando, Gállego & Costa-jussà (2022), *Measuring the Mixing of Contextual Information in
the Transformer*, EMNLP.

Definition: with the block decomposition ``z_i = Σ_j T_i(x_j) + c_i`` of
:mod:`~attnkit.runtime.measures.norm_residual` (attention, residual and normalisation; ``z_i`` the
block's actual output), the contribution of input ``j`` to output ``i`` is how much
closer ``T_i(x_j)`` lies to ``z_i`` than the zero vector does, in Manhattan distance::

    c_ij = max(0, ‖z_i‖₁ - ‖z_i - T_i(x_j)‖₁)
    m_ij = c_ij / Σ_k c_ik

one "mixed" head per layer, non-negative, rows sum to 1 (a row whose every term lies
farther from ``z_i`` than zero does stays 0). Because the residual is inside the block,
the layers compose by plain matrix products: ALTI's input attribution is the rollout of
these maps *without* an added identity, ``rollout(att, residual=0)``.
"""

from __future__ import annotations

from typing import Any

from ._decompose import BlockDecomposition

PER_HEAD = False
CITATION = ("Ferrando, Gállego & Costa-jussà (2022), Measuring the Mixing of Contextual "
            "Information in the Transformer, EMNLP.")


def alti_maps(block: BlockDecomposition) -> Any:
    """ALTI contributions ``m_ij``: float ``[(B,) 1, n, n]`` (rows = from, columns = to).

    Examples
    --------
    A pre-norm block whose output projection is the identity: ``z_0 = x_0 + 0.5 v_0 +
    0.5 v_1 = (4, 1)``; ``T_0(x_0) = (4, 0)`` lies at L1 distance 1 from it, ``T_0(x_1) =
    (0, 1)`` at 4, so ``c_00 = 5 - 1 = 4`` and ``c_01 = 5 - 4 = 1``.

    >>> import torch
    >>> from attnkit.runtime.measures._arch import LayerParts
    >>> from attnkit.runtime.measures._decompose import BlockDecomposition
    >>> from attnkit.runtime.measures.alti import alti_maps
    >>> probs = torch.tensor([[[0.5, 0.5], [0.0, 1.0]]], dtype=torch.float64)
    >>> values = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
    >>> x = torch.tensor([[3.0, 0.0], [0.0, 0.0]])
    >>> parts = LayerParts(None, torch.eye(2), None, "pre", None)
    >>> alti_maps(BlockDecomposition(probs, values, x, parts))[0].tolist()
    [[0.8, 0.2], [0.0, 1.0]]
    """
    import torch

    out = block.empty()
    whole = block._whole  # [B, n, d]
    # ‖z‖₁ by the same kernel as the distances, so a zero term gets exactly zero contribution
    flat = whole.reshape(-1, 1, whole.shape[-1])
    sizes = torch.cdist(flat, torch.zeros_like(flat), p=1).reshape(*whole.shape[:-1], 1)
    for items, rows, t in block.chunks():
        z = whole[items, rows]  # [b, r, d]
        lead = t.shape[:-2]
        # L1 distances of each term to its row's whole, without a [r, n, d] difference
        zr = z.reshape(-1, 1, z.shape[-1])
        dist = torch.cdist(zr, t.reshape(-1, *t.shape[-2:]), p=1).reshape(*lead, -1)
        c = (sizes[items, rows] - dist).clamp(min=0)
        total = c.sum(-1, keepdim=True)
        out[items, rows] = torch.where(total > 0, c / torch.where(total > 0, total, 1), 0)
    return block.result(out.unsqueeze(-3))
