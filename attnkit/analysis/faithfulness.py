"""Faithfulness of attention-based attributions: do they point at what the model uses?

For every input, each attribution of :mod:`attnkit.analysis.attribution` (raw attention,
rollout, flow, norm, ALTI, grad×attn, …) gives one score per input token. They are compared
with what the model does when tokens are taken away, as Abnar & Zuidema (2020) did:

- **blank-out importance** of token ``j``: ``y(x) - y(x with j masked)``, the drop of the
  target when that one token is replaced by the mask token (the unknown token where there
  is none); all ``m`` masked copies of an input run in one batch;
- **input×gradient** of token ``j``: ``Σ_d e_jd ∂y/∂e_jd`` on its input embedding;

by Spearman's rank correlation over the input's word tokens ([CLS], [SEP] and other
special tokens are never masked nor scored) — with the signed references, and with their
magnitudes (``_abs_``: attention-based scores are never negative, so a token whose removal
*raises* the target counts as important there; Abnar & Zuidema's code compared with
absolute gradients) — and by the **deletion** and **insertion**
curves (Petsiuk et al. 2018; DeYoung et al. 2020): tokens are masked (deletion) or revealed
from an all-masked input (insertion) in the order of the attribution, most attributed
first, at ``steps + 1`` fractions of the word tokens; the area under the target's curve
over the fraction (0 to 1) is reported in the target's units. A faithful attribution has a
*low* deletion area (the target falls fast) and a *high* insertion area. A ``random``
attribution is the chance level of all four.

The target ``y`` (:mod:`attnkit.runtime.objectives`) is a classifier's logit of the class it
predicts on the clean input, a causal LM's logit of its next token, or, for an encoder
without a head, the length of its mean-pooled embedding along the clean embedding's
direction. Every number is a mean over inputs with a bootstrap confidence interval (inputs
resampled); differences from raw attention (``"weights"``) are bootstrapped paired.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ..core import validate
from .._compat import renamed
from ..errors import InputError
from ..core.results import Result
from ..core.types import Input
from ..runtime import objectives as targets
from .attribution import ATTRIBUTIONS, NEEDS, attribution, check_attributions

#: The attributions scored by default (the issue's list; add "random", "input×grad",
#: "norm+residual" as wanted).
DEFAULT_MEASURES = ("weights", "rollout", "flow", "norm", "alti", "grad×attn")

#: The metrics, in table order.
METRICS = ("spearman_blankout", "spearman_abs_blankout", "spearman_inputxgrad",
           "spearman_abs_inputxgrad", "deletion_auc", "insertion_auc")


@renamed(target="objective")
def faithfulness(
    model: Any,
    inputs: Sequence[Input],
    *,
    measures: Sequence[str] = DEFAULT_MEASURES,
    objective: str = "auto",
    labels: Sequence[Any] | None = None,
    sources: Any = None,
    residual: float = 0.5,
    steps: int = 20,
    batch_size: int = 64,
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = True,
) -> Result:
    """Score attention-based input attributions against what the model does without tokens.

    Parameters
    ----------
    model : Model
        Runs forward (blank-out, deletion, insertion, the measures) and backward
        (gradients).
    inputs : sequence
        Texts, pairs or word lists (:meth:`attnkit.Model.encode`).
    measures : sequence of str
        Attributions to score, from
        :data:`~attnkit.analysis.attribution.ATTRIBUTIONS`: ``"weights"``,
        ``"rollout"``, ``"flow"``, ``"norm"``, ``"norm+residual"``, ``"alti"``,
        ``"grad×attn"``, ``"input×grad"``, ``"random"``.
    objective : str
        What the attributions explain (:mod:`attnkit.runtime.objectives`; formerly ``target=``):
        ``"logit"``, ``"projection"`` or ``"auto"`` (what the model predicts, as everywhere:
        ``"logit"`` for sequence classifiers and causal LMs, ``"projection"`` otherwise).
    labels : sequence, optional
        One class per input whose logit is explained (``"logit"``); default: the class the
        model predicts on each clean input.
    sources : int, list of int or "all", optional
        The rows the attention attributions read. ``None``: what the target reads — the
        first token for a classifier (BERT-style models classify from [CLS]), the last
        token for a causal LM, every position for ``"projection"`` (a mean-pooled
        embedding).
    residual : float
        Identity weight of rollout and flow, ``(1 - residual) A + residual I``.
    steps : int
        Fractions of the word tokens at which the deletion and insertion curves are
        measured (``steps + 1`` points from 0 to 1).
    batch_size : int
        Sequences per forward pass of the perturbed copies (and inputs per gradient pass
        is ``max(1, batch_size // 8)``).
    n_boot : int
        Bootstrap resamples of the inputs.
    seed : int
        Seeds the bootstrap and the ``random`` attribution.
    progress : bool
        Show a progress bar over the inputs.

    Returns
    -------
    Result
        ``table`` indexed by ``(measure, metric)`` with columns ``mean``, ``ci_low``,
        ``ci_high`` (95 % percentile bootstrap), ``n`` (inputs with a defined value),
        ``delta`` (mean paired difference from ``"weights"``, when scored) with
        ``delta_low``/``delta_high``. Metrics: ``spearman_blankout``,
        ``spearman_inputxgrad``, ``deletion_auc`` (lower is better), ``insertion_auc``
        (higher is better), and ``spearman_abs_blankout``/``spearman_abs_inputxgrad`` (with
        the magnitudes of the references). ``meta``: ``objective`` (also as ``target``, its former name), ``sources``, ``n_items``, ``mask_token``,
        ``per_item`` (DataFrame: one row per input and measure), ``curves`` (mean deletion
        and insertion curves per measure), ``baseline_full`` and ``baseline_empty`` (mean
        target on the clean and on the all-masked input), and the options.

    Raises
    ------
    InputError
        For unknown measures or targets, no inputs, labels of the wrong length, or a
        tokenizer with neither a mask nor an unknown token.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> import attnkit as ak
    >>> model = tiny_model("bert-cls")
    >>> texts = ["The cat sat on the mat.", "A student reads the new book in the library."]
    >>> r = ak.faithfulness(model, texts, measures=["weights", "rollout", "alti"],
    ...                     n_boot=50, progress=False)
    >>> r.meta["objective"], r.meta["n_items"], sorted(r.table.index.get_level_values(0).unique())
    ('logit', 2, ['alti', 'rollout', 'weights'])
    >>> float(r.table.loc[("weights", "spearman_blankout"), "delta"])
    0.0
    """
    validate.model(model, family="text")
    seed = validate.seed(seed)
    names = check_attributions(measures)
    kind = targets.auto_objective(model, targets.KINDS) if objective == "auto" else objective
    targets.check_kind(model, kind)
    items = list(inputs)
    if not items:
        raise InputError("faithfulness() got no inputs.")
    if labels is not None and len(labels) != len(items):
        raise InputError(f"Got {len(labels)} labels for {len(items)} inputs; give one per input.")
    steps, batch_size, n_boot = (validate.size(v, k) for k, v in
                                 (("steps", steps), ("batch_size", batch_size), ("n_boot", n_boot)))
    mask_id = model.tokenizer.mask_token_id
    if mask_id is None:
        mask_id = model.tokenizer.unk_token_id
    if mask_id is None:
        raise InputError(f"{model.name}'s tokenizer has neither a mask nor an unknown token to "
                         "blank tokens out with.")
    encs = [model.encode(x) for x in items]
    runner = _Runner(model, kind, mask_id, batch_size)
    from .._progress import progress as bar_of

    rows, curves, full, empty = [], [], [], []
    bar = bar_of(total=len(encs), show=progress, desc=f"faithfulness ({model.name})")
    step = max(1, batch_size // 8)
    try:
        for start in range(0, len(encs), step):
            chunk = encs[start : start + step]
            lab = None if labels is None else list(labels[start : start + step])
            for ev in _evaluate(model, runner, chunk, lab, names, kind, sources, residual, steps,
                                   seed, start):
                rows.extend(ev["rows"])
                curves.extend(ev["curves"])
                full.append(ev["full"])
                empty.append(ev["empty"])
                bar.update(1)
    finally:
        bar.close()
    per_item = pd.DataFrame(rows)
    table = _summarise(per_item, names, n_boot, seed)
    curve_df = pd.DataFrame(curves).groupby(["measure", "curve", "fraction"])["value"].mean()
    meta = {
        "objective": kind,
        "target": kind,  # the former name, kept one release
        "sources": "default" if sources is None else sources,
        "n_items": len(encs),
        "mask_token": model.tokenizer.convert_ids_to_tokens(int(mask_id)),
        "residual": residual,
        "steps": steps,
        "n_boot": n_boot,
        "seed": seed,
        "model": model.name,
        "baseline_full": float(np.mean(full)),
        "baseline_empty": float(np.mean(empty)),
        "selected_on": None,
        "per_item": per_item,
        "curves": curve_df.unstack("fraction"),
    }
    return Result(table, meta, plot="faithfulness")


# --------------------------------------------------------------------- forward passes
class _Runner:
    """Target values of many (possibly perturbed) copies of inputs, in batches."""

    def __init__(self, model: Any, kind: str, mask_id: int, batch_size: int) -> None:
        self.model, self.kind, self.mask_id, self.batch_size = model, kind, mask_id, batch_size

    def references(self, encs: list, labels: list | None) -> tuple[Any, np.ndarray]:
        import torch

        batch = self.model.to_device(self.model.pad(encs))
        with torch.inference_mode():
            out = targets.forward(self.model, self.kind, batch)
            lab = None if labels is None else torch.as_tensor(labels)
            ref = targets.references(self.kind, out, batch, lab)
            y = targets.values(self.kind, out, batch, ref)
        return ref, y.double().cpu().numpy()

    def values(self, enc: Any, ref: Any, masks: np.ndarray) -> np.ndarray:
        """Target of ``enc`` with the positions of each row of ``masks`` (bool ``[R, n]``)
        replaced by the mask token: float64 ``[R]``."""
        import torch

        model = self.model
        base = model.pad([enc])
        out_vals = []
        for r0 in range(0, len(masks), self.batch_size):
            m = torch.as_tensor(masks[r0 : r0 + self.batch_size])
            batch = {k: v.expand(len(m), -1).clone() for k, v in base.items()}
            batch["input_ids"][m] = self.mask_id
            batch = model.to_device(batch)
            with torch.inference_mode():
                out = targets.forward(model, self.kind, batch)
                y = targets.values(self.kind, out, batch, ref.expand(len(m), *ref.shape[1:]))
            out_vals.append(y.double().cpu().numpy())
        return np.concatenate(out_vals)


def _default_sources(model: Any, kind: str, enc: Any, n: int) -> list[int]:
    if kind == "projection":
        return list(range(n))
    if model.causal:
        return [n - 1]
    return [0]


def _sources(sources: Any, model: Any, kind: str, enc: Any) -> list[int]:
    n = len(enc)
    if sources is None:
        return _default_sources(model, kind, enc, n)
    if isinstance(sources, str):
        if sources != "all":
            raise InputError(f"sources must be a position, a list of positions or 'all', not {sources!r}.")
        return list(range(n))
    return validate.positions(sources, n, "sources", empty=False).tolist()


def _evaluate(model: Any, runner: _Runner, encs: list, labels: list | None, names: list[str],
              kind: str, sources: Any, residual: float, steps: int, seed: int,
              offset: int) -> Iterator[dict[str, Any]]:
    """Yield, per input of the chunk, its per-measure metric rows and curves."""
    from scipy.stats import spearmanr

    from ..runtime.measures import measure_maps
    from ..runtime.measures.grad_attn import grad_attn_maps
    from ..runtime.gradients import run_gradients

    grads = list(run_gradients(model, encs, kind, labels, len(encs), 0.15, seed, False, input_grads=True))
    maps: list[dict[str, Any]] = [{"weights": g.attention} for g in grads]
    for name in {NEEDS[n] for n in names if n in NEEDS} - {"weights"}:
        if name == "grad×attn":
            for item_maps, g in zip(maps, grads):
                item_maps[name] = replace(g.attention, maps=grad_attn_maps(g.attention.maps, g.grads),
                                  measure="grad×attn")
            continue
        for item_maps, enc, mp in zip(maps, encs, measure_maps(model, encs, measure=name)):
            item_maps[name] = model.to_attention(enc, mp, measure=name)
    ref, y_full = runner.references(encs, labels)
    for k, enc in enumerate(encs):
        item = offset + k
        n = len(enc)
        words = np.flatnonzero(np.asarray(enc.roles) == "word")
        m = len(words)
        src = _sources(sources, model, kind, enc)
        r = ref[k : k + 1]
        # blank-out: the clean input and its m one-token-masked copies, one batch
        masks = np.zeros((m + 1, n), dtype=np.bool_)
        masks[np.arange(1, m + 1), words] = True
        y = runner.values(enc, r, masks)
        blank = y[0] - y[1:]
        ixg = attribution({}, name="input×grad", sources=src, input_embeds=grads[k].input_embeds,
                          input_grads=grads[k].input_grads)[words]
        rng = np.random.default_rng((seed, item))
        scores = {name: attribution(maps[k], name=name, sources=src, residual=residual,
                                    input_embeds=grads[k].input_embeds,
                                    input_grads=grads[k].input_grads, rng=rng)[words]
                  for name in names}
        # deletion and insertion, every measure's curve points in one set of batches
        ks = np.unique(np.round(np.linspace(0, m, steps + 1)).astype(int))
        frac = ks / max(m, 1)
        pert = []
        for name in names:
            order = words[np.argsort(-scores[name], kind="stable")]
            for kk in ks:
                d = np.zeros(n, dtype=np.bool_)
                d[order[:kk]] = True
                ins = np.zeros(n, dtype=np.bool_)
                ins[words] = True
                ins[order[:kk]] = False
                pert.extend([d, ins])
        yc = runner.values(enc, r, np.array(pert)).reshape(len(names), len(ks), 2)
        rows: list[dict[str, Any]] = []
        curves: list[dict[str, Any]] = []
        for a, name in enumerate(names):
            rho = {}
            for key, ref_scores in (("blankout", blank), ("inputxgrad", ixg)):
                for prefix, vals in (("spearman_", ref_scores), ("spearman_abs_", np.abs(ref_scores))):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r_ = spearmanr(scores[name], vals).statistic if m > 1 else np.nan
                    rho[prefix + key] = float(r_)
            dele, ins = yc[a, :, 0], yc[a, :, 1]
            rows.append({"item": item, "measure": name, "n_tokens": m, **rho,
                         "deletion_auc": float(np.trapezoid(dele, frac)) if m else np.nan,
                         "insertion_auc": float(np.trapezoid(ins, frac)) if m else np.nan})
            curves.extend({"measure": name, "curve": c, "fraction": round(float(f), 2), "value": float(v)}
                          for c, vals in (("deletion", dele), ("insertion", ins))
                          for f, v in zip(np.round(frac * steps) / steps, vals))
        yield {"rows": rows, "curves": curves, "full": float(y_full[k]),
               "empty": float(yc[0, -1, 0]) if m else float(y_full[k])}


# --------------------------------------------------------------------- summary
def _summarise(per_item: pd.DataFrame, names: list[str], n_boot: int, seed: int) -> pd.DataFrame:
    """Means with percentile bootstrap CIs (inputs resampled; the same resamples for every
    measure, so differences from "weights" are paired)."""
    items = np.sort(per_item["item"].unique())
    pos = {it: i for i, it in enumerate(items)}
    vals = np.full((len(items), len(names), len(METRICS)), np.nan)
    for row in per_item.itertuples(index=False):
        a = names.index(row.measure)
        vals[pos[row.item], a] = [getattr(row, mt) for mt in METRICS]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(items), size=(n_boot, len(items)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        boot = np.nanmean(vals[idx], axis=1)  # [B, measures, metrics]
        base = names.index("weights") if "weights" in names else None
        if base is not None:
            diff = vals - vals[:, base : base + 1]
            dboot = np.nanmean(diff[idx], axis=1)
    out = []
    for a, name in enumerate(names):
        for j, metric in enumerate(METRICS):
            col = vals[:, a, j]
            row = {"measure": name, "metric": metric, "mean": float(np.nanmean(col)) if np.isfinite(col).any() else np.nan,
                   "ci_low": float(np.nanpercentile(boot[:, a, j], 2.5)) if np.isfinite(boot[:, a, j]).any() else np.nan,
                   "ci_high": float(np.nanpercentile(boot[:, a, j], 97.5)) if np.isfinite(boot[:, a, j]).any() else np.nan,
                   "n": int(np.isfinite(col).sum())}
            if base is not None:
                d = diff[:, a, j]
                fin = np.isfinite(dboot[:, a, j])
                row.update(delta=float(np.nanmean(d)) if np.isfinite(d).any() else np.nan,
                           delta_low=float(np.percentile(dboot[fin, a, j], 2.5)) if fin.any() else np.nan,
                           delta_high=float(np.percentile(dboot[fin, a, j], 97.5)) if fin.any() else np.nan)
            out.append(row)
    return pd.DataFrame(out).set_index(["measure", "metric"])


__all__ = ["ATTRIBUTIONS", "DEFAULT_MEASURES", "METRICS", "faithfulness"]
