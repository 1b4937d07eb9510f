"""The Dask worker plugin that holds attnkit's model on each worker (imports distributed,
so it is only imported when a cluster is used)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distributed import WorkerPlugin

if TYPE_CHECKING:
    from .model import Model


class ModelPlugin(WorkerPlugin):
    """The model, loaded once per worker process (and again by a worker that replaces a
    lost one): from a name (:func:`attnkit.engine.resolve_model`) or a pickled Model.

    Tasks reach it through :func:`attnkit.engine.worker_model`. Torch uses as many threads
    as the worker has.
    """

    def __init__(self, name: str, spec: str | None = None, model: Model | None = None):
        self.name = name
        self.spec = spec
        self._model = model
        self.model: Model | None = None

    def setup(self, worker: Any) -> None:
        import torch

        from .engine import resolve_model

        torch.set_num_threads(max(1, int(getattr(worker.state, "nthreads", 1) or 1)))
        if self._model is not None:
            _after_unpickling(self._model.hf)
            self.model = self._model
        else:
            self.model = resolve_model(self.spec or "")

    def teardown(self, worker: Any) -> None:
        self.model = None


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
