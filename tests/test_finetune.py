"""Fine-tuning smoke tests on a tiny random BERT and a trivially learnable rule."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import attnkit as ak
from attnkit.apps.cli import main
from attnkit.data.pairs import GlueDataset
from attnkit.errors import InputError
from attnkit.testing import tiny_model
from tolerances import assert_close, F32

# ``attnkit.apps.finetune`` is the function at package level; the package holds the helpers too.
ft = importlib.import_module("attnkit.apps.finetune")
ft_data = importlib.import_module("attnkit.apps.finetune.data")
ft_train = importlib.import_module("attnkit.apps.finetune.train")

SUBJECTS = ["the student", "she", "we", "mary", "teachers", "john", "her brother", "a student"]
VERBS = ["sat on the mat", "reads the new book"]


@pytest.fixture(autouse=True)
def one_thread():
    # Two threads on two shared cores spin-wait; one is many times faster here.
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def rule_data() -> GlueDataset:
    """Label 1 iff the sentence starts with "yesterday" (32 items, balanced)."""
    rows = []
    for s in SUBJECTS:
        for v in VERBS:
            rows += [(f"yesterday {s} {v}", 1), (f"{s} {v}", 0)]
    return GlueDataset([r[0] for r in rows], np.array([r[1] for r in rows]),
                       ("plain", "yesterday"), task="toy")


def tiny(seed=0):
    m = tiny_model("bert", seed=seed)
    m.hf.config.hidden_dropout_prob = 0.0  # copied into the classifier: memorising is then quick
    m.hf.config.attention_probs_dropout_prob = 0.0
    return m


def state(model):
    return {k: v.detach().clone() for k, v in model.hf.state_dict().items()}


def test_learns_rule_saves_and_loads(tmp_path):
    model = tiny()
    before = state(model)
    data = rule_data()
    out = tmp_path / "ft"
    res = ft.finetune(model, data, evaluate_on=data, epochs=10, lr=1e-2, batch_size=8, max_length=32,
                      warmup=0.0, out=out, progress=False)
    losses = res.history.loss.to_numpy()
    assert len(losses) == 40  # 32 items / 8 per step * 10 epochs
    assert losses[-4:].mean() < 0.25 * losses[:4].mean()
    assert res.accuracy == 1.0 and res.f1 == 1.0
    assert res.majority_rate == 0.5 and res.n_train == 32 and res.n_dev == 32
    # the pre-trained model is untouched
    after = state(model)
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in before)

    assert sorted(p.name for p in out.iterdir()) >= ["config.json", "finetune.json", "model.safetensors"]
    assert not list(tmp_path.glob(".ft.partial-*"))
    loaded = ak.load(out)
    assert type(loaded.hf).__name__ == "BertForSequenceClassification"
    assert loaded.hf.config.id2label == {0: "plain", 1: "yesterday"}
    text = "yesterday mary sat on the mat"
    a0, a1 = model.attend(text), loaded.attend(text)
    assert a0.tokens == a1.tokens
    assert a1.maps.shape == a0.maps.shape
    assert not np.allclose(a0.maps, a1.maps, atol=1e-3)
    assert_close(a1.maps.sum(-1), 1.0, F32, scale=1)
    # the saved classifier predicts what the in-memory one predicted
    enc = ft_data.tokenize(loaded, data, 32)
    assert np.array_equal(ft.predict(loaded.hf, enc, loaded.pad_id), res.predictions)
    assert np.array_equal(ft.predict(res.model.hf, enc, loaded.pad_id), res.predictions)


def test_classifier_copy_keeps_encoder_weights():
    model = tiny()
    clf = ft.classifier_copy(model, ("a", "b", "c"))
    assert clf.config.num_labels == 3
    enc = model.base.state_dict()
    for k, v in clf.base_model.state_dict().items():
        assert np.array_equal(v.numpy(), enc[k].numpy()), k
    # an existing classifier with as many labels is copied whole, head included
    cls = tiny_model("bert-cls")
    clf = ft.classifier_copy(cls, ("x", "y"))
    assert np.array_equal(clf.classifier.weight.detach().numpy(), cls.hf.classifier.weight.detach().numpy())
    assert clf is not cls.hf


def test_freeze_layers_keeps_bottom_weights():
    model = tiny()
    data = rule_data()
    res = ft.finetune(model, data, epochs=1, lr=1e-2, batch_size=8, max_length=32,
                      freeze_layers=2, progress=False)
    old, new = model.base.state_dict(), res.model.base.state_dict()
    same = {k: np.array_equal(old[k].numpy(), new[k].numpy()) for k in old}
    assert all(v for k, v in same.items() if k.startswith(("embeddings.", "encoder.layer.0.")))
    assert not all(v for k, v in same.items() if k.startswith("encoder.layer.1."))
    assert np.isnan(res.accuracy) and res.predictions is None
    with pytest.raises(InputError, match="freeze_layers=9"):
        ft.finetune(model, data, epochs=1, freeze_layers=9, progress=False)


def test_max_items_subset_and_majority_from_train():
    model = tiny()
    data = rule_data()
    dev = GlueDataset(["she sat on the mat"] * 3 + ["yesterday she sat on the mat"],
                      np.array([0, 0, 0, 1]), data.label_names)
    train = data.take(np.r_[np.flatnonzero(data.labels == 1), np.flatnonzero(data.labels == 0)[:4]])
    res = ft.finetune(model, train, evaluate_on=dev, epochs=1, max_items=12, lr=1e-3, batch_size=4,
                      max_length=32, progress=False)
    assert res.n_train == 12 and len(res.history) == 3
    # the baseline always answers train's majority label (1, 16 of 20 items), right 1 in 4
    assert res.majority_rate == 0.25
    assert res.majority_f1 == pytest.approx(2 * 1 / (2 * 1 + 3 + 0))


def test_scores_known_answers():
    acc, f1 = ft.scores(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]), 2)
    assert acc == 0.75 and f1 == pytest.approx(2 / 3)
    # macro F1 over three classes: class 0 perfect, class 1 F1 2/3, class 2 F1 0
    acc, f1 = ft.scores(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 1]), 3)
    assert acc == 0.5 and f1 == pytest.approx((1 + 0.5 + 0) / 3)


def test_interrupt_during_training_leaves_no_folder(tmp_path, monkeypatch):
    model, data = tiny(), rule_data()
    calls = {"n": 0}
    real = ft_train.collate

    def collate(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ft_train, "collate", collate)
    with pytest.raises(KeyboardInterrupt):
        ft.finetune(model, data, evaluate_on=data, epochs=2, batch_size=8, out=tmp_path / "ft", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_interrupt_while_saving_keeps_previous_folder(tmp_path, monkeypatch):
    model, data = tiny(), rule_data()
    out = tmp_path / "ft"
    ft.finetune(model, data, epochs=1, batch_size=8, out=out, progress=False)
    weights = (out / "model.safetensors").read_bytes()

    def broken_save(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(model.tokenizer), "save_pretrained", broken_save)
    with pytest.raises(KeyboardInterrupt):
        ft.finetune(model, data, epochs=1, batch_size=8, out=out, overwrite=True,
                    seed=1, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ft"]  # no partial folder left
    assert (out / "model.safetensors").read_bytes() == weights
    ak.load(out)

    # without a previous folder, an interrupted save leaves nothing attnkit.load could open
    with pytest.raises(KeyboardInterrupt):
        ft.finetune(model, data, epochs=1, batch_size=8, out=tmp_path / "new", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ft"]


def test_refuses_to_clobber(tmp_path):
    model, data = tiny(), rule_data()
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("x")
    with pytest.raises(InputError, match="already exists"):
        ft.finetune(model, data, out=mine, progress=False)
    with pytest.raises(InputError, match="not written by attnkit.apps.finetune"):
        ft.finetune(model, data, out=mine, overwrite=True, progress=False)
    assert (mine / "keep.txt").read_text() == "x"


def test_bad_inputs():
    model, data = tiny(), rule_data()
    other = GlueDataset(["a"], np.array([0]), ("neg", "pos"))
    with pytest.raises(InputError, match="labels .* differ"):
        ft.finetune(model, data, evaluate_on=other, progress=False)
    with pytest.raises(InputError, match="no labels"):
        ft.finetune(model, GlueDataset(["a"], None, ()), progress=False)
    with pytest.raises(InputError, match="GlueDataset"):
        ft.finetune(model, ["a", "b"], progress=False)
    with pytest.raises(InputError, match="max_length"):
        ft.finetune(model, data, max_length=1000, progress=False)


def test_command_line_end_to_end(tmp_path, monkeypatch, capsys):
    """``attnkit finetune`` on a GLUE-layout folder found through ATTNKIT_DATA."""
    import json

    model = tiny()
    folder = tmp_path / "pretrained"
    model.hf.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    data = rule_data()
    sst = tmp_path / "data" / "glue" / "SST-2"
    sst.mkdir(parents=True)
    rows = "".join(f"{t}\t{y}\n" for t, y in zip(data.inputs, data.labels))
    for split in ("train", "dev"):
        (sst / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path / "data"))
    out = tmp_path / "ft"
    assert main(["finetune", "--model", str(folder), "--task", "sst2", "--epochs", "10", "--lr",
                 "1e-2", "--batch-size", "8", "--max-length", "32", "--warmup", "0", "--out",
                 str(out), "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["accuracy"] == 1.0
    assert summary["label_names"] == ["negative", "positive"] and summary["n_train"] == 32
    assert json.loads((out / ft.INFO_FILE).read_text())["params"]["lr"] == 0.01
    assert type(ak.load(out).hf).__name__ == "BertForSequenceClassification"


@pytest.mark.realmodel
@pytest.mark.slow
def test_bundled_model_one_step(tmp_path):
    """The bundled MiniLM: encoder copied exactly, saved classifier keeps its tokenizer."""
    from attnkit.errors import ModelNotFoundError

    try:
        model = ak.load("minilm")
    except ModelNotFoundError as exc:
        if __import__("os").environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    pairs = [("The cat sat on the mat .", "A cat was sitting on the mat ."),
             ("He left early .", "Stocks fell sharply on Monday .")] * 4
    data = GlueDataset(pairs, np.array([1, 0] * 4), ("not_equivalent", "equivalent"), task="MRPC")
    clf = ft.classifier_copy(model, data.label_names)
    assert type(clf).__name__ == "BertForSequenceClassification"
    base = model.base.state_dict()
    assert all(np.array_equal(v.numpy(), base[k].numpy()) for k, v in clf.base_model.state_dict().items())
    res = ft.finetune(model, data, evaluate_on=data, epochs=1, batch_size=8, lr=1e-4, out=tmp_path / "m",
                      progress=False)
    assert len(res.history) == 1
    loaded = ak.load(tmp_path / "m")
    a0, a1 = model.attend(pairs[0]), loaded.attend(pairs[0])
    assert a0.tokens == a1.tokens and np.array_equal(a0.segments, a1.segments)
    assert not np.allclose(a0.maps, a1.maps)


@pytest.mark.slow
def test_python_dash_m_still_works():
    """``python -m attnkit.apps.finetune`` is ``attnkit finetune`` (older docs use it)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "attnkit.apps.finetune", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("usage: attnkit finetune") and "--freeze-layers" in out


