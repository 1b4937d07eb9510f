"""Gradient importance of attention (Clark et al. 2019, §3.2, Fig. 3).

How much would a model's objective change if a head attended a little more or less from
one position to another? ``attention_importance`` takes the gradient of a scalar
objective with respect to every attention probability (the softmax output of the eager
attention, exactly the tensor multiplied with the values) and averages its magnitude per
layer by what is attended to: [CLS], [SEP], punctuation, or any other position.

Unlike the other analyses this one runs the model (a backward pass needs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .._compat import renamed
from ..results import HeadResult, Result

from ..attention import Attention
from ..errors import InputError, NoAttentionError

#: Categories of attended-to positions, the columns of :func:`attention_importance`.
TARGETS = ("cls", "sep", "punct", "other")

OBJECTIVES = ("auto", "mlm", "lm", "classification", "embedding")

Objective = Callable[[Any, dict], Any]


# --------------------------------------------------------------- objectives
def _kind(model: Any) -> str:
    """The built-in objective that fits the model's head ("auto")."""
    name = type(model.hf).__name__
    if name.endswith("ForMaskedLM"):
        return "mlm"
    if name.endswith("ForSequenceClassification"):
        return "classification"
    if model.causal and hasattr(model.hf, "get_output_embeddings") and (
        model.hf.get_output_embeddings() is not None
    ):
        return "lm"
    return "embedding"


def _mask_positions(roles: Sequence[str], rate: float, seed: int, item: int) -> np.ndarray:
    """Word positions to mask in one item: ``max(1, round(rate * words))`` of them, drawn
    with a generator seeded by (seed, item) so a batch split never changes the choice."""
    words = np.flatnonzero(np.asarray(roles) == "word")
    k = max(1, int(round(rate * len(words))))
    rng = np.random.default_rng((seed, item))
    return np.sort(rng.choice(words, size=min(k, len(words)), replace=False))


def _mean_pool(hidden, mask):
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


