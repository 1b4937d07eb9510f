"""Analyses over a checkpoint series (issue 31): head scores indexed by (step, layer, head),
the in-context learning score, crossing steps; and the known answers of the toy recipe: the
induction phase change in two layers, none in one."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import attnkit as ak
from attnkit.errors import InputError
from attnkit.toys import induction as toy
from attnkit.training import SeriesResult
from tolerances import F16, F32, assert_close

pytestmark = pytest.mark.numerics

SMALL = dict(vocab_size=16, hidden=16, start_length=8, max_length=8, tokens_per_step=64)
STRIPE = [(9 + t, 2 + t) for t in range(7)]  # the induction stripe of 17-token inputs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "toy"
    model = toy.train_induction_model(**SMALL, steps=6, checkpoint_every=3, out=out,
                                      progress=False)
    inputs = ak.induction_inputs(model, 3, 8, seed=1)  # 17 tokens each
    return ak.checkpoints(out), model, inputs


@pytest.fixture(scope="module")
def scores(run):
    series, _, inputs = run
    return ak.checkpoint_scores(series, inputs, stats=True, composition=True, early=3, late=14,
                                maps=True, attribution=STRIPE, heads=[(1, 0)], progress=False)


def test_table_is_indexed_by_step_layer_head(scores):
    assert isinstance(scores, SeriesResult)
    assert list(scores.table.index.names) == ["step", "layer", "head"]
    assert scores.table.index.get_level_values("step").unique().tolist() == [0, 3, 6]
    assert list(scores.table.columns[:4]) == list(ak.analysis.HEAD_KINDS)
    assert set(ak.analysis.STAT_COLUMNS) <= set(scores.table.columns)
    assert scores.steps.index.tolist() == [0, 3, 6]
    assert list(scores.steps.columns) == list(ak.training.STEP_COLUMNS)
    assert scores.meta["n_items"] == 3 and scores.meta["value"] == "induction"


def test_final_checkpoint_equals_head_scores_of_the_final_model(run, scores):
    """The last checkpoint holds the final model's weights (to the bit): the same scores
    through the same code path."""
    _, model, inputs = run
    atts = [model.attend(x) for x in inputs]
    pd.testing.assert_frame_equal(scores.at(6).table[list(ak.analysis.HEAD_KINDS)],
                                  ak.head_scores(atts, progress=False).table)
    pd.testing.assert_frame_equal(scores.at(6).table[list(ak.analysis.STAT_COLUMNS)],
                                  ak.head_stats(atts, progress=False).table)
    assert scores.at(6).meta["step"] == 6
    comp = ak.composition(model, progress=False)
    pd.testing.assert_frame_equal(scores.composition.xs(6, level="step"), comp.table)
    assert scores.meta["composition_baseline"] == comp.meta["baseline"]
    assert scores.composition.index.names == ["step", "source_layer", "source_head",
                                              "target_layer", "target_head"]
    # the kept maps are the first input's, float16
    assert scores.maps is not None and scores.maps.shape == (3, 2, 2, 17, 17)
    assert scores.maps.dtype == np.float16 and scores.tokens == atts[0].tokens
    assert_close(scores.maps[-1], atts[0].maps, F16, scale=1)  # probabilities, kept as float16


def test_losses_match_a_reference(run, scores):
    """The loss of token p is -log softmax(logits[p-1])[token p]: computed here through
    log_softmax and gather, on a batched forward (another path than the per-input
    cross_entropy): two float32 computations."""
    series, _, inputs = run
    model = series[1].load(device="cpu")
    with torch.no_grad():
        logits = model.hf(input_ids=torch.as_tensor(np.stack(inputs))).logits.double()
    ids = torch.as_tensor(np.stack(inputs))
    nll = -torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    row = scores.steps.loc[3]
    assert_close(row["loss"], float(nll.mean()), F32)
    assert_close(row["early_loss"], float(nll[:, 2].mean()), F32)
    assert_close(row["late_loss"], float(nll[:, 13].mean()), F32)
    # a difference of two losses: compared at the losses' scale
    assert_close(row["icl"], float(nll[:, 13].mean() - nll[:, 2].mean()), F32,
                 scale=float(nll[:, 2].mean()))
    assert math.isnan(scores.steps.loc[0, "training_loss"])
    np.testing.assert_array_equal(scores.steps["training_loss"].to_numpy()[1:], series.losses[1:])


def test_crossing_steps_known_answer():
    idx = pd.MultiIndex.from_product([[0, 5, 10, 20], [0, 1], [0]],
                                     names=["step", "layer", "head"])
    # head (0, 0): crosses at 10 and stays; (1, 0): above at 5, falls back at 20
    values = [0.1, 0.0, 0.4, 0.7, 0.55, 0.8, 0.9, 0.5]
    r = SeriesResult(pd.DataFrame({"induction": values}, index=idx))
    c = ak.crossing_steps(r, above=0.5)
    assert c.table.loc[(0, 0)].tolist() == [10.0, 5.0, True, 0.1, 0.9]
    assert c.table.loc[(1, 0)].tolist() == [5.0, 0.0, False, 0.0, 0.5]
    assert c.meta == {"value": "step", "score": "induction", "above": 0.5}
    never = ak.crossing_steps(r, above=0.95)
    assert never["step"].isna().all() and not never["stays"].any()
    with pytest.raises(InputError, match="No column 'sink'"):
        ak.crossing_steps(r, value="sink")
    with pytest.raises(InputError, match="result of checkpoint_scores"):
        ak.crossing_steps(r.table)  # type: ignore[arg-type]


def test_at_and_plot(scores):
    with pytest.raises(InputError, match="no checkpoint at step 4"):
        scores.at(4)
    fig = scores.plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["1-1", "1-2", "2-1", "2-2"]
    assert ax.lines[0].get_xdata().tolist() == [0, 3, 6]
    np.testing.assert_array_equal(ax.lines[2].get_ydata(),
                                  scores.table["induction"].xs((1, 0), level=["layer", "head"]))
    assert fig.axes[1].get_ylabel() == "loss (nats)"


def test_bad_input(run):
    series, _, inputs = run
    with pytest.raises(InputError, match="inputs is empty"):
        ak.checkpoint_scores(series, [], progress=False)
    with pytest.raises(InputError, match="0 < early < late"):
        ak.checkpoint_scores(series, inputs, early=5, late=5, progress=False)
    with pytest.raises(InputError, match="late=500 is past the end of an input of 17 tokens"):
        ak.checkpoint_scores(series, inputs, progress=False)  # late=500 by default
    with pytest.raises(InputError, match="kinds must name"):
        ak.checkpoint_scores(series, inputs, kinds=["heads"], early=3, late=14, progress=False)
    with pytest.raises(InputError, match="must be a CheckpointSeries"):
        ak.checkpoint_scores("runs/toy", inputs, progress=False)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="list of inputs"):
        ak.checkpoint_scores(series, "dat dif", progress=False)


def test_composition_needs_two_layers(tmp_path):
    toy.train_induction_model(**SMALL, steps=1, layers=1, checkpoint_every=1, out=tmp_path / "one",
                              progress=False)
    with pytest.raises(InputError, match="composition needs two layers"):
        ak.checkpoint_scores(ak.checkpoints(tmp_path / "one"), [[0, 3, 4, 3, 4]], composition=True,
                             early=1, late=3, progress=False)


def test_on_a_dask_cluster_gives_the_same_tables(run, scores, dask_cluster):
    series, _, inputs = run
    with dask_cluster(processes=True) as client:
        remote = ak.checkpoint_scores(series, inputs, stats=True, composition=True, early=3,
                                      late=14, maps=True, attribution=STRIPE, heads=[(1, 0)],
                                      progress=False, client=client)
    # workers run one torch thread, this process maybe more: float32 sums may differ in order
    assert remote.table.index.equals(scores.table.index)
    for column in scores.table.columns:  # each column at its own scale (entropy vs shares)
        assert_close(remote.table[column], scores.table[column], F32)
    steps = scores.steps.to_numpy()
    assert np.isnan(remote.steps.to_numpy()[0, 0]) and np.isnan(steps[0, 0])
    assert_close(remote.steps.to_numpy()[:, 1:], steps[:, 1:], F32)
    assert_close(remote.steps.to_numpy()[1:, 0], steps[1:, 0], F32)
    assert remote.composition.index.equals(scores.composition.index)
    assert_close(remote.composition.to_numpy(), scores.composition.to_numpy(), F32)
    assert remote.attribution.index.equals(scores.attribution.index)
    for column in ak.training.ATTRIBUTION_COLUMNS:
        assert_close(remote.attribution[column].to_numpy(), scores.attribution[column].to_numpy(),
                     F32)


# ------------------------------------------------------------------ the known answers
#: The default recipe's first 260 steps (a shorter run at a constant learning rate is the
#: start of the longer one: tests/test_training_series.py checks it), a checkpoint every 10.
PHASE_STEPS, EVERY = 260, 10


def _toy_series(tmp_path, layers):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as docs/scripts/heads_across_training.py measured it
    try:
        out = tmp_path / f"toy-{layers}l"
        final = toy.train_induction_model(steps=PHASE_STEPS, layers=layers,
                                          checkpoint_every=EVERY, out=out, progress=False)
    finally:
        torch.set_num_threads(threads)
    series = ak.checkpoints(out)
    inputs = ak.induction_inputs(final, 8, 64, seed=0)  # 129 tokens: late=120 is in the copy
    return final, inputs, ak.checkpoint_scores(series, inputs, early=50, late=120, progress=False)


@pytest.mark.slow
def test_two_layers_phase_change(tmp_path):
    """Olsson et al. 2022: the layer-2 induction heads form while the second-copy loss falls
    from near chance to near zero; the model then learns in context."""
    final, inputs, r = _toy_series(tmp_path, 2)
    chance = math.log(512)
    loss = r.steps["training_loss"]  # the training loss is the second copy's loss
    start = loss.index[loss >= 0.9 * chance].max()  # last checkpoint still near chance
    end = loss.index[loss <= 0.1 * chance].min()  # first one near zero
    cross = ak.crossing_steps(r, value="induction", above=0.5)
    for head in (0, 1):  # both layer-2 heads cross inside the window, and stay
        step = cross.table.loc[(1, head), "step"]
        assert start < step <= end, (start, step, end)
        assert cross.table.loc[(1, head), "stays"]
    assert cross.table.loc[[(0, 0), (0, 1)], "step"].isna().all()  # no induction in layer 1
    previous = ak.crossing_steps(r, value="previous", above=0.5)
    assert previous.table["step"].notna().sum() == 1 and previous.table.loc[(0, 0), "stays"]
    # in-context learning: none at the start, strong at the end
    assert r.steps["icl"].iloc[0] > -0.5 and r.steps["icl"].iloc[-1] < -0.5 * chance
    # and the last checkpoint is the final model, scored the same way
    atts = [final.attend(x) for x in inputs]
    pd.testing.assert_frame_equal(r.at(PHASE_STEPS).table, ak.head_scores(atts, progress=False).table)


@pytest.mark.slow
def test_one_layer_has_no_induction_head_and_no_phase_change(tmp_path):
    _, _, r = _toy_series(tmp_path, 1)
    chance = math.log(512)
    assert r.table["induction"].max() < 0.1  # uniform attention gives about 0.011
    assert ak.crossing_steps(r, above=0.5)["step"].isna().all()
    # the copy's tokens stay unpredictable, and the model never learns in context
    assert r.steps["late_loss"].min() > 0.9 * chance
    assert r.steps["icl"].min() > -1.0


def test_steps_and_positions_are_whole_numbers(scores, run):
    series, _, inputs = run
    for bad in (True, 1.0, np.float64(3.0)):
        with pytest.raises(InputError, match="step"):
            scores.at(bad)
        with pytest.raises(InputError, match="early"):
            ak.checkpoint_scores(series, inputs, early=bad, late=14, progress=False)