def test_checkpoints_of_a_fine_tune(tmp_path):
    """checkpoint_every writes the Trainer layout; ak.checkpoints reads the run, the last
    checkpoint is the fine-tuned classifier to the bit, and the losses are the history's."""
    import torch

    data = rule_data()
    res = ak.finetune(tiny(), data, epochs=1, batch_size=8, checkpoint_every=3,
                      checkpoint_dir=tmp_path / "ckpt", progress=False)
    series = ak.checkpoints(tmp_path / "ckpt")
    assert series.steps == [0, 3, 4]  # 32 items in batches of 8: 4 steps
    np.testing.assert_array_equal(series.losses[1:], res.history["loss"].to_numpy()[[2, 3]])
    last = series[-1].load(device="cpu")
    assert type(last.hf).__name__ == "BertForSequenceClassification"
    for (name, a), b in zip(res.model.hf.state_dict().items(), last.hf.state_dict().values()):
        assert torch.equal(a, b), name
    first = series[0].load(device="cpu")
    assert not all(torch.equal(a, b) for a, b in zip(first.hf.state_dict().values(),
                                                     last.hf.state_dict().values()))
    with pytest.raises(InputError, match="checkpoint_every and checkpoint_dir go together"):
        ak.finetune(tiny(), data, epochs=1, checkpoint_every=3, progress=False)
    with pytest.raises(InputError, match="not empty"):
        ak.finetune(tiny(), data, epochs=1, checkpoint_every=3, checkpoint_dir=tmp_path / "ckpt",
                    progress=False)
