"""Heads across training: series of checkpoints and the analyses over them.

:func:`checkpoints` reads the checkpoints of a run (transformers' ``Trainer`` layout, or
``train_induction_model(checkpoint_every=k, out=...)``) lazily, one model at a time;
:func:`checkpoint_scores` scores heads on fixed inputs at every step, with the loss and the
in-context learning score per step (Olsson et al. 2022), and on request the relation heads of
a treebank (Clark et al. 2019) and the score attribution of fixed pairs; :func:`crossing_steps`
reads off when each head's score passes a level.
"""

from .analyses import (ATTRIBUTION_COLUMNS, STEP_COLUMNS, SeriesResult, checkpoint_scores,
                       crossing_steps)
from .series import ARCHITECTURE_KEYS, Checkpoint, CheckpointSeries, checkpoints

__all__ = [
    "ARCHITECTURE_KEYS",
    "ATTRIBUTION_COLUMNS",
    "STEP_COLUMNS",
    "Checkpoint",
    "CheckpointSeries",
    "SeriesResult",
    "checkpoint_scores",
    "checkpoints",
    "crossing_steps",
]
