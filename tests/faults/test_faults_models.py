"""Fault catalogue: model folders and checkpoints (issue items 2, 3, 9, 16, 20)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from fault_helpers import BATCH, TEXTS, raises_exactly, same_sets
from safetensors.torch import load_file, save_file

import attnkit as ak
from attnkit.errors import ModelLoadError, ModelNotFoundError
from attnkit.runtime.load import resolve_model


@pytest.fixture
def folder(tiny_bert, tmp_path):
    """A complete model folder: config, weights, tokenizer."""
    tiny_bert.hf.save_pretrained(tmp_path / "m")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def _weights(folder):
    return folder / "model.safetensors"


def test_a_complete_folder_loads_and_gives_the_same_maps(tiny_bert, folder):
    loaded = ak.load(folder)
    # the same weights in the same float32 kernels: bit for bit
    np.testing.assert_array_equal(loaded.attend("The cat sat.").maps, tiny_bert.attend("The cat sat.").maps)


def test_a_folder_without_tokenizer_files(tiny_bert, tmp_path):
    tiny_bert.hf.save_pretrained(tmp_path / "nt")
    raises_exactly(ModelNotFoundError, ak.load, tmp_path / "nt")


def test_a_tokenizer_of_another_model(folder):
    # a tokenizer with more entries than the model embeds (its ids would run past them)
    tok = json.loads((folder / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    for k in range(len(vocab), len(vocab) + 200):
        vocab[f"extra{k}"] = k
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    err = raises_exactly(ModelLoadError, ak.load, folder)
    assert "tokenizer" in str(err)


def test_a_missing_tensor_is_refused_unless_asked(folder):
    tensors = load_file(_weights(folder))
    name = sorted(tensors)[3]
    del tensors[name]
    save_file(tensors, _weights(folder), metadata={"format": "pt"})
    err = raises_exactly(ModelLoadError, ak.load, folder)
    assert name.split(".")[-2] in str(err) and "strict=False" in str(err)
    assert ak.load(folder, strict=False).n_layers == 2


def test_an_unexpected_tensor_is_refused(folder):
    tensors = load_file(_weights(folder))
    tensors["encoder.layer.9.extra.weight"] = torch.zeros(2, 2)
    save_file(tensors, _weights(folder), metadata={"format": "pt"})
    raises_exactly(ModelLoadError, ak.load, folder)


def test_a_tensor_of_the_wrong_shape_is_refused(folder):
    tensors = load_file(_weights(folder))
    name = next(k for k in sorted(tensors) if k.endswith("query.weight"))
    tensors[name] = torch.zeros(tensors[name].shape[0], tensors[name].shape[1] + 1)
    save_file(tensors, _weights(folder), metadata={"format": "pt"})
    raises_exactly(ModelLoadError, ak.load, folder)


def test_random_bytes_in_the_weights_say_the_file_is_damaged(folder):
    data = bytearray(_weights(folder).read_bytes())
    rng = random.Random(0)
    for i in range(len(data) - 4000, len(data) - 100):
        data[i] = rng.randrange(256)
    _weights(folder).write_bytes(bytes(data))
    err = raises_exactly(ModelLoadError, ak.load, folder)
    assert "damaged" in str(err) and "overflow" not in str(err)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_or_inf_weights_are_refused_at_load(folder, value):
    tensors = load_file(_weights(folder))
    name = sorted(tensors)[5]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] = value
    save_file(tensors, _weights(folder), metadata={"format": "pt"})
    err = raises_exactly(ModelLoadError, ak.load, folder)
    assert name in str(err)


def test_a_truncated_weights_file(folder):
    data = _weights(folder).read_bytes()
    _weights(folder).write_bytes(data[: len(data) // 2])
    raises_exactly(ModelLoadError, ak.load, folder)


def test_no_folder_and_no_weights(tmp_path, tiny_bert):
    raises_exactly(ModelNotFoundError, ak.load, tmp_path / "nowhere")
    tiny_bert.hf.config.save_pretrained(tmp_path / "cfg")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "cfg")
    raises_exactly(ModelNotFoundError, ak.load, tmp_path / "cfg")


@pytest.mark.parametrize("spec", ["os:getcwd", "builtins:dict", "builtins:list"])
def test_a_factory_that_returns_no_model(spec):
    err = raises_exactly(ModelLoadError, resolve_model, spec)
    assert "not an attnkit Model" in str(err)


def test_a_factory_that_cannot_be_imported():
    raises_exactly(ModelNotFoundError, resolve_model, "attnkit.nothing_here:make")


def test_saving_a_model_keeps_its_store_resumable(folder, tmp_path):
    """Item 9: save_pretrained adds bookkeeping to the config; the fingerprint ignores it."""
    first = ak.load(folder)
    store = tmp_path / "s"
    ak.extract(first, TEXTS[:4], batch_size=BATCH, store=store, progress=False)
    first.hf.save_pretrained(folder)  # writes architectures / dtype into config.json
    again = ak.load(folder)
    resumed = ak.extract(again, TEXTS[:4], batch_size=BATCH, store=store, progress=False)
    assert resumed.run_info == {"computed_batches": 0, "reused_batches": 2}
    same_sets(resumed, ak.extract(again, TEXTS[:4], batch_size=BATCH, progress=False))
