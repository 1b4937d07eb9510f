"""The GPU check of benchmarks/gpu_long.py runs on the CPU at a toy size (CI smoke test).

Only its exactness checks are asserted here; its time ratio is a benchmark, not a test.
"""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.numerics

pytest.importorskip("torch")
# Loaded by file: benchmarks/ on sys.path would let benchmarks/distributed.py shadow Dask's
# `distributed` package in every process started after this module (Dask workers included).
_spec = importlib.util.spec_from_file_location(
    "gpu_long", Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_long.py")
gpu_long = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_long)


def test_gpu_long_tiny_on_cpu(capsys):
    res = gpu_long.main(["--tiny", "--reps", "1"])
    checks = res["checks"]
    assert checks["same_forward"] and checks["rows_sum_to_one"] and checks["block_exact"]
    assert res["kept_gb"] > 0 and res["shape"]["n"] == 256
