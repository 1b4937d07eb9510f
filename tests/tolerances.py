"""The named tolerances of attnkit's tests: how close two numbers must be, and why.

Every numerics test compares with one of these (CONTRIBUTING.md, "Checks"):

- :data:`EXACT`: one code path produced both sides (a store read back, a copy, the same
  function twice): bit equality, ``np.testing.assert_array_equal``.
- :data:`F32`: two different float32 computations of one quantity (SDPA vs eager, a lazy
  band vs a dense map, a sum in another order): each float32 operation rounds at
  2^-24 ≈ 6e-8 relative, and a reduction over ``n`` terms accumulates up to ``n`` of those
  in the worst case, so 1e-5 *relative to the values' scale* holds for the sizes the tests
  use on any CPU (AVX-512, AVX2, the portable kernels, one thread or many). Absolute 1e-6
  does not: 1.2e-6 was seen between two correct computations of head averages on an AMD EPYC.
- :data:`F32_DEEP`: float32 through a whole model (many layers of matmuls and norms, the
  measures' decompositions): 1e-4 relative to the scale.
- :data:`F64`: two float64 computations (the residual decompositions): 1e-9 relative.
- :data:`FD`: a float64 derivative against a central difference (truncation ``O(eps²)``):
  1e-6 relative.
- :data:`F16`: a value stored as float16 (the store's maps, the widgets' wire): half a unit in
  the last place is 2^-11 ≈ 4.9e-4 relative, so 1e-3.
- :data:`U8`: a value quantised to uint8 for display: one step of 1/255 of the scale.

"Relative to the values' scale" means ``|a - b| <= rtol * max|b|`` elementwise (plus the usual
``rtol * |b|``): probabilities near zero are compared at the precision of the largest ones,
which is what the computation can promise. :func:`assert_close` does that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """A relative tolerance and the reason it is that size."""

    rtol: float
    why: str


EXACT = Tolerance(0.0, "one code path produced both sides")
F32 = Tolerance(1e-5, "two float32 computations of one quantity (summation order, kernels, threads)")
F32_DEEP = Tolerance(1e-4, "float32 through a whole model's layers")
F64 = Tolerance(1e-9, "two float64 computations of one quantity")
FD = Tolerance(1e-6, "a float64 derivative against a central difference (truncation O(eps^2))")
F16 = Tolerance(1e-3, "stored as float16 (2^-11 relative rounding)")
U8 = Tolerance(1.0 / 255, "quantised to uint8 for display")


def assert_close(actual, desired, tol: Tolerance = F32, *, scale: float | None = None, err_msg: str = "") -> None:
    """``actual`` equals ``desired`` within ``tol`` relative to the values' scale.

    Parameters
    ----------
    actual, desired : array_like
        The two sides (``desired`` is the reference; its largest magnitude is the scale).
    tol : Tolerance
        One of this module's tolerances.
    scale : float, optional
        The scale instead of ``max|desired|`` (e.g. 1 for probabilities).
    err_msg : str
        Added to the failure message.
    """
    a = np.asarray(actual, dtype=np.float64)
    d = np.asarray(desired, dtype=np.float64)
    if tol.rtol == 0.0:
        np.testing.assert_array_equal(actual, desired, err_msg=err_msg)
        return
    finite = np.abs(d[np.isfinite(d)])
    s = float(finite.max()) if scale is None and finite.size else (1.0 if scale is None else float(scale))
    np.testing.assert_allclose(a, d, rtol=tol.rtol, atol=tol.rtol * s,
                               err_msg=f"{err_msg} ({tol.why}; scale {s:.3g})".strip())
