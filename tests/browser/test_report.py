"""An exported report opened from file:// in headless Chromium with the network cut off.

The report of tests/notebooks/tiny_widgets.ipynb (executed in quick mode) must draw every
widget live from the inlined renderer and the saved state: the anywidget's canvas from its
binary buffer (hover reads each byte back exactly, click redraws), the ipywidgets slider
(keyboard moves it). No request may leave file://, none may fail, and the console must stay
free of errors. With JavaScript off, the PNG fallback is what shows.

The report of tests/notebooks/attnkit_widgets.ipynb does the same for attnkit's own widgets
(Heatmap, HeadGrid, HeadMap, ClusterView on a tiny random BERT): hover values are checked
against the float16/float32 buffers saved in the widget state, the heatmap zooms and fits
back, a head click selects on the front end. Its screenshot goes to ``img_dir`` (a temporary
folder unless ``$ATTNKIT_IMG_DIR`` says otherwise).
"""

from __future__ import annotations

import base64
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from attnkit.apps import report
from attnkit.apps.cli import main
from prereq import REPO, skip_or_fail

pytestmark = pytest.mark.browser

TINY = REPO / "tests" / "notebooks" / "tiny_widgets.ipynb"
QUICK_BYTES = [0, 64, 128, 255]
CELL = 40  # px per cell in the notebook's widget


@pytest.fixture(scope="module")
def chromium(browser):
    """The session's Chromium (tests/browser/conftest.py): one playwright per process."""
    return browser


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory) -> Path:
    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNKIT_QUICK", "1")
    try:
        out = tmp_path_factory.mktemp("browser-report") / "tiny.html"
        assert main(["report", str(TINY), "-o", str(out), "--execute"]) == 0
    finally:
        mp.undo()
    return out


class Offline:
    """A page that may load file:// only; records every other request, failure and error."""

    def __init__(self, browser, **context_args):
        self.context = browser.new_context(**context_args)
        self.page = self.context.new_page()
        self.blocked: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url} {r.failure}"))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def _route(self, route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()


@pytest.fixture
def offline(chromium):
    pages: list[Offline] = []

    def make(**kw) -> Offline:
        pages.append(Offline(chromium, **kw))
        return pages[-1]

    yield make
    for p in pages:
        p.close()


def test_report_draws_every_widget_live_offline(tiny_report, offline):
    o = offline()
    page = o.page
    page.goto(tiny_report.as_uri())
    summary = page.evaluate("window.attnkitReport.ready")
    assert summary == {"models": 5, "slots": 2, "missing": 0, "failed": 0}
    # widgets can tell that no kernel answers here
    assert page.evaluate("document.documentElement.dataset.attnkitKernel") == "none"
    page.wait_for_function(
        "[...document.querySelectorAll('.attnkit-slot')].every(s => s.dataset.attnkitState === 'live')",
        timeout=10_000,
    )
    # live views replaced the fallbacks
    assert page.eval_on_selector_all(".attnkit-slot > .attnkit-fallback", "els => els.map(e => e.hidden)") == [True, True]

    # the anywidget: canvas drawn from the base64 buffer, one 40-px cell per byte
    canvas = page.locator(".cells-canvas")
    assert canvas.count() == 1
    size = canvas.evaluate("c => [c.width, c.height]")
    assert size == [CELL * len(QUICK_BYTES), CELL]
    px = canvas.evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " return [...Array(c.width / 40).keys()].map(i => [...d.slice((20 * c.width + i * 40 + 20) * 4, (20 * c.width + i * 40 + 20) * 4 + 3)]); }"
    )
    assert px == [[255 - b, 255 - b, 255] for b in QUICK_BYTES]

    # hover shows the value of each cell, exactly as the kernel had it
    tip = page.locator(".cells-tip")
    for i, b in enumerate(QUICK_BYTES):
        canvas.hover(position={"x": i * CELL + CELL / 2, "y": CELL / 2})
        assert tip.text_content() == f"cell {i}: {b}"

    # click selects a cell on the front end (no kernel needed): a red outline is drawn there
    canvas.click(position={"x": 2 * CELL + CELL / 2, "y": CELL / 2})
    edge = canvas.evaluate("c => [...c.getContext('2d').getImageData(2 * 40 + 2, 20, 1, 1).data.slice(0, 3)]")
    assert edge == [255, 0, 0]

    # the ipywidgets slider is a working control
    readout = page.locator(".widget-readout")
    assert readout.text_content().strip() == "3"
    page.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    assert readout.text_content().strip() == "4"

    # provenance is on the page as text
    header = page.locator("#attnkit-provenance").inner_text()
    assert "none (hand-made widget)" in header and "four hand-written bytes" in header
    assert "ATTNKIT_QUICK=1" in header

    assert o.blocked == [], "the report tried to reach the network"
    assert o.failed == []
    assert o.errors == []


