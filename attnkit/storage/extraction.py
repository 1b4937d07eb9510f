"""``extract``: attention of a model over many inputs, into memory or a resumable store.

``extract(model, inputs, store=path)`` plans the batches, runs them here or on a Dask
cluster (:mod:`attnkit.storage.engine`) through the same three steps (:mod:`attnkit.storage.batches`) and
commits each into a Zarr store (:mod:`attnkit.storage.store`) as it finishes; running it again with
the same inputs resumes where an interrupted run stopped and recomputes any batch whose
chunks were damaged. Without ``store`` the set stays in memory (float16).
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from . import engine, store_v1
from ..core import validate
from . import store as st
from .._progress import progress as _bar
from .batches import (
    BatchSpec,
    Destination,
    build_index,
    inputs_fingerprint,
    plan_batches,
    v1_fingerprint,
)
from .corpus import AttentionSet, MemoryBackend
from ..runtime.encoding import Encoding
from ..errors import InputError, StoreError, TruncationWarning
from ..runtime.measures import check_measure, n_heads
from ..runtime.model import Model
from ..runtime.seq2seq import SUPPORTED as SEQ2SEQ_FAMILIES
from ..runtime.seq2seq import Seq2SeqModel
from .summaries import SUMMARIES


#: What ``keep`` may name of an encoder–decoder model: its cross-attention (the items'
#: maps, also ``"maps"``) and the encoder's and decoder's self-attention beside it.
PAIR_KEEP = ("cross", "encoder", "decoder")


def _keep(keep: str | Sequence[str]) -> tuple[bool, list[str], bool, tuple[str, ...]]:
    """Maps kept, summaries, queries and keys, and the pair parts named (``cross`` among
    them when named)."""
    if not isinstance(keep, str) and not isinstance(keep, Iterable):
        raise InputError(f"keep must be a name or a list of names ('maps', 'qk', a summary); "
                         f"got {keep!r}.")
    names = [keep] if isinstance(keep, str) else list(keep)
    bad = [k for k in names if k not in ("maps", "qk", *PAIR_KEEP) and k not in SUMMARIES]
    if bad or not names:
        raise InputError(
            f"keep must name 'maps', 'qk' (queries and keys), per-item summaries "
            f"{sorted(SUMMARIES)} and/or, for an encoder-decoder model, {list(PAIR_KEEP)}; "
            f"got {keep!r}."
        )
    parts = tuple(k for k in PAIR_KEEP if k in names)
    if parts and not ({"maps", "cross"} & set(names)):
        raise InputError(
            f"keep={keep!r}: the encoder's and decoder's self-attention are kept beside the "
            "cross-attention; add 'cross', e.g. keep=('cross', 'encoder', 'decoder').")
    summaries = sorted(k for k in names if k not in ("maps", "qk", *PAIR_KEEP))
    return bool({"maps", "cross"} & set(names)), summaries, "qk" in names, parts


def _pair_info(minfo: dict, spec: BatchSpec, *, qk: bool) -> dict:
    """The model record of a store of (source, target) pairs: its ``n_layers`` and
    ``n_heads`` are the cross-attention's (the decoder's), ``pairs`` the self-attention
    kept beside it (checked before anything is written)."""
    if qk:
        raise InputError("keep='qk' is for one-stack models; an encoder-decoder store keeps "
                         "the cross-attention (keep=('cross', 'encoder', 'decoder')).")
    if spec.embeddings:
        raise InputError("embeddings=True is for one-stack models, not (source, target) pairs.")
    if spec.measure != "weights":
        raise InputError(f"measure={spec.measure!r}: the cross-attention of pairs is stored as "
                         "attention weights only; pass measure='weights'.")
    rect = [k for k in spec.summaries if k != "stats"]
    if rect:
        raise InputError(f"The summaries {rect} need square maps; a store of pairs keeps "
                         "'stats' (head statistics of the cross-attention) only.")
    dec = minfo["decoder"]
    shapes = {"cross": [dec["layers"], dec["heads"]], "encoder": [minfo["n_layers"], minfo["n_heads"]],
              "decoder": [dec["layers"], dec["heads"]]}
    return {**minfo, "n_layers": dec["layers"], "n_heads": dec["heads"], "causal": False,
            "pairs": {k: shapes[k] for k in ("cross", *spec.pair_parts)}}


def _no_pairs(model: Any, parts: tuple[str, ...]) -> None:
    if parts:
        name = model if isinstance(model, str) else getattr(model, "name", "this model")
        raise InputError(
            f"keep names {list(parts)}, the attention of an encoder-decoder model, but {name} "
            "has one stack (encoder-only or decoder-only). Cross-attention needs a model "
            f"attnkit.load reads as encoder-decoder ({', '.join(SEQ2SEQ_FAMILIES)}); for a "
            "one-stack model drop them from keep (a (text_a, text_b) input is a sentence pair).")


def _qk_layers(qk_layers: Sequence[int] | None, keep_qk: bool, level: str,
               n_layers: int | None) -> tuple[int, ...] | None:
    """The layers whose queries and keys are kept (None: every layer, known once the model
    is), checked as far as possible before the model runs."""
    if not keep_qk:
        if qk_layers is not None:
            raise InputError("qk_layers needs keep to include 'qk'.")
        return ()
    if level != "token":
        raise InputError("Queries and keys are per token: keep='qk' needs level='token'.")
    if qk_layers is None:
        return None
    if n_layers is None:  # a model given by name: its layers are known once it is loaded
        if isinstance(qk_layers, (str, bytes)) or not isinstance(qk_layers, Iterable):
            raise InputError(f"qk_layers must be a sequence of ints; got {qk_layers!r}.")
        layers = tuple(sorted({validate.integer(x, "qk_layers", minimum=0) for x in qk_layers}))
    else:
        layers = tuple(sorted(set(validate.indices(qk_layers, n_layers, "qk_layers"))))
    if not layers:
        raise InputError("qk_layers is empty; pass the layers whose queries and keys to keep.")
    return layers


def _qk_info(layers: tuple[int, ...] | None, minfo: dict) -> tuple[tuple[int, ...], dict[str, int], dict | None]:
    """Layers, flat arrays (elements per position) and the store's ``qk`` record."""
    if layers == ():
        return (), {}, None
    geo = minfo.get("qk")
    if not geo:
        raise InputError(
            f"keep='qk' needs the queries and keys of {minfo['model']}, whose attention does not "
            "go through transformers' attention interface (it keeps its eager path)."
        )
    n_layers = int(minfo["n_layers"])
    layers = tuple(range(n_layers)) if layers is None else layers
    bad = [x for x in layers if not 0 <= x < n_layers]
    if bad:
        raise InputError(f"qk_layers {bad} are outside the model's layers 0..{n_layers - 1} (0-indexed).")
    flat = {"qk/queries": len(layers) * geo["heads"] * geo["dim"],
            "qk/keys": len(layers) * geo["kv_heads"] * geo["dim"]}
    record = {**geo, "layers": list(layers),
              "scaling": [geo["scaling"][x] for x in layers]}
    return layers, flat, record


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
    qk_layers: Sequence[int] | None = None,
    client: Any = None,
    storage_options: dict | None = None,
    verify: bool = True,
    progress: bool = True,
    generate: bool = False,
    max_new_tokens: int = 32,
) -> AttentionSet:
    """Attention of ``model`` on every input, batched, pooled to words on request.

    Parameters
    ----------
    model : Model or str
        A :class:`attnkit.runtime.model.Model`, or a name :func:`attnkit.load` resolves
        (``"minilm"``, a Hugging Face id in the cache, a folder) or a factory
        ``"package.module:function"`` returning a Model. With ``client``, pass a name: each
        worker loads the model once.
    inputs : iterable
        Texts, ``(text_a, text_b)`` pairs, word lists or treebank sentences (anything
        :meth:`Model.encode` takes); a sentence's ``id`` is kept as ``sent_id``. For an
        encoder–decoder model (:class:`~attnkit.runtime.seq2seq.Seq2SeqModel`): ``(source, target)``
        pairs (:meth:`~attnkit.runtime.seq2seq.Seq2SeqModel.encode_pair`); each item's maps are then
        its cross-attention ``[layer, head, target, source]``, read back as
        :class:`~attnkit.core.cross.CrossAttention` (``sset.pair(i)`` adds the self-attention kept).
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
        :data:`attnkit.storage.summaries.SUMMARIES` (``"stats"``, ``"edges"``) can be kept beside
        or instead of them, for corpora whose maps would not fit on any disk. ``"qk"``
        keeps every token's post-rotary queries and keys (float16, ``[layers, heads, n,
        d]`` per item, of ``qk_layers``; needs ``level="token"``), read back with
        ``sset[i].queries(layer)`` / ``.keys(layer)`` and embedded by
        :func:`attnkit.qk_embedding`. Of an encoder–decoder model: ``"cross"`` (the same as
        ``"maps"``: the cross-attention), ``"encoder"`` and ``"decoder"`` (their
        self-attention, beside it) and ``"stats"``.
    measure : str
        What the maps hold (:mod:`attnkit.runtime.measures`): ``"weights"``, ``"norm"``,
        ``"norm+residual"``, ``"alti"`` or ``"grad×attn"``; the mixed measures store one
        head per layer. Word pooling sums *to* a word and averages *from* it, whatever
        the measure.
    qk_layers : sequence of int, optional
        With ``keep`` including ``"qk"``: the layers (0-indexed) whose queries and keys are
        kept; ``None`` keeps every layer's.
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
    generate : bool
        Of an encoder–decoder model (loaded, not a name) and inputs that are sources alone:
        each item's target is the model's own greedy output
        (:meth:`~attnkit.runtime.seq2seq.Seq2SeqModel.generate`, start token first), generated
        here before extraction and stored as the item's target; ``sset.pair(i)`` reads it
        back. The same maps as ``model.attend(source, generate=True)``.
    max_new_tokens : int
        With ``generate``: the most tokens generated per item.

    Returns
    -------
    AttentionSet
        ``run_info`` counts the batches computed now and reused from the store.

    Raises
    ------
    InputError
        No inputs, or an unknown ``level``/``keep``/``measure``; plain texts for an
        encoder–decoder model without ``generate`` (pairs with it), ``generate`` for a
        one-stack model or a model name, a target that does not tokenise, or ``keep`` naming
        cross-attention of a one-stack model.
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

    An encoder–decoder over sources alone, its targets its own output:

    >>> from attnkit.testing import tiny_seq2seq
    >>> t5 = tiny_seq2seq("t5")
    >>> s2s = ak.extract(t5, ["The cat sat.", "We read."], level="token", generate=True,
    ...                  max_new_tokens=3, progress=False)
    >>> s2s.pair(1).cross.maps.shape[2] <= 4, s2s.pair(1).cross.source_tokens
    (True, ['▁we', '▁read', '.', '</s>'])
    """
    if not isinstance(model, str):  # a name is loaded here (and on the workers)
        # a store holds token (or pair) attention: vision models attend image by image
        validate.model(model, family=("text", "encoder-decoder"))
    if isinstance(inputs, (str, bytes)):
        raise InputError(
            "extract() takes many inputs (a list of texts, word lists, pairs or sentences); got "
            "one str, which would be read character by character. Wrap it in a list, "
            "extract(model, [text]), or use model.attend(text) for one input."
        )
    level = validate.level(level)
    batch_size = validate.size(batch_size, "batch_size")
    keep_maps, summary_names, keep_qk, pair_parts = _keep(keep)
    if isinstance(model, Model) and not isinstance(model, Seq2SeqModel):
        _no_pairs(model, pair_parts)
    wanted_qk = _qk_layers(qk_layers, keep_qk, level, getattr(model, "n_layers", None))
    measure = check_measure(measure=measure)
    if embeddings and not keep_maps:
        raise InputError("embeddings=True needs keep to include 'maps'.")
    items = list(inputs)
    if not items:
        raise InputError("extract() got no inputs.")
    max_new_tokens = validate.size(max_new_tokens, "max_new_tokens")
    if generate:
        items = _generated_pairs(model, items, max_new_tokens, progress)
    spec = BatchSpec(level=level, embeddings=embeddings, keep_maps=keep_maps,
                     summaries=tuple(summary_names), measure=measure)
    with engine.runner(model, client) as runner:
        encodings, minfo = runner.encode(items, progress=progress)
        if "decoder" in minfo:  # an encoder-decoder: (source, target) pairs
            spec = replace(spec, pair_parts=tuple(k for k in pair_parts if k != "cross"))
            minfo = {**_pair_info(minfo, spec, qk=wanted_qk != ()), "flat": {}}
        else:
            _no_pairs(model, pair_parts)
            layers, flat, qk_record = _qk_info(wanted_qk, minfo)
            spec = replace(spec, qk_layers=layers)
            minfo = {**minfo, "qk": qk_record, "flat": flat}
        job = _Job(encodings, minfo, spec, batch_size=batch_size, store=store,
                   storage_options=storage_options, verify=verify, progress=progress)
        try:
            runner.run(job.todo, job.batches, spec, dest=job.dest, on_done=job.done)
        finally:
            job.close()
    return job.result()


