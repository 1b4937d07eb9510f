"""Running one batch on the model, any measure, packed as the store holds it.

The second of the three steps of extraction (:mod:`attnkit.storage.batches`); the same function
runs in this process and on a Dask worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ...core.attention import Attention, pool_maps
from ...core.cross import Seq2SeqAttention
from ...runtime.encoding import Encoding, PairEncoding
from ...errors import CaptureError
from ...core.qkstates import QKRecorder
from ..store import PAIR_ARRAYS
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
        Per-item summaries (:data:`attnkit.storage.summaries.SUMMARIES`) to compute.
    measure : str
        What the maps hold (:mod:`attnkit.runtime.measures`).
    qk_layers : tuple of int
        Layers whose post-rotary queries and keys are kept (``qk/queries``, ``qk/keys``).
    pair_parts : tuple of str
        Batches of (source, target) pairs: the self-attention kept beside the
        cross-attention (``"encoder"``, ``"decoder"``; :data:`attnkit.storage.store.PAIR_ARRAYS`).

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
    pair_parts: tuple[str, ...] = ()


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
    if encs and isinstance(encs[0], PairEncoding):
        return run_pairs(model, encs, spec)  # type: ignore[arg-type]
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


def run_pairs(model: Any, encs: Sequence[PairEncoding], spec: BatchSpec) -> dict[str, np.ndarray]:
    """Run a batch of (source, target) pairs, one forward each
    (:meth:`Seq2SeqModel.attend_encoded <attnkit.runtime.seq2seq.Seq2SeqModel.attend_encoded>`), and
    pack it as a store of pairs holds it: the cross-attention ``maps`` (``[L, H, target,
    source]`` per item), ``encoder/maps`` and ``decoder/maps`` when ``spec.pair_parts`` asks,
    ``summaries/<name>`` rows (computed on the float16-rounded cross-attention), all at
    ``spec.level`` (words pooled on both sides).

    Parameters
    ----------
    model : Seq2SeqModel
        The encoder–decoder.
    encs : sequence of PairEncoding
        The batch's pairs.
    spec : BatchSpec
        Level, maps or summaries kept, the self-attention kept.

    Returns
    -------
    dict
        Flat float16 arrays and summary rows.

    Examples
    --------
    >>> from attnkit.testing import tiny_seq2seq
    >>> m = tiny_seq2seq("t5")
    >>> out = run_pairs(m, [m.encode_pair(("The cat sat.", "A cat."))],
    ...                 BatchSpec(level="token", pair_parts=("encoder",)))
    >>> sorted(out), out["maps"].size == 2 * 2 * 5 * 5, out["encoder/maps"].size == 2 * 2 * 5 * 5
    (['encoder/maps', 'maps'], True, True)
    """
    parts: dict[str, list[np.ndarray]] = {"maps": [], **{PAIR_ARRAYS[k]: [] for k in spec.pair_parts}}
    rows: dict[str, list[np.ndarray]] = {k: [] for k in spec.summaries}
    for enc in encs:
        s2s = model.attend_encoded(enc.source, enc.target)
        if spec.level == "word":
            s2s = Seq2SeqAttention(
                s2s.encoder.to_words() if "encoder" in spec.pair_parts else s2s.encoder,
                s2s.decoder.to_words() if "decoder" in spec.pair_parts else s2s.decoder,
                s2s.cross.to_words(), model=s2s.model)
        h = half(s2s.cross.maps)
        parts["maps"].append(h.ravel())
        for k in spec.pair_parts:
            parts[PAIR_ARRAYS[k]].append(half(getattr(s2s, k).maps).ravel())
        if rows:
            cross = replace(s2s.cross, maps=h.astype(np.float32))
            for name in rows:
                rows[name].append(np.asarray(SUMMARIES[name].compute(cross)))
    out = {k: np.concatenate(v) for k, v in parts.items() if spec.keep_maps or k != "maps"}
    out.update({f"summaries/{k}": np.stack(v) for k, v in rows.items()})
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