def test_without_javascript_the_png_fallback_shows(tiny_report, offline):
    o = offline(java_script_enabled=False)
    page = o.page
    page.goto(tiny_report.as_uri())
    img = page.locator(".attnkit-slot > .attnkit-fallback img")
    assert img.count() == 1  # the anywidget has a PNG; the slider falls back to its text
    assert img.evaluate("i => i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().height > 0")
    assert page.locator(".attnkit-slot canvas").count() == 0
    assert "IntSlider(value=3" in page.locator(".attnkit-slot").nth(1).inner_text()
    assert "none (hand-made widget)" in page.locator("#attnkit-provenance").inner_text()
    assert o.blocked == [] and o.failed == []


# ------------------------------------------------------------- the attnkit widgets
WIDGETS = REPO / "tests" / "notebooks" / "attnkit_widgets.ipynb"
STATE = "application/vnd.jupyter.widget-state+json"


@pytest.fixture(scope="module")
def widgets_report(tmp_path_factory) -> tuple[Path, dict]:
    """The report of notebooks/attnkit_widgets.ipynb (quick mode) and its widget state by
    class name (``{"Heatmap": {"state": ..., "buffers": {name: bytes}}}``)."""
    try:
        import attnkit.widgets.heatmap  # noqa: F401
    except ImportError:
        pytest.skip("the attnkit widgets are not on this branch yet")
    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNKIT_QUICK", "1")
    try:
        out = tmp_path_factory.mktemp("browser-report") / "widgets.html"
        nb = out.with_suffix(".ipynb")
        assert main(["report", str(WIDGETS), "-o", str(out), "--execute", "--save-notebook", str(nb)]) == 0
    finally:
        mp.undo()
    import nbformat

    state = nbformat.read(nb, as_version=4).metadata.widgets[STATE]["state"]
    by_class = {}
    for m in state.values():
        if m["model_name"] == "AnyModel":
            cls = m["state"]["_anywidget_id"].rsplit(".", 1)[-1]
            bufs = {b["path"][0]: base64.b64decode(b["data"]) for b in m.get("buffers", [])}
            by_class[cls] = {"state": m["state"], "buffers": bufs}
    return out, by_class


def _tooltip(page, root) -> str:
    tip = root.locator(".attnkit-tooltip")
    return tip.text_content() if tip.is_visible() else ""


