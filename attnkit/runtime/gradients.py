"""Gradients of an objective with respect to attention probabilities: one forward and one
backward of the model's eager attention per batch.

The runtime half of Clark et al. (2019)'s gradient importance
(:func:`attnkit.attention_importance`) and of ``measure="grad×attn"``
(:mod:`attnkit.runtime.measures.grad_attn`): both read :func:`run_gradients`. The objectives
themselves (a logit, an embedding's length) are in :mod:`attnkit.runtime.objectives`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import objectives
from ..core import validate
from .._compat import renamed
from .._progress import progress as _bar
from ..core.attention import Attention
from .encoding import Encoding
from ..errors import InputError, NoAttentionError

OBJECTIVES = ("auto", "mlm", "lm", "classification", "embedding", "logit", "projection")

Objective = Callable[[Any, dict], Any]


# --------------------------------------------------------------- objectives
def _mask_positions(roles: Sequence[str], rate: float, seed: int, item: int) -> np.ndarray:
    """Word positions to mask in one item: ``max(1, round(rate * words))`` of them, drawn
    with a generator seeded by (seed, item) so a batch split never changes the choice."""
    words = np.flatnonzero(np.asarray(roles) == "word")
    k = max(1, int(round(rate * len(words))))
    rng = np.random.default_rng((seed, item))
    return np.sort(rng.choice(words, size=min(k, len(words)), replace=False))


def _model_kwargs(batch: dict) -> dict:
    """The model's keyword inputs from a batch: ``inputs_embeds`` instead of ``input_ids``
    when the batch carries them (input gradients)."""
    kwargs = {k: batch[k] for k in ("attention_mask", "token_type_ids") if k in batch}
    if "inputs_embeds" in batch:
        kwargs["inputs_embeds"] = batch["inputs_embeds"]
    else:
        kwargs["input_ids"] = batch["input_ids"]
    return kwargs


def _builtin(kind: str, model: Any, batch: dict, clean: dict | None):
    """Per-item objective values ``[B]`` and the forward output holding attentions."""
    import torch
    import torch.nn.functional as F

    kwargs = _model_kwargs(batch)
    if kind in objectives.KINDS:
        out = objectives.forward(model, kind, kwargs, output_attentions=True)
        ref = objectives.references(kind, out, batch, batch.get("labels"))
        return objectives.values(kind, out, batch, ref), out
    if kind == "embedding":
        assert clean is not None  # the unmasked batch: _run passes it for this objective
        with torch.no_grad():
            target = objectives.mean_pool(model.base(**clean).last_hidden_state, clean["attention_mask"])
        out = model.base(**kwargs, output_attentions=True)
        pred = objectives.mean_pool(out.last_hidden_state, batch["attention_mask"])
        return 1.0 - F.cosine_similarity(pred, target, dim=-1), out
    out = model.hf(**kwargs, output_attentions=True)
    logits = out.logits
    if kind == "classification":
        labels = batch["labels"]
        if logits.shape[-1] == 1:
            return (logits[:, 0] - labels.to(logits.dtype)) ** 2, out
        return F.cross_entropy(logits, labels.long(), reduction="none"), out
    if kind == "lm":
        logits, gold = logits[:, :-1], batch["input_ids"][:, 1:].clone()
        gold[batch["attention_mask"][:, 1:] == 0] = -100
    else:  # mlm
        gold = batch["mlm_labels"]
    ce = F.cross_entropy(logits.transpose(1, 2), gold, reduction="none", ignore_index=-100)
    counted = (gold != -100).sum(1).clamp(min=1)
    return ce.sum(1) / counted, out


# ------------------------------------------------------------------ batches
def _batch(model: Any, encs: list, masked: list[np.ndarray] | None, labels: list | None) -> dict:
    import torch

    batch: dict[str, Any] = {**model.pad(encs), "lengths": [len(e) for e in encs]}
    ids = batch["input_ids"]
    if masked is not None:
        mask_id = model.tokenizer.mask_token_id
        mlm = torch.full_like(ids, -100)
        for i, pos in enumerate(masked):
            p = torch.as_tensor(pos, dtype=torch.long)
            mlm[i, p] = ids[i, p]
            ids[i, p] = mask_id
        batch["mlm_labels"] = mlm
    if labels is not None:
        batch["labels"] = torch.as_tensor(labels)
    return batch


@dataclass
class AttentionGradients:
    """Gradients of an objective with respect to one input's attention probabilities
    (:func:`attention_gradients` makes them).

    Parameters
    ----------
    attention : Attention
        The token-level attention the model computed (on the input it was actually fed:
        masked positions show ``[MASK]``).
    grads : numpy.ndarray
        Float32 ``[layer, head, n, n]``: ∂objective/∂attention[l, h, from, to].
    value : float
        The objective's value on this input.
    input_embeds, input_grads : numpy.ndarray or None
        Float32 ``[n, d]``: the input (word) embeddings the model was fed and
        ∂objective/∂embedding; None unless asked for (``input_grads=True``).

    Examples
    --------
    >>> from attnkit.runtime.gradients import attention_gradients
    >>> from attnkit.testing import tiny_model
    >>> g = attention_gradients(tiny_model("bert-mlm"), "The cat sat on the mat.")
    >>> g.grads.shape == g.attention.maps.shape, "[MASK]" in g.attention.tokens
    (True, True)
    """

    attention: Attention
    grads: np.ndarray
    value: float
    input_embeds: np.ndarray | None = None
    input_grads: np.ndarray | None = None


def run_gradients(model: Any, items: Sequence[Any], objective: Any, labels: Sequence[Any] | None,
                  batch_size: int, mask_rate: float, seed: int, progress: bool,
                  input_grads: bool = False):
    """Yield :class:`AttentionGradients` for every input, batch by batch (with the input
    embeddings' gradients too when ``input_grads``: one backward gives both)."""
    validate.model(model, family=("text", "vision"))
    seed = validate.seed(seed)
    batch_size = validate.size(batch_size, "batch_size")
    import torch

    if isinstance(objective, str):
        if objective not in OBJECTIVES:
            raise InputError(
                f"objective must be one of {OBJECTIVES} or a callable, not {objective!r}."
            )
        formerly = {"masked-lm": "mlm", "classifier": "classification",
                    "causal-lm": "lm"}.get(objectives.head_kind(model), "embedding")
        kind = (objectives.auto_objective(model, OBJECTIVES, formerly=formerly) if objective == "auto"
                else objective)
    elif callable(objective):
        kind = "callable"
    else:
        raise InputError(f"objective must be a name or a callable, not {type(objective).__name__}.")
    if kind in ("mlm", "embedding") and model.tokenizer.mask_token_id is None:
        raise InputError(f"The {kind} objective masks words, but {model.name}'s tokenizer has no "
                         "mask token; pass a callable objective instead.")
    if kind == "classification" and labels is None:
        raise InputError("The classification objective needs labels=[...] (one per input).")
    if kind in objectives.KINDS:
        objectives.check_kind(model, kind)
    if kind == "lm" and not model.causal:
        raise InputError(f"The lm objective needs a causal language model; {model.name} is not one.")
    if kind in ("mlm", "embedding") and not 0 < mask_rate <= 1:
        raise InputError(f"mask_rate must be in (0, 1], not {mask_rate}.")
    items = list(items)
    if not items:
        raise InputError("attention_importance() got no inputs.")
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(items):
            raise InputError(f"Got {len(labels)} labels for {len(items)} inputs; give one per input.")
    batch_size = validate.size(batch_size, "batch_size")
    encs: list[Encoding] = [x if isinstance(x, Encoding) else model.encode(x) for x in items]
    bar = _bar(show=progress, total=len(encs), desc=f"attention gradients ({model.name})", unit="item")
    try:
        for start in range(0, len(encs), batch_size):
            chunk = encs[start : start + batch_size]
            idx = range(start, start + len(chunk))
            masked = None
            if kind in ("mlm", "embedding"):
                masked = [_mask_positions(e.roles, mask_rate, seed, i) for e, i in zip(chunk, idx)]
            lab = None if labels is None else [labels[i] for i in idx]
            batch = model.to_device(_batch(model, chunk, masked, lab))
            clean = None
            if kind == "embedding":
                clean = model.to_device({k: v for k, v in _batch(model, chunk, None, None).items()
                                         if k in ("input_ids", "attention_mask", "token_type_ids")})
            # the eager attention: its probabilities are the ones multiplied with the values
            with torch.enable_grad(), model.eager():
                emb = None
                if input_grads:
                    emb = model.hf.get_input_embeddings()(batch["input_ids"]).detach()
                    batch["inputs_embeds"] = emb.requires_grad_(True)
                if kind == "callable":
                    out = model.hf(**_model_kwargs(batch), output_attentions=True)
                    values = objective(out, batch)
                    if not torch.is_tensor(values) or values.numel() not in (1, len(chunk)):
                        raise InputError(
                            "A callable objective must return a scalar tensor or one value per "
                            f"input ({len(chunk)} here)."
                        )
                else:
                    values, out = _builtin(kind, model, batch, clean)
                atts = getattr(out, "attentions", None)
                if not atts or any(a is None for a in atts):
                    raise NoAttentionError(
                        f"{model.name} returned no attention probabilities; it must run with "
                        "attn_implementation='eager' (load it with attnkit.load)."
                    )
                try:
                    grads = torch.autograd.grad(values.sum(), list(atts) + ([emb] if input_grads else []))
                except RuntimeError as exc:
                    raise NoAttentionError(
                        f"The attention {model.name} returns is not part of its computation "
                        f"graph, so it has no gradient ({exc}). attnkit needs the eager "
                        "attention, whose returned probabilities are the ones multiplied with the "
                        "values."
                    ) from exc
            e = eg = None
            if emb is not None:  # input_grads
                e, eg = emb.detach().float().cpu().numpy(), grads[-1].float().cpu().numpy()
                grads = grads[:-1]
            g = torch.stack(grads, dim=1).float().cpu().numpy()  # [B, L, H, T, T]
            a = torch.stack([x.detach() for x in atts], dim=1).float().cpu().numpy()
            ids = batch["input_ids"].cpu().numpy()
            vals = values.detach().double().reshape(-1).cpu().numpy()
            for k, enc in enumerate(chunk):
                n = len(enc)
                fed = enc
                if masked is not None:
                    tokens = model.tokenizer.convert_ids_to_tokens(ids[k, :n].tolist())
                    fed = Encoding(ids[k, :n].tolist(), tokens, enc.roles, enc.word_ids,
                                   enc.segments, enc.words, enc.type_ids, enc.truncated,
                                   dict(enc.meta))
                att = model.to_attention(fed, np.ascontiguousarray(a[k, :, :, :n, :n]))
                yield AttentionGradients(att, np.ascontiguousarray(g[k, :, :, :n, :n]),
                                         float(vals[k] if len(vals) > 1 else vals[0]),
                                         None if e is None else e[k, :n],
                                         None if eg is None else eg[k, :n])
            bar.update(len(chunk))
    finally:
        bar.close()


@renamed(positional=("objective",))
def attention_gradients(
    model: Any,
    item: Any,
    *,
    objective: str | Objective = "auto",
    label: Any = None,
    mask_rate: float = 0.15,
    seed: int = 0,
) -> AttentionGradients:
    """Gradient of ``objective`` on one input with respect to each attention probability.

    Parameters
    ----------
    model : Model
        The model (it runs forward and backward).
    item : text, pair, word list or Sentence
        One input (as :meth:`attnkit.Model.encode`).
    objective : str or callable
        As in :func:`attention_importance`.
    label : optional
        The input's label (classification objective).
    mask_rate, seed : float, int
        Masking of the ``"mlm"`` and ``"embedding"`` objectives.

    Returns
    -------
    AttentionGradients
        Token level, for inspection or plotting.

    Raises
    ------
    InputError
        As :func:`attention_importance`.

    Examples
    --------
    >>> from attnkit.runtime.gradients import attention_gradients
    >>> from attnkit.testing import tiny_model
    >>> g = attention_gradients(tiny_model("gpt2"), "The cat sat.")  # next-token loss
    >>> g.grads.shape, g.value > 0
    ((2, 2, 7, 7), True)
    """
    labels = None if label is None else [label]
    return next(run_gradients(model, [item], objective, labels, 1, mask_rate, seed, False))


