"""Extraction in three steps, one module each: plan the batches (:mod:`.plan`), run one
batch on the model with any measure (:mod:`.run`), write it (:mod:`.write`).

:func:`attnkit.extract` and the Dask workers of :mod:`attnkit.storage.engine` call the same
functions, so a batch computed on a cluster is the same bits as one computed here.
"""

from .plan import (
    build_index,
    encode_inputs,
    inputs_fingerprint,
    level_positions,
    model_fingerprint,
    model_info,
    pair_positions,
    plan_batches,
    slice_index,
    v1_fingerprint,
)
from .run import BatchSpec, half, run_batch
from .write import Destination, write_batches

__all__ = [
    "BatchSpec",
    "Destination",
    "build_index",
    "encode_inputs",
    "half",
    "inputs_fingerprint",
    "level_positions",
    "model_fingerprint",
    "model_info",
    "pair_positions",
    "plan_batches",
    "run_batch",
    "slice_index",
    "v1_fingerprint",
    "write_batches",
]
