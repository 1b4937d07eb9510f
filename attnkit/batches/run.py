"""Running one batch on the model, any measure, packed as the store holds it.

The second of the three steps of extraction (:mod:`attnkit.batches`); the same function
runs in this process and on a Dask worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..attention import Attention, pool_maps
from ..encoding import Encoding
from ..errors import CaptureError
from ..qkstates import QKRecorder
from ..summaries import SUMMARIES
from .plan import level_positions


@dataclass(frozen=True)
class BatchSpec:
    """What one batch computes and keeps.

    Parameters
    ----------
    level : {"word", "token"}
        Pool word-pieces to words (Clark et al.) or keep tokens.
    embeddings : bool
        Also keep the input embeddings per position.
    keep_maps : bool
        Keep the maps (else only the summaries).
    summaries : tuple of str
        Per-item summaries (:data:`attnkit.summaries.SUMMARIES`) to compute.
    measure : str
        What the maps hold (:mod:`attnkit.measures`).
    qk_layers : tuple of int
        Layers whose post-rotary queries and keys are kept (``qk/queries``, ``qk/keys``).

    Examples
    --------
    >>> BatchSpec(level="token").keep_maps
    True
    """

    level: str = "word"
    embeddings: bool = False
    keep_maps: bool = True
    summaries: tuple[str, ...] = ()
    measure: str = "weights"
    qk_layers: tuple[int, ...] = ()


def half(a: np.ndarray) -> np.ndarray:
    """float16 copy of an array; torch converts with F16C, numpy's astype is ~10x slower."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.float16).numpy()


def run_batch(model: Any, encs: Sequence[Encoding], spec: BatchSpec) -> dict[str, np.ndarray]:
    """Run one batch and pack it as the store holds it: flat float16 ``maps`` and
    ``embeddings`` (items one after another, at ``level``) and ``summaries/<name>`` rows.

    Summaries are computed from the float16-rounded maps, so they equal what an analysis
    computes from a store that keeps the maps.

    Parameters
    ----------
    model : Model
        Runs the forward pass (:meth:`attnkit.Model.run`, any measure).
    encs : sequence of Encoding
        The batch's inputs.
    spec : BatchSpec
        Level, embeddings, maps or summaries kept, measure.

    Returns
    -------
    dict
        ``maps`` (and ``embeddings``) as flat float16 arrays, ``summaries/<name>`` rows.

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> m = tiny_model("bert")
    >>> out = run_batch(m, [m.encode("The cat sat."), m.encode("We read.")],
    ...                 BatchSpec(level="token", summaries=("stats",)))
    >>> out["maps"].dtype, out["maps"].size == 2 * 2 * (6 * 6 + 5 * 5), out["summaries/stats"].shape
    (dtype('float16'), True, (2, 2, 2, 8))
    """
    level, embeddings, measure = spec.level, spec.embeddings, spec.measure
    summarize = {k: SUMMARIES[k].compute for k in spec.summaries}
    qk = QKRecorder([len(e) for e in encs], spec.qk_layers) if spec.qk_layers else None
    maps, embs = model.run(encs, embeddings=embeddings, measure=measure,
                           recorders=[qk] if qk is not None else ())
    parts, eparts = [], []
    rows: dict[str, list[np.ndarray]] = {k: [] for k in (summarize or {})}
    for k, (enc, m) in enumerate(zip(encs, maps)):
        tokens, roles, word_ids, segments, pool = level_positions(enc, level)
        e = embs[k] if embs is not None else None
        if pool is not None:
            m = pool_maps(m, pool)
            if e is not None:
                e = pool.mean_from @ e
        h = half(m)
        parts.append(h.ravel())
        if e is not None:
            eparts.append(half(e).ravel())
        if summarize:
            att = Attention(maps=h.astype(np.float32), tokens=tokens, roles=roles, word_ids=word_ids,
                            words=enc.words, level=level, segments=segments, meta=dict(enc.meta),
                            truncated=enc.truncated, model=model.name, causal=model.causal,
                            input_ids=np.asarray(enc.input_ids) if level == "token" else None,
                            measure=measure)
            for name, fn in summarize.items():
                rows[name].append(np.asarray(fn(att)))
    out: dict[str, np.ndarray] = {}
    if spec.keep_maps:
        out["maps"] = np.concatenate(parts)
        if eparts:
            out["embeddings"] = np.concatenate(eparts)
    for name, r in rows.items():
        out[f"summaries/{name}"] = np.stack(r)
    if qk is not None:
        out.update(pack_qk(qk, spec.qk_layers))
    return out


def pack_qk(rec: QKRecorder, layers: Sequence[int]) -> dict[str, np.ndarray]:
    """The batch's queries and keys as the store holds them: per item ``[layers, heads, n, d]``
    float16, items one after another (``qk/queries``, ``qk/keys``)."""
    missing = [l for l in layers if l not in rec.queries]
    if missing:
        raise CaptureError(
            f"The model did not hand layers {missing} to attnkit's attention function, so their "
            "queries and keys could not be kept; keep='qk' needs a model whose attention goes "
            "through transformers' attention interface."
        )
    out = {}
    for name, got in (("qk/queries", rec.queries), ("qk/keys", rec.keys)):
        parts = [half(np.stack([got[l][i] for l in layers])).ravel() for i in range(len(rec.lengths))]
        out[name] = np.concatenate(parts)
    return out
