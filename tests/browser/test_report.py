"""An exported report opened from file:// in headless Chromium with the network cut off.

The report of tests/notebooks/tiny_widgets.ipynb (executed in quick mode) must draw every
widget live from the inlined renderer and the saved state: the anywidget's canvas from its
binary buffer (hover reads each byte back exactly, click redraws), the ipywidgets slider
(keyboard moves it). No request may leave file://, none may fail, and the console must stay
free of errors. With JavaScript off, the PNG fallback is what shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnkit import report
from attnkit.cli import main

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "notebooks" / "tiny_widgets.ipynb"
QUICK_BYTES = [0, 64, 128, 255]
CELL = 40  # px per cell in the notebook's widget
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("playwright is not installed (pip install playwright; no browser download)")
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory) -> Path:
    if not (report.STATIC / "report.js").is_file():
        _skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
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
