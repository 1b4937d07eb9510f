"""Interventions: whether a head, an edge or a path matters to what the model outputs.

- :func:`ablate`: replace heads' outputs (zero, mean, resample) and measure the change.
- :func:`patch`: activation patching, the share of the clean–corrupted gap one component restores.
- :func:`path_patch`: only a sender head's difference reaches chosen receivers (Wang et al. 2023).
- :func:`knockout`: block chosen attention edges before the softmax (Geva et al. 2023).
- :func:`attribution_patching`: the first-order estimate of patching in two forwards and one
  backward (Nanda 2023), and :func:`attribution_agreement` against exact patching.
- :func:`edge_attribution`: a score for every edge between components (EAP, EAP-IG, exact
  edge patching, :mod:`~attnkit.interventions.edges`); :func:`circuit` keeps the strongest
  as a graph, :func:`circuit_faithfulness` measures what it keeps, :func:`acdc` finds one by
  greedy pruning (Conmy et al. 2023).
- :mod:`~attnkit.interventions.metrics`: what they measure.
"""

from .ablate import HOW, ablate
from .acdc import acdc
from .circuit import circuit, circuit_faithfulness
from .eap import edge_attribution
from .attribution import attribution_agreement, attribution_patching
from .metrics import (Metric, class_logit, class_margin, custom, kl, logit_diff, logprob, loss,
                      pair_similarity, projection)
from .knockout import knockout
from .patch import GRAINS, patch
from .path import VIA, path_patch

__all__ = ["GRAINS", "HOW", "VIA", "Metric", "ablate", "acdc", "attribution_agreement",
           "attribution_patching", "circuit", "circuit_faithfulness", "class_logit", "class_margin",
           "custom", "edge_attribution", "kl", "knockout", "logit_diff", "logprob", "loss",
           "pair_similarity", "patch", "path_patch", "projection"]
