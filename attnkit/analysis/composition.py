"""Q-, K- and V-composition between heads, from the weights alone (Elhage et al. 2021).

A head ``s`` of an earlier layer writes ``W_OV^s x = W_O^s W_V^s x`` into the residual stream;
a head ``t`` of a later layer reads it through its query (``s(i, j) = x_iᵀ W_QK^t x_j`` with
``W_QK^t = W_Q^tᵀ W_K^t``), its key, or its value. How much ``t`` can read what ``s`` writes
is measured by

    Q-composition  ‖W_QK^tᵀ W_OV^s‖_F / (‖W_QK^t‖_F ‖W_OV^s‖_F)
    K-composition  ‖W_QK^t  W_OV^s‖_F / (‖W_QK^t‖_F ‖W_OV^s‖_F)
    V-composition  ‖W_OV^t  W_OV^s‖_F / (‖W_OV^t‖_F ‖W_OV^s‖_F)

(Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"). Where a norm comes
before the attention (pre-norm models), its scale (and a layer norm's centring) is folded into
the matrices that read the stream; its ``1/σ`` is a per-token number and does not change the
ratios. Post-norm encoders' layer norms between the layers are not folded (``meta`` says so).

The baseline is the same scores for random Gaussian matrices of the same shapes
(``meta["baseline"]``: mean and 50th, 95th, 99th percentiles, ``samples`` heads a side).

Cost: one matrix product per target layer, every target head's three reading matrices
against every earlier source head's ``W_O``: ``O(L² H² k² d)``. Each norm is read off that
product without any ``d × d`` matrix and without a second product: with ``G = Cᵀ C`` a
factor of each ``k × k`` Gram matrix (``C = Λ^½ Eᵀ`` from ``G = E Λ Eᵀ``),
``‖Aᵀ M B‖_F = ‖C_A M C_Bᵀ‖_F``, so the reading matrices are multiplied by ``C_A`` and the
writing matrices by ``C_Bᵀ`` once per head, and each score is the root of a sum of squares of
one ``k × k`` block of the product (float32: relative rounding near ``d · 2^-24`` per term).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress as _bar
from ..runtime.archs import arch_of
from ..runtime.weights import head_weights, layer_modules
from ..core import validate
from ..errors import InputError
from ..core.results import Result

KINDS = ("q", "k", "v")


def _factor(g: Any) -> Any:
    """``C [..., k, k]`` with ``Cᵀ C = g`` for symmetric positive semi-definite Gram matrices
    ``g [..., k, k]`` (float64 eigendecomposition, negative rounding clamped to 0)."""
    import torch

    lam, vec = torch.linalg.eigh(g.double())
    return (lam.clamp(min=0).sqrt()[..., :, None] * vec.transpose(-1, -2)).float()


class _Heads:
    """One layer's matrices for composition, float32, per query head: ``read [3, H, k, d]``
    (what a target reads with, ``W_Q``, ``W_K``, ``W_V``, each multiplied on the left by the
    factor of the Gram matrix on its other side: ``W_K W_Kᵀ`` for Q, ``W_Q W_Qᵀ`` for K,
    ``W_Oᵀ W_O`` for V), ``y [d, H·k]`` (``W_O^h C_V^hᵀ``: what a source writes, times the
    factor of ``W_V W_Vᵀ``), and ``qk_norm = ‖W_QK‖_F``, ``ov_norm = ‖W_OV‖_F`` ``[H]``."""

    def __init__(self, wq: Any, wk: Any, wv: Any, wo: Any) -> None:
        H, k, d = wq.shape
        wq, wk, wv, wo = wq.float(), wk.float(), wv.float(), wo.float()
        gq, gk, gv = (w @ w.transpose(1, 2) for w in (wq, wk, wv))
        go = wo.transpose(1, 2) @ wo
        cq, ck, cv, co = (_factor(g) for g in (gq, gk, gv, go))
        import torch

        self.read = torch.stack([ck @ wq, cq @ wk, co @ wv])  # [3, H, k, d]
        self.y = (wo @ cv.transpose(1, 2)).permute(1, 0, 2).reshape(d, H * k)  # [d, H k]
        self.qk_norm = (gq * gk).sum((1, 2)).clamp(min=0).sqrt()
        self.ov_norm = (go * gv).sum((1, 2)).clamp(min=0).sqrt()
        self.k = k


def _layer_heads(model: Any, layer: int) -> _Heads:
    w = head_weights(model, layer)
    g = w.groups
    wq, wk, wv = w.wq, w.wk.repeat_interleave(g, 0), w.wv.repeat_interleave(g, 0)
    if w.norm is not None:  # fold the pre-attention norm into what reads the stream
        wq, wk, wv = w.norm.matrix(wq), w.norm.matrix(wk), w.norm.matrix(wv)
    return _Heads(wq, wk, wv, w.wo)


def _scores(target: _Heads, y: Any, ov_norm: Any) -> dict[str, Any]:
    """``[H_t, S]`` composition scores of every target head with ``S`` source heads written
    by ``y [d, S·k]`` (factored, :class:`_Heads`) with norms ``ov_norm [S]``."""
    _, H, k, d = target.read.shape
    S = y.shape[1] // k
    prod = (target.read.reshape(3 * H * k, d) @ y).view(3, H, k, S, k)  # C_A X_t W_O^s C_Bᵀ
    import torch

    num = torch.linalg.vector_norm(prod, dim=(2, 4))  # [3, H, S]
    out = {}
    for i, kind in enumerate(KINDS):
        den = (target.ov_norm if kind == "v" else target.qk_norm)[:, None] * ov_norm[None]
        out[kind] = (num[i] / den).numpy()
    return out


def _baseline(k: int, d: int, samples: int, seed: int) -> dict[str, dict[str, float]]:
    import torch

    gen = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    src = _Heads(rand(samples, k, d), rand(samples, k, d), rand(samples, k, d),
                 rand(samples, d, k))
    tgt = _Heads(rand(samples, k, d), rand(samples, k, d), rand(samples, k, d),
                 rand(samples, d, k))
    vals = {kind: v.ravel() for kind, v in _scores(tgt, src.y, src.ov_norm).items()}
    out = {}
    for kind in KINDS:
        v = vals[kind]
        out[kind] = {"mean": float(v.mean()), "p50": float(np.percentile(v, 50)),
                     "p95": float(np.percentile(v, 95)), "p99": float(np.percentile(v, 99)),
                     "n": int(v.size)}
    return out


def composition(model: Any, *, samples: int = 64, seed: int = 0,
                progress: bool = True) -> Result:
    """Q-, K- and V-composition scores between every pair of heads (source in an earlier
    layer than target), from the weights alone (Elhage et al. 2021), with a random baseline.

    See :mod:`attnkit.analysis.composition` for the definitions and how norms are folded.

    Parameters
    ----------
    model : Model
        The model (:func:`attnkit.load`).
    samples : int
        Random heads on each side of the baseline (``samples²`` random pairs).
    seed : int
        Seed of the baseline's random matrices.
    progress : bool
        Show a progress bar over target layers.

    Returns
    -------
    Result
        ``.table`` indexed by ``(source_layer, source_head, target_layer, target_head)``
        (0-indexed), columns ``q``, ``k``, ``v``; ``.meta["baseline"]`` the random matrices'
        ``{"q": {"mean", "p50", "p95", "p99", "n"}, ...}``; ``.plot()`` bars of the table;
        ``.widget(kind="k")`` a source head × target head :class:`~attnkit.HeadMap` of one
        kind.

    Raises
    ------
    InputError
        For a one-layer model (no pair of layers) or ``samples`` below 1.
    UnsupportedModelError
        For an architecture attnkit cannot read the weights of.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> comp = ak.composition(tiny_model("llama", layers=3), samples=16, progress=False)
    >>> comp.table.index.names
    FrozenList(['source_layer', 'source_head', 'target_layer', 'target_head'])
    >>> list(comp.table.columns), len(comp.table)  # 2 heads a layer: 4 + 4 + 4 pairs
    (['q', 'k', 'v'], 12)
    """
    validate.model(model)
    seed = validate.seed(seed)
    samples = validate.size(samples, "samples")
    import torch

    L, H = model.n_layers, model.n_heads
    layer_modules(model)  # refuses unknown architectures
    if L < 2:
        raise InputError(f"{model.name} has one layer: composition needs two.")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise InputError(f"samples must be a positive int; got {samples!r}.")
    with torch.no_grad():
        heads = [_layer_heads(model, m) for m in range(L)]
        k, d = heads[0].read.shape[2], heads[0].read.shape[3]
        y = torch.cat([h.y for h in heads[:-1]], 1)  # [d, (L-1) H k]: every source's W_O
        ov_norm = torch.cat([h.ov_norm for h in heads[:-1]])
        cols: dict[str, list[Any]] = {c: [] for c in ("sl", "sh", "tl", "th", "q", "k", "v")}
        for t in _bar(range(1, L), total=L - 1, desc="composition", show=progress):
            S = t * H
            sc = _scores(heads[t], y[:, : S * k], ov_norm[:S])
            sl, sh = np.divmod(np.arange(S), H)
            cols["sl"].append(np.tile(sl, H))
            cols["sh"].append(np.tile(sh, H))
            cols["tl"].append(np.full(S * H, t))
            cols["th"].append(np.repeat(np.arange(H), S))
            for kind in KINDS:
                cols[kind].append(sc[kind].ravel())
        baseline = _baseline(k, d, samples, seed)
    c = {key: np.concatenate(v) for key, v in cols.items()}
    index = pd.MultiIndex.from_arrays(
        [c["sl"], c["sh"], c["tl"], c["th"]],
        names=["source_layer", "source_head", "target_layer", "target_head"])
    table = pd.DataFrame({kind: c[kind].astype(np.float64) for kind in KINDS},
                         index=index).sort_index()
    layout = arch_of(model).layout
    post = layout is not None and layout.placement == "post"
    meta = {"model": model.name, "n_layers": L, "n_heads": H, "baseline": baseline,
            "samples": int(samples), "seed": seed,
            "norms": ("post-norm layer norms between layers not folded" if post else
                      "pre-attention norm scale (and centring) folded into W_Q, W_K, W_V"),
            "reference": "Elhage et al. 2021, A Mathematical Framework for Transformer Circuits"}
    return Result(table, meta, widget="composition")
