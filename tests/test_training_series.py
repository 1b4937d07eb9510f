"""Checkpoint series (issue 31): the toy recipe's checkpoints in the Trainer layout, read back
lazily by ak.checkpoints, and every kind of bad series refused with the checkpoint named."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import CheckpointError, InputError
from attnkit.toys import induction as toy

#: A recipe small enough to train in well under a second.
SMALL = dict(vocab_size=16, hidden=16, start_length=8, max_length=8, tokens_per_step=64)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 5-step run with checkpoints every 2 steps, and the model it ends with."""
    out = tmp_path_factory.mktemp("run") / "toy"
    model = toy.train_induction_model(**SMALL, steps=5, checkpoint_every=2, out=out, progress=False)
    return out, model


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_trainer_layout_and_states(run):
    out, model = run
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-0", "checkpoint-2",
                                                     "checkpoint-4", "checkpoint-5"]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "trainer_state.json"):
        assert (out / "checkpoint-4" / name).exists()
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and state["max_steps"] == 5
    assert [e["step"] for e in state["log_history"]] == [1, 2, 3, 4]
    assert json.loads((out / "checkpoint-0" / "trainer_state.json").read_text())["log_history"] == []
    # the final model's own record logs the same training: its last loss is step 5's
    last = json.loads((out / "checkpoint-5" / "trainer_state.json").read_text())["log_history"][-1]
    assert last == {"step": 5, "loss": model.config.attnkit_toy["final_loss"]}


def test_checkpointing_changes_nothing_in_training(run):
    """Same seed, no checkpoints: the same weights to the bit (one code path), and the last
    checkpoint holds exactly the final model."""
    out, model = run
    plain = toy.train_induction_model(**SMALL, steps=5, progress=False)
    last = ak.checkpoints(out)[-1].load(device="cpu")
    for (name, a), b, c in zip(model.hf.state_dict().items(), plain.hf.state_dict().values(),
                               last.hf.state_dict().values()):
        assert torch.equal(a, b) and torch.equal(a, c), name
    # and the step-2 checkpoint is the start of the run: 2 steps of the same recipe
    short = toy.train_induction_model(**SMALL, steps=2, progress=False)
    at2 = ak.checkpoints(out)[1].load(device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(short.hf.state_dict().values(),
                                                 at2.hf.state_dict().values()))


def test_series_reads_steps_and_losses(run):
    out, _ = run
    series = ak.checkpoints(out)
    assert series.steps == [0, 2, 4, 5] and len(series) == 4
    assert (series.n_layers, series.n_heads) == (2, 2)
    log = json.loads((out / "checkpoint-5" / "trainer_state.json").read_text())["log_history"]
    by_step = {e["step"]: e["loss"] for e in log}
    assert np.isnan(series.losses[0])
    np.testing.assert_array_equal(series.losses[1:], [by_step[2], by_step[4], by_step[5]])
    assert series.history.index.tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(series.history["loss"], [by_step[s] for s in range(1, 6)])
    assert series.table().index.tolist() == [0, 2, 4, 5]
    assert "4 checkpoints" in repr(series)


def test_series_loads_one_model_at_a_time(run):
    out, _ = run
    seen = []
    for item, model in ak.checkpoints(out).models(progress=False):
        seen.append((item.step, model.name, model.n_heads))
    assert seen == [(0, "checkpoint-0 (step 0)", 2), (2, "checkpoint-2 (step 2)", 2),
                    (4, "checkpoint-4 (step 4)", 2), (5, "checkpoint-5 (step 5)", 2)]


def test_series_from_a_list_in_any_order(run, tmp_path):
    out, _ = run
    # a folder not named for its step reads the step from trainer_state.json
    renamed = _copy(out / "checkpoint-4", tmp_path / "late")
    series = ak.checkpoints([out / "checkpoint-5", str(out / "checkpoint-0"), renamed])
    assert series.steps == [0, 4, 5] and series[1].path == renamed
    # Pythia-style revision names carry the step
    bare = _copy(out / "checkpoint-2", tmp_path / "step2")
    (bare / "trainer_state.json").unlink()
    assert ak.checkpoints([bare]).steps == [2] and np.isnan(ak.checkpoints([bare]).losses[0])


def test_training_options_refused():
    with pytest.raises(InputError, match="checkpoint_every and out go together"):
        toy.train_induction_model(**SMALL, steps=1, checkpoint_every=1, progress=False)
    with pytest.raises(InputError, match="layers must be"):
        toy.train_induction_model(**SMALL, steps=1, layers=0, progress=False)