def _builtin(kind: str, model: Any, batch: dict, clean: dict | None):
    """Per-item objective values ``[B]`` and the forward output holding attentions."""
    import torch
    import torch.nn.functional as F

    kwargs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
    if kind == "embedding":
        assert clean is not None  # the unmasked batch: _run passes it for this objective
        with torch.no_grad():
            target = _mean_pool(model.base(**clean).last_hidden_state, clean["attention_mask"])
        out = model.base(**kwargs, output_attentions=True)
        pred = _mean_pool(out.last_hidden_state, batch["attention_mask"])
        return 1.0 - F.cosine_similarity(pred, target, dim=-1), out
    out = model.hf(**kwargs, output_attentions=True)
    logits = out.logits
    if kind == "classification":
        labels = batch["labels"]
        if logits.shape[-1] == 1:
            return (logits[:, 0] - labels.to(logits.dtype)) ** 2, out
        return F.cross_entropy(logits, labels.long(), reduction="none"), out
    if kind == "lm":
        logits, targets = logits[:, :-1], batch["input_ids"][:, 1:].clone()
        targets[batch["attention_mask"][:, 1:] == 0] = -100
    else:  # mlm
        targets = batch["mlm_labels"]
    ce = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none", ignore_index=-100)
    counted = (targets != -100).sum(1).clamp(min=1)
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

    Examples
    --------
    >>> from attnkit.analysis import attention_gradients
    >>> from attnkit.testing import tiny_model
    >>> g = attention_gradients(tiny_model("bert-mlm"), "The cat sat on the mat.")
    >>> g.grads.shape == g.attention.maps.shape, "[MASK]" in g.attention.tokens
    (True, True)
    """

    attention: Attention
    grads: np.ndarray
    value: float


def _run(model, items, objective, labels, batch_size, mask_rate, seed, progress):
    """Yield :class:`AttentionGradients` for every input, batch by batch."""
    import torch
    from tqdm.auto import tqdm

    from ..model import Encoding

    if isinstance(objective, str):
        if objective not in OBJECTIVES:
            raise InputError(
                f"objective must be one of {OBJECTIVES} or a callable, not {objective!r}."
            )
        kind = _kind(model) if objective == "auto" else objective
    elif callable(objective):
        kind = "callable"
    else:
        raise InputError(f"objective must be a name or a callable, not {type(objective).__name__}.")
    if kind in ("mlm", "embedding") and model.tokenizer.mask_token_id is None:
        raise InputError(f"The {kind} objective masks words, but {model.name}'s tokenizer has no "
                         "mask token; pass a callable objective instead.")
    if kind == "classification" and labels is None:
        raise InputError("The classification objective needs labels=[...] (one per input).")
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
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, not {batch_size}.")
    encs: list[Encoding] = [model.encode(x) for x in items]
    bar = tqdm(total=len(encs), desc=f"attention gradients ({model.name})", unit="item",
               disable=not progress, dynamic_ncols=True)
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
                if kind == "callable":
                    kwargs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")
                              if k in batch}
                    out = model.hf(**kwargs, output_attentions=True)
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
                    grads = torch.autograd.grad(values.sum(), list(atts))
                except RuntimeError as exc:
                    raise NoAttentionError(
                        f"The attention {model.name} returns is not part of its computation "
                        f"graph, so it has no gradient ({exc}). attnkit needs the eager "
                        "attention, whose returned probabilities are the ones multiplied with the "
                        "values."
                    ) from exc
            g = torch.stack(grads, dim=1).float().cpu().numpy()  # [B, L, H, T, T]
            a = torch.stack([x.detach() for x in atts], dim=1).float().cpu().numpy()
            ids = batch["input_ids"].cpu().numpy()
            vals = values.detach().float().reshape(-1).cpu().numpy()
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
                                         float(vals[k] if len(vals) > 1 else vals[0]))
            bar.update(len(chunk))
    finally:
        bar.close()


def attention_gradients(
    model: Any,
    item: Any,
    objective: str | Objective = "auto",
    *,
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
    >>> from attnkit.analysis import attention_gradients
    >>> from attnkit.testing import tiny_model
    >>> g = attention_gradients(tiny_model("gpt2"), "The cat sat.")  # next-token loss
    >>> g.grads.shape, g.value > 0
    ((2, 2, 7, 7), True)
    """
    labels = None if label is None else [label]
    return next(_run(model, [item], objective, labels, 1, mask_rate, seed, False))


