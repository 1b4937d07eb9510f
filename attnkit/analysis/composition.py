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

Cost: the products ``(k × d) · (d × k)`` of every target head with every earlier source head,
done as one matrix product per target layer: ``O(L² H² k² d)``; the norms use the ``k × k``
Gram matrices (``‖Aᵀ M B‖_F² = Σ (A Aᵀ M) ⊙ (M B Bᵀ)``), never a ``d × d`` matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._progress import progress as _bar
from ..decompose import head_weights, layer_modules
from ..errors import InputError
from ..results import Result

KINDS = ("q", "k", "v")


class _Heads:
    """One layer's matrices for composition, float32: per query head, ``wq``, ``wk``, ``wv``
    ``[H, k, d]`` (what a target reads with), ``y [d, H·k]`` (``W_O``: what a source writes
    with), the ``k × k`` Gram matrices ``gq = W_Q W_Qᵀ``, ``gk``, ``gv`` and ``go = W_Oᵀ W_O``,
    and ``qk_norm = ‖W_QK‖_F``, ``ov_norm = ‖W_OV‖_F`` ``[H]``.

    ``‖Aᵀ M B‖_F² = Σ (G_A M) ⊙ (M G_B)`` with ``G_A = A Aᵀ``, ``G_B = B Bᵀ``: every norm is
    computed from ``k × k`` matrices.
    """

    def __init__(self, wq: Any, wk: Any, wv: Any, wo: Any) -> None:
        H, k, d = wq.shape
        self.wq, self.wk, self.wv = wq.float(), wk.float(), wv.float()
        self.y = wo.float().permute(1, 0, 2).reshape(d, H * k)  # [d, H k]
        self.gq, self.gk, self.gv = (w @ w.transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        self.go = wo.float().transpose(1, 2) @ wo.float()
        self.qk_norm = (self.gq * self.gk).sum((1, 2)).clamp(min=0).sqrt()
        self.ov_norm = (self.go * self.gv).sum((1, 2)).clamp(min=0).sqrt()
        self.k = k


def _layer_heads(model: Any, layer: int) -> _Heads:
    w = head_weights(model, layer)
    g = w.groups
    wq, wk, wv = w.wq, w.wk.repeat_interleave(g, 0), w.wv.repeat_interleave(g, 0)
    if w.norm is not None:  # fold the pre-attention norm into what reads the stream
        wq, wk, wv = w.norm.matrix(wq), w.norm.matrix(wk), w.norm.matrix(wv)
    return _Heads(wq, wk, wv, w.wo)


def _scores(target: _Heads, y: Any, gv: Any, ov_norm: Any) -> dict[str, Any]:
    """``[H_t, S]`` composition scores of every target head with ``S`` source heads written
    by ``y [d, S·k]`` (Gram matrices ``gv [S, k, k]``, norms ``ov_norm [S]``)."""
    import torch

    H, k, d = target.wq.shape
    S = y.shape[1] // k
    x = torch.cat([target.wq, target.wk, target.wv]).reshape(3 * H * k, d)
    m_all = (x @ y).view(3, H, k, S, k)  # M_ts = X_t W_O^s, one product for the three kinds
    out = {}
    # the Gram on the target's other side: W_K for Q, W_Q for K, W_O for V
    for i, (kind, left) in enumerate((("q", target.gk), ("k", target.gq), ("v", target.go))):
        m = m_all[i]
        a = torch.einsum("hab,hbsc->hasc", left, m)
        b = torch.einsum("hasb,sbc->hasc", m, gv)
        num = (a * b).sum((1, 3)).clamp(min=0).sqrt()
        den = (target.ov_norm if kind == "v" else target.qk_norm)[:, None] * ov_norm[None]
        out[kind] = (num / den).numpy()
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
    vals = {kind: v.ravel() for kind, v in _scores(tgt, src.y, src.gv, src.ov_norm).items()}
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
        ``{"q": {"mean", "p50", "p95", "p99", "n"}, ...}``; ``.plot()`` bars of the table.

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
    import torch

    L, H = model.n_layers, model.n_heads
    layer_modules(model)  # refuses unknown architectures
    if L < 2:
        raise InputError(f"{model.name} has one layer: composition needs two.")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise InputError(f"samples must be a positive int; got {samples!r}.")
    with torch.no_grad():
        heads = [_layer_heads(model, m) for m in range(L)]
        k, d = heads[0].wq.shape[1], heads[0].wq.shape[2]
        y = torch.cat([h.y for h in heads[:-1]], 1)  # [d, (L-1) H k]: every source's W_O
        gv = torch.cat([h.gv for h in heads[:-1]])
        ov_norm = torch.cat([h.ov_norm for h in heads[:-1]])
        cols: dict[str, list[Any]] = {c: [] for c in ("sl", "sh", "tl", "th", "q", "k", "v")}
        for t in _bar(range(1, L), total=L - 1, desc="composition", show=progress):
            S = t * H
            sc = _scores(heads[t], y[:, : S * k], gv[:S], ov_norm[:S])
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
    post = getattr(model, "config", None) is not None and model.model_type in (
        "bert", "roberta", "xlm-roberta", "distilbert")
    meta = {"model": model.name, "n_layers": L, "n_heads": H, "baseline": baseline,
            "samples": int(samples), "seed": seed,
            "norms": ("post-norm layer norms between layers not folded" if post else
                      "pre-attention norm scale (and centring) folded into W_Q, W_K, W_V"),
            "reference": "Elhage et al. 2021, A Mathematical Framework for Transformer Circuits"}
    return Result(table, meta)
