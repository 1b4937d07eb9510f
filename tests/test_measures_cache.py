"""The measures' cache of derived matrices (attnkit.runtime.measures._arch._cache_for) belongs to one
model's weights: models built and freed one after another in one process (whose weights may
land at a freed model's addresses) each get their own matrices, and weights changed in place
get new ones."""

import gc

import numpy as np
import pytest
import torch

from attnkit.runtime.measures import _arch
from attnkit.runtime.archs import submodule
from attnkit.runtime.measures._arch import spec
from attnkit.testing import CORPUS, tiny_model
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics

TEXT = CORPUS[1]
MEASURES = ("norm+residual", "alti")


def _uncached(model, measure, monkeypatch):
    """The maps computed with no cache at all (every derived matrix made afresh)."""
    with monkeypatch.context() as m:
        m.setattr(_arch, "_cache_for", lambda *tensors: {})
        return model.attend(TEXT, measure=measure).maps


def _check(model, monkeypatch, label):
    for measure in MEASURES:
        got = model.attend(TEXT, measure=measure).maps
        want = _uncached(model, measure, monkeypatch)
        # The same kernels on the same inputs, so the two agree to float32 rounding; a
        # matrix of another model (the failure this guards against) is off by O(0.1).
        assert_close(got, want, F32, err_msg=f"{label} {measure}")


@pytest.fixture
def collect():
    """``gc.collect()`` that then moves the survivors out of the collector's reach
    (``gc.freeze``), so the next call scans only what was made since (the freed model) instead
    of the whole heap of torch, transformers (imported lazily by the first model) and pytest:
    0.4-0.7 s CPU a call otherwise, measured. The heap is unfrozen after the test."""
    def run():
        gc.collect()
        gc.freeze()
    yield run
    gc.unfreeze()


@pytest.mark.slow
def test_same_shaped_models_built_and_freed_get_their_own_matrices(monkeypatch, collect):
    """40 tiny Llamas of one shape, each freed before the next is built: each model's maps
    equal a cache-free computation (with a cache keyed on storage addresses, several read
    an earlier model's matrices)."""
    for seed in range(40):
        model = tiny_model("llama", seed=seed)
        _check(model, monkeypatch, f"seed {seed}")
        del model
        collect()


@pytest.mark.slow
def test_models_of_differing_shapes_built_and_freed(monkeypatch, collect):
    """Models of different widths in turn (a stale matrix of another shape would not even
    multiply): each gets maps equal to a cache-free computation."""
    for i, (kind, hidden) in enumerate([("llama", 16), ("llama", 32), ("llama", 24),
                                        ("bert", 16), ("bert", 32), ("gpt2", 16),
                                        ("gpt2", 24), ("llama", 16), ("bert", 24)] * 2):
        model = tiny_model(kind, hidden=hidden, seed=i)
        _check(model, monkeypatch, f"{kind} hidden={hidden}")
        del model
        collect()


@pytest.mark.parametrize("kind", ["llama", "bert", "gpt2"])
def test_weights_changed_in_place_get_new_matrices(monkeypatch, kind):
    """An in-place change of the output projection (as an optimizer step makes), of the
    normalisation after the attention (BERT's post-norm), or a load_state_dict of another
    model's weights: the maps follow the new weights."""
    model = tiny_model(kind, seed=0)
    before = {m: model.attend(TEXT, measure=m).maps for m in MEASURES}
    s = spec(model)
    layers = list(submodule(model.base, s.layers))
    with torch.no_grad():
        for layer in layers:
            submodule(layer, s.out_proj).weight.mul_(torch.linspace(0.2, 3.0, submodule(
                layer, s.out_proj).weight.shape[-1]))
    _check(model, monkeypatch, f"{kind} out_proj scaled")
    for m in MEASURES:  # the change is visible (else the check above proves nothing)
        assert np.abs(model.attend(TEXT, measure=m).maps - before[m]).max() > 1e-3
    if s.norm:
        with torch.no_grad():
            for layer in layers:
                w = submodule(layer, s.norm).weight
                w.copy_(torch.linspace(-2.0, 2.0, w.shape[0]))
        _check(model, monkeypatch, f"{kind} norm weight replaced")
    other = tiny_model(kind, seed=1)
    model.hf.load_state_dict(other.hf.state_dict())
    _check(model, monkeypatch, f"{kind} load_state_dict")
    for m in MEASURES:  # the same weights give the other model's maps
        # Both models run the same kernels on equal weights and inputs: float32 rounding.
        assert_close(model.attend(TEXT, measure=m).maps,
                                   other.attend(TEXT, measure=m).maps, F32)
