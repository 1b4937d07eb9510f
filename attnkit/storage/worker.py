"""The Dask worker plugin that holds attnkit's model on each worker (imports distributed,
so it is only imported when a cluster is used)."""

from __future__ import annotations

import ctypes
import os
import sys
from typing import TYPE_CHECKING, Any

from distributed import WorkerPlugin

if TYPE_CHECKING:
    from ..runtime.model import Model


class ModelPlugin(WorkerPlugin):
    """The model, loaded once per worker process (and again by a worker that replaces a
    lost one): from a name (:func:`attnkit.runtime.load.resolve_model`) or a pickled Model.

    Tasks reach it through :func:`attnkit.storage.engine.worker_model`. Torch uses as many threads
    as the worker has.
    """

    def __init__(self, name: str, spec: str | None = None, model: Model | None = None):
        self.name = name
        self.spec = spec
        self._model = model
        self.model: Model | None = None

    def setup(self, worker: Any) -> None:
        import torch

        from ..runtime.load import resolve_model

        torch.set_num_threads(max(1, int(getattr(worker.state, "nthreads", 1) or 1)))
        _allocate_like_a_plain_process()
        if self._model is not None:
            _after_unpickling(self._model.hf)
            self.model = self._model
        else:
            self.model = resolve_model(self.spec or "")

    def teardown(self, worker: Any) -> None:
        self.model = None


def _allocate_like_a_plain_process() -> None:
    """Undo the cost of dask's ``MALLOC_TRIM_THRESHOLD_`` for torch.

    The nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to give freed memory
    back to the OS). On glibc, setting it also turns the adaptive mmap threshold off, so
    every tensor over 128 kB is mapped and zeroed anew: a forward pass on the CPU ran about
    30 % slower in a worker than in a plain process here. Large fixed thresholds (64 MB
    mmap, 128 MB trim) bring it back; memory is still returned above them.
    """
    if not sys.platform.startswith("linux") or "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 64 << 20)
    libc.mallopt(m_trim_threshold, 128 << 20)


def _after_unpickling(hf: Any) -> None:
    """Redo what transformers does in a model's ``__init__`` and unpickling skips: in a
    fresh process, the registry of outputs a model class can record is empty, and the
    model would return no attention."""
    try:
        from transformers import PreTrainedModel
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY
    except ImportError:  # older transformers record outputs without a registry
        return
    for module in hf.modules():
        if isinstance(module, PreTrainedModel):
            _CAN_RECORD_REGISTRY[module] = module._can_record_outputs
