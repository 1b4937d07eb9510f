"""Head ablation: replace a head's output and measure what the model loses.

Ablating head ``h`` of layer ``l`` replaces its output ``z_h`` (its slice of the output
projection's input, :mod:`attnkit.interventions.hooks`) at every position by

- ``"zero"``: zeros;
- ``"mean"``: its mean over the reference inputs' tokens (every real position of every
  reference input: one vector per head);
- ``"resample"``: its value on another input at the same position: input ``i`` takes it
  from reference input ``i mod len(reference)`` (default reference: the inputs themselves,
  shifted by one, so input ``i`` takes input ``i + 1``'s).

The effect is ``M(ablated) − M(clean)``, the metric averaged over the inputs. With
``heads="each"`` every head is ablated on its own, several heads per forward pass (copies of
the inputs in one batch, each copy ablating another head).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress as progress_bar
from ..core import validate
from ..core.results import HeadResult, Result, head_frame
from ..errors import InputError
from . import hooks
from .metrics import Metric, resolve

#: How a head's output is replaced.
HOW = ("zero", "mean", "resample")


def head_groups(heads: Any, n_layers: int, n_heads: int) -> tuple[list[list[tuple[int, int]]], bool]:
    """``heads=`` as groups of heads ablated together, and whether it was ``"each"``.

    None or ``"each"``: every head on its own; a list of ``(layer, head)`` pairs: one group of them
    all; a list of such lists: one group each.

    Parameters
    ----------
    heads : "each", pairs, or lists of pairs
        What to ablate.
    n_layers, n_heads : int
        The model's shape.

    Returns
    -------
    tuple
        ``(groups, each)``.

    Raises
    ------
    InputError
        For anything else, or heads out of range.

    Examples
    --------
    >>> from attnkit.interventions.ablate import head_groups
    >>> head_groups([(1, 0), (1, 1)], 2, 2)
    ([[(1, 0), (1, 1)]], False)
    >>> head_groups([[(0, 0)], [(1, 0), (1, 1)]], 2, 2)[0]
    [[(0, 0)], [(1, 0), (1, 1)]]
    """
    if heads is None:
        heads = "each"
    if isinstance(heads, str):
        if heads != "each":
            raise InputError(f"heads must be 'each', (layer, head) pairs or lists of pairs; "
                             f"got {heads!r}.")
        return [[(l, h)] for l in range(n_layers) for h in range(n_heads)], True
    try:
        items = list(heads)
    except TypeError:
        raise InputError(f"heads must be 'each', (layer, head) pairs or lists of pairs; "
                         f"got {heads!r}.") from None
    if not items:
        raise InputError("heads is empty; give 'each' or at least one (layer, head) pair.")
    nested = all(not isinstance(x, (str, bytes)) and hasattr(x, "__iter__") and x and
                 all(hasattr(y, "__iter__") for y in x) for x in items)
    if nested:
        return [validate.head_pairs(g, n_layers, n_heads) for g in items], False
    return [validate.head_pairs(items, n_layers, n_heads)], False


def _group_masks(site: hooks.Sites, groups: Sequence[list[tuple[int, int]]], width: int,
                 device: Any) -> dict[tuple[str, int], Any]:
    import torch

    R = len(groups)
    masks: dict[tuple[str, int], Any] = {}
    for r, g in enumerate(groups):
        for layer, head in g:
            key = ("z", layer)
            if key not in masks:
                masks[key] = torch.zeros(R, width, site.n_heads, dtype=torch.bool, device=device)
            masks[key][r, :, head] = True
    return masks


def replacements(model: Any, b: hooks.Batch, how: str, reference: Any,
                 stack: str | None = None) -> dict[int, Any]:
    """Per layer, what replaces the heads' outputs: ``[B or 1, T, H, d_head]``.

    Parameters
    ----------
    model : Model
        The model.
    b : Batch
        The inputs being ablated.
    how : str
        One of :data:`HOW`.
    reference : sequence or None
        Reference inputs of ``"mean"`` and ``"resample"`` (default the inputs).
    stack : str, optional
        An encoder–decoder's stack (its positions are the sources' for ``"encoder"``).

    Returns
    -------
    dict
        Layer -> source tensor.

    Raises
    ------
    InputError
        For an unknown ``how``, or resample references whose lengths do not match.

    Examples
    --------
    >>> from attnkit.interventions.ablate import replacements
    >>> from attnkit.interventions.hooks import batch
    >>> from attnkit.testing import tiny_model
    >>> model = tiny_model("gpt2")
    >>> src = replacements(model, batch(model, ["The cat sat."]), "mean", ["We read it."])
    >>> tuple(src[0].shape)
    (1, 1, 2, 8)
    """
    import torch

    how = validate.choice(how, "how", HOW)
    site = hooks.sites(model, stack)
    dev, dtype = b.device, model.dtype
    if how == "zero":
        zero = torch.zeros(1, 1, site.n_heads, site.head_dim, device=dev, dtype=dtype)
        return {layer: zero for layer in range(site.n_layers)}
    if reference is None:
        if how == "resample" and b.size < 2:
            raise InputError("how='resample' without a reference needs at least two inputs (each "
                             "takes the next one's head outputs); pass reference=[...].")
        ref = b
    else:
        ref = hooks.batch(model, reference, "reference")
    seen: dict = {}
    hooks.forward(model, ref, capture=seen, stack=stack)
    if how == "mean":
        m = ref.mask_of(stack).to(dtype)[..., None, None]
        out = {}
        for layer in range(site.n_layers):
            z = seen[("z", layer)]
            out[layer] = ((z * m).sum((0, 1)) / m.sum((0, 1)))[None, None]
        return out
    # resample: input i takes reference input (i + shift) mod len(reference)
    shift = 1 if reference is None else 0
    order = [(i + shift) % ref.size for i in range(b.size)]
    have, need = ref.lengths_of(stack), b.lengths_of(stack)
    side = "" if stack is None else (" source" if stack == "encoder" else " target")
    for i, j in enumerate(order):
        if have[j] < need[i]:
            raise InputError(
                f"reference[{j}]{side} has {have[j]} tokens, fewer than inputs[{i}] "
                f"({need[i]}): resampling takes each position's head outputs from the "
                "reference input, so it must be at least as long.")
    idx = torch.as_tensor(order, device=dev)
    width = b.width_of(stack)
    return {layer: seen[("z", layer)][idx, :width] for layer in range(site.n_layers)}


def ablate(
    model: Any,
    inputs: Any,
    *,
    stack: str | None = None,
    heads: Any = None,
    how: str = "zero",
    reference: Sequence[Any] | None = None,
    metric: str | Metric | Any = "auto",
    batch_size: int = 32,
    progress: bool = True,
) -> HeadResult | Result:
    """Effect on a metric of replacing heads' outputs (zero, mean or resample ablation).

    A head's output is its slice of the output projection's *input* (``z_h``, before the
    heads are mixed); under grouped-query attention only the query head's own ``z_h`` is
    replaced, never the key/value head it shares. See :mod:`attnkit.interventions.ablate`.

    Parameters
    ----------
    model : Model
        A text model loaded with :func:`attnkit.load`.
    inputs : sequence
        Texts, pairs, word lists or token ids (as :meth:`Model.encode`), or one of them; an
        encoder–decoder's ``(source, target)`` pairs.
    stack : str, optional
        An encoder–decoder's heads to ablate: ``"encoder"``, ``"decoder"`` (self-attention)
        or ``"cross"``; None (the only value) for other models.
    heads : None, "each", (layer, head) pairs, or lists of pairs
        None or ``"each"``: every head on its own (batched); a list of pairs: those heads together;
        a list of lists: each group together. 0-indexed (in ``stack``).
    how : str
        ``"zero"``, ``"mean"`` or ``"resample"``.
    reference : sequence, optional
        Inputs the mean or resampled outputs come from (default ``inputs``).
    metric : str, Metric or callable
        What to measure (:mod:`attnkit.interventions.metrics`); ``"auto"``: the loss of a
        language model, the predicted class's logit of a classifier, the embedding's
        projection of a bare model.
    batch_size : int
        Rows (copies × inputs) per forward pass.
    progress : bool
        Show a progress bar over forward passes.

    Returns
    -------
    HeadResult or Result
        For every head on its own: a :class:`HeadResult` indexed by ``(layer, head)`` with columns
        ``metric`` (the mean metric with that head ablated) and ``effect`` (``metric`` minus
        the clean value). For groups: a :class:`Result` indexed by ``group`` with columns
        ``heads`` (the group's pairs), ``metric`` and ``effect``. ``meta``: ``metric``,
        ``baseline`` (the clean value), ``how``, ``n_items``, ``higher_is_better``.

    Raises
    ------
    InputError
        For heads out of range, an unknown ``how`` or ``stack``, a metric that does not return
        one number per input, or a token the vocabulary lacks.
    UnsupportedModelError
        For a model family interventions do not know.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model, tiny_seq2seq
    >>> r = ak.ablate(tiny_model("llama", heads=4, kv_heads=2), ["The cat sat on the mat."],
    ...               progress=False)
    >>> r.meta["metric"], r.table.shape, r.value_column()
    ('loss', (8, 2), 'effect')
    >>> s2s = tiny_seq2seq("t5")   # the cross-attention heads of an encoder-decoder
    >>> r = ak.ablate(s2s, [("The cat sat.", "A cat sat.")], stack="cross", progress=False)
    >>> r.meta["stack"], r.table.shape
    ('cross', (4, 2))
    """
    site = hooks.sites(model, stack)
    stack = site.stack
    groups, each = head_groups(heads, site.n_layers, site.n_heads)
    size = validate.integer(batch_size, "batch_size", minimum=1)
    m = resolve(metric, model)
    b = hooks.batch(model, inputs)
    sources = replacements(model, b, how, reference, stack)
    clean_out = hooks.forward(model, b)
    baseline = float(hooks.per_copy(m(clean_out, hooks.context(model, b, clean_out)), 1)[0])
    per = max(1, size // b.size)
    values = np.empty(len(groups))
    spans = list(hooks.chunks(len(groups), per))
    dev = b.device
    for s, e in progress_bar(spans, show=progress, desc="ablate", unit="forward"):
        masks = _group_masks(site, groups[s:e], b.width_of(stack), dev)
        edits = hooks.Edits(e - s, masks, {k: sources[k[1]] for k in masks})
        out = hooks.forward(model, b, copies=e - s, edits=edits, stack=stack)
        values[s:e] = hooks.per_copy(m(out, hooks.context(model, b, clean_out, e - s)), e - s)
        del out
    meta = {"metric": m.name, "baseline": baseline, "how": how, "n_items": b.size,
            "higher_is_better": m.higher_is_better,
            "reference": "inputs" if reference is None else f"{len(list(reference))} inputs"}
    if stack is not None:
        meta["stack"] = stack
    if each:
        L, H = site.n_layers, site.n_heads
        table = head_frame({"metric": values.reshape(L, H), "effect": values.reshape(L, H) - baseline})
        return HeadResult(table, meta, value="effect")
    table = pd.DataFrame({"heads": [tuple(g) for g in groups], "metric": values,
                          "effect": values - baseline},
                         index=pd.RangeIndex(len(groups), name="group"))
    return Result(table, meta)
