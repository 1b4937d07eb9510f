"""The one writer of arrays sent to the browser (reader: ``js/src/lib/codec.ts``).

Every array crosses as a self-describing dict ``{"dtype", "shape", "buffer"}`` (plus an
optional ``"scale"``): little-endian bytes in C order, never JSON lists of floats. In widget
state the ``buffer`` is the bytes themselves (ipywidgets sends nested bytes as binary
buffers); in a custom message it is the index of the message buffer that holds them
(:func:`message`).

``scale`` is a power of two the stored values are multiplied by on reading. float16 keeps 3
significant digits only between 6e-5 and 65504; attention weights of long inputs are far
smaller (1/32768 = 3e-5), so :func:`f16` stores ``a / scale`` with ``scale`` chosen to bring
the largest value near 2**14, and small weights keep their digits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError

#: dtypes the front end reads, and their numpy spelling (little-endian)
DTYPES = {"uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "int32": "<i4",
          "float16": "<f2", "float32": "<f4"}


def wire(a: Any, dtype: str, *, scale: float | None = None) -> dict[str, Any]:
    """``a`` as ``{"dtype", "shape", "buffer"}`` of numpy dtype ``DTYPES[dtype]``.

    Integer dtypes must hold ``a`` exactly; floats are rounded to the nearest value.
    """
    if dtype not in DTYPES:
        raise InputError(f"cannot send dtype {dtype!r}; use one of {sorted(DTYPES)}.")
    arr = np.asarray(a)
    if scale is not None:
        arr = arr / scale
    out = np.ascontiguousarray(arr, dtype=DTYPES[dtype])
    if out.dtype.kind in "iu" and arr.size and not np.array_equal(out, arr):
        raise InputError(f"values do not fit in {dtype} exactly (range {arr.min()}..{arr.max()}).")
    d: dict[str, Any] = {"dtype": dtype, "shape": [int(s) for s in out.shape], "buffer": out.tobytes()}
    if scale is not None and scale != 1.0:
        d["scale"] = float(scale)
    return d


def f16(a: Any) -> dict[str, Any]:
    """Nonnegative or signed floats as float16 with a power-of-two ``scale``: the largest
    magnitude is stored near 2**14, so values down to ~1e-9 of it keep 3 significant digits."""
    arr = np.asarray(a, dtype=np.float32)
    finite = np.abs(arr[np.isfinite(arr)])
    top = float(finite.max()) if finite.size else 0.0
    if top > 0:
        scale = 2.0 ** (int(np.floor(np.log2(top))) - 14)
        return wire(arr, "float16", scale=scale)
    return wire(arr, "float16")


def read(d: dict[str, Any], buffers: list[bytes] | None = None) -> np.ndarray:
    """The numpy array of a wire dict (what the front end reads; for tests and round trips)."""
    raw = d["buffer"] if not isinstance(d["buffer"], int) else (buffers or [])[d["buffer"]]
    arr = np.frombuffer(bytes(raw), dtype=DTYPES[d["dtype"]]).reshape(d["shape"])
    if "scale" in d:
        return arr.astype(np.float64) * d["scale"]
    return arr


def message(content: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    """A custom message's ``(content, buffers)``: the bytes of each wire array found at the
    top level of ``content`` move to ``buffers`` and their ``buffer`` becomes its index."""
    out: dict[str, Any] = {}
    buffers: list[bytes] = []
    for k, v in content.items():
        if isinstance(v, dict) and isinstance(v.get("buffer"), (bytes, bytearray, memoryview)):
            v = dict(v, buffer=len(buffers))
            buffers.append(bytes(content[k]["buffer"]))
        out[k] = v
    return out, buffers
