"""The named tolerances (tests/tolerances.py) accept the rounding two correct float32
computations differ by, on any CPU, and refuse real errors."""

import numpy as np
import pytest

from tolerances import EXACT, F16, F32, assert_close


def test_f32_accepts_rounding_relative_to_the_scale():
    # head averages of one map on an AMD EPYC vs the dense mean: 1.2e-6 and 1.5e-6 apart
    desired = np.array([0.5, 0.25, 1e-4, 0.0], dtype=np.float32)
    assert_close(desired + np.float32(1.5e-6), desired, F32)
    # a score of size 40 carries rounding of its own size
    assert_close(np.float64(40.0001), 40.0, F32)


def test_f32_refuses_a_real_error():
    with pytest.raises(AssertionError, match="two float32 computations"):
        assert_close(np.array([0.5, 0.25]), np.array([0.5, 0.2501]), F32)
    with pytest.raises(AssertionError):
        assert_close(np.array([0.0, 2e-4]), np.array([0.0, 0.0]), F32, scale=1)


def test_f16_and_exact():
    x = np.linspace(0, 1, 50, dtype=np.float32)
    assert_close(x.astype(np.float16).astype(np.float32), x, F16)
    with pytest.raises(AssertionError):
        assert_close(x.astype(np.float16).astype(np.float32), x, EXACT)
    assert_close(x.copy(), x, EXACT)


def test_no_test_compares_at_an_absolute_tolerance_below_float32_rounding():
    """No ``np.testing.assert_allclose(..., atol=x)`` with 0 < x <= 1e-6 and no ``rtol`` at or
    below 1e-6 anywhere in the tests: such comparisons pass on one CPU and fail on another
    (tests/tolerances.py says what to use instead)."""
    import ast
    from pathlib import Path

    found = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "assert_allclose"):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            atol, rtol = kw.get("atol"), kw.get("rtol")
            tight_a = isinstance(atol, ast.Constant) and 0 < float(atol.value) <= 1e-6
            tight_r = isinstance(rtol, ast.Constant) and 0 < float(rtol.value) <= 1e-6
            bare = atol is None and rtol is None  # numpy's default rtol is 1e-7
            if tight_a or tight_r or bare:
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
