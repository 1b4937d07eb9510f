"""Where a model runs and in which precision: ``device=`` and ``dtype=`` of :func:`attnkit.load`.

``"auto"`` picks a CUDA GPU when torch sees one, else Apple's MPS, else the CPU; the
``"auto"`` dtype is the checkpoint's own on a GPU and float32 on the CPU (half precision on a
CPU is slow and rounds attention for nothing). Asking for a device that is not there, or a
dtype the device cannot run, raises :class:`~attnkit.errors.DeviceError` before any weights
are loaded.
"""

from __future__ import annotations

from typing import Any

from ..errors import DeviceError

#: dtype names :func:`resolve_dtype` accepts, and the torch dtype each names.
DTYPES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "fp64": "float64", "double": "float64",
}


def available_devices() -> list[str]:
    """The devices torch can use here, e.g. ``["cpu", "cuda:0", "cuda:1"]``.

    Returns
    -------
    list of str
        ``"cpu"`` first, then every CUDA device, then ``"mps"`` where there is one.

    Examples
    --------
    >>> from attnkit.runtime.device import available_devices
    >>> available_devices()[0]
    'cpu'
    """
    import torch

    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        out.append("mps")
    return out


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(device: Any = "auto") -> Any:
    """The ``torch.device`` that ``device`` names.

    Parameters
    ----------
    device : str or torch.device
        ``"auto"`` (a CUDA GPU, else MPS, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``,
        ``"mps"``, or a ``torch.device``.

    Returns
    -------
    torch.device

    Raises
    ------
    DeviceError
        When the name is not a device, or names one this machine does not have.

    Examples
    --------
    >>> from attnkit.runtime.device import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    import torch

    if isinstance(device, str) and device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(
            f"{device!r} is not a device; use 'auto', 'cpu', 'cuda', 'cuda:1' or 'mps' "
            f"(available here: {', '.join(available_devices())})."
        ) from None
    here = ", ".join(available_devices())
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "without CUDA"
            raise DeviceError(
                f"device={str(device)!r} asks for a CUDA GPU, but torch {torch.__version__} "
                f"({build}) sees none. Use device='cpu' or 'auto' (available here: {here})."
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise DeviceError(
                f"device={str(device)!r}: this machine has {count} CUDA GPU(s), numbered "
                f"0..{count - 1}. Available here: {here}."
            )
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type == "mps":
        if not _mps_available():
            raise DeviceError(f"device='mps' needs Apple silicon with MPS; not available here "
                              f"({here}).")
    elif dev.type != "cpu":
        backend = getattr(torch, dev.type, None)
        if backend is None or not getattr(backend, "is_available", lambda: False)():
            raise DeviceError(f"device={str(device)!r} is not available here ({here}).")
    return dev


def resolve_dtype(dtype: Any, device: Any, checkpoint_dtype: Any = None) -> Any:
    """The ``torch.dtype`` to run a model in on ``device``.

    Parameters
    ----------
    dtype : str or torch.dtype
        ``"auto"`` (the checkpoint's dtype on a GPU, float32 on the CPU), a name in
        :data:`DTYPES`, or a floating ``torch.dtype``.
    device : torch.device
        Where the model will run (:func:`resolve_device`).
    checkpoint_dtype : torch.dtype or str, optional
        The dtype the checkpoint was saved in (``config.dtype``); float32 when unknown.

    Returns
    -------
    torch.dtype

    Raises
    ------
    DeviceError
        For a name that is not a floating dtype, or a dtype the device cannot run (bfloat16
        on a GPU older than Ampere, float64 on MPS, or any dtype a small attention product
        fails in on that device).

    Examples
    --------
    >>> import torch
    >>> from attnkit.runtime.device import resolve_dtype
    >>> resolve_dtype("auto", torch.device("cpu"), checkpoint_dtype="bfloat16")
    torch.float32
    >>> resolve_dtype("bf16", torch.device("cpu"))
    torch.bfloat16
    """
    import torch

    if isinstance(dtype, str) and dtype == "auto":
        if device.type == "cpu":
            return torch.float32
        dtype = checkpoint_dtype if checkpoint_dtype is not None else torch.float32
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype, torch.float32)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            dtype = torch.float32
    elif isinstance(dtype, str):
        name = DTYPES.get(dtype.lower())
        if name is None:
            raise DeviceError(f"dtype={dtype!r} is not a floating-point precision; use 'auto', "
                              "'float32', 'bfloat16' or 'float16'.")
        dtype = getattr(torch, name)
    elif not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise DeviceError(f"dtype={dtype!r} is not a floating-point precision; use 'auto', "
                          "'float32', 'bfloat16' or 'float16'.")
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        name = torch.cuda.get_device_name(device)
        raise DeviceError(f"{name} cannot run bfloat16 (it needs compute capability 8.0 or "
                          "newer); use dtype='float16' or 'float32'.")
    if device.type == "mps" and dtype == torch.float64:
        raise DeviceError("MPS cannot run float64; use dtype='float32' (or 'float16').")
    _probe(device, dtype)
    return dtype


def _probe(device: Any, dtype: Any) -> None:
    """Run a tiny attention product in ``dtype`` on ``device``; a device that cannot is
    refused here rather than in the middle of a forward pass."""
    import torch

    try:
        x = torch.ones(1, 1, 2, 4, device=device, dtype=dtype)
        torch.nn.functional.scaled_dot_product_attention(x, x, x)
        torch.softmax(x @ x.transpose(-1, -2), dim=-1)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        raise DeviceError(f"{device} cannot run {str(dtype).replace('torch.', '')} "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                          "use dtype='float32'.") from exc