def _at(page, root, x: float, y: float) -> None:
    """Move the pointer to (x, y) CSS pixels from the top-left of the widget's first canvas."""
    canvas = root.locator("canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + y)


def _numbers(text: str) -> list[float]:
    return [float(t) for t in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", text)]


def test_attnkit_widgets_live_in_the_report(widgets_report, offline, img_dir):
    path, models = widgets_report
    assert set(models) == {"Heatmap", "HeadGrid", "HeadMap", "ClusterView"}
    o = offline(viewport={"width": 1100, "height": 900})
    page = o.page
    page.goto(path.as_uri())
    summary = page.evaluate("window.attnkitReport.ready")
    assert summary["slots"] == 4 and summary["missing"] == 0 and summary["failed"] == 0
    page.wait_for_function(
        "[...document.querySelectorAll('.attnkit-slot')].every(s => s.dataset.attnkitState === 'live')",
        timeout=15_000,
    )
    page.wait_for_function(
        "[...document.querySelectorAll('.attnkit-slot .attnkit')].filter(r => Number(r.dataset.drawn) >= 1).length === 4",
        timeout=15_000,
    )
    roots = page.locator(".attnkit-slot .attnkit")
    heatmap, grid, headmap, cluster = (roots.nth(i) for i in range(4))

    # Heatmap: hovering the strongest cell shows the value the kernel sent (float16 buffer)
    hm = models["Heatmap"]
    n = hm["state"]["n"]
    assert hm["state"]["overview_max"]["dtype"] == "float32"  # a short map: the overview is exact
    values = np.frombuffer(hm["buffers"]["overview_max"], dtype="<f4").astype(np.float64).reshape(n, n)
    r, c = np.unravel_index(np.argmax(values), values.shape)
    left, top, size = (float(heatmap.get_attribute(f"data-plot-{k}")) for k in ("left", "top", "size"))
    cell = size / n
    _at(page, heatmap, left + (c + 0.5) * cell, top + (r + 0.5) * cell)
    text = _tooltip(page, heatmap)
    tokens = hm["state"]["tokens"]
    assert text.startswith("attention: ") and f"(#{r})" in text and f"(#{c})" in text
    assert tokens[r] in text and tokens[c] in text
    assert abs(_numbers(text)[0] - values[r, c]) <= 5e-4
    # zoom with the wheel: the cell under the same pixel changes; double-click fits again
    probe = (left + size * 0.75, top + size * 0.75)
    _at(page, heatmap, *probe)
    before = _tooltip(page, heatmap)
    _at(page, heatmap, left + 2, top + 2)
    page.mouse.down()  # a click on the map lets the wheel zoom it
    page.mouse.up()
    for _ in range(4):
        page.mouse.wheel(0, -400)
    page.wait_for_timeout(150)
    _at(page, heatmap, *probe)
    zoomed = _tooltip(page, heatmap)
    assert zoomed and zoomed != before
    box = heatmap.locator("canvas").first.bounding_box()  # in view: _at scrolled to it
    page.mouse.dblclick(box["x"] + left + 5, box["y"] + top + 5)
    page.wait_for_timeout(150)
    _at(page, heatmap, *probe)
    assert _tooltip(page, heatmap) == before

    # HeadGrid: hover names the head and its metric value; click selects it (front end only)
    hg = models["HeadGrid"]
    L, H = hg["state"]["n_layers"], hg["state"]["n_heads"]
    metric = np.frombuffer(hg["buffers"]["metric"], dtype="<f4").reshape(L, H)
    g = {k: float(grid.get_attribute(f"data-{k}")) for k in ("cell", "grid-left", "grid-top", "pitch-x", "pitch-y")}
    x = g["grid-left"] + 0 * g["pitch-x"] + g["cell"] / 2
    y = g["grid-top"] + 1 * g["pitch-y"] + g["cell"] / 2
    _at(page, grid, x, y)
    text = _tooltip(page, grid)
    assert "Head 2-1" in text and "entropy" in text
    assert any(abs(v - metric[1, 0]) <= 5e-3 for v in _numbers(text))
    box = grid.locator("canvas").first.bounding_box()
    page.mouse.click(box["x"] + x, box["y"] + y)
    assert "selected 2-1" in grid.locator(".attnkit-status").text_content()

    # HeadMap: same metric, hover shows it
    m = {k: float(headmap.get_attribute(f"data-{k}")) for k in ("cell", "grid-left", "grid-top", "pitch-x", "pitch-y")}
    _at(page, headmap, m["grid-left"] + 1 * m["pitch-x"] + m["cell"] / 2, m["grid-top"] + m["cell"] / 2)
    text = _tooltip(page, headmap)
    assert "Head 1-2" in text and any(abs(v - metric[0, 1]) <= 5e-3 for v in _numbers(text))

    # ClusterView: drawn (ink on its canvas)
    ink = cluster.locator("canvas").first.evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let k = 0;"
        " for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250)) k++; return k; }"
    )
    assert ink > 50

    # the top of the report (provenance and the heatmap) for the README
    page.mouse.move(1, 1)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(img_dir / "report.png"), full_page=False)
    assert o.blocked == [], "the report tried to reach the network"
    assert o.failed == []
    assert o.errors == []


