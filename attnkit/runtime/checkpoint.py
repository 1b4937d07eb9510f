"""Write a training checkpoint in the layout of transformers' ``Trainer``: ``checkpoint-<step>``.

The toy recipes (``train_induction_model(checkpoint_every=...)``) and fine-tuning
(``finetune(..., checkpoint_every=...)``) write their checkpoints through
:func:`write_checkpoint`; :func:`attnkit.checkpoints` reads them (and a Trainer's own).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError


def checkpoint_folder(checkpoint_every: int | None, folder: str | Path | None, *,
                      name: str = "out") -> Path | None:
    """The folder checkpoints go into, checked and created; None without checkpoints.

    ``folder`` must not exist or be empty, so nothing is overwritten; ``checkpoint_every``
    and ``folder`` come together (``name`` is the option's name in the messages).
    """
    if checkpoint_every is None and folder is None:
        return None
    if checkpoint_every is None or folder is None:
        raise InputError(f"checkpoint_every and {name} go together: pass both (checkpoints every "
                         "k steps, into a folder) or neither.")
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise InputError(f"checkpoint_every must be a whole number of steps >= 1; got "
                         f"{checkpoint_every!r}.")
    path = Path(folder).expanduser()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InputError(
            f"{name}={str(folder)!r} is {'a file' if not path.is_dir() else 'a folder that is not empty'}; "
            "checkpoints go into a new or empty folder (nothing is overwritten)."
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_checkpoint(hf: Any, tokenizer: Any, folder: Path, step: int, *, max_steps: int,
                     log_history: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> Path:
    """``folder/checkpoint-<step>``: the model (``save_pretrained``), its tokenizer and
    ``trainer_state.json`` (``global_step``, ``max_steps``, ``log_history``: the training
    losses so far, and ``extra``'s keys), as transformers' Trainer writes them."""
    from transformers.utils import logging as hf_logging

    target = folder / f"checkpoint-{step}"
    target.mkdir()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # transformers' own bar for each shard it writes
    try:
        hf.save_pretrained(target)
        tokenizer.save_pretrained(target)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    state = {"global_step": step, "max_steps": max_steps, "log_history": log_history, **(extra or {})}
    (target / "trainer_state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
    return target
