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