# ------------------------------------------------------------- a long map, offline
LONG = '''\
import numpy as np
import attnkit
from attnkit.widgets import Heatmap

from qk_attention import causal_random_map as long_map  # tests/ is on the kernel's path

n = 2048
Heatmap(attnkit.Attention.from_maps(long_map(n)[None, None], ["<s>"] + [f"w{i}" for i in range(1, n)]))
'''


@pytest.fixture(scope="module")
def long_report(tmp_path_factory) -> Path:
    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
    import nbformat

    folder = tmp_path_factory.mktemp("long-report")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(LONG)]
    nbformat.write(nb, folder / "long.ipynb")
    out = folder / "long.html"
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
    try:
        assert main(["report", str(folder / "long.ipynb"), "-o", str(out), "--execute"]) == 0
    finally:
        mp.undo()
    return out


def test_a_2k_token_heatmap_zooms_offline_within_what_was_embedded(long_report, offline):
    from attnkit.core.attention import pool_square

    sys.path.insert(0, str(REPO / "tests"))
    from qk_attention import causal_random_map

    size_mb = long_report.stat().st_size / 1e6
    # overview (2 x 0.5 MB) + level 1 (2.1 MB) as base64, a PNG, the renderer: not 2048^2 floats
    assert size_mb < 9, size_mb
    o = offline(viewport={"width": 1100, "height": 1200})
    page = o.page
    page.goto(long_report.as_uri())
    page.evaluate("window.attnkitReport.ready")
    page.wait_for_function("Number(document.querySelector('.attnkit-slot .attnkit-heatmap')?.dataset.drawn ?? 0) >= 1", timeout=20_000)
    hm = page.locator(".attnkit-slot .attnkit-heatmap")
    assert hm.get_attribute("data-level") == "2"
    canvas = hm.locator("canvas").first
    canvas.scroll_into_view_if_needed()
    canvas.focus()
    def zoom_to(level: str) -> None:
        for _ in range(8):
            if hm.get_attribute("data-level") == level:
                return
            page.keyboard.press("+")
            page.wait_for_timeout(100)
        assert hm.get_attribute("data-level") == level

    zoom_to("1")  # bins of 2 x 2 tokens: embedded, drawn without a kernel
    assert hm.get_attribute("data-missing") == "0"
    zoom_to("0")  # single tokens: beyond what the report carries
    status = hm.locator(".attnkit-status").text_content()
    assert "embedded down to 2\u00d72 tokens per cell" in status and "need a running kernel" in status
    # hover: the exact weight needs a kernel; the embedded 2x2 bin's max is shown
    x0, y0, size = (float(v) for v in hm.get_attribute("data-view").split(","))
    left, top, plot = (float(hm.get_attribute(f"data-plot-{k}")) for k in ("left", "top", "size"))
    row, col = int(y0) + 20, int(y0) + 10
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + left + (col + 0.5 - x0) * plot / size, box["y"] + top + (row + 0.5 - y0) * plot / size)
    tip = hm.locator(".attnkit-tooltip")
    page.wait_for_function("(document.querySelector('.attnkit-heatmap .attnkit-tooltip')?.textContent ?? '').includes('here')")
    text = tip.text_content()
    assert "exact value needs a running kernel" in text and f"(#{row})" in text
    want = pool_square(causal_random_map(2048), 1024, "max")[row // 2, col // 2]
    got = float(re.search(r"max of 2\u00d72 here\s*([-0-9.e]+)", text).group(1))
    assert got == pytest.approx(want, rel=5e-3)
    assert o.blocked == [], "the report tried to reach the network"
    assert o.failed == [] and o.errors == []


# ------------------------------------------------------------- heads across training
SCRUBBER = '''\
import tempfile
import attnkit as ak
from attnkit.toys.induction import train_induction_model

with tempfile.TemporaryDirectory() as folder:
    final = train_induction_model(vocab_size=16, hidden=16, start_length=8, max_length=8,
                                  tokens_per_step=64, steps=40, checkpoint_every=10, out=folder,
                                  progress=False)
    inputs = ak.induction_inputs(final, 2, 8, seed=0)
    result = ak.checkpoint_scores(ak.checkpoints(folder), inputs, early=2, late=12, maps=True,
                                  progress=False)
view = ak.CheckpointScrubber(result)
view.selected = [1, 0]
view
'''


@pytest.fixture(scope="module")
def scrubber_report(tmp_path_factory) -> tuple[Path, dict]:
    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
    import nbformat

    folder = tmp_path_factory.mktemp("scrubber-report")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SCRUBBER)]
    nbformat.write(nb, folder / "scrubber.ipynb")
    out = folder / "scrubber.html"
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    try:
        assert main(["report", str(folder / "scrubber.ipynb"), "-o", str(out), "--execute"]) == 0
    finally:
        mp.undo()
    return out


