"""Saving a fine-tuned classifier: one folder (safetensors weights, config, tokenizer and
``finetune.json``) that appears only when everything is written.

Files go to a hidden ``.<name>.partial-<pid>`` folder next to ``out`` that is renamed at the
end, and removed if the run is interrupted (``KeyboardInterrupt``) or fails; a previous
folder is put back.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError

#: File written into every fine-tuned folder; its presence also marks a folder that
#: ``overwrite=True`` may replace.
INFO_FILE = "finetune.json"


def partial_dir(out: Path) -> Path:
    """The hidden folder this process writes ``out`` into before renaming it."""
    return out.parent / f".{out.name}.partial-{os.getpid()}"


def clear_stale_partials(out: Path) -> None:
    """Remove partial folders left by killed runs (their process is gone)."""
    for p in out.parent.glob(f".{out.name}.partial-*"):
        try:
            pid = int(p.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
            if pid != os.getpid():
                continue
        except ValueError:
            continue  # not a name this module gives: not ours to delete
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an existing ``out`` unless ``overwrite`` and it was written by finetune."""
    if not out.exists():
        return
    if not overwrite:
        raise InputError(f"{out} already exists; pass overwrite=True to replace it, or another out.")
    if not (out / INFO_FILE).is_file():
        raise InputError(f"{out} exists and was not written by attnkit.apps.finetune (no {INFO_FILE}); "
                         "refusing to replace it. Choose another out folder.")


def save(clf: Any, tokenizer: Any, info: dict[str, Any], out: Path, overwrite: bool) -> None:
    """Write the classifier, its tokenizer and ``info`` (as :data:`INFO_FILE`) to ``out``:
    under a temporary name, then renamed into place; interrupted, nothing half-written
    stays and a previous folder is put back."""
    check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_partials(out)
    tmp = partial_dir(out)
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        quietly(clf.save_pretrained, tmp)
        tokenizer.save_pretrained(tmp)
        if not (tmp / "model.safetensors").is_file() and not list(tmp.glob("*.safetensors")):
            raise InputError(f"transformers wrote no safetensors weights into {tmp}.")
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=1, default=json_default))
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            os.replace(old, out)  # put the previous folder back
        raise
    shutil.rmtree(old, ignore_errors=True)


def quietly(fn: Any, *args: Any) -> Any:
    """Call ``fn`` without transformers' own progress bars (library code stays quiet)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return fn(*args)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def json_default(o: Any) -> Any:
    """``json.dumps`` fallback for numpy numbers and paths."""
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(type(o).__name__)
