"""Where the shared data lives: ``$ATTNKIT_DATA``, else ``../shared/data`` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DataNotFoundError

_HINT = (
    "Set ATTNKIT_DATA to a folder holding ud-english-ewt/, ud-english-gum/ and glue/, or put "
    "it at ../shared/data beside the attnkit checkout. UD treebanks: "
    "https://universaldependencies.org (UD_English-EWT, UD_English-GUM); GLUE: "
    "https://gluebenchmark.com."
)


def data_dir() -> Path | None:
    """The data folder, or None when there is none."""
    env = os.environ.get("ATTNKIT_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for root in (here.parents[2], Path.cwd()):
        cand = root.parent / "shared" / "data"
        if cand.is_dir():
            return cand
    return None


def find_data(relative: str) -> Path:
    """Path of ``relative`` inside the data folder; raises DataNotFoundError with a hint."""
    base = data_dir()
    if base is None or not (base / relative).exists():
        where = f"in {base}" if base else "(no data folder found)"
        raise DataNotFoundError(f"{relative} was not found {where}. {_HINT}")
    return base / relative


def sample_treebank() -> Path:
    """A small hand-annotated CoNLL-U sample shipped with attnkit (for demos without data)."""
    return Path(__file__).with_name("sample.conllu")


def sample_coref() -> Path:
    """Two hand-annotated documents with GUM-style ``Entity=`` coreference, shipped with
    attnkit (for examples and tests)."""
    return Path(__file__).with_name("coref_sample.conllu")
