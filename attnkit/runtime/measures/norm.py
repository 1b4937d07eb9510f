"""``measure="norm"``: the size of what each token hands on through each head.

Kobayashi, Kuribayashi, Yokoi & Inui (2020), *Attention is Not Only a Weight: Analyzing
Transformers with Vector Norms*, EMNLP.

Definition: the output of head ``h`` at position ``i`` is ``Σ_j α^h_ij f^h(x_j)``, with
``f^h(x_j) = W_O^h (W_V^h x_j + b_V^h)``: the value projection (bias included, applied to
the normalised ``x_j`` in pre-norm models) followed by the slice of the output projection
that reads head ``h``. The measure is the norm of one summand::

    m^h_ij = ‖α^h_ij f^h(x_j)‖₂ = α^h_ij ‖f^h(x_j)‖₂

A large weight on a token whose transformed vector is small (Kobayashi et al. found this
for BERT's [SEP] and punctuation) gives a small norm. Maps are per head, non-negative;
rows do not sum to 1 (``m^h_ij`` is in the units of the residual stream). Cost: per layer,
``‖f^h(x_j)‖² = v^h_j · M_h v^h_j`` with the ``k × k`` matrix ``M_h = W_O^hᵀ W_O^h``; the
``[H, n, d]`` vectors are never formed.
"""

from __future__ import annotations

from typing import Any

from ._decompose import head_output_norms

PER_HEAD = True
CITATION = ("Kobayashi, Kuribayashi, Yokoi & Inui (2020), Attention is Not Only a Weight: "
            "Analyzing Transformers with Vector Norms, EMNLP.")


def norm_maps(probs: Any, values: Any, w_o: Any) -> Any:
    """``‖α^h_ij f^h(x_j)‖``: float ``[(B,) H, n, n]`` (rows = from, columns = to).

    Parameters
    ----------
    probs : tensor ``[(B,) H, n, n]``, attention probabilities.
    values : tensor ``[(B,) H_kv, n, k]``, value states (grouped-query heads are shared).
    w_o : tensor ``[d, H * k]``, the output projection's weight.

    Examples
    --------
    Two heads that copy their value (the output projection is the identity): the norm
    map is the weight times the norm of the attended token's value.

    >>> import torch
    >>> from attnkit.runtime.measures.norm import norm_maps
    >>> probs = torch.tensor([[[0.5, 0.5], [0.9, 0.1]]], dtype=torch.float64).repeat(2, 1, 1)
    >>> values = torch.tensor([[[3.0, 4.0], [0.0, 1.0]]]).repeat(2, 1, 1)  # norms 5 and 1
    >>> norm_maps(probs, values, torch.eye(4))[0].tolist()
    [[2.5, 0.5], [4.5, 0.1]]
    """
    return probs * head_output_norms(values, w_o, probs.shape[-3]).unsqueeze(-2)
