"""Running attnkit on a Dask cluster: extraction shards and corpus reductions.

Extraction (:func:`attnkit.extract` with ``client=``): a worker plugin loads the
model once per worker (by name, or from a pickled :class:`~attnkit.runtime.model.Model`); inputs
are tokenized, laid out by the client, and batches go to workers in shards. Each worker
writes its batches straight into the store and commits them; a shard lost with its worker
is rerun elsewhere by the scheduler and skips the batches already committed. The maps are
the same bits as in-process extraction of the same batches.

Reductions (:func:`map_blocks`): an analysis hands one function that turns a block of
items (one stored batch) into a partial result; blocks run as tasks on the workers (each
opens the store read-only) or here, in the same order, and the caller combines the
partials in block order, so a cluster gives exactly the in-process result.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._progress import progress as bar
from .batches import (BatchSpec, Destination, encode_inputs, model_fingerprint, model_info,
                      write_batches)
from .corpus import AttentionSet
from ..errors import AttnkitError, ClusterError, InputError, ModelLoadError, ModelNotFoundError
from ..runtime.model import Model
from ..runtime.load import resolve_model
from .store import BatchWriter, Location
from ..core.types import as_collection

#: Seconds to wait for a scheduler given by address.
CONNECT_TIMEOUT_S = 10
#: Items per block when a reduction runs over a plain list of attentions.
BLOCK_ITEMS = 32


# ------------------------------------------------------------------ the model
def worker_model(name: str) -> Model:
    """The model of plugin ``name`` on the worker running this task."""
    from distributed import get_worker

    plugin: Any = get_worker().plugins.get(name)
    if plugin is None or plugin.model is None:
        raise ModelNotFoundError(
            f"This worker has no model {name!r} (its plugin failed to set up); see the "
            "worker's log."
        )
    return plugin.model


# ------------------------------------------------------------------ the client
def connect(client: Any) -> tuple[Any, bool]:
    """(Client, whether we opened it) from a Client or a scheduler address."""
    from distributed import Client

    if isinstance(client, str):
        try:
            return Client(client, timeout=CONNECT_TIMEOUT_S, set_as_default=False), True
        except (OSError, TimeoutError) as exc:
            raise ClusterError(
                f"Could not reach the Dask scheduler at {client!r} within {CONNECT_TIMEOUT_S} s "
                f"({type(exc).__name__}: {exc}). Start it (dask scheduler, a LocalCluster, "
                "dask-jobqueue or dask-kubernetes) and pass its address or Client, or pass "
                "client=None to run in this process."
            ) from exc
    if not isinstance(client, Client):
        raise InputError(
            f"client must be a dask.distributed.Client or a scheduler address, not "
            f"{type(client).__name__}."
        )
    if client.status not in ("running", "newly-created"):
        raise ClusterError(
            f"The Dask client is {client.status}: its scheduler cannot be reached. Reconnect "
            "(Client(address)) or pass client=None to run in this process."
        )
    try:
        client.sync(client.scheduler.identity, callback_timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:
        raise ClusterError(
            f"The Dask scheduler of this client ({client.scheduler.address}) does not answer "
            f"({type(exc).__name__}: {exc}). Restart the cluster and reconnect, or pass "
            "client=None to run in this process."
        ) from exc
    return client, False


def n_workers(client: Any) -> int:
    """How many workers the cluster has now (waiting a while for a first one)."""
    n = len(client.scheduler_info().get("workers", {}))
    if n == 0:
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S * 3)
        except Exception as exc:
            raise ClusterError(
                f"The Dask cluster at {client.scheduler.address} has no workers. Start some "
                "(cluster.scale(n)) and try again."
            ) from exc
        n = len(client.scheduler_info().get("workers", {}))
    return max(n, 1)


def cancel(client: Any, futures: list) -> None:
    """Cancel ``futures`` on the way out of a failure; a client that is already closed (the
    failure itself, often) must not hide what went wrong."""
    with contextlib.suppress(Exception):
        client.cancel(futures)


def cluster_lost(exc: BaseException, future: Any = None) -> bool:
    """Whether ``exc``, raised while a client waited for ``future``, means the cluster lost
    the work (a worker that died on it, a closed client, a lost connection) rather than the
    task's own error: a task that raised ``OSError`` itself leaves its future ``"error"``."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.client import ClosedClientError

    if isinstance(exc, (KilledWorker, CancelledError, ClosedClientError)):
        return True
    if isinstance(exc, (OSError, TimeoutError)):
        return future is None or getattr(future, "status", None) != "error"
    return False