def test_training_never_writes_into_a_used_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        toy.train_induction_model(**SMALL, steps=1, checkpoint_every=1, out=tmp_path,
                                  progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    with pytest.raises(InputError, match="checkpoint_every must be"):
        toy.train_induction_model(**SMALL, steps=1, checkpoint_every=0, out=tmp_path / "new",
                                  progress=False)


def test_one_layer_variant(tmp_path):
    model = toy.train_induction_model(**SMALL, steps=1, layers=1, checkpoint_every=1,
                                      out=tmp_path / "one", progress=False)
    assert model.n_layers == 1 and model.name == "toy-induction-1l"
    assert model.config.attnkit_toy["recipe"]["layers"] == 1
    assert ak.checkpoints(tmp_path / "one").n_layers == 1


# ------------------------------------------------------------------ bad series
def test_empty_folder(tmp_path):
    with pytest.raises(CheckpointError, match=f"{tmp_path} holds no checkpoint-<step>"):
        ak.checkpoints(tmp_path)
    with pytest.raises(CheckpointError, match="No folder at"):
        ak.checkpoints(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="list of checkpoints is empty"):
        ak.checkpoints([])
    with pytest.raises(InputError, match="must be a folder or a list"):
        ak.checkpoints(3)  # type: ignore[arg-type]


def test_mixed_architectures_name_the_checkpoint(run, tmp_path):
    out, _ = run
    mixed = _copy(out, tmp_path / "mixed")
    wide = toy.train_induction_model(**{**SMALL, "hidden": 32}, steps=0, progress=False)
    toy.save(wide, mixed / "checkpoint-9")
    with pytest.raises(CheckpointError, match=r"step 9 .*checkpoint-9.*hidden_size: 16 vs 32"):
        ak.checkpoints(mixed)


def test_missing_step_and_duplicate_steps(run, tmp_path):
    out, _ = run
    nameless = _copy(out / "checkpoint-2", tmp_path / "final")
    (nameless / "trainer_state.json").unlink()
    with pytest.raises(CheckpointError, match=f"{nameless} has no step"):
        ak.checkpoints([out / "checkpoint-0", nameless])
    twice = _copy(out / "checkpoint-2", tmp_path / "again")
    with pytest.raises(CheckpointError, match="Two checkpoints have step 2"):
        ak.checkpoints([out / "checkpoint-2", twice])
    stale = _copy(out / "checkpoint-2", tmp_path / "checkpoint-3")
    with pytest.raises(CheckpointError, match="named for step 3 but .* global_step 2"):
        ak.checkpoints([stale])


def test_missing_files_name_the_checkpoint(run, tmp_path):
    out, _ = run
    broken = _copy(out, tmp_path / "broken")
    (broken / "checkpoint-4" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"checkpoint-4 has no weights"):
        ak.checkpoints(broken)
    shutil.rmtree(broken / "checkpoint-4")
    (broken / "checkpoint-2" / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config.json of the checkpoint .*checkpoint-2 cannot"):
        ak.checkpoints(broken)
    (broken / "checkpoint-2" / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"checkpoint-2 has no config.json"):
        ak.checkpoints(broken)


def test_unreadable_weights_name_the_checkpoint(run, tmp_path):
    out, _ = run
    damaged = _copy(out, tmp_path / "damaged")
    weights = damaged / "checkpoint-4" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])  # cut short: a half-copied file
    series = ak.checkpoints(damaged)  # reads no weights
    assert series.steps == [0, 2, 4, 5]
    with pytest.raises(CheckpointError, match=r"checkpoint of step 4 \(.*checkpoint-4\) could not be loaded"):
        list(series.models(progress=False))
    final = series[-1].load(device="cpu")
    with pytest.raises(CheckpointError, match="step 4"):
        ak.checkpoint_scores(series, ak.induction_inputs(final, 1, 4, seed=0), early=1, late=5,
                             progress=False)


def test_reads_what_transformers_trainer_writes(tmp_path):
    """A run of transformers' own Trainer (tiny Llama, 4 steps, a checkpoint every 2, a loss
    logged every step): ak.checkpoints reads its steps, losses and models."""
    pytest.importorskip("accelerate")
    from transformers import Trainer, TrainingArguments, default_data_collator

    from attnkit.testing import tiny_model

    model = tiny_model("llama")
    ids = torch.randint(3, model.hf.config.vocab_size, (8, 12), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=4, save_steps=2,
                             logging_steps=1, per_device_train_batch_size=4, report_to=[],
                             use_cpu=True, disable_tqdm=True)
    Trainer(model=model.hf, args=args, train_dataset=data, processing_class=model.tokenizer,
            data_collator=default_data_collator).train()
    series = ak.checkpoints(tmp_path / "run")
    assert series.steps == [2, 4]
    state = json.loads((tmp_path / "run" / "checkpoint-4" / "trainer_state.json").read_text())
    logged = {e["step"]: e["loss"] for e in state["log_history"] if "loss" in e}
    np.testing.assert_array_equal(series.losses, [logged[2], logged[4]])
    assert series.history.index.tolist() == [1, 2, 3, 4]
    loaded = series[1].load(device="cpu")
    assert (loaded.n_layers, loaded.n_heads) == (model.n_layers, model.n_heads)
    for (name, a), b in zip(model.hf.state_dict().items(), loaded.hf.state_dict().values()):
        assert torch.equal(a.cpu(), b), name  # the Trainer's model after step 4 is the checkpoint


def test_revisions_in_the_local_hub_cache(run, tmp_path, monkeypatch):
    """Pythia-style revisions (branches step2, step4) of a model in the local Hugging Face
    cache: each a snapshot folder, the step from the revision's name."""
    import huggingface_hub.constants

    out, _ = run
    cache = tmp_path / "hub"
    repo = cache / "models--attnkit--toy"
    for step, commit in ((2, "a" * 40), (4, "b" * 40)):
        snap = repo / "snapshots" / commit
        shutil.copytree(out / f"checkpoint-{step}", snap)
        (snap / "trainer_state.json").unlink()  # as on the hub: no Trainer state
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / f"step{step}").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    series = ak.checkpoints("attnkit/toy", revisions=["step4", "step2"])
    assert series.steps == [2, 4] and series[0].path.name == "a" * 40
    assert np.isnan(series.losses).all()
    assert series[1].load(device="cpu").n_layers == 2
    with pytest.raises(CheckpointError, match="'step6' of attnkit/toy is not in the local"):
        ak.checkpoints("attnkit/toy", revisions=["step2", "step6"])
    with pytest.raises(CheckpointError, match="'main' of attnkit/toy names no step"):
        ak.checkpoints("attnkit/toy", revisions=["main"])
