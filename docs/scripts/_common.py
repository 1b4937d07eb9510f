"""What the scripts of docs/scripts share: torch threads, the output folder, the model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import attnkit as ak


def prepare(args: argparse.Namespace) -> tuple[Path, Any]:
    """Set torch's threads (``args.threads``), make ``args.out``, load ``args.model``."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return out, ak.load(args.model)