def cluster_call(what: str, fn: Callable[[], Any]) -> Any:
    """Run a client call; comm failures become ClusterError, attnkit errors pass through."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.client import ClosedClientError

    try:
        return fn()
    except AttnkitError:
        raise
    except (ClosedClientError, CancelledError) as exc:
        raise ClusterError(
            f"{what}: the Dask client was closed (or its tasks cancelled) before the work was "
            f"done ({type(exc).__name__}: {exc}). Batches already committed to the store are "
            "kept; connect a client and run again to resume."
        ) from exc
    except KilledWorker as exc:
        raise ClusterError(
            f"{what}: workers kept dying on the same task ({exc}). Most often they run out of "
            "memory: give them more, or lower batch_size. Batches already committed to the "
            "store are kept; run again to resume."
        ) from exc
    except (OSError, TimeoutError) as exc:
        raise ClusterError(
            f"{what}: lost contact with the Dask scheduler ({type(exc).__name__}: {exc}). "
            "Committed batches are kept; reconnect and run again to resume."
        ) from exc


# ------------------------------------------------------------------ extraction runners
class _LocalRunner:
    """Extraction in this process."""

    def __init__(self, model: Model):
        self.model = model

    def close(self) -> None:
        pass

    def __enter__(self) -> _LocalRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def encode(self, items: list, *, progress: bool) -> tuple[list, dict]:
        return encode_inputs(self.model, items), model_info(self.model)

    def run(self, todo: list[int], encs: list[list], spec: BatchSpec, *, dest: Destination,
            on_done: Callable[[int], None]) -> None:
        write, background = dest.writer()
        write_batches(self.model, todo, encs, spec, write=write, background=background, on_done=on_done)


class _ClusterRunner:
    """Extraction on a Dask cluster: one model per worker, shards of batches."""

    def __init__(self, model: Model | str, client: Any):
        self.client, self._owned = connect(client)
        self.local = model if not isinstance(model, str) else None
        self.name = ""
        try:
            self.n_workers = n_workers(self.client)
            self.name = self._register(model)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> _ClusterRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Unload a model that was shipped as an object (a name stays loaded for the next
        call) and close a client opened from an address."""
        if getattr(self, "local", None) is not None and getattr(self, "name", None):
            self._unregister(self.name)
        if self._owned:
            self.client.close()

    def _register(self, model: Model | str) -> str:
        if isinstance(model, str):
            import hashlib

            key, spec, obj = hashlib.sha256(model.encode()).hexdigest()[:16], model, None
        else:
            key, spec, obj = model_fingerprint(model)[:16], None, model
        name = f"attnkit-model-{key}"
        have = cluster_call("Registering the model", lambda: self.client.run_on_scheduler(
            _scheduler_plugins))
        if name in have:
            return name
        from .worker import ModelPlugin

        plugin = ModelPlugin(name, spec, obj)
        try:
            cluster_call("Loading the model on the workers",
                          lambda: self.client.register_plugin(plugin, name=name))
        except AttnkitError as exc:
            self._unregister(name)
            if isinstance(exc, ClusterError):
                raise
            cls = ModelLoadError if isinstance(exc, ModelLoadError) else ModelNotFoundError
            raise cls(
                f"The workers could not load the model {spec or name!r}: {exc} Each worker "
                "loads it itself: make it available where the workers run (the same folder "
                "path or Hugging Face cache, or an installed package for a factory "
                "'module:function'), or pass a name they can resolve."
            ) from exc
        except Exception as exc:
            self._unregister(name)
            raise ModelNotFoundError(
                f"The workers could not load the model {spec or name!r} "
                f"({type(exc).__name__}: {exc}). Each worker loads it itself: make it "
                "available where the workers run (the same folder path or Hugging Face "
                "cache, or an installed package for a factory 'module:function')."
            ) from exc
        return name

    def _unregister(self, name: str) -> None:
        with contextlib.suppress(Exception):  # best effort: the plugin may not be there
            self.client.unregister_worker_plugin(name)

    def encode(self, items: list, *, progress: bool) -> tuple[list, dict]:
        if self.local is not None:
            return _LocalRunner(self.local).encode(items, progress=progress)
        from distributed import as_completed

        step = max(1, min(2048, math.ceil(len(items) / (4 * self.n_workers))))
        shards = [items[k : k + step] for k in range(0, len(items), step)]

        def go() -> tuple[list, dict]:
            futures = [self.client.submit(_encode_shard, self.name, s, k * step, pure=False)
                       for k, s in enumerate(shards)]
            info_f = self.client.submit(_worker_info, self.name, pure=False)
            out: dict[Any, list] = {}
            for f in as_completed(futures, loop=self.client.loop):
                out[f.key] = f.result()
            return [e for f in futures for e in out[f.key]], info_f.result()

        return cluster_call("Tokenizing on the workers", go)

    def run(self, todo: list[int], encs: list[list], spec: BatchSpec, *, dest: Destination,
            on_done: Callable[[int], None]) -> None:
        if not todo:
            return
        from distributed import as_completed

        per = max(1, min(4, math.ceil(len(todo) / (8 * self.n_workers))))
        run_id = uuid.uuid4().hex[:8]
        # the longest batches first (the plan sorts by length), so that the last shards
        # to finish are short ones and no worker waits long for another at the end
        order = sorted(range(len(todo)), key=lambda k: -sum(len(e) ** 2 for e in encs[k]))

        def go() -> None:
            futures = []
            for j in range(0, len(order), per):
                ks = order[j : j + per]
                futures.append(self.client.submit(
                    _extract_shard, self.name, [todo[k] for k in ks], [encs[k] for k in ks],
                    spec, dest.loc, dest.token,
                    key=f"attnkit-extract-{run_id}-{j // per:05d}", pure=False))
            try:
                for f in as_completed(futures, loop=self.client.loop):
                    for b, arrays in f.result().items():
                        if dest.sink is not None:
                            dest.sink(b, arrays)
                        on_done(b)
                    f.release()
            except BaseException:
                cancel(self.client, futures)
                raise

        cluster_call("Extraction on the cluster", go)


