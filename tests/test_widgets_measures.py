"""The measure switch on HeadGrid, Heatmap and FlowView; FlowView comparing two measures."""

import numpy as np
import pytest

pytest.importorskip("torch")

import attnkit as ak
from attnkit.errors import InputError
from attnkit.runtime.measures import mixed
from attnkit.testing import tiny_model

TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def atts():
    model = tiny_model("bert")
    return {m: model.attend(TEXT, measure=m) for m in ("weights", "norm", "alti", "grad×attn")}


def test_heatmap_switch_keeps_the_head_and_shows_the_measure(atts):
    s = ak.MeasureSwitch(atts, view=ak.Heatmap, layer=1, head=1)
    assert s.measure == "weights" and s.view.value_label == "weights"
    s.measure = "norm"
    assert (s.view.layer, s.view.head) == (1, 1) and s.view.value_label == "norm"
    assert s.stack.children[s.stack.selected_index] is s.view and s.buttons.value == "norm"
    np.testing.assert_allclose(s.view.top, atts["norm"].maps[1, 1].max(), rtol=1e-3)
    s.measure = "alti"  # one mixed head: head 1 does not exist, the layer carries over
    assert s.view.layer == 1 and s.view.n_heads == 1
    s.measure = "grad×attn"
    assert s.view.diverging  # signed values, diverging colours
    bundle = s._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "image/png" in data and "application/vnd.jupyter.widget-view+json" in data


def test_headgrid_switch_keeps_the_selection(atts, tmp_path):
    s = ak.MeasureSwitch(atts, measure="norm")
    s.view.selected = [1, 0]
    s.measure = "weights"
    assert list(s.view.selected) == [1, 0]
    assert s.save(tmp_path / "grid.png").exists()


def test_flowview_compares_two_measures_of_one_model(atts):
    view = ak.FlowView(atts["weights"], other=atts["norm"])
    assert view.result.names == ("tiny-bert (weights)", "tiny-bert (norm)")
    view = ak.FlowView(mixed(atts["weights"]), other=atts["alti"])
    assert len(view.result.heads) == atts["alti"].n_layers
    s = ak.MeasureSwitch({"weights": atts["weights"], "norm": atts["norm"]}, view=ak.FlowView, threshold=0.2)
    s.view.threshold = 0.25
    s.measure = "norm"
    assert s.view.threshold == pytest.approx(0.25)


def test_bad_switches(atts):
    with pytest.raises(InputError, match="at least one"):
        ak.MeasureSwitch({}, view=ak.Heatmap)
    with pytest.raises(InputError, match="not one of"):
        ak.MeasureSwitch(atts, view=ak.Heatmap, measure="nonsense")
    other = tiny_model("bert").attend("A different sentence.")
    with pytest.raises(InputError, match="other tokens"):
        ak.MeasureSwitch({"weights": atts["weights"], "x": other}, view=ak.Heatmap)


def test_switching_needs_no_kernel(atts):
    """Issue 19: in an offline report the buttons toggled but the view stayed. Every measure's
    view is in the stack, and the buttons drive the stack in the browser (a jslink)."""
    s = ak.MeasureSwitch(atts, view=ak.Heatmap)
    assert len(s.stack.children) == len(atts) and s.stack.selected_index == 0
    link = s._link
    assert (link.source[0], link.source[1]) == (s.buttons, "index")
    assert (link.target[0], link.target[1]) == (s.stack, "selected_index")
    s.measure = "alti"
    assert s.stack.selected_index == list(atts).index("alti")