_PIXELS = """(k) => { const c = document.querySelectorAll('.attnkit-slot .attnkit canvas')[k];
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let h = 0, ink = 0;
    for (let i = 0; i < d.length; i++) { h = (h * 31 + d[i]) | 0; if (i % 4 === 3 && d[i] > 0) ink++; }
    return [h, ink]; }"""


def test_the_checkpoint_scrubber_steps_offline_in_a_report(scrubber_report, offline):
    """The maps of every step travel with the report: moving the slider (keys, then a click
    with the mouse) redraws the head map and the picked head's heatmap from file://."""
    o = offline(viewport={"width": 1200, "height": 800})
    page = o.page
    page.goto(scrubber_report.as_uri())
    summary = page.evaluate("window.attnkitReport.ready")
    assert summary["slots"] == 1 and summary["missing"] == 0 and summary["failed"] == 0
    page.wait_for_function("document.querySelector('.attnkit-slot .attnkit') && "
                           "Number(document.querySelector('.attnkit-slot .attnkit').dataset.drawn) >= 1",
                           timeout=15_000)
    root = page.locator(".attnkit-slot .attnkit")
    assert root.get_attribute("data-checkpoints") == "5" and root.get_attribute("data-step") == "40"
    heat = root.locator("canvas").nth(2)
    assert (heat.get_attribute("aria-label") or "").startswith("attention of head 2-1 at step 40")
    assert heat.get_attribute("data-labels") == "17"  # <bos> and two copies of 8 tokens
    seen = {"40": (page.evaluate(_PIXELS, 1), page.evaluate(_PIXELS, 2))}
    slider = root.locator("input[type=range]")
    slider.focus()
    for key, step in (("ArrowLeft", "30"), ("Home", "0")):
        page.keyboard.press(key)
        page.wait_for_function(f"document.querySelector('.attnkit-slot .attnkit').dataset.step === '{step}'")
        page.wait_for_timeout(100)
        seen[step] = (page.evaluate(_PIXELS, 1), page.evaluate(_PIXELS, 2))
        assert f"at step {step}" in (heat.get_attribute("aria-label") or "")
    # each step its own head map and heatmap pixels (hash, inked pixels)
    for k in (0, 1):
        assert len({v[k][0] for v in seen.values()}) == 3, (k, seen)
        assert all(v[k][1] > 200 for v in seen.values())
    # the mouse: a click at the slider's right end shows the last step again
    box = slider.bounding_box()
    page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    page.wait_for_function("document.querySelector('.attnkit-slot .attnkit').dataset.step === '40'")
    page.wait_for_timeout(100)
    assert (page.evaluate(_PIXELS, 1), page.evaluate(_PIXELS, 2)) == seen["40"]
    assert o.blocked == [], "the report tried to reach the network"
    assert o.failed == [] and o.errors == []
