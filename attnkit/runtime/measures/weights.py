"""``measure="weights"``: the attention probabilities themselves.

Definition: ``m^h_ij = α^h_ij = softmax_j(q^h_i · k^h_j · scaling + mask_ij)``, the tensor the
model multiplies with the value states (Vaswani et al. 2017). Rows sum to 1. This is what
Clark et al. (2019) and DeRose et al. (2020) read, and the baseline the other measures are
compared with.
"""

from __future__ import annotations


#: Whether the maps have one head per attention head (True) or one "mixed" head per layer.
PER_HEAD = True
#: The paper the measure comes from.
CITATION = "Vaswani et al. (2017), Attention Is All You Need, NeurIPS."
