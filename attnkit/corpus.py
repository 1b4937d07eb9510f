"""Attention over many inputs: batched extraction into a resumable float16 store.

``extract(model, inputs, store=path)`` writes one batch at a time to ``path`` and returns an
:class:`AttentionSet`; running it again with the same inputs resumes where an interrupted
run stopped. Without ``store`` the set stays in memory (float16).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from .attention import Attention, pool_maps, word_pooling
from .errors import InputError, StoreError, TruncationWarning

STORE_VERSION = 1
_MANIFEST = "manifest.json"


@dataclass
class _Record:
    """Metadata of one stored item; maps live in a batch file (or in memory)."""

    item: int
    batch: int
    offset: int  # element offset of the item's maps inside its batch array
    n: int
    tokens: list[str]
    roles: list[str]
    word_ids: list[int]
    segments: list[int]
    words: list[str]
    meta: dict[str, Any]
    truncated: bool
    emb_offset: int = -1  # element offset of the item's embeddings in the batch's emb array

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class AttentionSet(Sequence[Attention]):
    """Attention of one model over many inputs, item by item in input order.

    Iterating yields :class:`Attention` objects (float32 maps ``[L, H, n, n]``, at the
    set's ``level``); the maps are kept as float16 on disk (``path``) or in memory.
    """

    def __init__(
        self,
        records: list[_Record],
        info: dict[str, Any],
        path: Path | None = None,
        maps: dict[int, np.ndarray] | None = None,
        embs: dict[int, np.ndarray] | None = None,
    ):
        self._records = sorted(records, key=lambda r: r.item)
        self.info = info
        self.path = path
        self._mem_maps = maps
        self._mem_embs = embs
        self._cache: dict[tuple[int, str], np.ndarray] = {}
        #: How the set was made: batches computed now and reused from the store.
        self.run_info: dict[str, int] = {}

    # ---------------------------------------------------------------- basics
    @property
    def model(self) -> str:
        return self.info["model"]

    @property
    def level(self) -> str:
        return self.info["level"]

    @property
    def n_layers(self) -> int:
        return self.info["n_layers"]

    @property
    def n_heads(self) -> int:
        return self.info["n_heads"]

    @property
    def causal(self) -> bool:
        return bool(self.info.get("causal", False))

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        where = f" at {self.path}" if self.path else " in memory"
        return (
            f"AttentionSet({len(self)} items, {self.model}, {self.level} level, "
            f"{self.n_layers}x{self.n_heads} heads{where})"
        )

    @property
    def truncated(self) -> np.ndarray:
        """Bool ``[len(self)]``: items cut to the model's maximum length."""
        return np.array([r.truncated for r in self._records], dtype=bool)

    def items(self) -> pd.DataFrame:
        """One row per item: length ``n``, word count, truncation flag and metadata.

        Returns
        -------
        DataFrame
            Indexed by ``item`` (input order), columns ``n``, ``n_words``, ``truncated``
            and the items' metadata (e.g. ``sent_id``).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> aset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read it."], progress=False)
        >>> aset.items()[["n", "n_words", "truncated"]].values.tolist()
        [[6, 4, False], [6, 4, False]]
        """
        rows = [
            {"n": r.n, "n_words": len(r.words), "truncated": r.truncated, **r.meta}
            for r in self._records
        ]
        return pd.DataFrame(rows, index=pd.RangeIndex(len(rows), name="item"))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"item {i} out of range for {len(self)} items")
        r = self._records[i]
        shape = (self.n_layers, self.n_heads, r.n, r.n)
        maps = self._array(r, "maps")[r.offset : r.offset + int(np.prod(shape))].reshape(shape)
        emb = None
        if self.info.get("embeddings"):
            d = self.info["embedding_dim"]
            flat = self._array(r, "embs")[r.emb_offset : r.emb_offset + r.n * d]
            emb = np.asarray(flat, dtype=np.float32).reshape(r.n, d)
        return Attention(
            maps=maps.astype(np.float32),
            tokens=r.tokens,
            roles=np.array(r.roles),
            word_ids=np.array(r.word_ids),
            words=r.words,
            level=self.level,
            segments=np.array(r.segments),
            embeddings=emb,
            meta=dict(r.meta),
            truncated=r.truncated,
            model=self.model,
            causal=self.causal,
        )

    def __iter__(self) -> Iterator[Attention]:
        for i in range(len(self)):
            yield self[i]

    # --------------------------------------------------------------- storage
    def _array(self, r: _Record, kind: str) -> np.ndarray:
        if self._mem_maps is not None:
            mem = self._mem_maps if kind == "maps" else self._mem_embs
            if mem is None:
                raise StoreError("This in-memory attention set holds no embeddings; extract "
                                 "with embeddings=True.")
            return mem[r.batch]
        key = (r.batch, kind)
        if key not in self._cache:
            if len(self._cache) > 8:
                self._cache.clear()
            suffix = "npy" if kind == "maps" else "emb.npy"
            assert self.path is not None  # a set without in-memory maps lives on disk
            self._cache[key] = np.load(self.path / "batches" / f"{r.batch:06d}.{suffix}", mmap_mode="r")
        return self._cache[key]

    @classmethod
    def open(cls, path: str | Path) -> "AttentionSet":
        """Open a finished store written by :func:`extract`.

        Parameters
        ----------
        path : str or Path
            The store folder given to ``extract(..., store=path)``.

        Returns
        -------
        AttentionSet
            Reading maps from disk (memory-mapped) as items are asked for.

        Raises
        ------
        StoreError
            When the folder is not an attnkit store, or is incomplete.

        Examples
        --------
        >>> import tempfile, attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     aset = ak.extract(tiny_model("bert"), ["The cat sat."], store=folder, progress=False)
        ...     again = ak.AttentionSet.open(folder)
        ...     len(again), bool((again[0].maps == aset[0].maps).all())
        (1, True)
        """
        path = Path(path)
        manifest = _read_manifest(path)
        if manifest is None:
            raise StoreError(f"{path} is not an attnkit store (no {_MANIFEST}).")
        records = _read_records(path)
        done = {r.batch for r in records}
        if len(done) < manifest["n_batches"]:
            raise StoreError(
                f"The store {path} is incomplete ({len(done)} of {manifest['n_batches']} "
                "batches). Run attnkit.extract again with the same model, inputs and store "
                "to finish it."
            )
        return cls(records, manifest, path=path)