def _scheduler_plugins(dask_scheduler: Any = None) -> list[str]:
    return list(getattr(dask_scheduler, "worker_plugins", {}) or {})


def runner(model: Model | str, client: Any) -> Any:
    """The extraction runner for ``model`` here (client None) or on a cluster."""
    if not isinstance(model, (Model, str)):
        raise InputError(f"model must be an attnkit Model or a model name, not {type(model).__name__}.")
    if client is None:
        return _LocalRunner(resolve_model(model) if isinstance(model, str) else model)
    return _ClusterRunner(model, client)


# ------------------------------------------------------------------ worker tasks
_WRITERS: dict[tuple[str, str], Any] = {}
_READERS: dict[str, Any] = {}
_CACHE_LOCK = threading.Lock()


def _encode_shard(name: str, items: list, start: int = 0) -> list:
    return encode_inputs(worker_model(name), items, start)


def _worker_info(name: str) -> dict:
    return model_info(worker_model(name))


def _extract_shard(name: str, batches: list[int], encs: list[list], spec: BatchSpec,
                   loc: Location | None, token: str) -> dict[int, Any]:
    """Compute and write (or return) batches on a worker; committed ones are skipped."""
    model = worker_model(name)
    writer = None
    if loc is not None:
        with _CACHE_LOCK:
            key = (loc.url, token or "")
            if key not in _WRITERS:
                _WRITERS.clear()
                _WRITERS[key] = BatchWriter(loc, token or "")
            writer = _WRITERS[key]
    out: dict[int, Any] = {}
    todo = [(b, e) for b, e in zip(batches, encs) if writer is None or not writer.committed(b)]
    out.update({b: None for b in batches})

    def keep(b: int, arrays: dict) -> None:
        out[b] = arrays

    # as in one process: a thread writes a batch while the next one runs
    write_batches(model, [b for b, _ in todo], [e for _, e in todo], spec,
                  write=writer.write if writer is not None else keep, background=writer is not None,
                  on_done=lambda b: None)
    return out


def _open_reader(ref: tuple[str, dict, str]) -> Any:
    url, storage_options, version = ref
    key = f"{url}|{version}"  # a store extracted again under the same path is opened again
    with _CACHE_LOCK:
        if key not in _READERS:
            if len(_READERS) > 4:
                _READERS.clear()
            _READERS[key] = AttentionSet.open(Location(url, storage_options))
        return _READERS[key]


