"""``measure="norm+residual"``: the norm measure through the residual connection and norm.

Kobayashi, Kuribayashi, Yokoi & Inui (2021), *Incorporating Residual and Normalization
Layers into Analysis of Masked Language Models*, EMNLP.

Definition: the whole attention block (attention, residual connection, layer
normalisation) is written as a sum over input tokens, ``z_i = Σ_j T_i(x_j) + c_i``
(:class:`~attnkit.runtime.measures._decompose.BlockDecomposition`), where for a post-norm model
(BERT) ``T_i(x_j) = L_i(Σ_h α^h_ij f^h(x_j) + δ_ij x_j)``: the heads' contributions
summed, the token's own residual added on the diagonal, and the normalisation's linear
part ``L_i`` applied with row ``i``'s statistics; ``c_i`` holds the biases, which belong to
no token. Pre-norm models have no norm after the sum (``T_i(x_j) = Σ_h α^h_ij f^h(x_j) +
δ_ij x_j``); Gemma 2 normalises the attention output before the sum. The measure is::

    m_ij = ‖T_i(x_j)‖₂

one "mixed" head per layer (the residual and the norm are not per head). Rows do not sum
to 1. The diagonal shows how much each token keeps of itself, which Kobayashi et al.
found to dominate BERT's mixing.
"""

from __future__ import annotations

from typing import Any

from ._decompose import BlockDecomposition

PER_HEAD = False
CITATION = ("Kobayashi, Kuribayashi, Yokoi & Inui (2021), Incorporating Residual and "
            "Normalization Layers into Analysis of Masked Language Models, EMNLP.")


def norm_residual_maps(block: BlockDecomposition) -> Any:
    """``‖T_i(x_j)‖₂``: float ``[(B,) 1, n, n]`` (one mixed head; rows = from, columns = to).

    Examples
    --------
    One head, a pre-norm block whose output projection is the identity: token 0 keeps its
    residual ``x_0`` and takes half of each value.

    >>> import torch
    >>> from attnkit.runtime.measures._arch import LayerParts
    >>> from attnkit.runtime.measures._decompose import BlockDecomposition
    >>> from attnkit.runtime.measures.norm_residual import norm_residual_maps
    >>> probs = torch.tensor([[[0.5, 0.5], [0.0, 1.0]]], dtype=torch.float64)
    >>> values = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
    >>> x = torch.tensor([[3.0, 0.0], [0.0, 0.0]])
    >>> parts = LayerParts(None, torch.eye(2), None, "pre", None)
    >>> norm_residual_maps(BlockDecomposition(probs, values, x, parts))[0].tolist()
    [[4.0, 1.0], [0.0, 2.0]]
    """
    return block.term_norms().unsqueeze(-3)