# ----------------------------------------------------------------- helpers
def _read_manifest(path: Path) -> dict[str, Any] | None:
    f = path / _MANIFEST
    if not f.exists():
        return None
    try:
        return json.loads(f.read_text())
    except json.JSONDecodeError as exc:
        raise StoreError(f"{f} is corrupt ({exc}); delete the store folder and extract again.") from exc


def _read_records(path: Path) -> list[_Record]:
    records: list[_Record] = []
    for f in sorted((path / "batches").glob("*.json")):
        records.extend(_Record(**d) for d in json.loads(f.read_text()))
    return records


def _atomic_write(path: Path, write) -> None:
    # A per-process name keeps two runs filling the same store from clobbering each other.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fingerprint(model: Any, encodings: list, level: str, batch_size: int, embeddings: bool) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([model.name, model.n_layers, model.n_heads, level, batch_size,
                         embeddings, STORE_VERSION]).encode())
    for e in encodings:
        h.update(json.dumps([e.input_ids, e.words, e.meta], default=str).encode())
    return h.hexdigest()


def _plan(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Batches of item indices: items sorted by length (stable), cut every batch_size."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


def _progress(total: int, initial: int, desc: str, show: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="item", disable=not show,
                dynamic_ncols=True)


# ----------------------------------------------------------------- extract
def extract(
    model: Any,
    inputs: Iterable[Any],
    *,
    batch_size: int = 32,
    level: str = "word",
    store: str | Path | None = None,
    embeddings: bool = False,
    progress: bool = True,
) -> AttentionSet:
    """Attention of ``model`` on every input, batched, pooled to words on request.

    Items longer than the model's maximum are truncated, flagged (``AttentionSet.truncated``)
    and counted in one :class:`~attnkit.errors.TruncationWarning`.

    Parameters
    ----------
    model : Model
        An :class:`attnkit.Model`.
    inputs : iterable
        Texts, ``(text_a, text_b)`` pairs, word lists or treebank sentences (anything
        :meth:`Model.encode <attnkit.Model.encode>` takes); a sentence's ``id`` is kept as
        ``sent_id``.
    batch_size : int
        Inputs per forward pass (inputs of similar length are batched together).
    level : {"word", "token"}
        Pool word-pieces into words (Clark et al.) or keep tokens.
    store : str or Path, optional
        Folder for the float16 store. Batches are written as they finish; calling again
        with the same model, inputs and options skips finished batches. None keeps
        everything in memory.
    embeddings : bool
        Also keep the model's input embeddings per position (for probes).
    progress : bool
        Show a progress bar over items.

    Returns
    -------
    AttentionSet
        One :class:`~attnkit.Attention` per input, in input order.

    Raises
    ------
    InputError
        For an unknown ``level``, ``batch_size < 1`` or no inputs.
    StoreError
        When ``store`` holds attention of other inputs or options.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> aset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read it."], progress=False)
    >>> len(aset), aset.level, aset[0].tokens
    (2, 'word', ['[CLS]', 'The', 'cat', 'sat', '.', '[SEP]'])
    """
    if level not in ("word", "token"):
        raise InputError(f"level must be 'word' or 'token', not {level!r}.")
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, not {batch_size}.")
    items = list(inputs)
    if not items:
        raise InputError("extract() got no inputs.")
    encodings = [model.encode(x) for x in items]
    plan = _plan([len(e) for e in encodings], batch_size)
    info = {
        "version": STORE_VERSION,
        "model": model.name,
        "level": level,
        "n_layers": model.n_layers,
        "n_heads": model.n_heads,
        "causal": model.causal,
        "batch_size": batch_size,
        "n_items": len(items),
        "n_batches": len(plan),
        "embeddings": embeddings,
        "embedding_dim": int(model.hf.get_input_embeddings().embedding_dim) if embeddings else 0,
        "fingerprint": _fingerprint(model, encodings, level, batch_size, embeddings),
    }
    path = Path(store) if store is not None else None
    done: set[int] = set()
    records: list[_Record] = []
    if path is not None:
        (path / "batches").mkdir(parents=True, exist_ok=True)
        old = _read_manifest(path)
        if old is not None and old.get("fingerprint") != info["fingerprint"]:
            raise StoreError(
                f"The store {path} holds attention of other inputs or options (model "
                f"{old.get('model')!r}, {old.get('n_items')} items, level {old.get('level')!r}). "
                "Use a new store folder, or delete this one to start over."
            )
        if old is None:
            _atomic_write(path / _MANIFEST, lambda fh: fh.write(json.dumps(info, indent=1).encode()))
        for f in (path / "batches").glob("*.tmp"):
            if time.time() - f.stat().st_mtime > 600:  # left by an interrupted run
                f.unlink(missing_ok=True)
        records = _read_records(path)
        done = {r.batch for r in records}
    mem_maps: dict[int, np.ndarray] | None = {} if path is None else None
    mem_embs: dict[int, np.ndarray] | None = {} if path is None and embeddings else None

    n_done = sum(len(plan[b]) for b in done)
    bar = _progress(len(items), n_done, f"attention ({model.name})", progress)
    writer = ThreadPoolExecutor(max_workers=1) if path is not None else None
    pending: Future | None = None
    computed = 0
    try:
        for b, batch in enumerate(plan):
            if b in done:
                continue
            encs = [encodings[i] for i in batch]
            maps, embs = model.run(encs, embeddings=embeddings)
            recs, flat_maps, flat_embs = _pack(b, batch, encs, maps, embs, level)
            if path is None:
                assert mem_maps is not None  # in memory: set up above
                mem_maps[b] = flat_maps
                if mem_embs is not None:
                    mem_embs[b] = flat_embs
            else:
                assert writer is not None  # on disk: set up above
                if pending is not None:
                    pending.result()
                pending = writer.submit(_write_batch, path, b, recs, flat_maps, flat_embs)
            records.extend(recs)
            computed += 1
            bar.update(len(batch))
        if pending is not None:
            pending.result()
    finally:
        bar.close()
        if writer is not None:
            writer.shutdown(wait=True)
    n_trunc = sum(e.truncated for e in encodings)
    if n_trunc:
        warnings.warn(
            f"{n_trunc} of {len(items)} inputs were longer than {model.name}'s maximum of "
            f"{model.max_length} tokens and were truncated (see AttentionSet.truncated).",
            TruncationWarning,
            stacklevel=2,
        )
    out = AttentionSet(records, info, path=path, maps=mem_maps, embs=mem_embs)
    out.run_info = {"computed_batches": computed, "reused_batches": len(done)}
    return out


def _half(a: np.ndarray) -> np.ndarray:
    """float16 copy of an array; torch converts with F16C, numpy's astype is ~10x slower."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.float16).numpy()


def _pack(b: int, batch: list[int], encs: list, maps: list[np.ndarray],
          embs: list[np.ndarray] | None, level: str):
    """Pool (if asked) and flatten one batch into float16 arrays plus records."""
    recs, parts, eparts, offset, eoffset = [], [], [], 0, 0
    for k, (item, enc, m) in enumerate(zip(batch, encs, maps)):
        roles = np.array(enc.roles)
        word_ids = np.array(enc.word_ids)
        tokens, segments = list(enc.tokens), list(enc.segments)
        e = embs[k] if embs is not None else None
        if level == "word":
            pool = word_pooling(word_ids, roles)
            m = pool_maps(m, pool)
            keep = pool.first
            tokens = [enc.words[word_ids[p]] if roles[p] == "word" else enc.tokens[p] for p in keep]
            roles, word_ids = roles[keep], word_ids[keep]
            segments = [segments[p] for p in keep]
            if e is not None:
                e = pool.mean_from @ e
        n = m.shape[-1]
        parts.append(_half(m).ravel())
        recs.append(_Record(item, b, offset, n, tokens, roles.tolist(), word_ids.tolist(),
                            segments, enc.words, enc.meta, enc.truncated,
                            eoffset if e is not None else -1))
        offset += m.size
        if e is not None:
            eparts.append(_half(e).ravel())
            eoffset += e.size
    flat_embs = np.concatenate(eparts) if eparts else None
    return recs, np.concatenate(parts), flat_embs


def _write_batch(path: Path, b: int, recs: list[_Record], maps: np.ndarray,
                 embs: np.ndarray | None) -> None:
    bdir = path / "batches"
    _atomic_write(bdir / f"{b:06d}.npy", lambda fh: np.save(fh, maps))
    if embs is not None:
        _atomic_write(bdir / f"{b:06d}.emb.npy", lambda fh: np.save(fh, embs))
    # The json index is written last: it marks the batch as finished.
    _atomic_write(bdir / f"{b:06d}.json",
                  lambda fh: fh.write(json.dumps([r.to_json() for r in recs]).encode()))
