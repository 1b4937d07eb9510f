"""IPython shows an attnkit widget as two outputs: its static picture, then its live view
(attnkit.widgets._base.display_beside), so the picture shows where the view cannot draw
(issue 19 item 3; the browser side is tests/browser/test_fallback_browser.py). The offline
report folds the picture back into the view's output."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

import attnkit as ak
from attnkit.apps import report

VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def att():
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.full(6, 0.5), size=(2, 2, 6)).astype(np.float32)
    return ak.Attention.from_maps(maps, ["[CLS]", "a", "b", "c", "d", "[SEP]"])


def shown(obj) -> list:
    InteractiveShell.instance()
    with capture_output() as cap:
        display(obj)
    return cap.outputs


def test_a_widget_is_its_picture_then_its_view(att):
    view = ak.Heatmap(att, layer=1, head=0)
    key = view._static_key
    assert len(key) == 32 and int(key, 16) >= 0
    assert ak.Heatmap(att)._static_key != key  # one key per widget
    picture, live = shown(view)
    assert sorted(picture.data) == ["image/png", "text/html", "text/plain"]
    assert picture.data["text/plain"] == view._alt_text()
    assert base64.b64decode(picture.data["image/png"]) == view.to_png()
    assert f'class="attnkit-static attnkit-static-{key}"' in picture.data["text/html"]
    assert picture.metadata == {"attnkit": {"static": key}}
    # the view's output: the widget, no second copy of the picture, and no text that an
    # export without widget state would show under the picture
    assert sorted(live.data) == [VIEW, "text/plain"] and live.data["text/plain"] == ""
    assert live.data[VIEW]["model_id"] == view.model_id
    assert live.metadata == {"attnkit": {"static": key}}
    # a front end reads the key from the model's state
    assert view.get_state()["_static_key"] == key


def test_a_measure_switch_shows_the_picture_of_its_view(att):
    switch = ak.MeasureSwitch({"weights": att, "other": att}, view=ak.Heatmap)
    picture, live = shown(switch)
    key = switch.view._static_key
    assert picture.metadata == {"attnkit": {"static": key}}
    assert f"attnkit-static-{key}" in picture.data["text/html"]
    assert live.data[VIEW]["model_id"] == switch.model_id and "image/png" not in live.data


def test_the_report_folds_the_picture_into_the_view(att):
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    view = ak.Heatmap(att)
    outs = [new_output("stream", name="stdout", text="hello\n")]
    outs += [new_output("display_data", o.data, metadata=o.metadata) for o in shown(view)]
    lone = {"attnkit": {"static": "f" * 32}}  # a picture whose view's output is gone stays
    outs.append(new_output("display_data", {"image/png": "iVBO"}, metadata=lone))
    nb = new_notebook(cells=[new_code_cell("view", outputs=outs)])
    folded = report.fold_static_outputs(nb).cells[0].outputs
    assert [o.output_type for o in folded] == ["stream", "display_data", "display_data"]
    assert folded[1].data["image/png"] == outs[1].data["image/png"] and VIEW in folded[1].data
    assert folded[1].data["text/plain"] == view._alt_text()  # the report's alt text
    assert folded[2].metadata == lone
    assert len(nb.cells[0].outputs) == 4  # the notebook itself is left as it was


def test_an_nbconvert_export_shows_each_picture_once(att):
    import re

    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    outs = [new_output("display_data", o.data, metadata=o.metadata) for o in shown(ak.Heatmap(att))]
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(new_notebook(cells=[new_code_cell("v", outputs=outs)]))
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', body)) == 1
    assert "object at 0x" not in body