def _generated_pairs(model: Any, items: list[Any], max_new_tokens: int, progress: bool) -> list[Any]:
    """``(source, target ids)`` pairs, each target the model's greedy output for its source."""
    if not isinstance(model, Seq2SeqModel):
        raise InputError("generate=True needs a loaded encoder-decoder model (ak.load(name) of a "
                         f"T5, BART or Marian model): targets are generated in this process; got {model!r:.80}.")
    out = []
    for k, item in enumerate(_bar(items, show=progress, desc="generating targets", unit="item")):
        if isinstance(item, tuple) or (isinstance(item, list) and not all(isinstance(x, str) for x in item)):
            raise InputError(f"Input {k}: with generate=True every input is a source alone (its target is "
                             "generated); got a pair. Drop generate=True to extract given targets.")
        try:
            out.append((item, model.generate(item, max_new_tokens=max_new_tokens)))
        except InputError as exc:
            raise InputError(f"Input {k}: {exc}") from exc
    return out


class _Job:
    """One call of :func:`extract` between planning and the result: the batch plan, the
    store (created, or checked and verified for resuming) and the progress bar."""

    def __init__(self, encodings: list[Encoding], minfo: dict, spec: BatchSpec, *, batch_size: int,
                 store: str | Path | None, storage_options: dict | None, verify: bool,
                 progress: bool) -> None:
        level, embeddings, keep_maps = spec.level, spec.embeddings, spec.keep_maps
        summary_names = list(spec.summaries)
        self.encodings = encodings
        minfo = {**minfo, "n_heads": n_heads(SimpleNamespace(n_heads=minfo["n_heads"]), measure=spec.measure)}
        self.minfo = minfo
        plan = plan_batches([len(e) for e in encodings], batch_size)
        index, n = build_index(encodings, level)
        emb_dim = minfo["embedding_dim"] if embeddings else 0
        layout = st.plan_layout(
            plan, n, [len(e) for e in encodings], [len(e.words) for e in encodings],
            [e.truncated for e in encodings], n_layers=minfo["n_layers"], n_heads=minfo["n_heads"],
            embedding_dim=emb_dim if keep_maps else 0, flat=minfo["flat"],
            pairs=minfo.get("pairs"), n_source=index.n_source, n_source_words=index.n_source_words,
        )
        kept = ["maps"] * keep_maps + summary_names
        if spec.qk_layers:  # (stores without queries and keys keep their fingerprint)
            kept.append("qk:" + ",".join(map(str, spec.qk_layers)))
        if minfo.get("pairs"):
            kept.append("pairs:" + ",".join(minfo["pairs"]))
        info = {
            "format": st.FORMAT,
            **minfo,
            "level": level,
            "batch_size": batch_size,
            "n_items": len(encodings),
            "n_batches": len(plan),
            "embeddings": embeddings,
            "embedding_dim": emb_dim,
            "keep_maps": keep_maps,
            "summaries": summary_names,
            "measure": spec.measure,
            "input_ids": True,
            "chunks": {"maps": layout.map_chunk, "embeddings": layout.emb_chunk,
                       **{k: f.chunk for k, f in layout.flat.items()}},
            "sizes": {"maps": layout.map_size if keep_maps else 0, "embeddings": layout.emb_size,
                      **{k: f.total for k, f in layout.flat.items()}},
            "inputs_fingerprint": inputs_fingerprint(encodings, level, batch_size, embeddings, kept),
        }
        meta_json = [json.dumps(e.meta, default=str) for e in encodings]
        shapes = {k: (SUMMARIES[k].shape(minfo), SUMMARIES[k].dtype) for k in summary_names}
        self.lock: st.WriterLock | None = None
        self.loc: st.Location | None = None
        if store is None:
            self.memory: MemoryBackend | None = MemoryBackend(
                info, layout, index.concat(layout), [dict(e.meta) for e in encodings])
            done: set[int] = set()
            self.dest = Destination(sink=self.memory.write)
        else:
            self.memory = None
            if not isinstance(store, (str, os.PathLike, st.Location)):
                raise InputError(f"store must be a folder path or an fsspec URL; got "
                                 f"{type(store).__name__} {store!r}.")
            self.loc = st.Location.of(store, storage_options)
            v1 = v1_fingerprint(minfo["model"], minfo["n_layers"], minfo["n_heads"], encodings, level,
                                batch_size, embeddings)
            self.lock, done = _prepare_store(self.loc, info, layout, index, meta_json, shapes, v1,
                                             verify=verify, progress=progress)
            self.dest = Destination(loc=self.loc, token=self.lock.token if self.lock else "")
        self.plan = plan
        self.todo = [b for b in range(len(plan)) if b not in done]
        self.reused = len(done)
        self.batches = [[encodings[i] for i in plan[b]] for b in self.todo]
        self.bar = _bar(show=progress, desc=f"attention ({minfo['model']})", total=len(encodings),
                        initial=sum(len(plan[b]) for b in done))

    def done(self, b: int) -> None:
        self.bar.update(len(self.plan[b]))

    def close(self) -> None:
        self.bar.close()
        if self.lock is not None:
            self.lock.release()

    def result(self) -> AttentionSet:
        n_trunc = sum(e.truncated for e in self.encodings)
        if n_trunc:
            warnings.warn(
                f"{n_trunc} of {len(self.encodings)} inputs were longer than {self.minfo['model']}'s "
                f"maximum of {self.minfo['max_length']} tokens and were truncated (see "
                "AttentionSet.truncated).",
                TruncationWarning,
                stacklevel=3,
            )
        backend: Any = self.memory if self.loc is None else st.StoreReader(self.loc)
        out = AttentionSet(backend)
        out.run_info = {"computed_batches": len(self.todo), "reused_batches": self.reused}
        return out


