"""End to end in a real JupyterLab: run a notebook, see the HeadGrid drawn, click a head,
read the new ``selected`` back in the kernel; zoom a 2k-token Heatmap until it asks the
kernel for exact tiles and read a weight back from hover; arrow keys move a FlowView slider,
not the notebook's selection; a saved notebook reopened with a new kernel still draws its
figures from the widget state saved with it (attnkit's JupyterLab settings override,
jupyter/overrides.d/attnkit.json, turns "save widget state" on).

The server listens on 127.0.0.1 on a free port with token auth (one for the session: each test
in a folder and workspace of its own, tests/browser/conftest.py); every wait is bounded.
"""

from __future__ import annotations

import json
import sys

import nbformat
import pytest
from prereq import REPO
from lab import JupyterLab, wait_for

sys.path.insert(0, str(REPO / "tests"))
from qk_attention import causal_random_map

pytestmark = pytest.mark.browser

SETUP = """\
import json, pathlib
import numpy as np
import attnkit
from attnkit.widgets import HeadGrid

n, L, H = 12, 4, 4
tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
maps = np.full((L, H, n, n), 0.02, dtype=np.float32)
for l in range(L):
    for h in range(H):
        maps[l, h, np.arange(n), (np.arange(n) + l + h) % n] = 1.0
maps /= maps.sum(-1, keepdims=True)
att = attnkit.Attention(maps, tokens=tokens, roles=["cls"] + ["word"] * (n - 2) + ["sep"],
                        word_ids=[-1] + list(range(n - 2)) + [-1], words=tokens[1:-1])
grid = HeadGrid(att)
def record(change):  # written whole, then renamed: the test never reads a half-written file
    tmp = pathlib.Path("selected.json.tmp")
    tmp.write_text(json.dumps(change["new"]))
    tmp.replace("selected.json")
grid.observe(record, names="selected")
grid
"""
READ = 'print("SELECTED", grid.selected)'

TILES = """\
import numpy as np
import attnkit
from attnkit.widgets import FlowView, Heatmap

from qk_attention import causal_random_map as long_map  # tests/ is on the kernel's path

n = 2048
att = attnkit.Attention.from_maps(long_map(n)[None, None], ["<s>"] + [f"w{i}" for i in range(1, n)])
hm = Heatmap(att)
hm
"""
FLOW = """\
rng = np.random.default_rng(1)
m = rng.dirichlet(np.full(12, 0.2), size=(2, 2, 12)).astype(np.float32)
flow = FlowView(attnkit.Attention.from_maps(m, ["[CLS]"] + [f"t{i}" for i in range(10)] + ["[SEP]"]), threshold=0.3)
flow
"""


@pytest.fixture
def lab(jupyter):
    with jupyter(JupyterLab, {"grid.ipynb": [SETUP, READ], "tiles.ipynb": [TILES, FLOW]}) as server:
        yield server


def test_headgrid_click_reaches_the_kernel(browser, lab):
    with lab.page(browser, height=1000) as page:
        cells = lab.open(page, "grid.ipynb")
        lab.run_cell(page, cells, 0)
        grid = lab.wait_view(page, "attnkit-headgrid")
        assert grid.get_attribute("data-thumbnails") == "16"
        ink = page.evaluate("""() => {
            const c = document.querySelector('.attnkit-headgrid canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] && d[i] < 200) ink++;
            return ink;
        }""")
        assert ink > 1000

        # Click head (2, 3), i.e. "3-4".
        canvas = grid.locator("canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        cell = float(grid.get_attribute("data-cell"))
        x = float(grid.get_attribute("data-grid-left")) + 3 * float(grid.get_attribute("data-pitch-x")) + cell / 2
        y = float(grid.get_attribute("data-grid-top")) + 2 * float(grid.get_attribute("data-pitch-y")) + cell / 2
        page.mouse.click(box["x"] + x, box["y"] + y)
        sel = lab.dir / "selected.json"
        wait_for(sel.exists, 60, "the kernel to observe the click")
        assert json.loads(sel.read_text()) == [2, 3]

        # Run the second cell and read the value back from the kernel's output.
        cells.nth(1).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        out = cells.nth(1).locator(".jp-OutputArea-output")
        out.first.wait_for(timeout=60_000)
        page.wait_for_function(
            "() => document.querySelectorAll('.jp-CodeCell')[1]?.innerText.includes('SELECTED')",
            timeout=60_000)
        assert "SELECTED [2, 3]" in out.first.inner_text()


def test_tiles_keyboard_and_a_reopened_notebook(browser, lab):
    with lab.page(browser, height=1100) as page:
        cells = lab.open(page, "tiles.ipynb")
        lab.run_cell(page, cells, 0)
        hm = lab.wait_view(page, "attnkit-heatmap")
        assert hm.get_attribute("data-level") == "2"  # 2048 tokens: the 512-bin overview

        # Zoom in with the keyboard (the notebook must not take the keys): level-0 tiles come
        # from the kernel through custom messages.
        canvas = hm.locator("canvas").first
        canvas.scroll_into_view_if_needed()
        canvas.focus()
        for _ in range(4):
            page.keyboard.press("+")
        page.wait_for_function("""() => { const r = document.querySelector('.attnkit-heatmap');
            return r.dataset.level === '0' && r.dataset.missing === '0' && Number(r.dataset.tiles ?? 0) > 0; }""",
                               timeout=120_000)
        x0, y0, size = (float(v) for v in hm.get_attribute("data-view").split(","))
        left, top, plot = (float(hm.get_attribute(f"data-plot-{k}")) for k in ("left", "top", "size"))
        row, col = int(y0) + 40, int(y0) + 30  # below the diagonal
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + left + (col + 0.5 - x0) * plot / size, box["y"] + top + (row + 0.5 - y0) * plot / size)
        page.wait_for_function(
            "() => /^attention: [-0-9.e]+from/.test(document.querySelector('.attnkit-heatmap .attnkit-tooltip')?.textContent ?? '')")
        text = hm.locator(".attnkit-tooltip").text_content()
        want = float(causal_random_map(2048)[row, col])  # the same map, rebuilt here
        got = float(text.split("attention: ")[1].split("from")[0])
        assert got == pytest.approx(want, rel=6e-4) and f"(#{row})" in text

        # Arrow keys move the FlowView slider, not the notebook's cell selection.
        lab.run_cell(page, cells, 1)
        slider = page.locator(".attnkit-flow input[type=range]")
        slider.wait_for(timeout=120_000)
        slider.focus()  # focusing it makes its cell the active one
        active = page.evaluate("() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex(c => c.classList.contains('jp-mod-active'))")
        before = float(slider.input_value())
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowDown")
        assert float(slider.input_value()) == pytest.approx(before + 0.01)
        assert page.evaluate("() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex(c => c.classList.contains('jp-mod-active'))") == active

        # Save (widget state included: attnkit's settings override), then reopen the notebook with
        # a new kernel: the figures draw from the saved state, no "model not found".
        page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        saved = lab.dir / "tiles.ipynb"
        wait_for(lambda: "application/vnd.jupyter.widget-state+json" in saved.read_text(encoding="utf-8"), 60,
                 "the notebook to be saved with its widget state")
        state = nbformat.read(saved, as_version=4).metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
        assert any(m["state"].get("_anywidget_id", "").endswith("Heatmap") for m in state.values())
        lab.shut_kernels()
        page.reload(wait_until="domcontentloaded")
        lab.wait_view(page, "attnkit-heatmap")
        assert page.locator(".attnkit-flow").count() == 1
        assert "model not found" not in page.locator(".jp-Notebook").inner_text()
