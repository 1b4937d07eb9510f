"""Shared pieces of the fault catalogue (tests/faults): the exact-class assertion, the
comparison of a store with a clean run, and the small corpus every store case uses."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from attnkit.testing import CORPUS

#: 8 items, 4 batches of 2: every store case damages one part and checks the rest.
TEXTS = [*CORPUS, "The cat reads.", "We read the review."]
BATCH = 2


def raises_exactly(cls: type[BaseException], fn, *args, match: str | None = None, **kwargs):
    """Call ``fn`` and check it raises ``cls`` itself (not a parent, not a subclass);
    returns the exception."""
    with pytest.raises(BaseException) as info:
        fn(*args, **kwargs)
    assert type(info.value) is cls, f"{type(info.value).__name__} ({info.value}) is not {cls.__name__}"
    if match is not None:
        assert match in str(info.value), str(info.value)
    return info.value


def same_sets(a, b) -> None:
    """Two AttentionSets hold the same items. Both were computed in this process by the
    same model and batches, then stored in float16, so the maps are compared bit for bit."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.tokens == y.tokens and x.words == y.words
        np.testing.assert_array_equal(x.maps, y.maps)
        if x.embeddings is not None or y.embeddings is not None:
            np.testing.assert_array_equal(x.embeddings, y.embeddings)


@contextmanager
def tmpfs(where: Path, size: str):
    """Mount a tmpfs of ``size`` at ``where`` (needs root and mount; skip otherwise)."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount): {exc}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True,
                   capture_output=True, timeout=30)
