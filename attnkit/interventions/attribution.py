"""Attribution patching: the first-order estimate of activation patching (Nanda 2023).

For a component with activation ``a`` (a head's output ``z_h``, at every position or at one;
a layer's heads together; the residual stream at one position), patching it from the clean
run into the corrupted run changes the metric by approximately

    AtP(a) = (a(x) − a(x′)) · ∂M/∂a, the gradient taken at x′

(Nanda 2023; Syed et al. 2023): the clean run, the corrupted run and one backward pass give
it for every component at once. The estimate is exact for a metric linear in ``a``, and
weak where a softmax saturates; :func:`attribution_agreement` sets it beside exact patching
(:func:`~attnkit.interventions.patch.patch`) and reports their rank agreement. Results are
reported as :func:`~attnkit.interventions.patch.patch` reports them, as a share of the gap
``M(x) − M(x′)`` (column ``restored``) and as the estimated change (column ``estimate``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.results import HeadResult, Result
from . import hooks
from .metrics import Metric, resolve
from .patch import check_grain, check_stack_grain, clean_and_corrupted, components, patch, table_for


def estimates(model: Any, clean: Any, corrupted: Any, m: Metric, grain: str,
              stack: str | None = None) -> tuple[np.ndarray, dict]:
    """``AtP`` of every component of ``grain`` (in
    :func:`~attnkit.interventions.patch.components` order) and the two runs' record.

    Parameters
    ----------
    model : Model
        The model.
    clean, corrupted : sequence
        Matched inputs.
    m : Metric
        The metric (differentiable).
    grain : str
        One of :data:`~attnkit.interventions.patch.GRAINS`.
    stack : str, optional
        An encoder–decoder's stack.

    Returns
    -------
    tuple
        ``(values, runs)``: float64 ``[components]``, and
        :func:`~attnkit.interventions.patch.clean_and_corrupted`'s dict.

    Examples
    --------
    >>> from attnkit.interventions.attribution import estimates
    >>> from attnkit.interventions.metrics import loss
    >>> from attnkit.testing import tiny_model
    >>> v, runs = estimates(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."], loss(), "layer")
    >>> v.shape
    (2,)
    """
    import torch

    g = check_grain(grain)
    n_layers = hooks.sites(model, stack).n_layers
    runs = clean_and_corrupted(model, clean, corrupted, m, stack)
    bc, bx = runs["clean"], runs["corrupted"]
    site = "resid" if g == "residual×position" else "z"
    acts: dict = {}
    out = hooks.forward(model, bx, capture=acts, grad=True, stack=stack)
    value = m(out, hooks.context(model, bc, runs["reference"])).mean()
    keys = [(site, layer) for layer in range(n_layers)]
    grads = torch.autograd.grad(value, [acts[k] for k in keys])
    per_layer = []
    for key, grad in zip(keys, grads):
        delta = runs["sources"][key].to(grad.dtype) - acts[key].detach()
        prod = (delta * grad).double().sum(0)  # over inputs: [T, H, d] or [T, d]
        if g == "head":
            per_layer.append(prod.sum((0, 2)))  # [H]
        elif g == "head×position":
            per_layer.append(prod.sum(-1).T.reshape(-1))  # [H * T], head-major
        elif g == "layer":
            per_layer.append(prod.sum().reshape(1))
        else:
            per_layer.append(prod.sum(-1))  # [T]
    # the metric is a mean over inputs: so is its change
    values = torch.cat(per_layer).cpu().numpy() / bx.size
    return values, runs


def attribution_patching(
    model: Any,
    clean: Any,
    corrupted: Any,
    *,
    stack: str | None = None,
    metric: str | Metric | Any = "auto",
    grain: str = "head",
    progress: bool = True,
) -> HeadResult | Result:
    """First-order estimate of activation patching for every component, in two forwards
    and one backward (Nanda 2023).

    See :mod:`attnkit.interventions.attribution`; the grains and the share of the gap are
    those of :func:`~attnkit.interventions.patch.patch`.

    Parameters
    ----------
    model : Model
        A text model loaded with :func:`attnkit.load`.
    clean, corrupted : sequence
        Matched inputs, the same number of tokens pair by pair (an encoder–decoder's
        ``(source, target)`` pairs).
    stack : str, optional
        An encoder–decoder's components: ``"encoder"``, ``"decoder"`` or ``"cross"``
        (:func:`~attnkit.interventions.patch.patch`); None for other models.
    metric : str, Metric or callable
        What to measure (differentiable in the output).
    grain : str
        ``"head"``, ``"head×position"``, ``"layer"`` or ``"residual×position"``.
    progress : bool
        Kept for the contract (three passes, no loop).

    Returns
    -------
    HeadResult or Result
        Columns ``restored`` (the estimated share of the gap) and ``estimate`` (the
        estimated change of the metric), indexed as :func:`patch` indexes the grain.
        ``meta``: ``metric``, ``clean``, ``corrupted``, ``grain``, ``method``.

    Raises
    ------
    InputError
        As :func:`~attnkit.interventions.patch.patch`.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.attribution_patching(tiny_model("gpt2"), ["The cat sat."], ["A cat sat."],
    ...                             progress=False)
    >>> r.meta["method"], r.table.shape
    ('attribution patching', (4, 2))
    >>> from attnkit.testing import tiny_seq2seq
    >>> r = ak.attribution_patching(tiny_seq2seq("t5"), [("The cat sat on the mat.", "A cat.")],
    ...                             [("The cat sat we the mat.", "A cat.")], stack="cross",
    ...                             progress=False)
    >>> r.meta["stack"], r.table.shape
    ('cross', (4, 2))
    """
    del progress
    site = hooks.sites(model, stack)
    stack = site.stack
    g = check_grain(grain)
    check_stack_grain(stack, g)
    m = resolve(metric, model)
    values, runs = estimates(model, clean, corrupted, m, g, stack)
    gap = runs["m_clean"] - runs["m_corrupted"]
    comps = components(g, site.n_layers, site.n_heads, runs["corrupted"].width_of(stack))
    meta = {"metric": m.name, "clean": runs["m_clean"], "corrupted": runs["m_corrupted"],
            "grain": g, "n_items": runs["corrupted"].size, "method": "attribution patching",
            "higher_is_better": m.higher_is_better}
    if stack is not None:
        meta["stack"] = stack
    return table_for(g, comps, {"restored": values / gap, "estimate": values},
                     site.n_layers, site.n_heads, meta)


def attribution_agreement(
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
    """Attribution patching beside exact activation patching, and their rank agreement.

    Parameters
    ----------
    model : Model
        A text model loaded with :func:`attnkit.load`.
    clean, corrupted : sequence
        Matched inputs (the sample both methods run on).
    stack : str, optional
        An encoder–decoder's components (:func:`~attnkit.interventions.patch.patch`).
    metric : str, Metric or callable
        What to measure.
    grain : str
        As in :func:`~attnkit.interventions.patch.patch`.
    batch_size : int
        Rows per forward pass of the exact patching.
    progress : bool
        Show the exact patching's progress bar.

    Returns
    -------
    HeadResult or Result
        Columns ``patching`` and ``attribution`` (shares of the gap restored), indexed by
        the grain. ``meta``: ``spearman`` (rank correlation of the two), ``spearman_abs`` (of
        their magnitudes), ``top_agree`` (whether both put the same component first),
        ``metric``, ``clean``, ``corrupted``, ``grain``.

    Raises
    ------
    InputError
        As :func:`~attnkit.interventions.patch.patch`.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> r = ak.interventions.attribution_agreement(tiny_model("gpt2"), ["The cat sat."],
    ...                                            ["A cat sat."], progress=False)
    >>> list(r.table.columns), -1.0 <= r.meta["spearman"] <= 1.0
    (['patching', 'attribution'], True)
    """
    from scipy.stats import spearmanr

    exact = patch(model, clean, corrupted, stack=stack, metric=metric, grain=grain,
                  batch_size=batch_size, progress=progress)
    approx = attribution_patching(model, clean, corrupted, stack=stack, metric=metric, grain=grain)
    a, b = exact.table["restored"].to_numpy(), approx.table["restored"].to_numpy()
    rho = float(spearmanr(a, b).statistic) if len(a) > 1 else float("nan")
    rho_abs = float(spearmanr(np.abs(a), np.abs(b)).statistic) if len(a) > 1 else float("nan")
    meta: dict[str, Any] = {k: exact.meta[k] for k in ("metric", "clean", "corrupted", "grain",
                                                        "n_items", "stack") if k in exact.meta}
    meta.update(spearman=rho, spearman_abs=rho_abs,
                top_agree=bool(np.argmax(np.abs(a)) == np.argmax(np.abs(b))))
    table = exact.table[[]].copy()
    table["patching"], table["attribution"] = a, b
    if isinstance(exact, HeadResult):
        return HeadResult(table, meta, value="attribution")
    return Result(table, meta)