def _prepare_store(loc: st.Location, info: dict, layout: st.Layout, index: st.Index,
                   meta_json: list[str], shapes: dict, v1: str, *, verify: bool,
                   progress: bool) -> tuple[st.WriterLock | None, set[int]]:
    """Take the writer lock; create the store, or check it holds these inputs and find the
    batches to reuse (committed and, with ``verify``, intact)."""
    if loc.local and store_v1.is_v1(Path(loc.url)):
        raise StoreError(
            f"{loc} is a store of format 1 (.npy batches). Convert it with `attnkit store "
            f"migrate {loc}` (it keeps every batch), or extract into a new store."
        )
    if loc.local and Path(loc.url).is_file():
        raise StoreError(f"{loc} is a file, not a store folder; pass a folder path.")
    if loc.local and Path(loc.url).is_dir() and not st.is_store(loc) and any(
            p.name != "writer.lock" for p in Path(loc.url).iterdir()):
        # refused before the lock is taken and before anything is cleaned up: nothing of a
        # user's folder is written, rewritten or deleted
        raise StoreError(
            f"{loc} is a folder with other files in it, not an attnkit store; nothing in it was "
            "changed. Pass a new or empty folder."
        )
    try:
        lock = st.WriterLock(loc).acquire()
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise StoreError(f"Could not open the store {loc} for writing ({exc}).") from exc
        return None, _read_only_store(loc, info, v1, exc, verify=verify)
    try:
        st.remove_leftovers(loc)
        if loc.exists(st.META_BACKUP):  # restore damaged metadata (committed batches are kept)
            st.repair_metadata(loc)
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
            st.save_metadata(loc)
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


