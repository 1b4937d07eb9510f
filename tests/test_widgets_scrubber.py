"""CheckpointScrubber (issue 31), Python side: what travels to the browser, stepping, the
static picture, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import attnkit as ak
from attnkit.errors import InputError
from attnkit.toys import induction as toy
from attnkit.training import SeriesResult
from attnkit.widgets._codec import DTYPES
from tolerances import F16, assert_close


def _read(w: dict) -> np.ndarray:
    out = np.frombuffer(w["buffer"], dtype=DTYPES[w["dtype"]]).reshape(w["shape"]).astype(np.float64)
    return out * w.get("scale", 1.0)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "toy"
    final = toy.train_induction_model(vocab_size=16, hidden=16, start_length=8, max_length=8,
                                      tokens_per_step=64, steps=4, checkpoint_every=2, out=out,
                                      progress=False)
    return ak.checkpoint_scores(ak.checkpoints(out), ak.induction_inputs(final, 2, 8, seed=0),
                                early=2, late=12, maps=True, progress=False)


def test_every_step_travels_with_the_widget(result):
    view = ak.CheckpointScrubber(result)
    assert view.steps == [0, 2, 4] and view.index == 2 and view.step == 4
    assert (view.n_layers, view.n_heads) == (2, 2) and view.value_name == "induction"
    cube = _read(view.values)
    assert cube.shape == (3, 2, 2)
    for s, step in enumerate(view.steps):  # float32 on the wire: exact for these float64s' float32
        np.testing.assert_array_equal(cube[s], result.at(step).grid("induction").astype(np.float32))
    np.testing.assert_array_equal(_read(view.loss)[1:], result.steps["training_loss"].to_numpy(np.float32)[1:])
    assert np.isnan(_read(view.loss)[0]) and view.loss_name == "training loss"
    np.testing.assert_array_equal(_read(view.icl), result.steps["icl"].to_numpy(np.float32))
    maps = _read(view.maps)
    assert maps.shape == (3, 2, 2, 17, 17) and len(view.tokens) == 17
    # the wire's float16 (with a power-of-two scale) of the result's float16 maps
    assert_close(maps, result.maps.astype(np.float64), F16, scale=1)
    assert view.vmax == pytest.approx(float(result.table["induction"].max()))


def test_stepping_and_value(result):
    view = ak.CheckpointScrubber(result, value="previous", step=0)
    assert view.step == 0 and view.title == "previous across training"
    np.testing.assert_array_equal(view.grid(), result.at(0).grid("previous"))
    view.show(2)
    assert view.index == 1
    np.testing.assert_array_equal(view.grid(), result.at(2).grid("previous"))
    with pytest.raises(InputError, match="step 3 is not a step"):
        view.show(3)
    with pytest.raises(InputError, match="outside the 3 checkpoints"):
        view.index = 3
    view.selected = [1, 0]
    with pytest.raises(InputError):
        view.selected = [2, 0]


def test_static_picture_and_words(result):
    view = ak.CheckpointScrubber(result, step=2)
    data, _ = view._repr_mimebundle_()
    assert data["image/png"] and "attnkit-static" in data["text/html"]
    fig = view.figure()
    assert len([a for a in fig.axes if a.get_title(loc="left") or a.get_title()]) >= 2
    assert fig.axes[0].get_title(loc="left") == "step 2 of 4"
    view.selected = [1, 1]
    titled = [a.get_title() for a in view.figure().axes] + [a.get_title(loc="left") for a in view.figure().axes]
    assert "head 2-2 at step 2" in titled
    g = result.at(2).grid("induction")
    layer, head = np.unravel_index(np.nanargmax(g), g.shape)
    assert f"at head {layer + 1}-{head + 1}" in view._alt_text() and "step 2 of 4" in view._alt_text()


def test_result_widget_is_the_scrubber(result):
    assert isinstance(result.widget(), ak.CheckpointScrubber)


def test_without_maps_or_training_loss():
    idx = pd.MultiIndex.from_product([[0, 5], [0], [0, 1]], names=["step", "layer", "head"])
    r = SeriesResult(pd.DataFrame({"induction": [0.1, 0.0, 0.6, 0.2]}, index=idx),
                     {"n_layers": 1, "n_heads": 2})
    r.steps = pd.DataFrame({"training_loss": [np.nan, np.nan], "loss": [3.0, 2.0],
                            "icl": [0.0, -1.0]}, index=pd.Index([0, 5], name="step"))
    r.maps, r.tokens = None, []
    view = ak.CheckpointScrubber(r)
    assert view.maps == {} and view.tokens == [] and view.loss_name == "loss on the inputs"
    np.testing.assert_array_equal(_read(view.loss), [3.0, 2.0])
    assert len(view.figure().axes) >= 2


def test_bad_input(result):
    with pytest.raises(InputError, match="result of attnkit.checkpoint_scores"):
        ak.CheckpointScrubber(result.at(4))
    with pytest.raises(InputError, match="No column 'cls'"):
        ak.CheckpointScrubber(result, value="cls")
    with pytest.raises(InputError, match="step 7 is not a step"):
        ak.CheckpointScrubber(result, step=7)
