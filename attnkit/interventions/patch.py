"""Activation patching: how much of the clean–corrupted gap one component restores.

The corrupted inputs ``x′`` run with one component's activation taken from the clean run
``x`` (Meng et al. 2022; Heimersheim & Nanda 2024); the result is the share of the gap
restored,

    restored = (M(patched) − M(x′)) / (M(x) − M(x′)),

1 where the component carries all of the difference, 0 where it carries none (it can be
negative, or above 1). ``M`` is the metric averaged over the inputs; it reads the clean
inputs' tokens (the answers) and compares with the clean run's output (:func:`kl`). Clean
and corrupted inputs are matched one to one and position by position, so each pair must
have the same number of tokens.

Grains (``grain=``):

``"head"``
    a head's output ``z_h`` at every position (index ``(layer, head)``);
``"head×position"``
    a head's output at one position (index ``(layer, head, position)``);
``"layer"``
    every head of a layer together: the attention block's output before the projection
    (index ``layer``);
``"residual×position"``
    the residual stream entering a layer at one position (index ``(layer, position)``).

Every component is patched in its own copy of the corrupted inputs, several copies per
forward pass.

An encoder–decoder is patched one stack at a time (``stack="encoder"``, ``"decoder"`` or
``"cross"``, :mod:`attnkit.interventions.hooks`) on ``(source, target)`` pairs matched on both
sides; positions are the source's for ``"encoder"``, the target's otherwise, and the
residual stream is the encoder's (``"encoder"``) or the decoder's (``"decoder"``) entering
each layer.
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
from .metrics import Metric, check_gap, resolve

#: What one patched component is.
GRAINS = ("head", "head×position", "layer", "residual×position")
_ALIASES = {"head*position": "head×position", "head_position": "head×position",
            "residual*position": "residual×position", "residual_position": "residual×position"}


def check_grain(grain: Any) -> str:
    """``grain=`` as one of :data:`GRAINS` (``*`` or ``_`` may stand for ``×``).

    Parameters
    ----------
    grain : str
        The grain.

    Returns
    -------
    str

    Raises
    ------
    InputError
        For anything else.

    Examples
    --------
    >>> from attnkit.interventions.patch import check_grain
    >>> check_grain("head*position")
    'head×position'
    """
    if isinstance(grain, str):
        grain = _ALIASES.get(grain, grain)
    return validate.choice(grain, "grain", GRAINS)


def check_stack_grain(stack: str | None, grain: str) -> None:
    """Refuse the residual stream of an encoder–decoder's cross-attention: it has none of its
    own (the stream entering a decoder layer is ``stack="decoder"``'s).

    Parameters
    ----------
    stack : str or None
        The stack.
    grain : str
        One of :data:`GRAINS`.

    Raises
    ------
    InputError
        For ``stack="cross"`` with ``grain="residual×position"``.

    Examples
    --------
    >>> from attnkit.interventions.patch import check_stack_grain
    >>> check_stack_grain("decoder", "residual×position")
    """
    if stack == "cross" and grain == "residual×position":
        raise InputError("grain='residual×position' with stack='cross': the cross-attention has "
                         "no residual stream of its own; the stream entering each decoder layer "
                         "is stack='decoder', the encoder's stack='encoder'.")


def components(grain: str, n_layers: int, n_heads: int, width: int) -> list[tuple]:
    """The components of a grain, in table order: ``(layer, head)``, ``(layer, head,
    position)``, ``(layer,)`` or ``(layer, position)``.

    Parameters
    ----------
    grain : str
        One of :data:`GRAINS`.
    n_layers, n_heads, width : int
        The model's shape and the inputs' padded length.

    Returns
    -------
    list of tuple

    Examples
    --------
    >>> from attnkit.interventions.patch import components
    >>> components("residual×position", 2, 3, 2)
    [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    L, H, T = range(n_layers), range(n_heads), range(width)
    if grain == "head":
        return [(l, h) for l in L for h in H]
    if grain == "head×position":
        return [(l, h, p) for l in L for h in H for p in T]
    if grain == "layer":
        return [(l,) for l in L]
    return [(l, p) for l in L for p in T]


def component_masks(grain: str, comps: Sequence[tuple], n_heads: int, width: int,
                    device: Any) -> dict[tuple[str, int], Any]:
    """Per site, which copy replaces what: ``[R, T, H]`` or ``[R, T]`` booleans (copy ``r``
    patches component ``comps[r]``).

    Parameters
    ----------
    grain : str
        One of :data:`GRAINS`.
    comps : sequence of tuple
        Components (:func:`components`), one per copy.
    n_heads, width : int
        Heads per layer and padded length.
    device : torch.device
        Where the masks live.

    Returns
    -------
    dict
        ``(site, layer)`` -> mask.

    Examples
    --------
    >>> from attnkit.interventions.patch import component_masks
    >>> m = component_masks("head×position", [(0, 1, 2)], 2, 3, "cpu")
    >>> m[("z", 0)][0].int().tolist()
    [[0, 0], [0, 0], [0, 1]]
    """
    import torch

    R = len(comps)
    masks: dict[tuple[str, int], Any] = {}
    site = "resid" if grain == "residual×position" else "z"
    for r, c in enumerate(comps):
        key = (site, c[0])
        if key not in masks:
            shape = (R, width) if site == "resid" else (R, width, n_heads)
            masks[key] = torch.zeros(shape, dtype=torch.bool, device=device)
        if grain == "head":
            masks[key][r, :, c[1]] = True
        elif grain == "head×position":
            masks[key][r, c[2], c[1]] = True
        elif grain == "layer":
            masks[key][r] = True
        else:
            masks[key][r, c[1]] = True
    return masks


def table_for(grain: str, comps: Sequence[tuple], columns: dict[str, np.ndarray],
              n_layers: int, n_heads: int, meta: dict[str, Any]) -> HeadResult | Result:
    """The result of per-component values in :func:`components` order.

    Parameters
    ----------
    grain : str
        One of :data:`GRAINS`.
    comps : sequence of tuple
        The components.
    columns : dict
        Column name -> one value per component.
    n_layers, n_heads : int
        The model's shape.
    meta : dict
        The result's meta.

    Returns
    -------
    HeadResult or Result
        A :class:`HeadResult` for ``"head"``, else a :class:`Result` indexed by the grain.

    Examples
    --------
    >>> import numpy as np
    >>> from attnkit.interventions.patch import table_for
    >>> r = table_for("layer", [(0,), (1,)], {"restored": np.array([0.1, 0.9])}, 2, 1, {})
    >>> r.table.index.name, r.table["restored"].tolist()
    ('layer', [0.1, 0.9])
    """
    if grain == "head":
        table = head_frame({k: v.reshape(n_layers, n_heads) for k, v in columns.items()})
        return HeadResult(table, meta, value=next(iter(columns)), plot="patching")
    names = {"head×position": ["layer", "head", "position"], "layer": ["layer"],
             "residual×position": ["layer", "position"]}[grain]
    index = (pd.Index([c[0] for c in comps], name="layer") if grain == "layer"
             else pd.MultiIndex.from_tuples(comps, names=names))
    return Result(pd.DataFrame(columns, index=index), meta, plot="patching")


def clean_and_corrupted(model: Any, clean: Any, corrupted: Any, m: Metric,
                        stack: str | None = None) -> dict[str, Any]:
    """The two runs every patching needs: batches, the clean activations, both outputs and
    both metric values.

    Parameters
    ----------
    model : Model
        The model.
    clean, corrupted : sequence
        Matched inputs.
    m : Metric
        The metric.
    stack : str, optional
        An encoder–decoder's stack whose activations are recorded.

    Returns
    -------
    dict
        ``clean`` and ``corrupted`` (:class:`~attnkit.interventions.hooks.Batch`),
        ``sources`` (clean activations by site), ``reference`` (the clean output),
        ``m_clean``, ``m_corrupted``.

    Raises
    ------
    InputError
        When the inputs cannot be matched, or the metric does not tell them apart.

    Examples
    --------
    >>> from attnkit.interventions.metrics import loss
    >>> from attnkit.interventions.patch import clean_and_corrupted
    >>> from attnkit.testing import tiny_model
    >>> runs = clean_and_corrupted(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss())
    >>> sorted(runs)[:3], runs["m_clean"] != runs["m_corrupted"]
    (['clean', 'corrupted', 'm_clean'], True)
    """
    bc = hooks.batch(model, clean, "clean")
    bx = hooks.batch(model, corrupted, "corrupted")
    hooks.same_shape(bc, bx, ("clean", "corrupted"))
    sources: dict = {}
    ref = hooks.forward(model, bc, capture=sources, stack=stack)
    out = hooks.forward(model, bx)
    ctx = hooks.context(model, bc, ref)
    m_clean = float(hooks.per_copy(m(ref, ctx), 1)[0])
    m_corr = float(hooks.per_copy(m(out, ctx), 1)[0])
    check_gap(m, m_clean, m_corr, so="there is no gap to restore")
    return {"clean": bc, "corrupted": bx, "sources": sources, "reference": ref,
            "m_clean": m_clean, "m_corrupted": m_corr}


def patch(
    model: Any,
    clean: Any,
    corrupted: Any,
    *,
    stack: str | None = None,
    metric: str | Metric | Any = "auto",
    grain: str = "head",
    batch_size: int = 32,
    progress: bool = True,
) -> HeadResult | Result:
    """Activation patching: the share of the clean–corrupted gap each component restores.

    See :mod:`attnkit.interventions.patch` for the definition and the grains.

    Parameters
    ----------
    model : Model
        A text model loaded with :func:`attnkit.load`.
    clean, corrupted : sequence
        Matched inputs (texts or token ids), the same number of tokens pair by pair; an
        encoder–decoder's ``(source, target)`` pairs, matched on both sides.
    stack : str, optional
        An encoder–decoder's components to patch: ``"encoder"``, ``"decoder"`` or ``"cross"``
        (``"residual×position"``: the encoder's or the decoder's stream); None for other models.
    metric : str, Metric or callable
        What to measure (:mod:`attnkit.interventions.metrics`).
    grain : str
        ``"head"``, ``"head×position"``, ``"layer"`` or ``"residual×position"``.
    batch_size : int
        Rows (copies × inputs) per forward pass.
    progress : bool
        Show a progress bar over forward passes.

    Returns
    -------
    HeadResult or Result
        Columns ``restored`` (the share of the gap) and ``metric`` (``M(patched)``); a
        :class:`HeadResult` for ``"head"``, else indexed by ``(layer, head, position)``,
        ``layer`` or ``(layer, position)``. ``meta``: ``metric``, ``clean``, ``corrupted``
        (the metric on each), ``grain``, ``n_items`` (and ``stack``).

    Raises
    ------
    InputError
        When clean and corrupted differ in number or length, the metric does not tell them
        apart, for an unknown grain or stack, or the residual stream of ``stack="cross"``.
    UnsupportedModelError
        For a model family interventions do not know.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.patch(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], progress=False)
    >>> r.meta["grain"], r.table.shape, r.value_column()
    ('head', (4, 2), 'restored')
    >>> from attnkit.testing import tiny_seq2seq
    >>> r = ak.patch(tiny_seq2seq("bart"), [("The cat sat on the mat.", "A cat.")],
    ...              [("The cat sat ou the mat.", "A cat.")], stack="encoder", grain="layer",
    ...              progress=False)
    >>> r.meta["stack"], r.table.shape
    ('encoder', (2, 2))
    """
    site = hooks.sites(model, stack)
    stack = site.stack
    g = check_grain(grain)
    check_stack_grain(stack, g)
    size = validate.integer(batch_size, "batch_size", minimum=1)
    m = resolve(metric, model)
    runs = clean_and_corrupted(model, clean, corrupted, m, stack)
    bc, bx = runs["clean"], runs["corrupted"]
    comps = components(g, site.n_layers, site.n_heads, bx.width_of(stack))
    values = np.empty(len(comps))
    per = max(1, size // bx.size)
    dev = bx.device
    spans = list(hooks.chunks(len(comps), per))
    for s, e in progress_bar(spans, show=progress, desc="patch", unit="forward"):
        masks = component_masks(g, comps[s:e], site.n_heads, bx.width_of(stack), dev)
        edits = hooks.Edits(e - s, masks, {k: runs["sources"][k] for k in masks})
        out = hooks.forward(model, bx, copies=e - s, edits=edits, stack=stack)
        ctx = hooks.context(model, bc, runs["reference"], e - s)
        values[s:e] = hooks.per_copy(m(out, ctx), e - s)
        del out
    gap = runs["m_clean"] - runs["m_corrupted"]
    meta = {"metric": m.name, "clean": runs["m_clean"], "corrupted": runs["m_corrupted"],
            "grain": g, "n_items": bx.size, "higher_is_better": m.higher_is_better}
    if stack is not None:
        meta["stack"] = stack
    return table_for(g, comps, {"restored": (values - runs["m_corrupted"]) / gap, "metric": values},
                     site.n_layers, site.n_heads, meta)
