"""Interventions: whether a head, an edge or a path matters to what the model outputs.

- :func:`ablate`: replace heads' outputs (zero, mean, resample) and measure the change.
- :func:`patch`: activation patching, the share of the clean–corrupted gap one component restores.
- :func:`path_patch`: only a sender head's difference reaches chosen receivers (Wang et al. 2023).
- :func:`knockout`: block chosen attention edges before the softmax (Geva et al. 2023).
- :func:`attribution_patching`: the first-order estimate of patching in two forwards and one
  backward (Nanda 2023), and :func:`attribution_agreement` against exact patching.
- :mod:`~attnkit.interventions.metrics`: what they measure.
"""

from .ablate import HOW, ablate
from .attribution import attribution_agreement, attribution_patching
from .metrics import (Metric, class_logit, class_margin, custom, kl, logit_diff, logprob, loss,
                      pair_similarity, projection)
from .knockout import knockout
from .patch import GRAINS, patch
from .path import VIA, path_patch

__all__ = ["GRAINS", "HOW", "VIA", "Metric", "ablate", "attribution_agreement", "attribution_patching",
           "class_logit", "class_margin", "custom", "kl", "knockout", "logit_diff", "logprob", "loss",
           "pair_similarity", "patch", "path_patch", "projection"]
