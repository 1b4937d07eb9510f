"""Attention over many inputs: batched extraction into a resumable, checksummed store.

``extract(model, inputs, store=path)`` writes one batch at a time into a Zarr store
(:mod:`attnkit.store`) and returns an :class:`AttentionSet`; running it again with the same
inputs resumes where an interrupted run stopped and recomputes any batch whose chunks were
damaged. Without ``store`` the set stays in memory (float16). With ``client=`` the batches
run on a Dask cluster (:mod:`attnkit.engine`) and give the same bits.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from . import store as st
from ._progress import progress as _bar
from .attention import ROLES, Attention, pool_maps, word_pooling
from .errors import InputError, StoreError, TruncationWarning

if TYPE_CHECKING:
    from .model import Encoding, Model

STORE_VERSION = st.FORMAT
#: Bytes of decoded batches an AttentionSet keeps for random access (input-order iteration
#: over a length-sorted store touches batches out of order).
CACHE_BYTES = 512 * 2**20
_ROLE_NAMES = np.array(ROLES)
_POSITIONS = ("positions/tokens", "positions/roles", "positions/word_ids", "positions/segments",
              "words/words")


# ------------------------------------------------------------------ backends
class _Memory:
    """Batches held in this process (``store=None``), laid out like a store."""

    def __init__(self, info: dict, layout: st.Layout, index: dict[str, np.ndarray], meta: list[dict]):
        self.info, self.layout, self._index, self._meta = info, layout, index, meta
        self.batches: dict[int, dict[str, np.ndarray]] = {}
        self.loc = None
        self.committed: set[int] = set()

    def meta(self, i: int) -> dict:
        return self._meta[i]

    def has(self, name: str) -> bool:
        if name in self._index:
            return True
        return any(name in d for d in self.batches.values())

    def write(self, b: int, arrays: dict[str, np.ndarray]) -> None:
        self.batches[b] = arrays
        self.committed.add(b)

    def read_batch(self, b: int, names: Iterable[str]) -> dict[str, np.ndarray]:
        return _slice_index(self._index, self.layout, b, names, self.batches.get(b, {}))


def _slice_index(index: dict[str, np.ndarray], lay: st.Layout, b: int, names: Iterable[str],
                 computed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name in names:
        if name in computed:
            out[name] = computed[name]
        elif name.startswith("positions/"):
            out[name] = index[name][slice(*lay.range(b, "pos_offset", "n"))]
        elif name == "words/words":
            out[name] = index[name][slice(*lay.range(b, "word_offset", "n_words"))]
        elif name == "ids/input_ids":
            out[name] = index[name][slice(*lay.range(b, "ids_offset", "n_tokens"))]
        else:
            raise StoreError(f"Batch {b} holds no {name!r}.")
    return out


class AttentionSet(Sequence[Attention]):
    """Attention of one model over many inputs, item by item in input order.

    Iterating yields :class:`Attention` objects (float32 maps ``[L, H, n, n]``, at the
    set's ``level``); the maps are kept as float16 in a store (``path``) or in memory. Every
    read from a store is verified: a damaged chunk raises
    :class:`~attnkit.errors.StoreError` naming the items it holds.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> sset = ak.extract(tiny_model("bert"), ["The cat sat.", "A new book."], progress=False)
    >>> len(sset), sset.level, sset[0].maps.shape[:2]
    (2, 'word', (2, 2))
    """

    def __init__(self, backend: Any, *, cache_bytes: int = CACHE_BYTES):
        self._backend = backend
        self.info: dict[str, Any] = backend.info
        self._layout: st.Layout = backend.layout
        self._cache: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._cache_bytes = cache_bytes
        #: How the set was made: batches computed now and reused from the store.
        self.run_info: dict[str, int] = {}

    # ---------------------------------------------------------------- basics
    @property
    def path(self) -> Path | str | None:
        """Where the store lives (a Path for a local folder, the URL otherwise), or None."""
        loc = self._backend.loc
        if loc is None:
            return None
        return Path(loc.url) if loc.local else loc.url

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

    @property
    def has_maps(self) -> bool:
        """False for a store that keeps only per-item summaries (``keep=`` of extract)."""
        return bool(self.info.get("keep_maps", True))

    @property
    def summaries(self) -> list[str]:
        """Names of the per-item summaries the store keeps (see :meth:`summary`)."""
        return list(self.info.get("summaries", []))

    @property
    def measure(self) -> str:
        """What the maps hold (:mod:`attnkit.measures`); ``"weights"`` for stores without it."""
        return str(self.info.get("measure", "weights"))

    def __len__(self) -> int:
        return self._layout.n_items

    def __repr__(self) -> str:
        where = f" at {self.path}" if self.path else " in memory"
        return (
            f"AttentionSet({len(self)} items, {self.model}, {self.level} level, "
            f"{self.n_layers}x{self.n_heads} heads{where})"
        )

    @property
    def truncated(self) -> np.ndarray:
        """Bool ``[len(self)]``: items cut to the model's maximum length."""
        return self._layout.table["truncated"].astype(bool)

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
        t = self._layout.table
        rows = [
            {"n": int(t["n"][i]), "n_words": int(t["n_words"][i]), "truncated": bool(t["truncated"][i]),
             **self._backend.meta(i)}
            for i in range(len(self))
        ]
        return pd.DataFrame(rows, index=pd.RangeIndex(len(rows), name="item"))

    # ---------------------------------------------------------------- reading
    def _names(self, summaries: Sequence[str] = ()) -> list[str]:
        names = list(_POSITIONS)
        if self.has_maps:
            names.append("maps")
        if self.info.get("embeddings") and self.has_maps:
            names.append("embeddings")
        if self.level == "token" and self.info.get("input_ids", True):
            names.append("ids/input_ids")
        names += [f"summaries/{s}" for s in summaries]
        return names

    def _batch(self, b: int, summaries: Sequence[str] = ()) -> dict[str, np.ndarray]:
        names = self._names(summaries)
        hit = self._cache.get(b)
        if hit is not None and all(n in hit for n in names):
            self._cache.move_to_end(b)
            return hit
        data = self._backend.read_batch(b, names)
        self._cache[b] = data
        while len(self._cache) > 1 and sum(
            sum(v.nbytes for v in d.values()) for d in self._cache.values()
        ) > self._cache_bytes:
            self._cache.popitem(last=False)
        return data

    def _item(self, i: int, data: dict[str, np.ndarray], b: int) -> Attention:
        if not self.has_maps:
            raise StoreError(
                f"This set keeps per-item summaries only ({', '.join(self.summaries)}), not "
                "attention maps: read them with .summary(name), or extract again with "
                "keep='maps'."
            )
        lay, t = self._layout, self._layout.table
        n, L, H = int(t["n"][i]), self.n_layers, self.n_heads
        m0 = lay.map_range(b)[0]
        mo = int(t["map_offset"][i]) - m0
        maps = data["maps"][mo : mo + L * H * n * n].reshape(L, H, n, n)
        p = int(t["pos_offset"][i]) - lay.range(b, "pos_offset", "n")[0]
        w = int(t["word_offset"][i]) - lay.range(b, "word_offset", "n_words")[0]
        emb = None
        if "embeddings" in data:
            d = self.info["embedding_dim"]
            e = int(t["emb_offset"][i]) - lay.emb_range(b)[0]
            emb = data["embeddings"][e : e + n * d].astype(np.float32).reshape(n, d)
        ids = None
        if "ids/input_ids" in data and int(t["n_tokens"][i]) == n:
            k = int(t["ids_offset"][i]) - lay.range(b, "ids_offset", "n_tokens")[0]
            ids = data["ids/input_ids"][k : k + n]
        return Attention(
            maps=maps.astype(np.float32),
            tokens=[str(x) for x in data["positions/tokens"][p : p + n]],
            roles=_ROLE_NAMES[data["positions/roles"][p : p + n]],
            word_ids=data["positions/word_ids"][p : p + n].astype(np.int64),
            words=[str(x) for x in data["words/words"][w : w + int(t["n_words"][i])]],
            level=self.level,
            segments=data["positions/segments"][p : p + n].astype(np.int64),
            embeddings=emb,
            meta=dict(self._backend.meta(i)),
            truncated=bool(t["truncated"][i]),
            model=self.model,
            causal=self.causal,
            input_ids=ids,
            measure=self.measure,
        )

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"item {i} out of range for {len(self)} items")
        b = int(self._layout.table["batch"][i])
        return self._item(i, self._batch(b), b)

    def __iter__(self) -> Iterator[Attention]:
        for i in range(len(self)):
            yield self[i]

    @property
    def n_batches(self) -> int:
        return len(self._layout.batches)

    def batch_items(self, b: int) -> np.ndarray:
        """Item indices of stored batch ``b``, in the order the store holds them.

        Parameters
        ----------
        b : int
            A batch, ``0 <= b < n_batches`` (batches hold inputs of similar length).

        Returns
        -------
        numpy.ndarray
            Int indices of the batch's items in input order.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> aset = ak.extract(tiny_model("bert"), ["A cat.", "The cat sat on the mat.", "We read."],
        ...                   batch_size=2, progress=False)
        >>> aset.n_batches, sorted(int(i) for b in range(aset.n_batches) for i in aset.batch_items(b))
        (2, [0, 1, 2])
        """
        return self._layout.batches[b]

    def read_batch(self, batch: int, *, summaries: Sequence[str] = ()) -> tuple[np.ndarray, list[Attention] | None, dict[str, np.ndarray]]:
        """Items of stored batch ``batch`` with their attention and per-item summaries, in
        one verified read (how the corpus analyses read a store, batch by batch).

        Parameters
        ----------
        batch : int
            A batch, ``0 <= batch < n_batches``.
        summaries : sequence of str
            Per-item summaries to read too (any of :attr:`summaries`).

        Returns
        -------
        items : numpy.ndarray
            Input-order indices of the batch's items.
        attentions : list of Attention or None
            Their attention, same order; None for a store that keeps summaries only.
        rows : dict of str to numpy.ndarray
            Each requested summary's rows (same order), and ``"n"``, the items' lengths.

        Raises
        ------
        StoreError
            When a chunk of the batch is damaged or missing (naming its items).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> aset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read it."], batch_size=2,
        ...                   keep=("maps", "stats"), progress=False)
        >>> items, atts, rows = aset.read_batch(0, summaries=["stats"])
        >>> sorted(items.tolist()), len(atts), rows["stats"].shape, rows["n"].tolist()
        ([0, 1], 2, (2, 2, 2, 8), [6, 6])
        """
        b = batch
        data = self._batch(b, summaries)
        items = self._layout.batches[b]
        atts = [self._item(int(i), data, b) for i in items] if self.has_maps else None
        rows = {s: data[f"summaries/{s}"] for s in summaries}
        rows["n"] = self._layout.table["n"][items]
        return items, atts, rows

    def summary(self, kind: str) -> np.ndarray:
        """A per-item summary of every item, rows in input order.

        Parameters
        ----------
        kind : str
            One of :attr:`summaries` (``"stats"``, ``"edges"``; see
            :mod:`attnkit.summaries`).

        Returns
        -------
        numpy.ndarray
            ``[items, ...]``: ``stats`` is ``[items, layer, head, 8]``, ``edges``
            ``[items, layer, head, k, 3]``.

        Raises
        ------
        InputError
            When the set does not keep that summary.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> aset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read it."],
        ...                   keep="stats", progress=False)
        >>> aset.has_maps, aset.summary("stats").shape
        (False, (2, 2, 2, 8))
        """
        name = kind
        if name not in self.summaries:
            raise InputError(f"This set keeps no summary {name!r}; it has {self.summaries or 'none'}.")
        parts, order = [], []
        for b in range(self.n_batches):
            items, _, s = self.read_batch(b, summaries=[name])
            parts.append(s[name])
            order.append(items)
        rows = np.concatenate(parts)
        out = np.empty_like(rows)
        out[np.concatenate(order)] = rows
        return out

    @property
    def location(self) -> st.Location | None:
        """The store's :class:`attnkit.store.Location` (None in memory)."""
        return self._backend.loc

    # --------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | Path | st.Location, *, storage_options: dict | None = None) -> AttentionSet:
        """Open a finished store written by :func:`extract`, read-only (no model needed).

        Stores of format 1 (folders of ``.npy`` batches) open read-only too; convert them
        with ``attnkit store migrate PATH``. :func:`attnkit.open_store` is the same.

        Parameters
        ----------
        path : str, Path or attnkit.store.Location
            The store folder given to ``extract(..., store=path)``, or an fsspec URL.
        storage_options : dict, optional
            Passed to fsspec (credentials, endpoint).

        Returns
        -------
        AttentionSet
            Reading maps batch by batch as items are asked for; every read is verified
            against the chunks' checksums.

        Raises
        ------
        StoreError
            When there is no attnkit store at ``path``, it is incomplete, or damaged.

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
        loc = st.Location.of(path, storage_options)
        from . import _store_v1

        if loc.local and _store_v1.is_v1(Path(loc.url)):
            return cls(_store_v1.V1Backend(Path(loc.url)))
        if st.read_info(loc) is None:
            raise StoreError(
                f"{loc} is not an attnkit store (no Zarr group with attnkit attributes, no "
                "manifest.json). Check the path, or run attnkit.extract(..., store=...) to make one."
            )
        return cls(st.StoreReader(loc))


def open_store(path: str | Path, *, storage_options: dict | None = None) -> AttentionSet:
    """Open an attention store read-only, without the model.

    Parameters
    ----------
    path : str or Path
        A folder written by :func:`extract`, or an fsspec URL (``s3://bucket/run.zarr``,
        ``memory://run``). Format-1 stores (``.npy`` batches) open read-only as well.
    storage_options : dict, optional
        Passed to fsspec (credentials, endpoint).

    Returns
    -------
    AttentionSet
        Every read is verified against the chunks' crc32c checksums.

    Raises
    ------
    StoreError
        When there is no store at ``path``, it is incomplete, or its item table is damaged.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> _ = ak.extract(tiny_model("bert"), ["The cat sat."], store="memory://doc-open",
    ...                progress=False)
    >>> ak.open_store("memory://doc-open")[0].tokens
    ['[CLS]', 'The', 'cat', 'sat', '.', '[SEP]']
    """
    return AttentionSet.open(path, storage_options=storage_options)


# ----------------------------------------------------------------- planning
def _plan(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Batches of item indices: items sorted by length (stable), cut every batch_size."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


def level_positions(enc: Encoding, level: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, Any]:
    """Tokens, roles, word ids and segments of an encoding at ``level`` (and the word
    pooling that gets there, None at token level)."""
    roles = np.array(enc.roles)
    word_ids = np.array(enc.word_ids)
    segments = np.array(enc.segments)
    if level == "token":
        return list(enc.tokens), roles, word_ids, segments, None
    pool = word_pooling(word_ids, roles)
    keep = pool.first
    tokens = [enc.words[word_ids[p]] if roles[p] == "word" else enc.tokens[p] for p in keep]
    return tokens, roles[keep], word_ids[keep], segments[keep], pool


def model_fingerprint(model: Model) -> str:
    """A hash of the model's configuration and a sample of every weight tensor: two
    different models (or a model and its fine-tuned version) never share it."""
    h = hashlib.sha256()
    cfg = {k: v for k, v in model.config.to_dict().items()
           if k not in ("_name_or_path", "transformers_version", "_attn_implementation_autoset")}
    h.update(json.dumps(cfg, sort_keys=True, default=str).encode())
    with torch.no_grad():
        for name, p in sorted(model.hf.named_parameters()):
            h.update(name.encode())
            h.update(str(tuple(p.shape)).encode())
            h.update(p.detach().reshape(-1)[:1024].float().cpu().numpy().tobytes())
    return h.hexdigest()


def model_info(model: Model) -> dict[str, Any]:
    """What a store records about the model (computed where the model lives)."""
    return {
        "model": model.name,
        "n_layers": model.n_layers,
        "n_heads": model.n_heads,
        "causal": model.causal,
        "max_length": model.max_length,
        "embedding_dim": int(model.hf.get_input_embeddings().embedding_dim),
        "model_fingerprint": model_fingerprint(model),
    }


def _inputs_fingerprint(encodings: list, level: str, batch_size: int, embeddings: bool,
                        keep: list[str]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([level, batch_size, embeddings, keep, st.FORMAT]).encode())
    for e in encodings:
        h.update(json.dumps([e.input_ids, e.words, e.meta, e.type_ids], default=str).encode())
    return h.hexdigest()


def v1_fingerprint(name: str, n_layers: int, n_heads: int, encodings: list, level: str,
                   batch_size: int, embeddings: bool) -> str:
    """The fingerprint a format-1 store of these inputs recorded (to reuse migrated stores)."""
    h = hashlib.sha256()
    h.update(json.dumps([name, n_layers, n_heads, level, batch_size, embeddings, 1]).encode())
    for e in encodings:
        h.update(json.dumps([e.input_ids, e.words, e.meta], default=str).encode())
    return h.hexdigest()


def build_index(encodings: list, level: str) -> tuple[st.Index, list[int]]:
    """The store index of every item (what the tokenizer knows) and each item's length."""
    tokens, roles, word_ids, segments, n = [], [], [], [], []
    for e in encodings:
        t, r, w, s, _ = level_positions(e, level)
        tokens.append(t)
        roles.append(r)
        word_ids.append(w)
        segments.append(s)
        n.append(len(t))
    index = st.Index(tokens, roles, word_ids, segments,
                     [np.asarray(e.input_ids) for e in encodings],
                     [list(e.words) for e in encodings], [dict(e.meta) for e in encodings])
    return index, n


# ----------------------------------------------------------------- one batch
def _half(a: np.ndarray) -> np.ndarray:
    """float16 copy of an array; torch converts with F16C, numpy's astype is ~10x slower."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.float16).numpy()


def compute_batch(model: Model, encs: list, level: str, embeddings: bool, keep_maps: bool = True,
                  summarize: dict[str, Callable[[Attention], np.ndarray]] | None = None,
                  measure: str = "weights") -> dict[str, np.ndarray]:
    """Run one batch and pack it as the store holds it: flat float16 ``maps`` and
    ``embeddings`` (items one after another, at ``level``) and ``summaries/<name>`` rows.

    Summaries are computed from the float16-rounded maps, so they equal what an analysis
    computes from a store that keeps the maps.
    """
    maps, embs = model.run(encs, embeddings=embeddings, measure=measure)
    parts, eparts = [], []
    rows: dict[str, list[np.ndarray]] = {k: [] for k in (summarize or {})}
    for k, (enc, m) in enumerate(zip(encs, maps)):
        tokens, roles, word_ids, segments, pool = level_positions(enc, level)
        e = embs[k] if embs is not None else None
        if pool is not None:
            m = pool_maps(m, pool)
            if e is not None:
                e = pool.mean_from @ e
        h = _half(m)
        parts.append(h.ravel())
        if e is not None:
            eparts.append(_half(e).ravel())
        if summarize:
            att = Attention(maps=h.astype(np.float32), tokens=tokens, roles=roles, word_ids=word_ids,
                            words=enc.words, level=level, segments=segments, meta=dict(enc.meta),
                            truncated=enc.truncated, model=model.name, causal=model.causal,
                            input_ids=np.asarray(enc.input_ids) if level == "token" else None,
                            measure=measure)
            for name, fn in summarize.items():
                rows[name].append(np.asarray(fn(att)))
    out: dict[str, np.ndarray] = {}
    if keep_maps:
        out["maps"] = np.concatenate(parts)
        if eparts:
            out["embeddings"] = np.concatenate(eparts)
    for name, r in rows.items():
        out[f"summaries/{name}"] = np.stack(r)
    return out


# ----------------------------------------------------------------- extract
def _keep(keep: str | Sequence[str]) -> tuple[bool, list[str]]:
    from .summaries import SUMMARIES

    names = [keep] if isinstance(keep, str) else list(keep)
    bad = [k for k in names if k != "maps" and k not in SUMMARIES]
    if bad or not names:
        raise InputError(
            f"keep must name 'maps' and/or per-item summaries {sorted(SUMMARIES)}; got {keep!r}."
        )
    return "maps" in names, sorted(k for k in names if k != "maps")


def extract(
    model: Model | str,
    inputs: Iterable[Any],
    *,
    batch_size: int = 32,
    level: str = "word",
    store: str | Path | None = None,
    embeddings: bool = False,
    keep: str | Sequence[str] = "maps",
    measure: str = "weights",
    client: Any = None,
    storage_options: dict | None = None,
    verify: bool = True,
    progress: bool = True,
) -> AttentionSet:
    """Attention of ``model`` on every input, batched, pooled to words on request.

    Parameters
    ----------
    model : Model or str
        A :class:`attnkit.model.Model`, or a name :func:`attnkit.load` resolves
        (``"minilm"``, a Hugging Face id in the cache, a folder) or a factory
        ``"package.module:function"`` returning a Model. With ``client``, pass a name: each
        worker loads the model once.
    inputs : iterable
        Texts, ``(text_a, text_b)`` pairs, word lists or treebank sentences (anything
        :meth:`Model.encode` takes); a sentence's ``id`` is kept as ``sent_id``.
    batch_size : int
        Inputs per forward pass (items are sorted by length first).
    level : {"word", "token"}
        ``"word"`` pools word-pieces (Clark et al.); ``"token"`` keeps them and the token ids.
    store : str or Path, optional
        Folder or fsspec URL (``s3://…``, ``memory://…``) of a Zarr store. Batches are
        committed as they finish; calling again with the same model, inputs and options
        reuses committed batches and recomputes missing or damaged ones. ``None`` keeps
        everything in memory.
    embeddings : bool
        Also keep the model's input embeddings per position (for probes).
    keep : str or sequence of str
        ``"maps"`` (default) keeps the attention maps; per-item summaries of
        :data:`attnkit.summaries.SUMMARIES` (``"stats"``, ``"edges"``) can be kept beside
        or instead of them, for corpora whose maps would not fit on any disk.
    measure : str
        What the maps hold (:mod:`attnkit.measures`): ``"weights"``, ``"norm"``,
        ``"norm+residual"``, ``"alti"`` or ``"grad×attn"``; the mixed measures store one
        head per layer. Word pooling sums *to* a word and averages *from* it, whatever
        the measure.
    client : dask.distributed.Client or str, optional
        Run the batches on this Dask cluster (or the scheduler at this address); workers
        write straight into ``store``. ``None`` runs in this process; the maps are the
        same bits either way.
    storage_options : dict, optional
        fsspec options of ``store`` (credentials, endpoint).
    verify : bool
        On resume, re-read every committed batch and recompute those whose checksums fail.
    progress : bool
        Show a progress bar.

    Returns
    -------
    AttentionSet
        ``run_info`` counts the batches computed now and reused from the store.

    Raises
    ------
    InputError
        No inputs, or an unknown ``level``/``keep``/``measure``.
    StoreError
        ``store`` holds another model's or other inputs' attention, another process is
        writing it, or the disk filled up (finished batches stay committed).
    ModelNotFoundError
        The model name cannot be loaded (here or on the workers).
    ClusterError
        The scheduler cannot be reached, or workers kept dying on a shard.

    Items longer than the model's maximum are truncated, flagged (``AttentionSet.truncated``)
    and counted in one :class:`~attnkit.errors.TruncationWarning`.

    Examples
    --------
    >>> import attnkit as ak
    >>> from attnkit.testing import tiny_model
    >>> sset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read."], level="token",
    ...                   progress=False)
    >>> sset[1].tokens, sset[1].maps.shape
    (['[CLS]', 'we', 'read', '.', '[SEP]'], (2, 2, 5, 5))
    """
    if level not in ("word", "token"):
        raise InputError(f"level must be 'word' or 'token', not {level!r}.")
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, not {batch_size}.")
    keep_maps, summary_names = _keep(keep)
    from .measures import check_measure

    measure = check_measure(measure)
    if embeddings and not keep_maps:
        raise InputError("embeddings=True needs keep to include 'maps'.")
    items = list(inputs)
    if not items:
        raise InputError("extract() got no inputs.")
    from . import engine

    runner = engine.runner(model, client)
    try:
        return _extract(runner, items, batch_size=batch_size, level=level, store=store,
                        embeddings=embeddings, keep_maps=keep_maps, summary_names=summary_names,
                        measure=measure, storage_options=storage_options, verify=verify, progress=progress)
    finally:
        runner.close()


def _extract(runner: Any, items: list, *, batch_size: int, level: str, store: str | Path | None,
             embeddings: bool, keep_maps: bool, summary_names: list[str], measure: str,
             storage_options: dict | None, verify: bool, progress: bool) -> AttentionSet:
    from types import SimpleNamespace

    from .measures import n_heads

    encodings, minfo = runner.encode(items, progress=progress)
    minfo = {**minfo, "n_heads": n_heads(SimpleNamespace(n_heads=minfo["n_heads"]), measure)}
    plan = _plan([len(e) for e in encodings], batch_size)
    index, n = build_index(encodings, level)
    emb_dim = minfo["embedding_dim"] if embeddings else 0
    layout = st.plan_layout(
        plan, n, [len(e) for e in encodings], [len(e.words) for e in encodings],
        [e.truncated for e in encodings], n_layers=minfo["n_layers"], n_heads=minfo["n_heads"],
        embedding_dim=emb_dim if keep_maps else 0,
    )
    from .summaries import SUMMARIES

    info = {
        "format": st.FORMAT,
        **minfo,
        "level": level,
        "batch_size": batch_size,
        "n_items": len(items),
        "n_batches": len(plan),
        "embeddings": embeddings,
        "embedding_dim": emb_dim,
        "keep_maps": keep_maps,
        "summaries": summary_names,
        "measure": measure,
        "input_ids": True,
        "chunks": {"maps": layout.map_chunk, "embeddings": layout.emb_chunk},
        "sizes": {"maps": layout.map_size if keep_maps else 0, "embeddings": layout.emb_size},
        "inputs_fingerprint": _inputs_fingerprint(encodings, level, batch_size, embeddings,
                                                  ["maps"] * keep_maps + summary_names),
    }
    meta_json = [json.dumps(e.meta, default=str) for e in encodings]
    summarize = {k: SUMMARIES[k].compute for k in summary_names}
    shapes = {k: (SUMMARIES[k].shape(minfo), SUMMARIES[k].dtype) for k in summary_names}
    lock: st.WriterLock | None = None
    if store is None:
        backend: Any = _Memory(info, layout, index.concat(layout), [dict(e.meta) for e in encodings])
        done: set[int] = set()
    else:
        loc = st.Location.of(store, storage_options)
        v1 = v1_fingerprint(minfo["model"], minfo["n_layers"], minfo["n_heads"], encodings, level,
                            batch_size, embeddings)
        lock, done = _prepare_store(loc, info, layout, index, meta_json, shapes, v1,
                                    verify=verify, progress=progress)
        backend = None
    todo = [b for b in range(len(plan)) if b not in done]
    bar = _bar(show=progress, desc=f"attention ({minfo['model']})", total=len(items),
               initial=sum(len(plan[b]) for b in done))
    try:
        runner.run(todo, [[encodings[i] for i in plan[b]] for b in todo], level, embeddings,
                   keep_maps, summarize, measure, sink=backend.write if lock is None else None,
                   loc=None if lock is None else loc, token=None if lock is None else lock.token,
                   on_done=lambda b: bar.update(len(plan[b])))
    finally:
        bar.close()
        if lock is not None:
            lock.release()
    n_trunc = sum(e.truncated for e in encodings)
    if n_trunc:
        warnings.warn(
            f"{n_trunc} of {len(items)} inputs were longer than {minfo['model']}'s maximum of "
            f"{minfo['max_length']} tokens and were truncated (see AttentionSet.truncated).",
            TruncationWarning,
            stacklevel=3,
        )
    if store is not None:
        backend = st.StoreReader(loc)
    out = AttentionSet(backend)
    out.run_info = {"computed_batches": len(todo), "reused_batches": len(done)}
    return out


def _prepare_store(loc: st.Location, info: dict, layout: st.Layout, index: st.Index,
                   meta_json: list[str], shapes: dict, v1: str, *, verify: bool,
                   progress: bool) -> tuple[st.WriterLock, set[int]]:
    """Take the writer lock; create the store, or check it holds these inputs and find the
    batches to reuse (committed and, with ``verify``, intact)."""
    from . import _store_v1

    if loc.local and _store_v1.is_v1(Path(loc.url)):
        raise StoreError(
            f"{loc} is a store of format 1 (.npy batches). Convert it with `attnkit store "
            f"migrate {loc}` (it keeps every batch), or extract into a new store."
        )
    if loc.local and Path(loc.url).is_file():
        raise StoreError(f"{loc} is a file, not a store folder; pass a folder path.")
    lock = st.WriterLock(loc).acquire()
    try:
        st.remove_leftovers(loc)
        old = st.read_info(loc)
        if old is None:
            if loc.local and any(p.name != "writer.lock" for p in Path(loc.url).iterdir()):
                raise StoreError(
                    f"{loc} is a folder with other files in it, not an attnkit store; pass a "
                    "new or empty folder."
                )
            st.create(loc, info, layout, index, meta_json, summaries=shapes)
            return lock, set()
        _check_same(loc, old, info, v1)
        if old.get("state") != "ready":
            st.uncommit(loc, st.committed_batches(loc))
            st.create(loc, {**info, **{k: old[k] for k in ("fingerprint_v1",) if k in old}},
                      layout, index, meta_json, summaries=shapes)
            return lock, set()
        try:
            reader = st.StoreReader(loc, require_complete=False)
            damaged_index = bool(reader.verify_index())
        except StoreError:  # the item table is damaged
            damaged_index = True
        if damaged_index:  # everything in the index comes from the inputs: write it again
            import zarr

            g = zarr.open_group(loc.url, mode="a", storage_options=loc.storage_options or None)
            st.write_index(g, layout, index, meta_json)
            reader = st.StoreReader(loc, require_complete=False)
        done = set(reader.committed)
        if verify and done:
            bad = []
            for b in _bar(sorted(done), show=progress, desc="verifying store", unit="batch"):
                if reader.verify_batch(b):
                    bad.append(b)
            st.uncommit(loc, bad)
            done -= set(bad)
        return lock, done
    except BaseException:
        lock.release()
        raise


def _check_same(loc: st.Location, old: dict, new: dict, v1: str) -> None:
    if old.get("fingerprint_v1") and old["fingerprint_v1"] == v1 and old.get("model") == new["model"]:
        if old.get("inputs_fingerprint") != new["inputs_fingerprint"]:
            new["inputs_fingerprint"] = old["inputs_fingerprint"]  # a migrated store of these inputs
        if old.get("model_fingerprint") in (None, new["model_fingerprint"]):
            new["model_fingerprint"] = old.get("model_fingerprint") or new["model_fingerprint"]
    diffs = []
    if old.get("model") != new["model"] or old.get("model_fingerprint") not in (None, new["model_fingerprint"]):
        diffs.append(f"model {old.get('model')!r} (weights {str(old.get('model_fingerprint'))[:10]}) "
                     f"vs {new['model']!r} (weights {new['model_fingerprint'][:10]})")
    for key in ("level", "batch_size", "embeddings", "keep_maps", "summaries", "n_items"):
        if old.get(key) != new[key]:
            diffs.append(f"{key} {old.get(key)!r} vs {new[key]!r}")
    if old.get("measure", "weights") != new["measure"]:
        diffs.append(f"measure {old.get('measure', 'weights')!r} vs {new['measure']!r}")
    if not diffs and old.get("inputs_fingerprint") != new["inputs_fingerprint"]:
        diffs.append("the inputs themselves (same count, different texts or ids)")
    if diffs:
        raise StoreError(
            f"The store {loc} holds attention of another model or other inputs or options: "
            + "; ".join(diffs) + ". Use a new store, or delete this one to start over."
        )


# ----------------------------------------------------------------- in process
def run_in_process(model: Model, todo: list[int], encs: list[list], level: str, embeddings: bool,
                   keep_maps: bool, summarize: dict, measure: str = "weights", *,
                   write: Callable[[int, dict], None],
                   background: bool, on_done: Callable[[int], None]) -> None:
    """Compute batches here and hand each to ``write``; with ``background`` a thread writes
    one batch while the next one runs."""
    pool = ThreadPoolExecutor(max_workers=1) if background else None
    pending: tuple[int, Future] | None = None
    try:
        for b, e in zip(todo, encs):
            arrays = compute_batch(model, e, level, embeddings, keep_maps, summarize, measure)
            if pool is None:
                write(b, arrays)
                on_done(b)
                continue
            if pending is not None:
                pending[1].result()
                on_done(pending[0])
            pending = (b, pool.submit(write, b, arrays))
        if pending is not None:
            pending[1].result()
            on_done(pending[0])
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