@renamed(positional=("objective",))
def attention_importance(
    model: Any,
    inputs: Sequence[Any],
    *,
    objective: str | Objective = "auto",
    labels: Sequence[Any] | None = None,
    by: str = "layer",
    batch_size: int = 8,
    mask_rate: float = 0.15,
    seed: int = 0,
    progress: bool = True,
) -> Result:
    """Average gradient magnitude of an objective w.r.t. attention, by attended-to position.

    For each input, ``|∂objective/∂α|`` is taken for every attention probability α =
    attention[layer, head, from, to] of the model's eager attention at token level; their
    mean is reported per layer (or head) separately for attention *to* [CLS], to [SEP], to
    punctuation and to every other position (the paper's Fig. 3 shows [SEP], "." / ","
    and other). Means pool all (input, head, from, to) entries of a category. For causal
    models only visible entries (to ≤ from) count.

    Parameters
    ----------
    model : a :class:`attnkit.model.Model` (it runs forward and backward).
    inputs : texts, pairs, word lists or treebank sentences (as :meth:`Model.encode`).
    objective :
        ``"auto"`` picks by the model's head: ``"mlm"`` for a masked-LM head,
        ``"classification"`` for a sequence classifier, ``"lm"`` for a causal LM, and
        ``"embedding"`` for a bare encoder such as the bundled sentence-embedding model.

        - ``"mlm"``: the masked-LM loss, as in the paper. In every input ``mask_rate`` of
          the word positions (at least one) are replaced by the mask token; the objective is
          the mean cross-entropy of the original tokens at those positions.
        - ``"classification"``: cross-entropy of ``labels`` (squared error for a
          one-output regression head).
        - ``"lm"``: mean next-token cross-entropy over the input.
        - ``"embedding"``: masked-embedding reconstruction, 1 − cos(e(masked x), e(x)),
          where e is the mean-pooled last hidden state (the pooling sentence-transformers
          uses) and the clean embedding e(x) is held fixed. It is the sentence-embedding
          analogue of the MLM loss: the same masking, but the model must recover the
          *meaning* of the sentence (what it was trained to embed) rather than the missing
          tokens. Gradients are those of the masked input's attention.
        - a callable ``objective(output, batch)``: ``output`` is ``model.hf(...,
          output_attentions=True)``'s output on the batch, ``batch`` a dict with
          ``input_ids``, ``attention_mask``, ``lengths`` (and ``token_type_ids``,
          ``labels`` when present). Return one value per input (a ``[B]`` tensor), or a
          scalar that is a *sum* over inputs, so each input's gradient is its own.
    labels : one label per input (classification objective; passed on to callables).
    by : ``"layer"`` or ``"head"``.
    batch_size : inputs per forward and backward pass.
    mask_rate, seed : masking of the mlm and embedding objectives; the masked positions of
        input i depend only on (seed, i).

    progress : show a progress bar over batches.

    Returns
    -------
    Result or HeadResult
        ``table`` indexed by ``layer`` (a :class:`Result`) or ``(layer, head)`` (a
        :class:`HeadResult`), 0-indexed, with columns :data:`TARGETS`: mean ``|gradient|`` of
        attention to [CLS], [SEP], punctuation (all-punctuation word pieces) and other
        positions (words and any other special tokens); NaN where the inputs have no such
        position. ``meta``: ``objective``, ``n_items``. Positions replaced by the mask
        token count as "other". ``plot()`` draws the paper's Fig. 3.

    Raises
    ------
    InputError
        For an unknown ``by`` or objective, or labels that do not match the inputs.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> imp = ak.attention_importance(tiny_model("bert-mlm"), ["The cat sat on the mat."],
    ...                               progress=False)
    >>> imp.meta["objective"], list(imp.columns)
    ('mlm', ['cls', 'sep', 'punct', 'other'])
    """
    if by not in ("layer", "head"):
        raise InputError(f"by must be 'layer' or 'head', not {by!r}.")
    sums = counts = None
    n_items = 0
    kind = objective if not isinstance(objective, str) or objective != "auto" else _kind(model)
    for r in _run(model, inputs, objective, labels, batch_size, mask_rate, seed, progress):
        att = r.attention
        n = len(att)
        target = np.full(n, 3)
        target[att.punct] = 2
        target[att.roles == "sep"] = 1
        target[att.roles == "cls"] = 0
        onehot = np.eye(len(TARGETS))[target]  # [n, 4]
        g = np.abs(r.grads.astype(np.float64))
        visible = np.ones((n, n))
        if att.causal:
            visible = np.tril(visible)
        s = np.einsum("lhqk,qk,kc->lhc", g, visible, onehot)
        c = np.einsum("qk,kc->c", visible, onehot)
        c = np.broadcast_to(c, s.shape)
        sums = s if sums is None else sums + s
        counts = c.copy() if counts is None else counts + c
        n_items += 1
    assert sums is not None and counts is not None
    if by == "layer":
        sums, counts = sums.sum(1), counts.sum(1)
        index = pd.RangeIndex(sums.shape[0], name="layer")
    else:
        L, H = sums.shape[:2]
        sums, counts = sums.reshape(L * H, -1), counts.reshape(L * H, -1)
        index = pd.MultiIndex.from_product([range(L), range(H)], names=["layer", "head"])
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(counts > 0, sums / counts, np.nan)
    out = pd.DataFrame(mean, index=index, columns=list(TARGETS))
    meta = {"objective": kind if isinstance(kind, str) else getattr(kind, "__name__", "callable"),
            "n_items": n_items}
    if by == "head":
        return HeadResult(out, meta, value="cls")
    return Result(out, meta, plot=_plot_importance)


def _plot_importance(result: Result, ax: Any = None, **options: Any) -> Any:
    from ..plot.stats import plot_importance

    return plot_importance(result, ax=ax, **options)
