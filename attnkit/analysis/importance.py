"""Gradient importance of attention (Clark et al. 2019, §3.2, Fig. 3).

How much would a model's objective change if a head attended a little more or less from
one position to another? ``attention_importance`` takes the gradient of a scalar
objective with respect to every attention probability (the softmax output of the eager
attention, exactly the tensor multiplied with the values) and averages its magnitude per
layer by what is attended to: [CLS], [SEP], punctuation, or any other position.

Unlike the other analyses this one runs the model (a backward pass needs it).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from .._compat import renamed
from ..core.results import HeadResult, Result, head_index

from ..core import validate
from ..errors import InputError
from ..runtime.gradients import OBJECTIVES, Objective, run_gradients
from ..runtime.objectives import auto_objective

#: Categories of attended-to positions, the columns of :func:`attention_importance`.
TARGETS = ("cls", "sep", "punct", "other")

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
    model : a :class:`attnkit.runtime.model.Model` (it runs forward and backward).
    inputs : texts, pairs, word lists or treebank sentences (as :meth:`Model.encode`).
    objective :
        ``"auto"`` explains what the model predicts, as everywhere in attnkit
        (:data:`attnkit.runtime.objectives.AUTO`): ``"mlm"`` for a masked-LM head (the paper's
        Fig. 3), ``"logit"`` for a sequence classifier or a causal LM, ``"projection"`` for
        a bare encoder. For the bundled sentence-embedding model, the analogue of the
        paper's MLM loss is ``"embedding"`` (what ``attnkit analyze`` and notebook 01 use).

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
        - ``"logit"``: the logit of the class a sequence classifier predicts (of ``labels``
          when given), or a causal LM's logit of the token it predicts after the input
          (:mod:`attnkit.runtime.objectives`). No masking: it explains the prediction.
        - ``"projection"``: for encoders without a head, the length of the mean-pooled
          embedding along its own direction (gradient of ``‖e(x)‖``), unmasked.
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
    validate.model(model)
    seed = validate.seed(seed)
    if by not in ("layer", "head"):
        raise InputError(f"by must be 'layer' or 'head', not {by!r}.")
    sums = counts = None
    n_items = 0
    kind = objective if not isinstance(objective, str) or objective != "auto" else auto_objective(model, OBJECTIVES)
    for r in run_gradients(model, inputs, objective, labels, batch_size, mask_rate, seed, progress):
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
        index = head_index(L, H)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(counts > 0, sums / counts, np.nan)
    out = pd.DataFrame(mean, index=index, columns=list(TARGETS))
    meta = {"objective": kind if isinstance(kind, str) else getattr(kind, "__name__", "callable"),
            "n_items": n_items}
    if by == "head":
        return HeadResult(out, meta, value="cls")
    return Result(out, meta, plot="importance")


