"""Attention over many inputs: :class:`AttentionSet`, read from memory or a store.

:func:`attnkit.extract` (:mod:`attnkit.storage.extraction`) makes one; :func:`open_store` reopens
a Zarr store (:mod:`attnkit.storage.store`) without the model. Every read from a store is verified
against its checksums.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from . import store as st
from . import store_v1
from .batches import slice_index
from ..core.attention import ROLES, Attention
from ..core.cross import CrossAttention, Seq2SeqAttention
from ..core import validate
from ..errors import InputError, StoreError
from ..core.qkstates import QKStates

if TYPE_CHECKING:
    pass

#: Bytes of decoded batches an AttentionSet keeps for random access (input-order iteration
#: over a length-sorted store touches batches out of order).
CACHE_BYTES = 512 * 2**20
_ROLE_NAMES = np.array(ROLES)
_POSITIONS = ("positions/tokens", "positions/roles", "positions/word_ids", "positions/segments",
              "words/words")


# ------------------------------------------------------------------ backends
class MemoryBackend:
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

    def read_batch(self, b: int, names: Iterable[str], *, check_fill: bool = True) -> dict[str, np.ndarray]:
        return slice_index(self._index, self.layout, b, names, self.batches.get(b, {}))


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
    def qk_layers(self) -> list[int]:
        """Layers whose post-rotary queries and keys the set keeps (``keep="qk"`` of
        extract); empty for none."""
        return list((self.info.get("qk") or {}).get("layers", []))

    def qk_states(self, item: int) -> QKStates:
        """The queries and keys item ``i`` keeps (float32 from the float16 store).

        Parameters
        ----------
        item : int
            Item (input order).

        Returns
        -------
        QKStates
            ``queries(layer)`` ``[heads, n, d]`` and ``keys(layer)`` ``[key heads, n, d]``
            of the kept layers.

        Raises
        ------
        InputError
            When the set keeps no queries and keys.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> sset = ak.extract(tiny_model("llama"), ["The cat sat.", "We read."], level="token",
        ...                   keep="qk", qk_layers=[1], progress=False)
        >>> sset.qk_layers, sset.qk_states(0).queries(1).shape, sset.qk_states(0).keys(1).shape
        ([1], (2, 7, 8), (1, 7, 8))
        """
        if not self.qk_layers:
            raise InputError("This set keeps no queries and keys; extract with keep=('maps', 'qk') "
                             "and level='token'.")
        i = self._index_of(item)
        b = int(self._layout.table["batch"][i])
        return self._qk(i, self._batch(b), b)

    def _qk(self, i: int, data: dict[str, np.ndarray], b: int) -> QKStates:
        qk = self.info["qk"]
        lay, n = self._layout, int(self._layout.table["n"][i])
        layers = list(qk["layers"])
        shapes = {"qk/queries": qk["heads"], "qk/keys": qk["kv_heads"]}
        got = {}
        for name, heads in shapes.items():
            o = int(lay.flat[name].offsets[i]) - lay.flat_range(b, name)[0]
            size = len(layers) * heads * n * qk["dim"]
            got[name] = data[name][o : o + size].reshape(len(layers), heads, n, qk["dim"])
        p = int(lay.table["pos_offset"][i]) - lay.range(b, "pos_offset", "n")[0]
        return QKStates({x: got["qk/queries"][j] for j, x in enumerate(layers)},
                        {x: got["qk/keys"][j] for j, x in enumerate(layers)},
                        dict(zip(layers, qk["scaling"])), qk.get("softcap"),
                        tokens=[str(x) for x in data["positions/tokens"][p : p + n]],
                        roles=_ROLE_NAMES[data["positions/roles"][p : p + n]], causal=self.causal)

    def _index_of(self, i: int) -> int:
        return validate.index(i, len(self), "item")

    @property
    def measure(self) -> str:
        """What the maps hold (:mod:`attnkit.runtime.measures`); ``"weights"`` for stores without it."""
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
    def _names(self, summaries: Sequence[str] = (), extra: Sequence[str] = ()) -> list[str]:
        names = [*_POSITIONS, *extra]
        if self.has_maps:
            names.append("maps")
        if self.info.get("embeddings") and self.has_maps:
            names.append("embeddings")
        if self.level == "token" and self.info.get("input_ids", True):
            names.append("ids/input_ids")
        names += [f"summaries/{s}" for s in summaries]
        if self.qk_layers:
            names += ["qk/queries", "qk/keys"]
        return names

    def _batch(self, b: int, summaries: Sequence[str] = (), extra: Sequence[str] = ()) -> dict[str, np.ndarray]:
        names = self._names(summaries, extra)
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

    @property
    def pairs(self) -> list[str]:
        """What a store of (source, target) pairs of an encoder–decoder model keeps:
        ``"cross"`` (every item's maps) and ``"encoder"``/``"decoder"`` (:meth:`pair`);
        empty for one-stack models."""
        return list(self.info.get("pairs") or {})

    def pair(self, item: int) -> Seq2SeqAttention:
        """Cross-attention of item ``item`` of a store of pairs with the encoder's and the
        decoder's self-attention it keeps (``extract(..., keep=("cross", "encoder",
        "decoder"))``).

        Parameters
        ----------
        item : int
            Item (input order).

        Returns
        -------
        Seq2SeqAttention
            ``.cross`` as ``self[item]``; ``.encoder`` and ``.decoder`` :class:`Attention`,
            None where the store does not keep them.

        Raises
        ------
        InputError
            When the set does not hold (source, target) pairs.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_seq2seq
        >>> sset = ak.extract(tiny_seq2seq("t5"), [("The cat sat.", "A cat.")], level="token",
        ...                   keep=("cross", "encoder"), progress=False)
        >>> s2s = sset.pair(0)
        >>> s2s.cross.shape, s2s.encoder.maps.shape, s2s.decoder is None
        ((2, 2, 5, 5), (2, 2, 5, 5), True)
        """
        if not self.pairs:
            raise InputError("This set holds the attention of a one-stack model, not (source, "
                             "target) pairs of an encoder-decoder; read its items with set[i].")
        i = self._index_of(item)
        b = int(self._layout.table["batch"][i])
        extra = tuple(st.PAIR_ARRAYS[k] for k in self.pairs if k in st.PAIR_ARRAYS)
        data = self._batch(b, extra=extra)
        cross = self._cross(i, data, b)
        sides: dict[str, Any] = {}
        for k, name in st.PAIR_ARRAYS.items():
            if name not in data:
                sides[k] = None
                continue
            L, H = self.info["pairs"][k]
            n = cross.n_columns if k == "encoder" else len(cross)
            o = int(self._layout.flat[name].offsets[i]) - self._layout.flat_range(b, name)[0]
            maps = data[name][o : o + L * H * n * n].astype(np.float32).reshape(L, H, n, n)
            rows = "source_" if k == "encoder" else ""
            sides[k] = Attention(
                maps=maps, tokens=getattr(cross, f"{rows}tokens"),
                roles=getattr(cross, f"{rows}roles"), word_ids=getattr(cross, f"{rows}word_ids"),
                words=getattr(cross, f"{rows}words"), level=self.level, model=self.model,
                causal=k == "decoder", meta=dict(cross.meta))
        return Seq2SeqAttention(sides["encoder"], sides["decoder"], cross, model=self.model,
                                meta=dict(cross.meta))

    def _cross(self, i: int, data: dict[str, np.ndarray], b: int) -> CrossAttention:
        """Item ``i`` of a store of pairs: target positions first, then the source's."""
        lay, t = self._layout, self._layout.table
        n, ns, L, H = int(t["n"][i]), int(t["n_source"][i]), self.n_layers, self.n_heads
        nt = n - ns
        mo = int(t["map_offset"][i]) - lay.map_range(b)[0]
        maps = data["maps"][mo : mo + L * H * nt * ns].reshape(L, H, nt, ns)
        p = int(t["pos_offset"][i]) - lay.range(b, "pos_offset", "n")[0]
        w = int(t["word_offset"][i]) - lay.range(b, "word_offset", "n_words")[0]
        nw, nsw = int(t["n_words"][i]), int(t["n_source_words"][i])
        tokens = [str(x) for x in data["positions/tokens"][p : p + n]]
        roles = _ROLE_NAMES[data["positions/roles"][p : p + n]]
        wids = data["positions/word_ids"][p : p + n].astype(np.int64)
        words = [str(x) for x in data["words/words"][w : w + nw]]
        return CrossAttention(
            maps.astype(np.float32), tokens[:nt], roles[:nt], wids[:nt], words[: nw - nsw],
            tokens[nt:], roles[nt:], wids[nt:], words[nw - nsw :], level=self.level,
            meta=dict(self._backend.meta(i)), model=self.model, measure=self.measure)

    def _item(self, i: int, data: dict[str, np.ndarray], b: int) -> Any:
        if not self.has_maps:
            raise StoreError(
                f"This set keeps per-item summaries only ({', '.join(self.summaries)}), not "
                "attention maps: read them with .summary(name), or extract again with "
                "keep='maps'."
            )
        if self.pairs:
            return self._cross(i, data, b)
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
            qk=self._qk(i, data, b) if "qk/queries" in data else None,
        )

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = validate.integer(i, "item")
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):  # an IndexError, as Python's sequences raise
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
        b = validate.index(b, len(self._layout.batches), "b")
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
        batch = validate.index(batch, len(self._layout.batches), "batch")
        b = batch
        data = self._batch(b, summaries)
        items = self._layout.batches[b]
        atts = [self._item(int(i), data, b) for i in items] if self.has_maps else None
        rows = {s: data[f"summaries/{s}"] for s in summaries}
        rows["n"] = self._layout.table["n"][items]
        return items, atts, rows

    def qk_batch(self, batch: int) -> tuple[np.ndarray, list[QKStates]]:
        """Queries and keys of every item of stored batch ``batch``, in one verified read of
        the queries, keys, tokens and roles only (no maps), not kept in the set's cache: how
        :func:`attnkit.qk_embedding` streams a corpus batch by batch.

        Parameters
        ----------
        batch : int
            A batch, ``0 <= batch < n_batches``.

        Returns
        -------
        items : numpy.ndarray
            Input-order indices of the batch's items.
        states : list of QKStates
            Their queries and keys (``tokens`` and ``roles`` set), same order.

        Raises
        ------
        InputError
            When the set keeps no queries and keys, or ``batch`` is out of range.
        StoreError
            When a chunk of the batch is damaged or missing (naming its items).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> sset = ak.extract(tiny_model("llama"), ["The cat sat.", "We read."], level="token",
        ...                   keep="qk", qk_layers=[1], batch_size=2, progress=False)
        >>> items, states = sset.qk_batch(0)
        >>> sorted(items.tolist()), states[0].queries(1).shape[0], len(states[0].tokens) > 0
        ([0, 1], 2, True)
        """
        if not self.qk_layers:
            raise InputError("This set keeps no queries and keys; extract with keep=('maps', 'qk') "
                             "and level='token'.")
        b = validate.index(batch, self.n_batches, "batch")
        data = self._backend.read_batch(b, ["positions/tokens", "positions/roles", "qk/queries", "qk/keys"])
        items = self._layout.batches[b]
        return items, [self._qk(int(i), data, b) for i in items]

    def qk_head_rows(self, batch: int, *, heads: Sequence[tuple[int, int]] | None = None, queries: bool = True,
                     keys: bool = True, check_fill: bool = True, tokens: bool = False,
                     ) -> tuple[np.ndarray, np.ndarray, dict[str, dict[tuple[int, int], np.ndarray]],
                                tuple[list[list[str]], list[np.ndarray]] | None]:
        """Some heads' queries and/or keys over stored batch ``batch``, one array per head with
        the batch's positions as rows, in one verified read of ``qk/queries`` and/or
        ``qk/keys`` only (no tokens, no per-item objects, nothing kept in the set's cache):
        how :func:`attnkit.qk_embedding` streams a store in chunks.

        Parameters
        ----------
        batch : int
            A batch, ``0 <= batch < n_batches``.
        heads : sequence of (layer, head), optional
            0-indexed heads (layers among :attr:`qk_layers`); None for every kept head.
        queries, keys : bool
            Which to read (each is its own array in the store).
        check_fill : bool
            Scan the values for a missing chunk (the fill value). A second read of a batch
            may skip it; the chunks' checksums are verified on every read.
        tokens : bool
            Read the items' tokens and roles in the same read.

        Returns
        -------
        items : numpy.ndarray
            Input-order indices of the batch's items.
        lengths : numpy.ndarray
            Their lengths; the rows of item ``items[j]`` follow those of ``items[:j]``.
        rows : dict
            ``rows["queries"][(layer, head)]`` and ``rows["keys"][(layer, head)]``: float32
            ``[sum(lengths), d]`` (a key head shared by grouped queries is read for each).
        labels : tuple or None
            With ``tokens``: each item's tokens (list of str) and roles (array), same order.

        Raises
        ------
        InputError
            When the set keeps no queries and keys, or for a batch or layer out of range.
        StoreError
            When a chunk of the batch is damaged or missing (naming its items).

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> sset = ak.extract(tiny_model("llama"), ["The cat sat.", "We read."], level="token",
        ...                   keep="qk", batch_size=2, progress=False)
        >>> items, n, rows, _ = sset.qk_head_rows(0, heads=[(1, 0)])
        >>> i = int(items[0])
        >>> bool((rows["keys"][(1, 0)][:n[0]] == sset.qk_states(i).keys(1)[0]).all())
        True
        """
        if not self.qk_layers:
            raise InputError("This set keeps no queries and keys; extract with keep=('maps', 'qk') "
                             "and level='token'.")
        b = validate.index(batch, self.n_batches, "batch")
        qk = self.info["qk"]
        layers = list(qk["layers"])
        heads = ([(x, h) for x in layers for h in range(int(qk["heads"]))] if heads is None
                 else validate.head_pairs(heads, self.n_layers, int(qk["heads"])))
        for layer, _ in heads:
            if layer not in layers:
                raise InputError(f"heads: layer {layer} is not among the layers whose queries and "
                                 f"keys are kept: {layers}.")
        parts = {"queries": ("qk/queries", int(qk["heads"]), 1),
                 "keys": ("qk/keys", int(qk["kv_heads"]), int(qk["heads"]) // int(qk["kv_heads"]))}
        wanted = [p for p, on in (("queries", queries), ("keys", keys)) if on]
        extra = ["positions/tokens", "positions/roles"] if tokens else []
        data = self._backend.read_batch(b, [parts[p][0] for p in wanted] + extra, check_fill=check_fill)
        lay, d = self._layout, int(qk["dim"])
        items = lay.batches[b]
        n = lay.table["n"][items].astype(np.int64)
        out: dict[str, dict[tuple[int, int], np.ndarray]] = {}
        for p in wanted:
            name, n_heads, groups = parts[p]
            flat = data[name]
            start = lay.flat[name].offsets[items].astype(np.int64) - lay.flat_range(b, name)[0]
            out[p] = {}
            for layer, head in heads:
                j = layers.index(layer) * n_heads + head // groups
                # each item's block is [layers, heads, n, d]: this head's n x d values
                got = np.empty((int(n.sum()), d), dtype=np.float32)
                at = 0
                for o, m in zip((start + j * n * d).tolist(), n.tolist()):
                    got[at:at + m] = flat[o:o + m * d].reshape(m, d)
                    at += m
                out[p][(layer, head)] = got
        labels = None
        if tokens:
            base = lay.range(b, "pos_offset", "n")[0]
            toks, roles = [], []
            for i, m in zip(items, n.tolist()):
                p0 = int(lay.table["pos_offset"][i]) - base
                toks.append([str(x) for x in data["positions/tokens"][p0 : p0 + m]])
                roles.append(_ROLE_NAMES[data["positions/roles"][p0 : p0 + m]])
            labels = (toks, roles)
        return items, n, out, labels

    def batch_tokens(self, batch: int) -> tuple[np.ndarray, list[list[str]], list[np.ndarray]]:
        """Tokens and roles of every item of stored batch ``batch``, read alone (no maps,
        queries or keys).

        Parameters
        ----------
        batch : int
            A batch, ``0 <= batch < n_batches``.

        Returns
        -------
        items : numpy.ndarray
            Input-order indices of the batch's items.
        tokens : list of list of str
            Each item's tokens, same order.
        roles : list of numpy.ndarray
            Each item's position roles (``"special"``, ``"token"``, ...), same order.

        Examples
        --------
        >>> import attnkit as ak
        >>> from attnkit.testing import tiny_model
        >>> sset = ak.extract(tiny_model("bert"), ["The cat sat.", "We read."], batch_size=2,
        ...                   progress=False)
        >>> items, tokens, roles = sset.batch_tokens(0)
        >>> tokens[list(items).index(0)] == sset[0].tokens
        True
        """
        b = validate.index(batch, self.n_batches, "batch")
        data = self._backend.read_batch(b, ["positions/tokens", "positions/roles"])
        lay = self._layout
        items = lay.batches[b]
        base = lay.range(b, "pos_offset", "n")[0]
        toks, roles = [], []
        for i in items:
            p, n = int(lay.table["pos_offset"][i]) - base, int(lay.table["n"][i])
            toks.append([str(x) for x in data["positions/tokens"][p : p + n]])
            roles.append(_ROLE_NAMES[data["positions/roles"][p : p + n]])
        return items, toks, roles

    def summary(self, kind: str) -> np.ndarray:
        """A per-item summary of every item, rows in input order.

        Parameters
        ----------
        kind : str
            One of :attr:`summaries` (``"stats"``, ``"edges"``; see
            :mod:`attnkit.storage.summaries`).

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
        """The store's :class:`attnkit.storage.store.Location` (None in memory)."""
        return self._backend.loc

    # --------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | Path | st.Location, *, storage_options: dict | None = None) -> AttentionSet:
        """Open a finished store written by :func:`extract`, read-only (no model needed).

        Stores of format 1 (folders of ``.npy`` batches) open read-only too; convert them
        with ``attnkit store migrate PATH``. :func:`attnkit.open_store` is the same.

        Parameters
        ----------
        path : str, Path or attnkit.storage.store.Location
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
        if loc.local and store_v1.is_v1(Path(loc.url)):
            return cls(store_v1.V1Backend(Path(loc.url)))
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
