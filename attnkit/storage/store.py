"""Store format 2: the attention of many inputs in a checksummed Zarr (format 3) group.

A store is a folder or any fsspec URL (``s3://bucket/run.zarr``, ``memory://x``) that Zarr
and Dask read directly::

    zarr.json                 the group; attributes["attnkit"] say what the store holds
    maps                      float16, every item's [layer, head, n, n] maps, flat
    embeddings                float16, every item's [n, d] input embeddings, flat (optional)
    positions/{tokens,roles,word_ids,segments}   one entry per position
    ids/input_ids             token ids (token level, also for word-level stores)
    words/words               the words of every item
    items/{batch,row,n,...}   the item table: one row per item, in input order
    summaries/<name>          per-item summaries, one row per item (optional)
    qk/{queries,keys}         float16, every item's post-rotary [layers, heads, n, d] queries
                              and keys of the layers kept, flat (optional, keep="qk")
    commits/000012.json       batch 12 is complete (written after its chunks)
    writer.lock               held by the one process that writes

Items are laid out batch by batch (the order the model ran them); each batch of maps and
embeddings starts on a chunk boundary, so two workers never write the same chunk. Every
chunk carries a crc32c checksum (Zarr's ``crc32c`` codec); fill values that valid data
never hold (NaN, -2, 255, "") reveal a missing chunk. A read that meets a corrupt,
truncated or missing chunk raises :class:`~attnkit.errors.StoreError` naming the items the
chunk holds; :func:`verify` lists every damaged batch and ``extract`` recomputes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import os
import re
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.attention import ROLES
from ..errors import StoreError

FORMAT = 2
_COMMITS = "commits"
_LOCK = "writer.lock"
#: A copy of every Zarr metadata document of the store (the group's attributes included),
#: written when the store is made: what ``attnkit store repair`` restores them from.
META_BACKUP = "attnkit-metadata.json"
#: Seconds after which a writer lock whose heartbeat stopped is considered abandoned
#: (a lock of a dead process on the same host is taken over at once).
LOCK_STALE_S = 120.0
_HEARTBEAT_S = 20.0

# name -> (dtype, fill value that valid data never holds, chunk length)
_POSITION_ARRAYS: dict[str, tuple[Any, Any, int]] = {
    "positions/tokens": (str, "", 1 << 16),
    "positions/roles": (np.uint8, 255, 1 << 20),
    "positions/word_ids": (np.int32, -2, 1 << 20),
    "positions/segments": (np.int8, -2, 1 << 20),
    "ids/input_ids": (np.int64, -1, 1 << 20),
    "words/words": (str, "", 1 << 16),
}
#: The item table: one row per item in input order.
ITEM_COLUMNS = {
    "batch": np.int64, "row": np.int64, "n": np.int64, "n_tokens": np.int64,
    "n_words": np.int64, "truncated": np.int8, "map_offset": np.int64,
    "emb_offset": np.int64, "pos_offset": np.int64, "ids_offset": np.int64,
    "word_offset": np.int64,
}
#: More item columns of a store of (source, target) pairs (``info["pairs"]``): an item's
#: positions and words are the target's, then the source's; these count the source's.
PAIR_COLUMNS = {"n_source": np.int64, "n_source_words": np.int64}
#: The extra map arrays a store of pairs may keep beside the cross-attention (``maps``):
#: the encoder's ``[L, H, source, source]`` and the decoder's ``[L, H, target, target]``.
PAIR_ARRAYS = {"encoder": "encoder/maps", "decoder": "decoder/maps"}
_ITEM_CHUNK = 1 << 18
#: Decoded chunks of index arrays a reader keeps (a chunk holds many batches' positions).
_CHUNK_CACHE = 64


def _is_index(name: str) -> bool:
    return name in _POSITION_ARRAYS


# ------------------------------------------------------------------ where a store lives
@dataclass(frozen=True)
class Location:
    """A store's address: a local folder or an fsspec URL, with fsspec storage options."""

    url: str
    storage_options: dict = field(default_factory=dict, hash=False)

    @classmethod
    def of(cls, where: str | Path | Location, storage_options: dict | None = None) -> Location:
        if isinstance(where, Location):
            return where
        text = str(where)
        if "://" not in text or text.startswith("file://"):
            text = str(Path(text.removeprefix("file://")).expanduser().absolute())
        return cls(text, dict(storage_options or {}))

    @property
    def local(self) -> bool:
        return "://" not in self.url

    @property
    def fs(self) -> Any:
        import fsspec

        fs, _ = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return fs

    @property
    def root(self) -> str:
        import fsspec

        _, path = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return path.rstrip("/")

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def __str__(self) -> str:
        return self.url

    # plain-file helpers (markers, the lock): every failure becomes a StoreError
    def exists(self, *parts: str) -> bool:
        return self.fs.exists(self.path(*parts))

    def read_json(self, *parts: str) -> Any:
        with self.fs.open(self.path(*parts), "rb") as fh:
            return json.loads(fh.read().decode())

    def write_json(self, obj: Any, *parts: str) -> None:
        data = json.dumps(obj, indent=1).encode()
        if self.local:
            atomic_write(Path(self.path(*parts)), lambda fh: fh.write(data))
        else:  # an object store's PUT replaces the object atomically
            self.fs.pipe_file(self.path(*parts), data)

    def create_json(self, obj: Any, *parts: str) -> bool:
        """Write ``obj`` only if the file does not exist yet; False when it did."""
        target = self.path(*parts)
        data = json.dumps(obj, indent=1).encode()
        try:
            if self.local:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                return True
            with self.fs.open(target, "xb") as fh:
                fh.write(data)
            return True
        except FileExistsError:
            return False

    def remove(self, *parts: str) -> None:
        try:
            self.fs.rm_file(self.path(*parts))
        except FileNotFoundError:
            pass

    def listdir(self, *parts: str) -> list[str]:
        try:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.path(*parts), detail=False)]
        except FileNotFoundError:
            return []


