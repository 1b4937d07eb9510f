"""What a map holds: attention weights, or measures of what attention actually passes on.

``model.attend(text, measure=...)`` and ``attnkit.extract(..., measure=...)`` return maps
``[layer, head, n, n]`` (rows = from, columns = to) of one of :data:`MEASURES`, one module
each, with its paper and definition:

- ``"weights"`` (:mod:`~attnkit.runtime.measures.weights`): the attention probabilities.
- ``"norm"`` (:mod:`~attnkit.runtime.measures.norm`): ``‖α f(x)‖``, Kobayashi et al. (2020).
- ``"norm+residual"`` (:mod:`~attnkit.runtime.measures.norm_residual`): the same through the
  residual connection and layer norm, Kobayashi et al. (2021); one mixed head per layer.
- ``"alti"`` (:mod:`~attnkit.runtime.measures.alti`): Ferrando et al. (2022); one mixed head per
  layer, rows sum to 1; roll it out with ``rollout(att, residual=0)``.
- ``"grad×attn"`` (:mod:`~attnkit.runtime.measures.grad_attn`): ``α ⊙ ∂y/∂α``, signed.

The forward-only measures are computed from :mod:`attnkit.runtime.capture`'s recorders in the same
single forward that records the weights; where each architecture keeps its output
projection and normalisation is the family's record in :data:`attnkit.runtime.archs.ARCHS`.
Results are :class:`~attnkit.Attention` objects with ``measure`` set; rows of measures other
than weights need not sum to 1.
"""

from dataclasses import replace

import numpy as np

from ..._compat import renamed
from ...core.attention import Attention, row_shares
from .compute import MEASURES, MeasureRecorder, check_measure, measure_maps, n_heads
from .grad_attn import grad_attn

__all__ = ["MEASURES", "MeasureRecorder", "check_measure", "grad_attn", "measure_maps",
           "mixed", "n_heads"]


@renamed(att="attentions")
def mixed(attentions: Attention) -> Attention:
    """One "mixed" head per layer: the mean over heads of each row's shares
    (:func:`~attnkit.core.attention.row_shares`), so a per-head measure can be set beside a
    mixed one (``norm+residual``, ``alti``) in :func:`~attnkit.compare` or a FlowView.

    Parameters
    ----------
    attentions : Attention
        Maps ``[layer, head, n, n]`` of a non-negative measure.

    Returns
    -------
    Attention
        Maps ``[layer, 1, n, n]``, the same ``measure`` (rows of non-negative measures sum
        to 1 or 0).

    Raises
    ------
    InputError
        For signed maps (``grad×attn``).

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> from attnkit.runtime.measures import mixed
    >>> att = tiny_model("bert").attend("The cat sat on the mat.", measure="norm")
    >>> mixed(att).maps.shape
    (2, 1, 9, 9)
    """
    att = attentions
    shares = row_shares(np.asarray(att.maps, dtype=np.float64), att.measure)
    return replace(att, maps=shares.mean(axis=1, keepdims=True).astype(np.float32))
