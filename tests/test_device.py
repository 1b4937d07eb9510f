"""Device and precision: resolution, refusals with clear messages, and runs off float32."""

import numpy as np
import pytest
import torch

import attnkit
from attnkit.runtime.device import resolve_device, resolve_dtype
from attnkit.errors import DeviceError
from attnkit.testing import tiny_model
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny Llama saved to disk, for attnkit.load."""
    path = tmp_path_factory.mktemp("tiny-llama")
    model = tiny_model("llama")
    model.hf.save_pretrained(path)
    model.tokenizer.save_pretrained(path)
    return path


def test_auto_picks_what_is_there():
    want = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and torch.backends.mps.is_available():
        want = "mps"
    assert resolve_device("auto").type == want
    assert resolve_device("cpu") == CPU
    assert resolve_dtype("auto", CPU, checkpoint_dtype=torch.bfloat16) == torch.float32


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_missing_gpu_is_refused(folder):
    with pytest.raises(DeviceError, match="sees none"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="sees none"):
        attnkit.load(folder, device="cuda:0")


def test_gpu_index_out_of_range(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(DeviceError, match="has 2 CUDA GPU"):
        resolve_device("cuda:5")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_missing_mps_and_unknown_names():
    with pytest.raises(DeviceError, match="MPS"):
        resolve_device("mps")
    with pytest.raises(DeviceError, match="not a device"):
        resolve_device("gpu")


def test_dtype_names():
    assert resolve_dtype("bf16", CPU) == torch.bfloat16
    assert resolve_dtype(torch.float16, CPU) == torch.float16
    for bad in ("int8", "float8", torch.int64):
        with pytest.raises(DeviceError, match="not a floating-point"):
            resolve_dtype(bad, CPU)


def test_dtype_the_device_cannot_run(monkeypatch):
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    with pytest.raises(DeviceError, match="Tesla T4 cannot run bfloat16"):
        resolve_dtype("bfloat16", gpu)
    with pytest.raises(DeviceError, match="MPS cannot run float64"):
        resolve_dtype("float64", torch.device("mps"))


def test_probe_failure_is_a_device_error(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError('"baddbmm" not implemented for this dtype')

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", broken)
    with pytest.raises(DeviceError, match="cannot run float16"):
        resolve_dtype("float16", CPU)


def test_load_on_cpu_in_bfloat16(folder):
    model = attnkit.load(folder, device="cpu", dtype="bfloat16")
    assert model.device == CPU and model.dtype == torch.bfloat16
    assert "bfloat16" in repr(model)
    ref = attnkit.load(folder, device="cpu")
    assert ref.dtype == torch.float32 and "float32" not in repr(ref)
    text = "A student reads the new book in the library."
    att, want = model.attend(text), ref.attend(text)
    assert att.maps.dtype == np.float32  # numpy float32 on the CPU whatever the model ran in
    assert_close(att.maps.sum(-1), 1.0, F32, scale=1)
    assert np.abs(att.maps - want.maps).max() < 0.1  # bfloat16 rounding, same attention
    # lazy capture runs the fused bfloat16 kernel, dense capture the eager arithmetic: the
    # first layer's maps agree to bfloat16 rounding of the scores; later layers see inputs
    # that already differ by bfloat16 rounding
    lazy = model.attend(text, lazy=True)
    np.testing.assert_allclose(lazy.maps[0], att.maps[0], atol=2e-3)
    np.testing.assert_allclose(lazy.maps.sum(-1), 1.0, atol=1e-3)


def test_device_map_goes_through_accelerate(folder):
    pytest.importorskip("accelerate")
    model = attnkit.load(folder, device_map={"": "cpu"})
    assert model.device == CPU
    assert model.attend("The cat sat.").maps.shape[0] == 2
