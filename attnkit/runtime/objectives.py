"""Scalar objectives that attributions and gradients explain: a prediction's logit, or an embedding's size.

Both are deterministic functions of the input (no masking, no labels needed), which is what
attribution and faithfulness need: the same function is differentiated (gradients) and
evaluated on perturbed copies of the input (blank-out, deletion, insertion). Each target
has a *reference* fixed on the clean input, so that a perturbed copy is scored on the same
scale:

``"logit"``
    A sequence classifier's logit of the class it predicts on the clean input (or of a
    given label); a causal LM's logit, at the last position, of the token it predicts there.
``"projection"``
    For encoders without a head (sentence-embedding models): the length of the input's
    embedding ``e(x')`` along the clean embedding's direction, ``⟨e(x'), e(x) / ‖e(x)‖⟩``,
    with ``e`` the mean-pooled last hidden state (the pooling sentence-transformers uses,
    as in :func:`~attnkit.attention_importance`'s ``"embedding"`` objective). On the clean
    input it equals ``‖e(x)‖`` and its gradient is that of ``‖e(x)‖``; a perturbation that
    removes what the embedding encodes shortens it. (The masked-reconstruction
    ``"embedding"`` objective does not suit attribution: its gradient vanishes on the clean
    input, and it masks words at random.)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import InputError

#: Target kinds.
KINDS = ("logit", "projection")


def head_kind(model: Any) -> str:
    """What sits on the model's transformer: ``"masked-lm"``, ``"classifier"``,
    ``"causal-lm"`` or ``"none"`` (a bare encoder or decoder)."""
    name = type(model.hf).__name__
    if name.endswith("ForMaskedLM"):
        return "masked-lm"
    if name.endswith("ForSequenceClassification"):
        return "classifier"
    if model.causal and hasattr(model.hf, "get_output_embeddings") and (
        model.hf.get_output_embeddings() is not None
    ):
        return "causal-lm"
    return "none"


def default_kind(model: Any) -> str:
    """``"logit"`` for sequence classifiers and causal LMs, ``"projection"`` otherwise."""
    return "logit" if head_kind(model) in ("classifier", "causal-lm") else "projection"


#: What ``objective="auto"`` means, for every function that takes an objective: explain what
#: the model predicts. Per head kind (:func:`head_kind`), the objectives in order of
#: preference; a function takes the first one it supports.
AUTO = {
    "masked-lm": ("mlm", "projection"),   # the masked words it predicts
    "classifier": ("logit",),             # the class it predicts
    "causal-lm": ("logit",),              # the next token it predicts
    "none": ("projection",),              # the embedding it outputs
}


def auto_objective(model: Any, supported: Sequence[str], *, formerly: str | None = None) -> str:
    """The objective ``"auto"`` stands for on ``model``: the first of :data:`AUTO`'s
    preferences for its head that the calling function supports.

    Parameters
    ----------
    model : Model
        The model.
    supported : sequence of str
        The objectives the calling function can compute.
    formerly : str, optional
        What ``"auto"`` meant in this function before it meant one thing everywhere; when
        that differs, a :class:`FutureWarning` names both, so the old numbers stay one
        keyword away (for one release).

    Returns
    -------
    str
        An objective name.

    Raises
    ------
    InputError
        When the function supports none of the model's objectives.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> auto_objective(tiny_model("bert-mlm"), ("mlm", "logit", "projection"))
    'mlm'
    >>> auto_objective(tiny_model("bert-mlm"), ("logit", "projection"))
    'projection'
    >>> auto_objective(tiny_model("gpt2"), ("logit", "projection"))
    'logit'
    """
    prefs = AUTO[head_kind(model)]
    for kind in prefs:
        if kind in supported:
            if formerly is not None and formerly != kind:
                warnings.warn(
                    f"objective='auto' now means {kind!r} on {model.name} (what the model predicts, "
                    f"as everywhere in attnkit); it meant {formerly!r} here before. Pass "
                    f"objective={formerly!r} for the former numbers.",
                    FutureWarning,
                    stacklevel=3,
                )
            return kind
    raise InputError(
        f"objective='auto' stands for {' or '.join(prefs)} on {model.name}, which this function "
        f"does not compute; pass one of {tuple(supported)}."
    )


def check_kind(model: Any, kind: str) -> None:
    """Refuse a target the model cannot produce."""
    if kind not in KINDS:
        raise InputError(f"objective must be one of {KINDS} or 'auto', not {kind!r}.")
    if kind == "logit" and default_kind(model) != "logit":
        raise InputError(
            f"The 'logit' objective needs a sequence classifier or a causal LM; {model.name} is "
            f"a {type(model.hf).__name__}. Use objective='projection' (its embedding), or load a "
            "fine-tuned classifier (attnkit.apps.finetune)."
        )


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean of ``hidden [B, T, d]`` over the positions where ``mask [B, T]`` is 1."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


def forward(model: Any, kind: str, kwargs: dict, **options: Any) -> Any:
    """The model's output that :func:`values` reads (``model.hf`` for logits, the bare
    model for projections)."""
    net = model.hf if kind == "logit" else model.base
    return net(**kwargs, **options)


def _scores(kind: str, out: Any, batch: dict) -> Any:
    import torch

    if kind == "logit":
        logits = out.logits
        if logits.dim() == 3:  # causal LM: the last real position of each item
            last = batch["attention_mask"].sum(1).to(logits.device) - 1
            logits = logits[torch.arange(len(last), device=logits.device), last]
        return logits
    return mean_pool(out.last_hidden_state, batch["attention_mask"].to(out.last_hidden_state.device))


def references(kind: str, out: Any, batch: dict, labels: Any = None) -> Any:
    """The reference of each item, from the clean input's output: the class (or next
    token) index ``[B]`` for ``"logit"`` (``labels`` when given), the unit embedding
    ``[B, d]`` for ``"projection"``. Detached."""
    s = _scores(kind, out, batch).detach()
    if kind == "logit":
        if labels is not None:
            return labels.to(s.device).long()
        return s.argmax(-1)
    return s / s.norm(dim=-1, keepdim=True).clamp(min=1e-12)


def values(kind: str, out: Any, batch: dict, reference: Any) -> Any:
    """Target values ``[B]`` of a (possibly perturbed) batch, scored against ``reference``
    (:func:`references` of the clean inputs, one row per item of the batch)."""
    s = _scores(kind, out, batch)
    if kind == "logit":
        return s.gather(-1, reference.to(s.device).long().view(-1, 1))[:, 0]
    return (s * reference.to(s.device, s.dtype)).sum(-1)