def _read_only_store(loc: st.Location, info: dict, v1: str, exc: OSError, *, verify: bool) -> set[int]:
    """Resuming where nothing can be written (a read-only file system): a complete, intact
    store of these inputs is read as it is; anything else is an error saying so."""
    old = st.read_info(loc)
    if old is not None:
        _check_same(loc, old, info, v1)
        reader = st.StoreReader(loc, require_complete=False)
        done = set(reader.committed)
        if len(done) == len(reader.layout.batches) and not (
                verify and (reader.verify_index() or any(reader.verify_batch(b) for b in done))):
            return done
    raise StoreError(
        f"The store {loc} cannot be written ({exc.strerror}: a read-only file system or no "
        "permission) and it is not a complete, intact store of these inputs. Copy it to a "
        "writable place (or pass another store) and run attnkit.extract again."
    ) from exc


def _check_same(loc: st.Location, old: dict, new: dict, v1: str) -> None:
    if old.get("fingerprint_v1") and old["fingerprint_v1"] == v1 and old.get("model") == new["model"]:
        if old.get("inputs_fingerprint") != new["inputs_fingerprint"]:
            new["inputs_fingerprint"] = old["inputs_fingerprint"]  # a migrated store of these inputs
        if old.get("model_fingerprint") in (None, new["model_fingerprint"]):
            new["model_fingerprint"] = old.get("model_fingerprint") or new["model_fingerprint"]
    if old.get("model_fingerprint") and old["model_fingerprint"] == new.get("model_fingerprint_legacy"):
        new["model_fingerprint"] = old["model_fingerprint"]  # written by an earlier attnkit
    diffs = []
    if old.get("model") != new["model"] or old.get("model_fingerprint") not in (None, new["model_fingerprint"]):
        diffs.append(f"model {old.get('model')!r} (weights {str(old.get('model_fingerprint'))[:10]}) "
                     f"vs {new['model']!r} (weights {new['model_fingerprint'][:10]})")
    for key in ("level", "batch_size", "embeddings", "keep_maps", "summaries", "n_items"):
        if old.get(key) != new[key]:
            diffs.append(f"{key} {old.get(key)!r} vs {new[key]!r}")
    if sorted(old.get("pairs") or {}) != sorted(new.get("pairs") or {}):
        diffs.append(f"attention kept of pairs {sorted(old.get('pairs') or {}) or None} vs "
                     f"{sorted(new.get('pairs') or {}) or None}")
    old_qk, new_qk = ((old.get("qk") or {}).get("layers"), (new.get("qk") or {}).get("layers"))
    if old_qk != new_qk:
        diffs.append(f"queries and keys of layers {old_qk} vs {new_qk}")
    if old.get("measure", "weights") != new["measure"]:
        diffs.append(f"measure {old.get('measure', 'weights')!r} vs {new['measure']!r}")
    if not diffs and old.get("inputs_fingerprint") != new["inputs_fingerprint"]:
        diffs.append("the inputs themselves (same count, different texts or ids)")
    if diffs:
        raise StoreError(
            f"The store {loc} holds attention of another model or other inputs or options: "
            + "; ".join(diffs) + ". Use a new store, or delete this one to start over."
        )
