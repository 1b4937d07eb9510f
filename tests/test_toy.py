"""The trained induction toy model: a real decoder whose heads are known, the known answer for
head_scores; and its recipe, which retrained briefly reaches the same head structure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.toys import induction as toy
from attnkit.errors import InputError
from tolerances import assert_close, F32

pytestmark = pytest.mark.numerics


@pytest.fixture(scope="module")
def shipped():
    return toy.induction_model()


@pytest.fixture(scope="module")
def shipped_scores(shipped):
    atts = [shipped.attend(x) for x in ak.induction_inputs(shipped, 16, 32, seed=0)]
    return ak.head_scores(atts, progress=False)


def test_shipped_model_is_attention_only_llama(shipped):
    assert shipped.model_type == "llama" and shipped.causal
    assert (shipped.n_layers, shipped.n_heads) == (2, 2)
    for layer in shipped.hf.model.layers:
        assert not layer.mlp.down_proj.weight.any()  # the MLPs add exactly nothing
    rec = shipped.config.attnkit_toy
    assert rec["recipe"] == {**rec["recipe"], "seed": 0, "steps": 800}
    assert toy.induction_accuracy(shipped, length=32, n=8, seed=5) >= 0.99


def test_shipped_model_known_heads(shipped_scores):
    r = shipped_scores
    assert r.meta["n_rows"]["induction"] == 16 * 32 and r.meta["identity"] == "input_ids"
    prev, ind = r.grid("previous"), r.grid("induction")
    # layer 1 (index 0) holds the previous-token head, layer 2 the induction heads
    assert r.best("previous") == (0, 0) and r.best("induction")[0] == 1
    others = np.delete(prev.ravel(), 0)
    assert prev[0, 0] > 0.95 and prev[0, 0] - others.max() > 0.5 and prev[1].max() < 0.1
    assert ind[1].min() > 0.95 and ind[0].max() < 0.05
    # uniform attention would give about 1/40 to each: the heads are far above it
    assert r.meta["uniform"]["induction"] < 0.03
    assert r.grid("duplicate").max() < 0.05
    # measured on the shipped weights (docs/results.md)
    np.testing.assert_allclose(r.grid("previous"), PREVIOUS, atol=0.01)
    np.testing.assert_allclose(r.grid("induction"), INDUCTION, atol=0.01)


# measured with the test above on attnkit/toy_models/induction-2l (seed 0, 800 steps)
PREVIOUS = np.array([[0.976, 0.424], [0.039, 0.047]])
INDUCTION = np.array([[0.000, 0.003], [0.982, 0.987]])


def test_induction_head_looks_length_minus_one_back(shipped):
    [ids] = ak.induction_inputs(shipped, 1, 20, seed=3)
    att = shipped.attend(ids)
    rows = np.arange(22, 41)  # second copy after its first token: position q looks at q - 19
    for head in range(2):
        assert (att.maps[1, head, rows].argmax(-1) == rows - 19).all()
    assert (att.maps[0, 0, 1:].argmax(-1) == np.arange(0, 40)).all()  # head 1-1: the previous token


def test_text_input_and_save_load(tmp_path, shipped):
    att = shipped.attend("dat dif dat dif")
    assert att.tokens[0] == "<bos>" and att.roles[0] == "cls"
    folder = toy.save(shipped, tmp_path / "toy")
    again = ak.load(folder)
    assert again.config.attnkit_toy == shipped.config.attnkit_toy
    ids = ak.induction_inputs(shipped, 1, 8)[0]
    # The loaded model is another object (its attention implementation chosen on load): the
    # same weights may sum in another float32 order; a weight lost on the way is off by more.
    assert_close(again.attend(ids).maps, shipped.attend(ids).maps, F32)


@pytest.mark.slow
def test_recipe_retrained_briefly_reaches_the_same_heads():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = toy.train_induction_model(steps=RETRAIN_STEPS, progress=False)
    finally:
        torch.set_num_threads(threads)
    rec = model.config.attnkit_toy
    assert rec["recipe"]["steps"] == RETRAIN_STEPS and rec["final_loss"] < 0.1
    assert toy.induction_accuracy(model, length=32, n=8, seed=5) >= 0.95
    atts = [model.attend(x) for x in ak.induction_inputs(model, 8, 32, seed=0)]
    r = ak.head_scores(atts, progress=False)
    prev, ind = r.grid("previous"), r.grid("induction")
    assert r.best("previous")[0] == 0 and prev[0].max() > 0.8 and prev[1].max() < 0.15
    assert r.best("induction")[0] == 1 and ind[1].max() > 0.9 and ind[0].max() < 0.05


RETRAIN_STEPS = 300


SMALL = {"vocab_size": 16, "hidden": 16, "start_length": 8, "max_length": 8}


def test_training_is_reproducible_and_leaves_global_rng():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = toy.train_induction_model(**SMALL, steps=3, progress=False)
    after = torch.rand(1)
    assert torch.equal(before, after)
    b = toy.train_induction_model(**SMALL, steps=3, progress=False)
    for (k, v), (_, w) in zip(a.hf.state_dict().items(), b.hf.state_dict().items()):
        assert torch.equal(v, w), k
    c = toy.train_induction_model(**SMALL, steps=3, seed=1, progress=False)
    assert not torch.equal(a.hf.lm_head.weight, c.hf.lm_head.weight)


def test_toy_tokenizer():
    words = toy.toy_words(300)
    assert len(set(words)) == 300 and all(len(w) == 3 for w in words)
    assert toy.toy_words(5) == words[:5]
    tok = toy.toy_tokenizer(5)
    assert tok.convert_ids_to_tokens(tok(f"{words[0]} nope")["input_ids"]) == ["<bos>", words[0], "<unk>"]
    assert len(tok) == 8


def test_bad_options():
    with pytest.raises(InputError, match="min_length"):
        toy.train_induction_model(vocab_size=8, max_length=9, steps=0, progress=False)
    with pytest.raises(InputError, match="heads"):
        toy.train_induction_model(hidden=10, heads=4, steps=0, progress=False)
    with pytest.raises(InputError, match="vocab_size"):
        toy.toy_words(0)
    with pytest.raises(InputError, match="causal language model"):
        from attnkit.testing import tiny_model

        toy.induction_accuracy(tiny_model("bert"), length=4)


def test_lazy_attention_gives_the_dense_scores(shipped):
    pytest.importorskip("attnkit.runtime.lazy", reason="needs lazy capture (attnkit.runtime.lazy)")
    inputs = ak.induction_inputs(shipped, 2, 100, seed=0)
    dense = ak.head_scores([shipped.attend(x, lazy=False) for x in inputs], progress=False)
    lazy_atts = [shipped.attend(x, lazy=True) for x in inputs]
    assert not isinstance(lazy_atts[0], ak.Attention)
    lazy = ak.head_scores(lazy_atts, progress=False)
    assert_close(lazy.table.to_numpy(), dense.table.to_numpy(), F32, scale=1)
    assert lazy.meta == dense.meta
