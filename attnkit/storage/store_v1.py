"""Stores of format 1 (a folder of ``.npy`` batches and JSON records): read-only access and
migration to format 2 (:mod:`attnkit.storage.store`).

Format 1 carries no checksums: a batch file that cannot be read is reported by batch and
items, but flipped bytes inside a file cannot be detected. ``attnkit store migrate PATH``
converts a finished store, checks every value of the copy against the original, and only
then swaps the folders (the original is kept as ``PATH.v1`` unless asked otherwise).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from . import store as st
from .batches import BatchSpec, build_index, plan_batches, slice_index, v1_fingerprint, write_batches
from ..errors import StoreError

_MANIFEST = "manifest.json"


def is_v1(path: Path) -> bool:
    """True when ``path`` is a format-1 store (a manifest.json, no Zarr group)."""
    return (path / _MANIFEST).is_file() and not (path / "zarr.json").exists()


class V1Backend:
    """A finished format-1 store, read-only, laid out like a format-2 store."""

    def __init__(self, path: Path):
        self.path = path
        self.loc = st.Location.of(path)
        try:
            manifest = json.loads((path / _MANIFEST).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(f"{path / _MANIFEST} is unreadable ({exc}); extract again into a new store.") from exc
        records: list[dict] = []
        for f in sorted((path / "batches").glob("*.json")):
            try:
                records.extend(json.loads(f.read_text()))
            except (OSError, json.JSONDecodeError) as exc:
                raise StoreError(f"{f} is unreadable ({exc}); its batch must be extracted again.") from exc
        done = {r["batch"] for r in records}
        if len(done) < manifest["n_batches"]:
            raise StoreError(
                f"The store {path} is incomplete ({len(done)} of {manifest['n_batches']} batches). "
                "It is of format 1, which this attnkit only reads: extract into a new store."
            )
        self.manifest = manifest
        records.sort(key=lambda r: (r["batch"], r["offset"]))
        by_item = {r["item"]: r for r in records}
        n_items = len(by_item)
        batches = [[r["item"] for r in records if r["batch"] == b] for b in range(manifest["n_batches"])]
        self.records = [by_item[i] for i in range(n_items)]
        emb_dim = manifest.get("embedding_dim", 0) if manifest.get("embeddings") else 0
        self.layout = st.plan_layout(
            batches, [r["n"] for r in self.records], [0] * n_items,
            [len(r["words"]) for r in self.records], [r["truncated"] for r in self.records],
            n_layers=manifest["n_layers"], n_heads=manifest["n_heads"], embedding_dim=emb_dim,
        )
        self.index = st.Index(
            [r["tokens"] for r in self.records], [np.asarray(r["roles"]) for r in self.records],
            [np.asarray(r["word_ids"]) for r in self.records],
            [np.asarray(r["segments"]) for r in self.records], None,
            [r["words"] for r in self.records], [r["meta"] for r in self.records],
        )
        self._concat = self.index.concat(self.layout)
        self.info: dict[str, Any] = {
            "format": 1, "model": manifest["model"], "level": manifest["level"],
            "n_layers": manifest["n_layers"], "n_heads": manifest["n_heads"],
            "causal": manifest.get("causal", False), "batch_size": manifest["batch_size"],
            "n_items": n_items, "n_batches": manifest["n_batches"],
            "embeddings": bool(manifest.get("embeddings")), "embedding_dim": emb_dim,
            "keep_maps": True, "summaries": [], "input_ids": False,
            "fingerprint_v1": manifest.get("fingerprint"),
        }
        self.committed = set(range(manifest["n_batches"]))

    def meta(self, i: int) -> dict:
        return self.records[i]["meta"]

    def has(self, name: str) -> bool:
        return name in self._concat or name == "maps" or (name == "embeddings" and self.info["embeddings"])

    def _load(self, b: int, suffix: str, size: int) -> np.ndarray:
        f = self.path / "batches" / f"{b:06d}.{suffix}"
        try:
            a = np.load(f, mmap_mode="r")
            if a.dtype != np.float16 or a.ndim != 1 or a.size != size:
                raise ValueError(f"holds {a.dtype} {a.shape}, expected float16 ({size},)")
            return np.asarray(a)
        except (OSError, ValueError, EOFError) as exc:
            items = [int(i) for i in self.layout.batches[b]]
            raise StoreError(
                f"Batch file {f} of the format-1 store {self.path} is damaged or missing "
                f"({exc}); it holds items {st._describe_items(items, self.meta)}. Format 1 has "
                "no checksums and cannot be repaired: extract these inputs again into a new "
                "store (format 2 verifies every read)."
            ) from exc

    def read_batch(self, b: int, names: Iterable[str], *, check_fill: bool = True) -> dict[str, np.ndarray]:

        computed = {}
        names = list(names)
        if "maps" in names:
            lo, hi = self.layout.map_range(b)
            computed["maps"] = self._load(b, "npy", hi - lo)
        if "embeddings" in names:
            lo, hi = self.layout.emb_range(b)
            computed["embeddings"] = self._load(b, "emb.npy", hi - lo)
        return slice_index(self._concat, self.layout, b, names, computed)


def migrate(path: str | Path, out: str | Path | None = None, *, keep_old: bool = True,
            on_batch: Callable[[int], None] | None = None) -> Path:
    """Convert the format-1 store ``path`` to format 2.

    With ``out`` the new store is written there and ``path`` is left alone. Without, it is
    written beside ``path``, every value is compared with the original, and the folders are
    swapped: ``path`` becomes the new store and the original moves to ``path.v1`` (deleted
    when ``keep_old`` is False). Returns the new store's path.
    """
    src = Path(path)
    if not is_v1(src):
        if st.read_info(st.Location.of(src)) is not None:
            raise StoreError(f"{src} is already a store of format {st.FORMAT}; nothing to migrate.")
        raise StoreError(f"{src} is not a format-1 attnkit store (no {_MANIFEST}).")
    old = V1Backend(src)
    target = Path(out) if out is not None else src.with_name(src.name + ".migrating")
    if target.exists():
        loc_t = st.Location.of(target)
        if out is not None or not st.is_store(loc_t) or \
                (st.read_info(loc_t) or {}).get("migrated_from") != 1:
            raise StoreError(f"{target} already exists; remove it or pick another output.")
        shutil.rmtree(target)  # a migration that was interrupted before the swap
    loc = st.Location.of(target)
    info = {
        **old.info, "format": st.FORMAT, "model_fingerprint": None, "max_length": None,
        "chunks": {"maps": old.layout.map_chunk, "embeddings": old.layout.emb_chunk},
        "sizes": {"maps": old.layout.map_size, "embeddings": old.layout.emb_size},
        "inputs_fingerprint": "migrated-from-format-1:" + str(old.info["fingerprint_v1"]),
        "migrated_from": 1,
    }
    target.mkdir(parents=True)
    lock = st.WriterLock(loc).acquire()
    try:
        st.create(loc, info, old.layout, old.index,
                  [json.dumps(m, default=str) for m in old.index.meta], summaries={})
        writer = st.BatchWriter(loc, lock.token)
        names = ["maps"] + (["embeddings"] if old.info["embeddings"] else [])
        for b in range(len(old.layout.batches)):
            writer.write(b, {k: old.read_batch(b, [k])[k] for k in names})
            if on_batch is not None:
                on_batch(b)
    finally:
        lock.release()
    new = st.StoreReader(loc)
    for b in range(len(old.layout.batches)):
        a, c = old.read_batch(b, names), new.read_batch(b, names)
        if any(not np.array_equal(a[k], c[k]) for k in names):
            raise StoreError(f"Migration check failed on batch {b}: {target} differs from {src}; "
                             f"the original is untouched. Remove {target} and report this.")
    if out is not None:
        return target
    backup = src.with_name(src.name + ".v1")
    if backup.exists():
        raise StoreError(f"{backup} exists; move it away so the original can be kept there. "
                         f"The converted store is complete at {target}.")
    src.rename(backup)
    target.rename(src)
    if not keep_old:
        shutil.rmtree(backup)
    return src


class V1Writer:
    """Writes format 1, as attnkit 0.1 did (a JSON record file per batch, written last),
    for the benchmark that compares the two formats and for tests of migration."""

    def __init__(self, path: Path, manifest: dict, layout: st.Layout, index: st.Index):
        self.path, self.layout, self.index = Path(path), layout, index
        (self.path / "batches").mkdir(parents=True, exist_ok=True)
        st.atomic_write(self.path / _MANIFEST, lambda fh: fh.write(json.dumps(manifest, indent=1).encode()))

    def write(self, b: int, arrays: dict[str, np.ndarray]) -> None:
        lay, ix, t = self.layout, self.index, self.layout.table
        m0 = lay.map_range(b)[0]
        e0 = lay.emb_range(b)[0]
        recs = []
        for i in lay.batches[b]:
            i = int(i)
            recs.append({
                "item": i, "batch": b, "offset": int(t["map_offset"][i]) - m0, "n": int(t["n"][i]),
                "tokens": list(ix.tokens[i]), "roles": [str(r) for r in ix.roles[i]],
                "word_ids": [int(w) for w in ix.word_ids[i]],
                "segments": [int(s) for s in ix.segments[i]], "words": list(ix.words[i]),
                "meta": ix.meta[i], "truncated": bool(t["truncated"][i]),
                "emb_offset": int(t["emb_offset"][i]) - e0 if "embeddings" in arrays else -1,
            })
        bdir = self.path / "batches"
        st.atomic_write(bdir / f"{b:06d}.npy", lambda fh: np.save(fh, arrays["maps"]))
        if "embeddings" in arrays:
            st.atomic_write(bdir / f"{b:06d}.emb.npy", lambda fh: np.save(fh, arrays["embeddings"]))
        st.atomic_write(bdir / f"{b:06d}.json", lambda fh: fh.write(json.dumps(recs).encode()))


def extract_v1(model: Any, inputs: Iterable[Any], path: str | Path, *, batch_size: int = 32,
               level: str = "word", embeddings: bool = False) -> None:
    """Extract into a format-1 store the way attnkit 0.1 did (same batches, same float16
    maps, a background thread writing ``.npy`` files): the baseline of
    benchmarks/distributed.py and the source of the migration tests."""

    items = list(inputs)
    encs = [model.encode(x) for x in items]
    index, n = build_index(encs, level)
    plan = plan_batches([len(e) for e in encs], batch_size)
    dim = int(model.hf.get_input_embeddings().embedding_dim) if embeddings else 0
    layout = st.plan_layout(plan, n, [len(e) for e in encs], [len(e.words) for e in encs],
                            [e.truncated for e in encs], n_layers=model.n_layers,
                            n_heads=model.n_heads, embedding_dim=dim)
    manifest = {
        "version": 1, "model": model.name, "level": level, "n_layers": model.n_layers,
        "n_heads": model.n_heads, "causal": model.causal, "batch_size": batch_size,
        "n_items": len(items), "n_batches": len(plan), "embeddings": embeddings,
        "embedding_dim": dim,
        "fingerprint": v1_fingerprint(model.name, model.n_layers, model.n_heads, encs, level,
                                      batch_size, embeddings),
    }
    writer = V1Writer(Path(path), manifest, layout, index)
    write_batches(model, list(range(len(plan))), [[encs[i] for i in b] for b in plan],
                  BatchSpec(level=level, embeddings=embeddings), write=writer.write, background=True,
                  on_done=lambda b: None)
