"""The GPU check of benchmarks/gpu_long.py runs on the CPU at a toy size (CI smoke test).

Only its exactness checks are asserted here; its time ratio is a benchmark, not a test.
"""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpu_long


def test_gpu_long_tiny_on_cpu(capsys):
    res = gpu_long.main(["--tiny", "--reps", "1"])
    checks = res["checks"]
    assert checks["same_forward"] and checks["rows_sum_to_one"] and checks["block_exact"]
    assert res["kept_gb"] > 0 and res["shape"]["n"] == 256
