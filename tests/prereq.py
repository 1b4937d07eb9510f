"""Skip a test whose prerequisite is missing, or fail it under CI.

Under ``CI=true`` every prerequisite (real data, the bundled model, Chromium, built front
end) must be there, so a missing one is a failure rather than a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO = Path(__file__).resolve().parents[1]


def skip_or_fail(reason: str) -> None:
    """Skip the running test, or fail it under ``CI=true``."""
    if IN_CI:
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)


def require_installed(module: str, reason: str) -> None:
    """Skip (or fail under CI) unless ``module`` can be imported, without importing it: the
    front ends run in their own processes, and importing one here would run its import-time
    code in the test worker (marimo's config dataclasses break in a worker where another test
    left a second copy of ``dataclasses``)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        skip_or_fail(reason)
