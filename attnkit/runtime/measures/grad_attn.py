"""``measure="grad×attn"``: attention weights times the gradient of an objective.

The attention-times-gradient product of the attribution literature (e.g. Barkan et al.
2021, *Grad-SAM: Explaining Transformers via Gradient Self-Attention Maps*, CIKM; Chefer,
Gur & Wolf 2021, *Generic Attention-model Explainability for Interpreting Bi-Modal and
Encoder-Decoder Transformers*, ICCV, who keep its positive part and average over heads),
computed with the gradient machinery of Clark et al. (2019)'s importance analysis
(:func:`~attnkit.attention_importance`).

Definition: for an objective ``y`` of the input (see ``objective``)::

    m^h_ij = α^h_ij · ∂y/∂α^h_ij

the first-order share of ``y`` carried by the term ``α^h_ij v^h_j`` of the attention
output: scaling that one term by ``(1 + ε)`` changes ``y`` by ``ε m^h_ij``. Per head,
**signed** (positive: attending there raises ``y``); rows do not sum to 1. One forward and
one backward per batch of inputs. Analyses that need probabilities (rollout, flow, head
statistics) refuse signed maps; take ``np.clip(att.maps, 0, None)`` for Chefer et al.'s
positive part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...core import validate
from ...core.attention import Attention
from ..gradients import OBJECTIVES, run_gradients
from ..objectives import auto_objective, default_kind
from ...core.types import Input

PER_HEAD = True
CITATION = ("Barkan et al. (2021), Grad-SAM: Explaining Transformers via Gradient "
            "Self-Attention Maps, CIKM; gradients as in Clark et al. (2019).")


def grad_attn_maps(probs: Any, grads: Any) -> Any:
    """``α ⊙ ∂y/∂α``, elementwise: ``[..., H, n, n]`` (numpy or torch).

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.runtime.measures.grad_attn import grad_attn_maps
    >>> grad_attn_maps(np.array([[0.25, 0.75]]), np.array([[2.0, -1.0]])).tolist()
    [[0.5, -0.75]]
    """
    return probs * grads


def default_objective(model: Any) -> str:
    """The objective ``"auto"`` picks, as everywhere (:data:`attnkit.runtime.objectives.AUTO`: what
    the model predicts): ``"mlm"`` for a masked-LM head, ``"logit"`` (the predicted class's,
    or the predicted next token's, logit) for sequence classifiers and causal LMs,
    ``"projection"`` (the embedding's length along its own direction) for bare encoders."""
    return auto_objective(model, OBJECTIVES, formerly=default_kind(model))


def grad_attn(
    model: Any,
    inputs: Sequence[Input],
    *,
    objective: Any = "auto",
    labels: Sequence[Any] | None = None,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
) -> list[Attention]:
    """``grad×attn`` maps of ``model`` on every input (token level).

    Parameters
    ----------
    model : Model
        Runs forward and backward (attention as the eager path defines it).
    inputs : sequence
        Texts, pairs, word lists or sentences (:meth:`attnkit.Model.encode`).
    objective : str or callable
        ``"auto"`` (:func:`default_objective`), or any objective of
        :func:`~attnkit.attention_importance`: ``"logit"``, ``"projection"``, ``"mlm"``,
        ``"lm"``, ``"classification"``, ``"embedding"`` or a callable. Objectives that mask
        words (``"mlm"``, ``"embedding"``) give the maps of the masked input.
    labels : sequence, optional
        One per input: the class whose logit is explained (``"logit"``; default the
        predicted class), or the labels of ``"classification"``.
    batch_size : int
        Inputs per forward and backward pass.
    seed : int
        Masking of the ``"mlm"``/``"embedding"`` objectives.
    progress : bool
        Show a progress bar.

    Returns
    -------
    list of Attention
        One per input, ``measure="grad×attn"``, maps ``[layer, head, n, n]`` (signed;
        rows = from, columns = to). ``meta["objective"]`` names the objective and
        ``meta["objective_value"]`` holds its value.

    Raises
    ------
    InputError
        For an objective the model cannot produce (e.g. ``"logit"`` on a bare encoder).

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> from attnkit.runtime.measures.grad_attn import grad_attn
    >>> att = grad_attn(tiny_model("bert-cls"), ["The cat sat on the mat."], progress=False)[0]
    >>> att.measure, att.maps.shape, att.meta["objective"]
    ('grad×attn', (2, 2, 9, 9), 'logit')
    """
    validate.model(model)
    seed = validate.seed(seed)
    kind = default_objective(model) if isinstance(objective, str) and objective == "auto" else objective
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", "callable")
    out = []
    for r in run_gradients(model, inputs, kind, labels, batch_size, 0.15, seed, progress):
        att = r.attention
        out.append(replace(att, maps=grad_attn_maps(att.maps, r.grads), measure="grad×attn",
                           meta={**att.meta, "objective": name, "objective_value": r.value}))
    return out
