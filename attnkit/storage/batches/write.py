"""Writing batches: run each on the model and hand it to a store (or a sink) as it finishes.

The third of the three steps of extraction (:mod:`attnkit.storage.batches`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ...runtime.encoding import Encoding
from ...errors import InputError
from ..store import BatchWriter, Location
from .run import BatchSpec, run_batch


@dataclass(frozen=True)
class Destination:
    """Where computed batches go: a store (its location and the writer lock's token, so that
    cluster workers write straight into it) or, without a store, a sink in this process.

    Parameters
    ----------
    loc : Location, optional
        The store.
    token : str
        The writer lock's token (:class:`attnkit.storage.store.WriterLock`).
    sink : callable, optional
        ``sink(b, arrays)`` for batches kept in memory.

    Examples
    --------
    >>> got = {}
    >>> Destination(sink=got.__setitem__).writer() == (got.__setitem__, False)
    True
    """

    loc: Location | None = None
    token: str = ""
    sink: Callable[[int, dict], None] | None = None

    def writer(self) -> tuple[Callable[[int, dict], None], bool]:
        """``(write, background)``: a :class:`~attnkit.storage.store.BatchWriter` of the store (written
        in a thread while the next batch runs), else the sink.

        Returns
        -------
        tuple
            The write function and whether to write in the background.
        """
        if self.loc is not None:
            return BatchWriter(self.loc, self.token).write, True
        if self.sink is None:
            raise InputError("A Destination needs a store location or a sink.")
        return self.sink, False


def write_batches(model: Any, todo: Sequence[int], encs: Sequence[Sequence[Encoding]],
                  spec: BatchSpec, *, write: Callable[[int, dict], None], background: bool,
                  on_done: Callable[[int], None]) -> None:
    """Run batches ``todo`` (inputs ``encs``, one list per batch) on ``model`` and hand each
    to ``write``; with ``background`` a thread writes one batch while the next one runs.
    The same function runs in this process and on a Dask worker (:mod:`attnkit.storage.engine`).

    Parameters
    ----------
    model : Model
        Runs each batch (:func:`~attnkit.storage.batches.run.run_batch`).
    todo : sequence of int
        Batch numbers.
    encs : sequence of sequence of Encoding
        Each batch's inputs.
    spec : BatchSpec
        What every batch computes and keeps.
    write : callable
        ``write(b, arrays)``: a store's :meth:`~attnkit.storage.store.BatchWriter.write`, or a sink.
    background : bool
        Write in a thread while the next batch runs.
    on_done : callable
        Called with each batch number once it is written.

    Returns
    -------
    None

    Examples
    --------
    >>> from attnkit.testing import tiny_model
    >>> m = tiny_model("bert")
    >>> got = {}
    >>> write_batches(m, [0, 1], [[m.encode("The cat sat.")], [m.encode("We read.")]],
    ...               BatchSpec(), write=got.__setitem__, background=False, on_done=lambda b: None)
    >>> sorted(got), sorted(got[0])
    ([0, 1], ['maps'])
    """
    pool = ThreadPoolExecutor(max_workers=1) if background else None
    pending: tuple[int, Future] | None = None
    try:
        for b, e in zip(todo, encs):
            arrays = run_batch(model, e, spec)
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