# ------------------------------------------------------------------ reductions
@dataclass
class Block:
    """A block of a corpus handed to a reduction: one stored batch of an AttentionSet, or
    :data:`BLOCK_ITEMS` consecutive items of another collection.

    items : indices of the items in the corpus (input order), in the block's order.
    attentions : their Attention objects (None for a store that keeps summaries only).
    summaries : per-item summary rows asked for (same order), and ``"n"``, item lengths.
    other : the paired items of a second corpus (``other=`` of :func:`map_blocks`), or None.
    """

    items: np.ndarray
    attentions: list | None
    summaries: dict[str, np.ndarray]
    other: list | None = None


def _store_ref(sset: Any) -> tuple[str, dict, str] | None:
    """How a worker reopens a stored set; None for a set held in this process's memory."""
    loc = sset.location
    if loc is None or loc.url.startswith("memory://"):
        return None
    return loc.url, loc.storage_options, \
        f"{sset.info.get('inputs_fingerprint')}|{sset.info.get('model_fingerprint')}"


def _read_block(sset: Any, b: int, summaries: tuple[str, ...], other: Any) -> Block:
    items, atts, summ = sset.read_batch(b, summaries=summaries)
    return Block(items, atts, summ, None if other is None else [other[int(i)] for i in items])


def _store_task(ref: tuple, other_ref: tuple | None, batches: list[int], fn: Any,
                summaries: tuple[str, ...]) -> list[Any]:
    """On a worker: open the store(s) read-only and reduce some of its batches."""
    sset = _open_reader(ref)
    other = _open_reader(other_ref) if other_ref is not None else None
    return [fn(_read_block(sset, b, summaries, other)) for b in batches]


def _list_task(blocks: list[Block], fn: Any) -> list[Any]:
    return [fn(block) for block in blocks]


def map_blocks(
    attentions: Any,
    fn: Callable[[Block], Any],
    *,
    other: Any = None,
    client: Any = None,
    summaries: Sequence[str] = (),
    progress: bool = False,
    desc: str = "",
) -> list[Any]:
    """``fn(block)`` over the blocks of a corpus; the partial results in block order.

    Blocks are the stored batches of an :class:`~attnkit.AttentionSet` (read in store
    order, one verified read each) or :data:`BLOCK_ITEMS` consecutive items of any other
    iterable (see :class:`Block`). ``other`` pairs item ``i`` with item ``i`` of a second
    corpus. With ``client`` the blocks run as Dask tasks: a set in a store is read by the
    workers themselves (the store must be where they can reach it), other data are sent to
    them. Without, they run here. The list is the same either way, so a caller that
    combines it in order gets the same result on a cluster, to the bit.

    ``fn`` must be picklable: a module-level function or a functools.partial of one.
    """

    summaries = tuple(summaries)
    if isinstance(attentions, AttentionSet):
        sset = attentions
        missing = [s for s in summaries if s not in sset.summaries]
        if missing:
            raise InputError(f"The set keeps no summaries {missing}; it has {sset.summaries or 'none'}.")
        if other is not None and not isinstance(other, AttentionSet):
            other = list(as_collection(other))
        _check_paired(len(sset), other)
        ref = _store_ref(sset)
        other_ref = _store_ref(other) if isinstance(other, AttentionSet) else None
        if client is not None and ref is not None and (other is None or other_ref is not None):
            task = functools.partial(_store_task, ref, other_ref)
            return _run_tasks(client, task, list(range(sset.n_batches)), fn, progress, desc,
                              summaries)
        if client is None:
            return [fn(_read_block(sset, b, summaries, other))
                    for b in bar(range(sset.n_batches), show=progress, desc=desc, unit="batch")]
        blocks = [_read_block(sset, b, summaries, other) for b in range(sset.n_batches)]
        return _run_tasks(client, _list_task, blocks, fn, progress, desc)
    if summaries:
        raise InputError(f"Per-item summaries {summaries} come only from an AttentionSet store.")
    atts = as_collection(attentions)
    if other is not None:
        other = other if isinstance(other, AttentionSet) else list(as_collection(other))
    if client is None and other is None:
        out, block, start = [], [], 0
        for att in bar(atts, show=progress, desc=desc, total=_length(atts)):
            block.append(att)
            if len(block) == BLOCK_ITEMS:
                out.append(fn(Block(np.arange(start, start + len(block)), block, {})))
                start += len(block)
                block = []
        if block:
            out.append(fn(Block(np.arange(start, start + len(block)), block, {})))
        return out
    items = list(atts)
    _check_paired(len(items), other)
    blocks = []
    for k in range(0, len(items), BLOCK_ITEMS):
        idx = np.arange(k, min(k + BLOCK_ITEMS, len(items)))
        blocks.append(Block(idx, items[k : k + BLOCK_ITEMS], {},
                            None if other is None else [other[int(i)] for i in idx]))
    if client is None:
        return [fn(b) for b in bar(blocks, show=progress, desc=desc, unit="block")]
    return _run_tasks(client, _list_task, blocks, fn, progress, desc)


