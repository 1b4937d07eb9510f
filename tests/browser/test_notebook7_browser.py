"""Keys inside attnkit views in Notebook 7 (the ``notebook`` package, issue 19 item 4).

Notebook 7 is JupyterLab's application shell with one notebook per page: its command-mode
shortcuts (ArrowUp/ArrowDown/j/k move the cell selection, Space and Shift+Space scroll,
Enter edits) are Lumino key bindings that the application processes for keydown events
bubbling to ``document``. A range input (FlowView's threshold slider) and a focused map must
keep their keys: ArrowUp moves the slider, not the notebook's active cell.
"""

from __future__ import annotations

import pytest
from lab import Notebook7

pytestmark = pytest.mark.browser

FLOW = """\
import numpy as np
import attnkit
from attnkit.widgets import FlowView, Heatmap

rng = np.random.default_rng(1)
m = rng.dirichlet(np.full(12, 0.2), size=(2, 2, 12)).astype(np.float32)
flow = FlowView(attnkit.Attention.from_maps(m, ["[CLS]"] + [f"t{i}" for i in range(10)] + ["[SEP]"]), threshold=0.3)
flow
"""
HEATMAP = """\
from qk_attention import causal_random_map as long_map  # tests/ is on the kernel's path
n = 512
hm = Heatmap(attnkit.Attention.from_maps(long_map(n)[None, None], ["<s>"] + [f"w{i}" for i in range(1, n)]))
hm
"""
LAST = "x = 1"

ACTIVE = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex(c => c.classList.contains('jp-mod-active'))"


@pytest.fixture
def nb7(jupyter):
    with jupyter(Notebook7, {"keys.ipynb": [FLOW, HEATMAP, LAST]}) as server:
        yield server


def test_arrow_keys_stay_in_the_slider_and_the_map(browser, nb7):
    with nb7.page(browser, height=1100) as page:
        cells = nb7.open(page, "keys.ipynb")
        nb7.run_cell(page, cells, 0)
        slider = page.locator(".attnkit-flow input[type=range]")
        slider.wait_for(timeout=120_000)
        nb7.run_cell(page, cells, 1)
        view = page.locator(".jp-OutputArea .attnkit-heatmap").first
        view.wait_for(timeout=120_000)

        # the slider: command mode (Escape leaves the editor), then focus the slider
        page.keyboard.press("Escape")
        slider.scroll_into_view_if_needed()
        slider.focus()
        active = page.evaluate(ACTIVE)
        before = float(slider.input_value())
        for key in ("ArrowUp", "ArrowUp", "ArrowDown"):
            page.keyboard.press(key)
        assert float(slider.input_value()) == pytest.approx(before + 0.01)
        assert page.evaluate(ACTIVE) == active, "the arrow keys moved the notebook's cell selection"

        # the map: arrows pan it, + zooms it; the notebook's selection stays
        canvas = view.locator("canvas").first
        canvas.scroll_into_view_if_needed()
        canvas.focus()
        active = page.evaluate(ACTIVE)
        page.keyboard.press("+")
        zoomed = view.get_attribute("data-view")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "(v) => document.querySelector('.jp-OutputArea .attnkit-heatmap').dataset.view !== v", arg=zoomed)
        assert page.evaluate(ACTIVE) == active, "keys in the map moved the notebook's cell selection"
        # no command-mode shortcut ran on the way: the notebook has as many cells as before
        assert page.locator(".jp-Notebook .jp-Cell").count() == 3