def atomic_write(path: Path, write: Callable[[Any], Any]) -> None:
    """Write a local file through a temporary beside it and a rename (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def disk_full(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says the disk or quota is full."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


# ------------------------------------------------------------------ the layout
@dataclass
class Layout:
    """Where every item lives: batches (item ids in storage order) and per-item offsets.

    Everything here is known before the model runs (lengths come from the tokenizer), so
    workers write disjoint, chunk-aligned ranges.
    """

    batches: list[np.ndarray]
    table: dict[str, np.ndarray]  # ITEM_COLUMNS, indexed by item id
    map_chunk: int
    emb_chunk: int
    map_size: int  # total length of the maps array (padded)
    emb_size: int
    item_map_size: np.ndarray  # elements of each item's maps
    item_emb_size: np.ndarray
    #: More flat per-position arrays laid out like the maps (``qk/queries``, ``qk/keys``).
    flat: dict[str, FlatArray] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.table["n"])

    def map_range(self, b: int) -> tuple[int, int]:
        """Start and end (unpadded) of batch ``b`` in the maps array."""
        items = self.batches[b]
        last = items[-1]
        return int(self.table["map_offset"][items[0]]), int(self.table["map_offset"][last] + self.item_map_size[last])

    def emb_range(self, b: int) -> tuple[int, int]:
        items = self.batches[b]
        last = items[-1]
        return int(self.table["emb_offset"][items[0]]), int(self.table["emb_offset"][last] + self.item_emb_size[last])

    def flat_range(self, b: int, name: str) -> tuple[int, int]:
        """Start and end (unpadded) of batch ``b`` in the flat array ``name``."""
        f = self.flat[name]
        items = self.batches[b]
        last = items[-1]
        return int(f.offsets[items[0]]), int(f.offsets[last] + f.sizes[last])

    def range(self, b: int, column: str, size: str) -> tuple[int, int]:
        """Start and end of batch ``b`` in a per-position array (``pos_offset``/``n`` ...)."""
        items = self.batches[b]
        start = int(self.table[column][items[0]])
        last = items[-1]
        return start, int(self.table[column][last] + self.table[size][last])

    def rows(self, b: int) -> tuple[int, int]:
        items = self.batches[b]
        return int(self.table["row"][items[0]]), int(self.table["row"][items[-1]] + 1)


@dataclass
class FlatArray:
    """A flat float16 array of ``per_position`` elements per position of every item, laid out
    batch by batch, each batch starting on a chunk boundary (like the maps). Its offsets
    follow from the item table, so the table needs no column for it."""

    per_position: int
    chunk: int
    offsets: np.ndarray
    sizes: np.ndarray
    total: int


def flat_array(batches: Sequence[Any], n: np.ndarray, per_position: int,
               chunk: int | None = None, sizes: np.ndarray | None = None) -> FlatArray:
    """Lay out a flat array of ``per_position`` elements per position (``chunk`` chosen
    like the maps' when not given), or of ``sizes`` elements per item."""
    if sizes is None:
        sizes = np.asarray(n, dtype=np.int64) * int(per_position)
    sizes = np.asarray(sizes, dtype=np.int64)
    if chunk is None:
        chunk = _pow2_chunk([int(sizes[list(b)].sum()) for b in batches])
    offsets = np.zeros(len(sizes), dtype=np.int64)
    o = 0
    for members in batches:
        for i in members:
            offsets[i] = o
            o += int(sizes[i])
        o = -(-o // chunk) * chunk
    return FlatArray(int(per_position), int(chunk), offsets, sizes, o)


def _pow2_chunk(sizes: Sequence[int], waste: float = 0.05, lo: int = 1 << 10, hi: int = 1 << 22) -> int:
    """The largest power-of-two chunk length in ``[lo, hi]`` for which padding every batch to
    a chunk boundary wastes at most ``waste`` of the data."""
    total = sum(sizes)
    best = lo
    c = lo
    while c <= hi:
        padded = sum(-(-s // c) * c for s in sizes)
        if padded - total <= waste * total:
            best = c
        c <<= 1
    return best


def pair_sizes(pairs: dict, n: np.ndarray, n_source: np.ndarray, n_layers: int,
               n_heads: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Elements per item of a store of pairs: the cross-attention maps ``[n_layers,
    n_heads, target, source]`` and each kept array of :data:`PAIR_ARRAYS` (``pairs`` maps
    ``"encoder"``/``"decoder"`` to ``[layers, heads]``)."""
    s = np.asarray(n_source, dtype=np.int64)
    t = np.asarray(n, dtype=np.int64) - s
    side = {"encoder": s, "decoder": t}
    extra = {PAIR_ARRAYS[k]: int(L) * int(H) * side[k] * side[k]
             for k, (L, H) in sorted(pairs.items()) if k in PAIR_ARRAYS}
    return n_layers * n_heads * t * s, extra


def plan_layout(
    batches: Sequence[Sequence[int]],
    n: Sequence[int],
    n_tokens: Sequence[int],
    n_words: Sequence[int],
    truncated: Sequence[bool],
    *,
    n_layers: int,
    n_heads: int,
    embedding_dim: int,
    flat: dict[str, int] | None = None,
    pairs: dict | None = None,
    n_source: Sequence[int] | None = None,
    n_source_words: Sequence[int] | None = None,
) -> Layout:
    """Offsets of every item, batches laid out one after another, chunk-aligned; ``flat``
    names more flat arrays and their elements per position (:class:`FlatArray`). A store
    of (source, target) pairs gives ``pairs`` (:func:`pair_sizes`) and each item's source
    positions and words (:data:`PAIR_COLUMNS`)."""
    n_items = len(n)
    n_arr = np.asarray(n, dtype=np.int64)
    map_size = n_layers * n_heads * n_arr * n_arr
    pair_arrays: dict[str, np.ndarray] = {}
    if pairs is not None:
        map_size, pair_arrays = pair_sizes(pairs, n_arr, np.asarray(n_source), n_layers, n_heads)
    emb_size = n_arr * embedding_dim
    map_chunk = _pow2_chunk([int(map_size[list(b)].sum()) for b in batches])
    emb_chunk = _pow2_chunk([int(emb_size[list(b)].sum()) for b in batches]) if embedding_dim else 1
    t = {k: np.zeros(n_items, dtype=v) for k, v in ITEM_COLUMNS.items()}
    t["n"][:] = n_arr
    t["n_tokens"][:] = n_tokens
    t["n_words"][:] = n_words
    t["truncated"][:] = np.asarray(truncated, dtype=np.int8)
    if pairs is not None:
        t["n_source"] = np.asarray(n_source, dtype=np.int64)
        t["n_source_words"] = np.asarray(n_source_words, dtype=np.int64)
    mo = eo = po = io = wo = row = 0
    out_batches: list[np.ndarray] = []
    for members in batches:
        items = np.asarray(members, dtype=np.int64)
        b = len(out_batches)
        out_batches.append(items)
        for i in items:
            t["batch"][i], t["row"][i] = b, row
            t["map_offset"][i], t["emb_offset"][i] = mo, eo
            t["pos_offset"][i], t["ids_offset"][i], t["word_offset"][i] = po, io, wo
            mo += int(map_size[i])
            eo += int(emb_size[i])
            po += int(n_arr[i])
            io += int(t["n_tokens"][i])
            wo += int(t["n_words"][i])
            row += 1
        mo = -(-mo // map_chunk) * map_chunk
        if embedding_dim:
            eo = -(-eo // emb_chunk) * emb_chunk
    extra = {name: flat_array(out_batches, n_arr, k) for name, k in (flat or {}).items()}
    extra.update({name: flat_array(out_batches, n_arr, 0, sizes=sizes)
                  for name, sizes in pair_arrays.items()})
    return Layout(out_batches, t, map_chunk, emb_chunk, mo, eo, map_size, emb_size, extra)


# ------------------------------------------------------------------ index content
@dataclass
class Index:
    """What the tokenizer knows about every item (input order): written at creation."""

    tokens: list[list[str]]
    roles: list[np.ndarray]
    word_ids: list[np.ndarray]
    segments: list[np.ndarray]
    input_ids: list[np.ndarray] | None
    words: list[list[str]]
    meta: list[dict]
    #: Pairs only: each item's source positions and source words (:data:`PAIR_COLUMNS`).
    n_source: list[int] | None = None
    n_source_words: list[int] | None = None

    def concat(self, layout: Layout) -> dict[str, np.ndarray]:
        """The per-position arrays in storage order."""
        order = np.concatenate(layout.batches) if layout.batches else np.zeros(0, np.int64)
        codes = {r: k for k, r in enumerate(ROLES)}

        def cat(parts: list, dtype: Any) -> np.ndarray:
            chosen = [np.asarray(parts[i], dtype=dtype) for i in order]
            return np.concatenate(chosen) if chosen else np.zeros(0, dtype)

        out = {
            "positions/tokens": cat([np.asarray(t, dtype=object) for t in self.tokens], object),
            "positions/roles": cat([[codes[r] for r in rs] for rs in self.roles], np.uint8),
            "positions/word_ids": cat(self.word_ids, np.int32),
            "positions/segments": cat(self.segments, np.int8),
            "words/words": cat([np.asarray(w, dtype=object) for w in self.words], object),
        }
        if self.input_ids is not None:
            out["ids/input_ids"] = cat(self.input_ids, np.int64)
        return out


# ------------------------------------------------------------------ zarr helpers
def _zarr_open(loc: Location, mode: Any) -> Any:
    import zarr

    so = loc.storage_options or None
    try:
        return zarr.open_group(loc.url, mode=mode, storage_options=so, zarr_format=3)
    except FileNotFoundError as exc:
        raise StoreError(f"No attnkit store at {loc}: {exc}.") from exc
    except (ValueError, TypeError, KeyError) as exc:  # json.JSONDecodeError is a ValueError
        raise metadata_error(loc, "zarr.json", exc) from exc


def _create(group: Any, name: str, shape: tuple, chunks: tuple, dtype: Any, fill: Any) -> Any:
    from zarr.codecs import Crc32cCodec

    parent, _, leaf = name.rpartition("/")
    g = group.require_group(parent) if parent else group
    return g.create_array(
        leaf, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
        compressors=[Crc32cCodec()], config={"write_empty_chunks": True}, overwrite=True,
    )


def metadata_error(loc: Location, doc: str, exc: BaseException) -> StoreError:
    """The StoreError for a Zarr metadata document of ``loc`` that is missing or damaged."""
    return StoreError(
        f"The store {loc} is damaged: its metadata file {doc} is missing or unreadable "
        f"({type(exc).__name__}: {str(exc)[:120]}). The computed batches are kept: run "
        f"`attnkit store repair {loc}` to restore the metadata (or attnkit.extract with the "
        "same model, inputs and store, which repairs it too)."
    )


def _metadata_docs(loc: Location) -> list[str]:
    """Paths (relative to the store) of every ``zarr.json`` of the store."""
    root = loc.root
    found = loc.fs.find(root, withdirs=False)
    return sorted(p[len(root) + 1:] for p in found if p.rsplit("/", 1)[-1] == "zarr.json")


def save_metadata(loc: Location) -> None:
    """Write :data:`META_BACKUP`: every Zarr metadata document of the store, verbatim."""
    docs = {}
    for doc in _metadata_docs(loc):
        with loc.fs.open(loc.path(doc), "rb") as fh:
            docs[doc] = json.loads(fh.read().decode())
    loc.write_json({"format": FORMAT, "documents": docs}, META_BACKUP)


def _write_bytes(fh: Any, data: bytes) -> None:
    fh.write(data)


def _backup(loc: Location) -> dict | None:
    try:
        return dict(loc.read_json(META_BACKUP)["documents"])
    except (FileNotFoundError, ValueError, KeyError, TypeError, OSError):
        return None


def damaged_metadata(loc: Location, backup: dict | None = None) -> list[str]:
    """The Zarr metadata documents of the store that are missing (listed in the backup,
    or the group's own) or unreadable."""
    backup = _backup(loc) if backup is None else backup
    damaged = []
    for doc in sorted(set(backup or ()) | set(_metadata_docs(loc)) | {"zarr.json"}):
        try:
            with loc.fs.open(loc.path(doc), "rb") as fh:
                json.loads(fh.read().decode())
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            damaged.append(doc)
    return damaged


def repair_metadata(loc: Location) -> tuple[list[str], list[str]]:
    """Restore every Zarr metadata document that is missing or unreadable from
    :data:`META_BACKUP`. Returns ``(restored, lost)``: the documents written back, and
    those damaged with no copy to restore (the store must then be extracted again)."""
    backup = _backup(loc)
    restored, lost = [], []
    for doc in damaged_metadata(loc, backup):
        if backup is not None and doc in backup:
            data = json.dumps(backup[doc], indent=2).encode()
            if loc.local:
                atomic_write(Path(loc.path(doc)), functools.partial(_write_bytes, data=data))
            else:
                loc.fs.pipe_file(loc.path(doc), data)
            restored.append(doc)
        else:
            lost.append(doc)
    return restored, lost


def _fill_of(name: str) -> Any:
    if name in ("maps", "embeddings") or name.startswith(("summaries/", "qk/", "encoder/",
                                                           "decoder/")):
        return np.nan
    if name in _POSITION_ARRAYS:
        return _POSITION_ARRAYS[name][1]
    return -1


def _holds_fill(name: str, values: np.ndarray) -> bool:
    """True when ``values`` contain the fill value of ``name``: a chunk was missing."""
    fill = _fill_of(name)
    if values.size == 0:
        return False
    if name.startswith("summaries/"):
        return False  # summaries may hold NaN; their chunks are checked by listing instead
    if isinstance(fill, float) and np.isnan(fill):
        return bool(np.isnan(values).any())
    if values.dtype.kind in "OUT":
        return bool((values == fill).any())
    return bool((values == fill).any())


def _sync(coro: Any) -> Any:
    from zarr.core.sync import sync

    return sync(coro)


async def _gather(reads: list[tuple[Any, tuple]]) -> list[Any]:
    return await asyncio.gather(
        *[arr.async_array.getitem(sel) for arr, sel in reads], return_exceptions=True
    )


async def _gather_writes(writes: list[tuple[Any, tuple, np.ndarray]]) -> list[Any]:
    return await asyncio.gather(
        *[arr.async_array.setitem(sel, value) for arr, sel, value in writes],
        return_exceptions=True,
    )


def _describe_items(items: Iterable[int], meta: Callable[[int], dict] | None, limit: int = 12) -> str:
    items = sorted({int(i) for i in items})
    shown = []
    for i in items[:limit]:
        sid = (meta(i) or {}).get("sent_id") if meta else None
        shown.append(f"{i} ({sid})" if sid else str(i))
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(shown) + more


# ------------------------------------------------------------------ reading
class StoreReader:
    """A store of format 2, opened read-only: info, layout and verified batch reads."""

    def __init__(self, loc: Location, *, require_complete: bool = True, mode: str = "r"):
        self.loc = loc
        g = _zarr_open(loc, mode)
        info = dict(g.attrs.get("attnkit") or {})
        if not info:
            raise StoreError(f"{loc} is a Zarr group but not an attnkit store (no 'attnkit' attributes).")
        if info.get("format") != FORMAT:
            raise StoreError(
                f"{loc} is an attnkit store of format {info.get('format')}; this attnkit reads "
                f"format {FORMAT}. Upgrade attnkit, or extract again into a new store."
            )
        if info.get("state") != "ready":
            raise StoreError(
                f"The store {loc} was never finished being created (its creation was "
                "interrupted). Run attnkit.extract again with the same model, inputs and store."
            )
        self.group = g
        self.info = info
        self._arrays: dict[str, Any] = {}
        self._chunks: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self.layout = self._read_layout()
        self.committed = committed_batches(loc)
        n_batches = len(self.layout.batches)
        if require_complete and len(self.committed) < n_batches:
            raise StoreError(
                f"The store {loc} is incomplete ({len(self.committed)} of {n_batches} batches). "
                "Run attnkit.extract again with the same model, inputs and store to finish it."
            )

    # -- arrays
    def array(self, name: str) -> Any:
        if name not in self._arrays:
            try:
                self._arrays[name] = self.group[name]
            except KeyError as exc:
                raise metadata_error(self.loc, f"{name}/zarr.json", exc) from exc
            except (ValueError, TypeError) as exc:  # a truncated or garbled zarr.json
                raise metadata_error(self.loc, f"{name}/zarr.json", exc) from exc
        return self._arrays[name]

    def has(self, name: str) -> bool:
        try:
            self.array(name)
            return True
        except StoreError:
            return False

    def _read_layout(self) -> Layout:
        columns = {**ITEM_COLUMNS, **(PAIR_COLUMNS if self.info.get("pairs") else {})}
        names = list(columns)
        arrays = [self.array(f"items/{k}") for k in names]
        values = _sync(_gather([(a, (slice(None),)) for a in arrays]))
        for k, v in zip(names, values):
            if isinstance(v, BaseException) or (np.asarray(v) == -1).any():
                raise StoreError(
                    f"The item table of {self.loc} (items/{k}) is damaged "
                    f"({v if isinstance(v, BaseException) else 'a missing chunk'}): every item "
                    "is affected. Run attnkit.extract with the same model, inputs and store to "
                    "rewrite it; the attention already computed is kept."
                ) from (v if isinstance(v, BaseException) else None)
        table = {k: np.asarray(v, dtype=columns[k]) for k, v in zip(names, values)}
        info = self.info
        n_batches = int(info["n_batches"])
        order = np.argsort(table["row"], kind="stable")
        cuts = np.searchsorted(table["batch"][order], np.arange(n_batches + 1))
        batches = [order[cuts[b] : cuts[b + 1]] for b in range(n_batches)]
        L, H, d = info["n_layers"], info["n_heads"], info.get("embedding_dim", 0)
        n = table["n"]
        flat = {name: flat_array(batches, n, k, int(info["chunks"][name]))
                for name, k in (info.get("flat") or {}).items()}
        map_size = L * H * n * n
        if info.get("pairs"):
            map_size, extra = pair_sizes(info["pairs"], n, table["n_source"], L, H)
            flat.update({name: flat_array(batches, n, 0, int(info["chunks"][name]), sizes)
                         for name, sizes in extra.items()})
        return Layout(batches, table, int(info["chunks"]["maps"]), int(info["chunks"].get("embeddings", 1)),
                      int(info["sizes"]["maps"]), int(info["sizes"].get("embeddings", 0)),
                      map_size, n * d, flat)

    def meta(self, i: int) -> dict:
        if not hasattr(self, "_meta"):
            self._meta = self._read_meta()
        return self._meta[i]

    def _read_meta(self) -> list[dict]:
        try:
            raw = self.array("items/meta")[:]
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"The item table of {self.loc} (items/meta) is damaged ({exc}). Run "
                "attnkit.extract with the same model, inputs and store to rewrite it."
            ) from exc
        if (raw == "").any():
            raise StoreError(f"The item table of {self.loc} (items/meta) has a missing chunk. "
                             "Run attnkit.extract with the same model, inputs and store to rewrite it.")
        return [json.loads(s) for s in raw]

    # -- verified batch reads
    def batch_reads(self, b: int, names: Iterable[str]) -> dict[str, tuple[int, int]]:
        lay = self.layout
        ranges: dict[str, tuple[int, int]] = {}
        for name in names:
            if name == "maps":
                ranges[name] = lay.map_range(b)
            elif name == "embeddings":
                ranges[name] = lay.emb_range(b)
            elif name in lay.flat:
                ranges[name] = lay.flat_range(b, name)
            elif name.startswith("positions/"):
                ranges[name] = lay.range(b, "pos_offset", "n")
            elif name == "ids/input_ids":
                ranges[name] = lay.range(b, "ids_offset", "n_tokens")
            elif name == "words/words":
                ranges[name] = lay.range(b, "word_offset", "n_words")
            else:  # summaries: one row per item
                ranges[name] = lay.rows(b)
        return ranges

    def read_batch(self, b: int, names: Iterable[str], *, check_fill: bool = True) -> dict[str, np.ndarray]:
        """The arrays ``names`` over batch ``b``, verified (checksums, no missing chunk).

        ``check_fill=False`` skips the scan of the values for the fill value (a missing
        chunk): for a batch read again after a read that scanned it; the chunks' checksums
        are verified on every read all the same."""
        if b not in self.committed:
            raise StoreError(
                f"Batch {b} of {self.loc} is not complete (items "
                f"{_describe_items(self.layout.batches[b], self.meta)}). Run attnkit.extract "
                "with the same model, inputs and store to compute it."
            )
        ranges = self.batch_reads(b, names)
        direct = {k: r for k, r in ranges.items() if not _is_index(k)}
        # index arrays hold every item's positions in few chunks: read whole chunks, keep them
        wanted = []
        for name, (lo, hi) in ranges.items():
            if _is_index(name) and hi > lo:
                c = self.array(name).chunks[0]
                wanted += [(name, k) for k in range(lo // c, -(-hi // c)) if (name, k) not in self._chunks]
        reads = [(self.array(k), (slice(*r),)) for k, r in direct.items()]
        for name, k in wanted:
            arr = self.array(name)
            c = arr.chunks[0]
            reads.append((arr, (slice(k * c, min((k + 1) * c, arr.shape[0])),)))
        values = _sync(_gather(reads))
        out = {}
        for (name, r), v in zip(direct.items(), values):
            if isinstance(v, BaseException) or (check_fill and _holds_fill(name, np.asarray(v))) \
                    or self.missing_chunks(name, r):
                raise self.damage_error(name, r, v if isinstance(v, BaseException) else None)
            out[name] = np.asarray(v)
        for (name, k), v in zip(wanted, values[len(direct):]):
            c = self.array(name).chunks[0]
            if isinstance(v, BaseException) or _holds_fill(name, np.asarray(v)):
                raise self.damage_error(name, (k * c, (k + 1) * c), v if isinstance(v, BaseException) else None)
            self._chunks[(name, k)] = np.asarray(v)
            while len(self._chunks) > _CHUNK_CACHE:
                self._chunks.popitem(last=False)
        for name, (lo, hi) in ranges.items():
            if not _is_index(name):
                continue
            if hi <= lo:
                out[name] = np.asarray(self.array(name)[0:0])
                continue
            c = self.array(name).chunks[0]
            parts = []
            for k in range(lo // c, -(-hi // c)):
                chunk = self._chunks.get((name, k))
                if chunk is None:  # evicted while this batch was assembled: read it again
                    return self.read_batch(b, names, check_fill=check_fill)
                self._chunks.move_to_end((name, k))
                parts.append(chunk[max(lo - k * c, 0) : min(hi - k * c, c)])
            out[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return out

    def verify_index(self) -> list[str]:
        """Index arrays (positions, token ids, words) that fail to read back intact."""
        bad = []
        for name in _POSITION_ARRAYS:
            if name == "ids/input_ids" and not self.info.get("input_ids", True):
                continue
            try:
                ok = not _holds_fill(name, np.asarray(self.array(name)[:]))
            except Exception:  # noqa: BLE001 - any decoding failure means a damaged chunk
                ok = False
            if not ok:
                bad.append(name)
        try:
            self._read_meta()
        except StoreError:
            bad.append("items/meta")
        return bad

    def damage_error(self, name: str, r: tuple[int, int], exc: BaseException | None) -> StoreError:
        """A StoreError naming the chunks of ``name`` within range ``r`` that are damaged
        and the items they hold."""
        bad = self.bad_chunks(name, r)
        items: set[int] = set()
        for _, batches, _ in bad:
            for b in batches:
                items.update(int(i) for i in self.layout.batches[b])
        what = "; ".join(f"{name}/c/{k} ({why})" for k, _, why in bad) or f"{name} ({exc})"
        if not items:  # could not pinpoint: blame the batches the range covers
            items = {int(i) for b in self.batches_of_range(name, r) for i in self.layout.batches[b]}
        err = StoreError(
            f"The store {self.loc} is damaged: {what}. The damaged chunks hold items "
            f"{_describe_items(items, self.meta)}. Their values were not used. Run "
            "attnkit.extract with the same model, inputs and store to recompute exactly these "
            "items, or `attnkit store verify` to list every damaged batch."
        )
        err.items = sorted(items)  # type: ignore[attr-defined]
        return err

    def batches_of_range(self, name: str, r: tuple[int, int]) -> list[int]:
        out = []
        for b in range(len(self.layout.batches)):
            br = self.batch_reads(b, [name])[name]
            if br[0] < r[1] and br[1] > r[0]:
                out.append(b)
        return out

    def bad_chunks(self, name: str, r: tuple[int, int]) -> list[tuple[str, list[int], str]]:
        """(chunk key, batches it holds, why) of the damaged chunks of ``name`` in ``r``."""
        arr = self.array(name)
        c = arr.chunks[0]
        out = []
        for k in range(r[0] // c, -(-r[1] // c)):
            lo, hi = max(r[0], k * c), min(r[1], (k + 1) * c)
            why = None
            try:
                v = np.asarray(arr[lo:hi])
                if _holds_fill(name, v) or self.missing_chunks(name, (k * c, (k + 1) * c)):
                    why = "missing"
            except Exception as exc:  # noqa: BLE001 - any decoding failure means a damaged chunk
                why = f"checksum mismatch or truncated: {exc}".replace("\n", " ")[:160]
            if why:
                if why == "missing" and not self.missing_chunks(name, (k * c, (k + 1) * c), every=True):
                    why = "holds fill values"
                key = "/".join([str(k)] + ["0"] * (arr.ndim - 1))  # the first file of the row
                out.append((key, self.batches_of_range(name, (k * c, (k + 1) * c)), why))
        return out

    def _grid_rest(self, name: str) -> list[tuple[int, ...]]:
        """Chunk coordinates along every axis but the first (one entry for 1-D arrays)."""
        import itertools

        arr = self.array(name)
        return list(itertools.product(*(range(-(-n // c)) for n, c in zip(arr.shape[1:], arr.chunks[1:]))))

    def missing_chunks(self, name: str, r: tuple[int, int], *, every: bool = False) -> bool:
        """True when a chunk file of rows ``r`` of ``name`` is missing (``every``: when all
        are). Only summaries need it: they may hold NaN, their fill value, so a missing
        chunk is found by listing, at its full path (``summaries/stats/c/1/0/0/0``: a
        multi-dimensional array's chunk files lie in folders)."""
        if not name.startswith("summaries/") or r[1] <= r[0]:
            return False
        c = self.array(name).chunks[0]
        rest = self._grid_rest(name)
        found = [self.loc.exists(*name.split("/"), "c", str(k), *map(str, tail))
                 for k in range(r[0] // c, -(-r[1] // c)) for tail in rest]
        return not any(found) if every else not all(found)

    def verify_batch(self, b: int) -> list[str]:
        """Problems of committed batch ``b`` (empty when every chunk reads back intact)."""
        names = [n for n in ("maps", "embeddings") if self.has(n)]
        names += list(self.layout.flat)
        names += [f"summaries/{s}" for s in self.info.get("summaries", [])]
        problems = []
        for name in names:
            r = self.batch_reads(b, [name])[name]
            if r[1] <= r[0]:
                continue
            try:
                v = np.asarray(self.array(name)[slice(*r)])
                ok = not _holds_fill(name, v) and not self.missing_chunks(name, r)
            except Exception:  # noqa: BLE001 - any decoding failure means a damaged chunk
                ok = False
            if not ok:
                problems.append(name)
        return problems


def committed_batches(loc: Location) -> set[int]:
    """Batches whose commit marker exists."""
    out = set()
    for name in loc.listdir(_COMMITS):
        if name.endswith(".json") and name[:-5].isdigit():
            out.add(int(name[:-5]))
    return out


def read_info(loc: Location) -> dict | None:
    """The ``attnkit`` attributes of a format-2 store, or None when there is no store."""
    import zarr

    try:
        g = zarr.open_group(loc.url, mode="r", storage_options=loc.storage_options or None, zarr_format=3)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        if loc.exists(META_BACKUP):  # an attnkit store whose group metadata is damaged
            raise metadata_error(loc, "zarr.json", exc) from exc
        return None
    info = g.attrs.get("attnkit")
    return dict(info) if isinstance(info, dict) and info else None


# ------------------------------------------------------------------ writing
def _host() -> str:
    return socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WriterLock:
    """The one writer of a store: an exclusively created lock file with a heartbeat.

    A lock left by a dead process on this host, or one whose heartbeat stopped more than
    :data:`LOCK_STALE_S` seconds ago, is taken over; any other lock refuses the second
    writer with a :class:`StoreError` saying who holds it.
    """

    def __init__(self, loc: Location):
        self.loc = loc
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self) -> dict:
        return {"token": self.token, "host": _host(), "pid": os.getpid(),
                "since": getattr(self, "_since", time.time()), "heartbeat": time.time()}

    def acquire(self) -> WriterLock:
        self._since = time.time()
        for _ in range(3):
            if self.loc.create_json(self._record(), _LOCK):
                self._thread = threading.Thread(target=self._beat, daemon=True, name="attnkit-lock")
                self._thread.start()
                return self
            try:
                held = self.loc.read_json(_LOCK)
            except (FileNotFoundError, json.JSONDecodeError, OSError):
                held = None
            if held is None or self._stale(held):
                self.loc.remove(_LOCK)
                continue
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(held.get("since", 0)))
            raise StoreError(
                f"The store {self.loc} is being written by another process (pid "
                f"{held.get('pid')} on host {held.get('host')}, since {since}). Two writers "
                "would interleave their batches: wait until it finishes (then run again to "
                "reuse its batches), or write to another store. If that process is gone, "
                f"delete {self.loc.path(_LOCK)}."
            )
        raise StoreError(f"Could not take the writer lock of {self.loc}; try again.")

    @staticmethod
    def _stale(held: dict) -> bool:
        if held.get("host") == _host() and not _pid_alive(int(held.get("pid", -1))):
            return True
        return time.time() - float(held.get("heartbeat", 0)) > LOCK_STALE_S

    def _beat(self) -> None:
        while not self._stop.wait(_HEARTBEAT_S):
            # a missed heartbeat only makes the lock look older
            with contextlib.suppress(Exception):
                if self.holds():
                    self.loc.write_json(self._record(), _LOCK)

    def holds(self) -> bool:
        return lock_token(self.loc) == self.token

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.holds():
            self.loc.remove(_LOCK)


def lock_token(loc: Location) -> str | None:
    try:
        return loc.read_json(_LOCK).get("token")
    except (FileNotFoundError, json.JSONDecodeError, OSError):
        return None


class BatchWriter:
    """Writes batches into a created store: chunks first, then the commit marker.

    Used by the process that holds the lock and by cluster workers acting for it (they
    carry its ``token`` and refuse to commit once another writer took the lock over).
    """

    def __init__(self, loc: Location, token: str):
        self.loc = loc
        self.token = token
        self.reader = StoreReader(loc, require_complete=False, mode="r+")

    def committed(self, b: int) -> bool:
        return self.loc.exists(_COMMITS, f"{b:06d}.json")

    def write(self, b: int, arrays: dict[str, np.ndarray]) -> None:
        """Write batch ``b`` (``maps``, ``embeddings``, ``summaries/<name>``) and commit it."""
        r = self.reader
        lay = r.layout
        writes = []
        for name, value in arrays.items():
            arr = r.array(name)
            if name in ("maps", "embeddings") or name in lay.flat:
                start, stop = (lay.map_range(b) if name == "maps" else lay.emb_range(b)
                               if name == "embeddings" else lay.flat_range(b, name))
                c = arr.chunks[0]
                padded = np.zeros(-(-(stop - start) // c) * c, dtype=np.float16)
                if value.size != stop - start:
                    raise StoreError(f"Batch {b}: {name} has {value.size} values, the layout wants {stop - start}.")
                padded[: value.size] = value
                writes.append((arr, (slice(start, start + padded.size),), padded))
            else:
                lo, hi = lay.rows(b)
                writes.append((arr, (slice(lo, hi),), value))
        self._check_token(b)
        for res in _sync(_gather_writes(writes)):
            if isinstance(res, BaseException):
                raise self._write_error(b, res) from res
        self._check_token(b)
        try:
            self.loc.write_json({"batch": b, "items": len(lay.batches[b]), "time": time.time(),
                                 "host": _host(), "pid": os.getpid(), "token": self.token},
                                _COMMITS, f"{b:06d}.json")
        except OSError as exc:
            raise self._write_error(b, exc) from exc

    def _check_token(self, b: int) -> None:
        if lock_token(self.loc) != self.token:
            raise StoreError(
                f"Batch {b} was not written: the writer lock of {self.loc} is now held by "
                "another process (this run's lock was taken over or deleted). Nothing was "
                "interleaved; run extract again once the other writer is done."
            )

    def _write_error(self, b: int, exc: BaseException) -> StoreError:
        items = _describe_items(self.reader.layout.batches[b], None)
        if disk_full(exc):
            return StoreError(
                f"The disk holding {self.loc} is full: batch {b} (items {items}) could not be "
                "written and was not committed. The batches committed before it are intact. "
                "Free space (or pick another store) and run attnkit.extract again with the "
                "same model, inputs and store to resume."
            )
        return StoreError(
            f"Writing batch {b} (items {items}) to {self.loc} failed ({type(exc).__name__}: "
            f"{exc}); it was not committed. Run attnkit.extract again to resume."
        )


def create(
    loc: Location,
    info: dict,
    layout: Layout,
    index: Index,
    meta_json: list[str],
    *,
    summaries: dict[str, tuple[tuple[int, ...], Any]],
) -> None:
    """Create (or re-create) the arrays and write the index; ``state`` becomes ready last.

    ``summaries`` maps a summary name to (per-item shape, dtype).
    """
    try:
        _create_all(loc, info, layout, index, meta_json, summaries)
    except StoreError:
        raise
    except Exception as exc:
        if disk_full(exc):
            raise StoreError(
                f"The disk holding {loc} is full: the store could not be created. Free space "
                "(or pick another store) and run attnkit.extract again."
            ) from exc
        raise StoreError(f"Could not create the store {loc} ({type(exc).__name__}: {exc}).") from exc


def _create_all(loc: Location, info: dict, layout: Layout, index: Index, meta_json: list[str],
                summaries: dict[str, tuple[tuple[int, ...], Any]]) -> None:
    g = _zarr_open(loc, "a")
    g.attrs["attnkit"] = {**info, "state": "creating"}
    n_items = layout.n_items
    if info.get("keep_maps", True):
        _create(g, "maps", (layout.map_size,), (layout.map_chunk,), np.float16, np.nan)
    if info.get("embeddings"):
        _create(g, "embeddings", (layout.emb_size,), (layout.emb_chunk,), np.float16, np.nan)
    for name, f in layout.flat.items():
        _create(g, name, (f.total,), (f.chunk,), np.float16, np.nan)
    bs = int(info["batch_size"])
    for name, (shape, dtype) in summaries.items():
        _create(g, f"summaries/{name}", (n_items, *shape), (bs, *shape), dtype, np.nan)
    write_index(g, layout, index, meta_json)
    g.attrs["attnkit"] = {**info, "state": "ready"}
    save_metadata(loc)


def write_index(g: Any, layout: Layout, index: Index, meta_json: list[str]) -> None:
    """Write the item table and the per-position arrays (everything the tokenizer knows)."""
    n_items = layout.n_items
    chunk = min(_ITEM_CHUNK, max(n_items, 1))
    writes = []
    columns = {**ITEM_COLUMNS, **{k: v for k, v in PAIR_COLUMNS.items() if k in layout.table}}
    for k, dtype in columns.items():
        arr = _create(g, f"items/{k}", (n_items,), (chunk,), dtype, -1)
        writes.append((arr, (slice(None),), layout.table[k]))
    arr = _create(g, "items/meta", (n_items,), (chunk,), str, "")
    writes.append((arr, (slice(None),), np.asarray(meta_json, dtype=object)))
    for name, values in index.concat(layout).items():
        dtype, fill, c = _POSITION_ARRAYS[name]
        arr = _create(g, name, (len(values),), (min(c, max(len(values), 1)),), dtype, fill)
        writes.append((arr, (slice(None),), values))
    for res in _sync(_gather_writes(writes)):
        if isinstance(res, BaseException):
            raise res


#: Names of the temporary files a killed writer leaves, and nothing else: Zarr's chunk and
#: metadata writes (``<name>.<32 hex digits>.partial``, zarr.storage.LocalStore) and
#: :func:`atomic_write`'s (``<name>.<pid>.<thread id>.tmp``).
_LEFTOVER = re.compile(r"^.+\.(?:[0-9a-f]{32}\.partial|\d+\.\d+\.tmp)$")


def is_store(loc: Location) -> bool:
    """Whether ``loc`` is provably an attnkit store of format 2: its root ``zarr.json``
    carries attnkit's attributes, or (that document damaged) the metadata backup attnkit
    writes beside it (:data:`META_BACKUP`) holds a root document that does. A folder of
    anything else, or a path that does not exist, is not."""
    try:
        if read_info(loc) is not None:
            return True
    except StoreError:
        pass
    backup = _backup(loc)
    try:
        return bool(backup and backup["zarr.json"]["attributes"]["attnkit"])
    except (KeyError, TypeError):
        return False


def require_store(loc: Location, action: str) -> None:
    """Refuse, before anything is written or deleted, a path that is not an attnkit store
    (:func:`is_store`): ``action`` (e.g. ``"repair"``) names what was asked. A store whose
    root document and backup are both damaged still has attnkit's :data:`META_BACKUP` by
    name: it passes (repair then reports the metadata lost), but :func:`remove_leftovers`,
    which needs the proof, deletes nothing in it."""
    if loc.local and not Path(loc.url).exists():
        raise StoreError(f"Cannot {action} {loc}: there is no such folder. Pass the folder "
                         "attnkit.extract(..., store=...) wrote.")
    if loc.local and not Path(loc.url).is_dir():
        raise StoreError(f"Cannot {action} {loc}: it is a file, not a store folder.")
    if not is_store(loc) and not loc.exists(META_BACKUP):
        raise StoreError(
            f"Cannot {action} {loc}: it is not an attnkit store (no zarr.json with attnkit's "
            f"attributes, no {META_BACKUP}). Nothing in it was changed. Pass the folder "
            "attnkit.extract(..., store=...) wrote."
        )


def _own_tops(loc: Location) -> set[str]:
    """The folders at the root of the store that attnkit wrote: ``commits`` and the arrays
    and groups its metadata backup lists (a store written before the backup existed: the
    root's folders with a ``zarr.json``)."""
    backup = _backup(loc)
    if backup is not None:
        tops = {doc.split("/")[0] for doc in backup if "/" in doc}
    else:
        tops = {p.name for p in Path(loc.url).iterdir() if (p / "zarr.json").is_file()}
    return tops | {_COMMITS}


def _own_folder(root: Path, folder: Path, tops: set[str]) -> bool:
    """Whether ``folder`` (inside the store ``root``) is one attnkit writes into: the root,
    or anything under one of its own folders ``tops``."""
    return folder == root or folder.relative_to(root).parts[0] in tops


def remove_leftovers(loc: Location) -> list[Path]:
    """Delete the temporary files a killed writer left in a local store (Zarr's
    ``*.partial`` chunk files, attnkit's ``*.tmp`` markers) and return them; call only
    while holding the lock. Only files provably attnkit's go: the folder must be a store
    (:func:`is_store`), the name must be one a writer makes (:data:`_LEFTOVER`), and it must
    lie where the store writes (the root, ``commits/`` or an array's folder), so a user's
    own ``notes.tmp`` or a folder of theirs inside the store is never touched."""
    if not loc.local or not is_store(loc):
        return []
    root = Path(loc.url)
    tops = _own_tops(loc)
    gone = []
    for pattern in ("*.partial", "*.tmp"):
        for f in root.rglob(pattern):
            if f.is_file() and not f.is_symlink() and _LEFTOVER.match(f.name) \
                    and _own_folder(root, f.parent, tops):
                f.unlink(missing_ok=True)
                gone.append(f)
    return gone


@dataclass
class Repair:
    """What :func:`repair` did to a store and what is left to recompute."""

    restored: list[str]  # metadata documents written back from the backup
    lost: list[str]  # metadata documents damaged with no copy (extract the store again)
    damaged: dict[int, list[str]]  # batch -> damaged arrays (uncommitted: extract recomputes them)
    damaged_index: list[str]  # index arrays extract rewrites from the inputs
    missing: list[int]  # batches never computed
    items: dict[int, str] = field(default_factory=dict)  # batch -> its items, described
    unreadable: str = ""  # why the store could not be opened after the repair

    @property
    def to_recompute(self) -> bool:
        return bool(self.lost or self.damaged or self.damaged_index or self.missing or self.unreadable)


def repair(loc: Location) -> Repair:
    """Rebuild what can be rebuilt in a store and list what must be recomputed.

    Under the writer lock: removes a killed writer's temporary files, restores missing or
    unreadable metadata documents (group attributes included) from :data:`META_BACKUP`,
    re-reads every committed batch against its checksums (maps, embeddings and every
    summary) and forgets damaged ones so that the next ``extract`` recomputes exactly them,
    and checks the index arrays. A store written before the backup existed gets one.
    A path that is not an attnkit store (:func:`require_store`) is refused before anything
    is written or deleted.
    """
    require_store(loc, "repair")
    try:
        lock = WriterLock(loc).acquire()
    except OSError as exc:
        raise StoreError(f"The store {loc} cannot be repaired in place: it cannot be written "
                         f"({exc.strerror}). Copy it to a writable place and repair the copy.") from exc
    try:
        remove_leftovers(loc)
        restored, lost = repair_metadata(loc)
        try:
            reader = StoreReader(loc, require_complete=False)
        except StoreError as exc:
            return Repair(restored, lost, {}, [], [], unreadable=str(exc))
        damaged = {}
        for b in sorted(reader.committed):
            problems = reader.verify_batch(b)
            if problems:
                damaged[b] = problems
        uncommit(loc, damaged)
        missing = [b for b in range(len(reader.layout.batches)) if b not in reader.committed]
        out = Repair(restored, lost, damaged, reader.verify_index(), missing)
        with contextlib.suppress(StoreError):
            out.items = {b: _describe_items(reader.layout.batches[b], reader.meta)
                         for b in [*damaged, *missing]}
        if not lost:
            save_metadata(loc)
        return out
    finally:
        lock.release()


def uncommit(loc: Location, batches: Iterable[int]) -> None:
    """Forget batches (their chunks will be rewritten)."""
    for b in batches:
        loc.remove(_COMMITS, f"{b:06d}.json")