def _length(items: Any) -> int | None:
    return len(items) if hasattr(items, "__len__") else None


def _check_paired(n: int, other: Any) -> None:
    if other is not None and len(other) != n:
        raise InputError(f"The two corpora have {n} and {len(other)} items; item i of one is "
                         "paired with item i of the other.")


def map_items(
    attentions: Any,
    fn: Callable[..., Any],
    *,
    other: Any = None,
    client: Any = None,
    progress: bool = False,
    desc: str = "",
) -> list[Any]:
    """``fn(i, attention)`` (or ``fn(i, attention, other_attention)``) for every item, the
    results in input order whatever order the blocks ran in. ``fn`` must be picklable."""
    parts = map_blocks(attentions, functools.partial(_apply_items, fn), other=other, client=client,
                       progress=progress, desc=desc)
    pairs = [p for part in parts for p in part]
    pairs.sort(key=lambda p: p[0])
    return [v for _, v in pairs]


def _apply_items(fn: Callable[..., Any], block: Block) -> list[tuple[int, Any]]:
    if block.attentions is None:
        raise InputError("This set keeps per-item summaries only; this analysis needs the maps "
                         "(extract with keep='maps').")
    if block.other is None:
        return [(int(i), fn(int(i), a)) for i, a in zip(block.items, block.attentions)]
    return [(int(i), fn(int(i), a, b)) for i, a, b in zip(block.items, block.attentions, block.other)]


def _run_tasks(client: Any, task: Callable, blocks: list, fn: Callable, progress: bool, desc: str,
               summaries: tuple[str, ...] | None = None) -> list[Any]:
    from distributed import as_completed


    client, owned = connect(client)
    try:
        workers = n_workers(client)
        per = max(1, min(16, math.ceil(len(blocks) / (4 * workers))))
        groups = [blocks[k : k + per] for k in range(0, len(blocks), per)]

        def go() -> list[Any]:
            [fn_f] = client.scatter([fn], broadcast=True, hash=False)
            futures = [client.submit(task, g, fn_f, *(() if summaries is None else (summaries,)),
                                     pure=False) for g in groups]
            done: dict[Any, list] = {}
            b = bar(show=progress, desc=desc, total=len(blocks), unit="block")
            try:
                for f in as_completed(futures, loop=client.loop):
                    done[f.key] = f.result()
                    b.update(len(done[f.key]))
            except BaseException:
                cancel(client, futures)
                raise
            finally:
                b.close()
            return [r for f in futures for r in done[f.key]]

        return cluster_call("A reduction on the cluster", go)
    finally:
        if owned:
            client.close()


def sum_partials(parts: Iterable[Any]) -> Any:
    """Add partial results (arrays, numbers, or dicts/tuples of them) in the order given.

    Raises
    ------
    InputError
        When there is nothing to add, or two arrays differ in shape (attention of models
        with different layers and heads).
    """
    total: Any = None
    for p in parts:
        total = p if total is None else _add(total, p)
    if total is None:
        raise InputError("There was nothing to add up (no items).")
    return total


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _add(a[k], b[k]) for k in a}
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and np.shape(a) != np.shape(b):
        raise InputError(
            f"All attentions must have the same layers and heads; got partial results of shapes "
            f"{np.shape(a)} and {np.shape(b)}."
        )
    return a + b


__all__ = ["Block", "connect", "map_blocks", "map_items", "resolve_model", "runner",
           "sum_partials", "worker_model"]
