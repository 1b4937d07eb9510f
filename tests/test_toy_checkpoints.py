"""Checkpoints of the reversal T5 and the colour-square ViT recipes (issue 31): the same
``checkpoint_every=``/``out=`` as the induction toy, read by ``ak.checkpoints``, and the
per-step score of each task over the series (``checkpoint_scores(score=...)``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError
from attnkit.toys import tasks
from tolerances import F32, assert_close

pytestmark = pytest.mark.numerics

HELD_OUT = 30_000


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _same_weights(a, b) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name


def test_reversal_score_is_the_anti_diagonal_of_the_cross_attention():
    """Against the token-level maps read by hand: decoder row j (after the start token)
    predicts target word j, which copies source token n - 1 - j."""
    model = tasks.reversal_model()
    pairs = tasks.reversal_pairs(6, seed=HELD_OUT)
    want, words = 0.0, 0
    for source, target in pairs:
        n = len(source.split())
        maps = model.attend(source, target).cross.maps  # [L, H, target, source]
        j = np.arange(n)
        want = want + maps[:, :, j, n - 1 - j].sum(-1)
        words += n
    r = tasks.reversal_score(model, pairs)
    assert list(r.table.index.names) == ["layer", "head"] and list(r.table.columns) == ["reversal"]
    assert_close(r.table["reversal"].to_numpy().reshape(want.shape), want / words, F32)
    assert r.meta["n_words"] == words
    # beside the alignment accuracy of every head (argmax links): the heads that align
    # (accuracy >= 0.9; most of the trained model's) carry most of their attention on the
    # copied word, and the one that does not align has the lowest score
    aer = ak.analysis.alignment_error_rate([model.attend(s, t) for s, t in pairs],
                                           tasks.reversal_gold(pairs), progress=False)
    aligned = aer.table["accuracy"] >= 0.9
    assert aligned.sum() >= 4 and (r.table["reversal"][aligned] > 0.5).all()
    assert r.table["reversal"].idxmin() == aer.table["accuracy"].idxmin()
    with pytest.raises(InputError, match="target is the source reversed"):
        tasks.reversal_score(model, [("a b", "a b")])
    with pytest.raises(InputError, match="non-empty list"):
        tasks.reversal_score(model, [])


def test_colour_score_reads_the_squares_patch():
    """Against the patch colour_images says it drew the square in."""
    model = tasks.colour_model()
    images, _, cells = tasks.colour_images(8, seed=HELD_OUT)
    want = np.mean([model.attend(im).maps[:, :, 0, 1 + 4 * r + c]
                    for im, (r, c) in zip(images, cells)], axis=0)
    got = tasks.colour_score(model, list(images))
    assert_close(got.table["square"].to_numpy().reshape(want.shape), want, F32)
    assert got.table["square"].max() > 0.5  # the trained model's [CLS] reads the square
    blank = np.full((32, 32, 3), 255, dtype=np.uint8)
    with pytest.raises(InputError, match="0 patches with colour"):
        tasks.colour_score(model, [blank])


def test_reversal_checkpoints(tmp_path):
    final = tasks.train_reversal_model(steps=4, batch_size=4, d_model=16, heads=2,
                                       checkpoint_every=3, out=tmp_path / "rev", progress=False)
    series = ak.checkpoints(tmp_path / "rev")
    assert series.steps == [0, 3, 4] and series.n_layers == 2 and series.n_heads == 2
    assert np.isnan(series.losses[0]) and (series.losses[1:] > 0).all()
    last = series[-1].load(device="cpu")
    _same_weights(final.hf, last.hf)
    # checkpointing changes nothing in the training
    again = tasks.train_reversal_model(steps=4, batch_size=4, d_model=16, heads=2,
                                       progress=False)
    _same_weights(final.hf, again.hf)
    pairs = tasks.reversal_pairs(3, seed=HELD_OUT)
    r = ak.checkpoint_scores(series, pairs, kinds=(), score=tasks.reversal_score,
                             progress=False)
    assert list(r.table.columns) == ["reversal"] and r.meta["value"] == "reversal"
    assert_close(r.at(4).table["reversal"].to_numpy(),
                 tasks.reversal_score(final, pairs).table["reversal"].to_numpy(), F32)
    assert r.steps["loss"].isna().all()  # no causal LM head: no in-context score
    assert ak.crossing_steps(r, value="reversal", above=0.99)["step"].isna().all()
    with pytest.raises(InputError, match="not empty"):
        tasks.train_reversal_model(steps=1, batch_size=4, d_model=16, heads=2,
                                   checkpoint_every=1, out=tmp_path / "rev", progress=False)
    with pytest.raises(InputError, match="go together"):
        tasks.train_reversal_model(steps=1, checkpoint_every=1, progress=False)


def test_colour_checkpoints(tmp_path):
    final = tasks.train_colour_model(steps=3, batch_size=4, checkpoint_every=2,
                                     out=tmp_path / "vit", progress=False)
    series = ak.checkpoints(tmp_path / "vit")
    assert series.steps == [0, 2, 3]
    _same_weights(final.hf, series[-1].load(device="cpu").hf)
    images, _, _ = tasks.colour_images(3, seed=HELD_OUT)
    r = ak.checkpoint_scores(series, list(images), kinds=(), score=tasks.colour_score,
                             progress=False)
    assert_close(r.at(3).table["square"].to_numpy(),
                 tasks.colour_score(final, list(images)).table["square"].to_numpy(), F32)
    with pytest.raises(InputError, match="kinds must name"):
        ak.checkpoint_scores(series, list(images), kinds=(), progress=False)
    with pytest.raises(InputError, match="score must be a function"):
        ak.checkpoint_scores(series, list(images), kinds=(), score="square",  # type: ignore[arg-type]
                             progress=False)
