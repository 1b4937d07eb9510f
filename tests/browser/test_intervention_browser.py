"""InterventionView in headless Chromium (issue 29, item 8): a click on a cell of the head's
map knocks that edge out in the kernel and the view shows ``ak.knockout``'s numbers; Shift
asks for the key's column; the keyboard does the same; the later heads' difference grid
opens a head; without a kernel (an exported page) the maps draw and a click says it needs
one; tokens only ever as text; a dark theme."""

from __future__ import annotations

import sys
import textwrap

import pytest
from harness import DARK, DARK_BG, WidgetPage
from prereq import REPO

import attnkit as ak
from attnkit.testing import tiny_model

sys.path.insert(0, str(REPO / "tests"))
from tolerances import F32, assert_close  # noqa: E402

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"
INPUTS = [f"The cat {XSS} sat on the mat.", "A dog ran in the park and sat down now."]
HEAT_TOP = 18  # js/src/intervention.ts


def ink(wp: WidgetPage, k: int) -> int:
    return wp.page.evaluate(
        """(k) => { const c = document.querySelectorAll('#root canvas')[k];
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) ink++;
            return ink; }""", k)


def click_cell(wp: WidgetPage, q: int, k: int, n: int, modifiers: list[str] | None = None) -> None:
    px = float(wp.data("heat")) / n
    wp.page.locator("#root canvas").nth(1).click(
        position={"x": (k + 0.5) * px, "y": HEAT_TOP + (q + 0.5) * px}, modifiers=modifiers or [])


def result_text(wp: WidgetPage) -> str:
    return wp.page.locator("#root .attnkit-iv-result").text_content()


def fmt(v: float) -> str:
    """js/src/lib/labels.ts formatValue for ordinary magnitudes."""
    import math

    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2e}".replace("e-0", "e-").replace("e+0", "e+")
    return f"{v:.{min(max(0, 2 - math.floor(math.log10(a))), 4)}f}"


@pytest.fixture(scope="module")
def model():
    return tiny_model("gpt2")


def test_click_knocks_an_edge_out_and_shows_knockouts_numbers(browser, model, img_dir):
    view = ak.InterventionView(model, INPUTS, layer=0, head=1, progress=False)
    n = len(view.tokens)
    wp = WidgetPage(browser, view, width=1000)
    try:
        wp.wait_drawn()
        assert ink(wp, 0) > 500 and ink(wp, 1) > 2000  # the effects map and the head's attention
        assert "no edge knocked out yet" in result_text(wp)
        # a click on cell (query 6, key 2): the kernel knocks out ak.knockout's edge
        click_cell(wp, 6, 2, n)
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit').dataset.result !== ''")
        direct = ak.knockout(model, INPUTS, [(0, 1, 6, 2)], progress=False).meta
        assert view.knocked["after"] == direct["knocked_out"]
        text = result_text(wp)
        assert text.startswith("knocked out edge 6 \u2192 2 of head 1-2: loss")
        assert f"{fmt(direct['clean'])} \u2192 {fmt(direct['knocked_out'])}" in text
        assert float(wp.data("result")) == direct["knocked_out"]
        sent = wp.page.evaluate("() => window.__sent")
        assert {k: sent[-1][k] for k in ("type", "layer", "head", "query", "key", "stripe")} == {
            "type": "knockout", "layer": 0, "head": 1, "query": 6, "key": 2, "stripe": "edge"}
        # the later heads' after - before arrive as traits and draw as a grid
        wp.push("knocked", "diffs", "diff_heads", "diff_bin")
        wp.page.wait_for_function("() => (document.querySelectorAll('#root canvas')[2].getAttribute('aria-label') || '').startsWith('2 later heads')")
        assert ink(wp, 2) > 300
        # Shift + click: the column of key 3
        click_cell(wp, 8, 3, n, ["Shift"])
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit-iv-result').textContent.includes('column of key 3')")
        assert wp.page.evaluate("() => window.__sent")[-1]["stripe"] == "column"
        assert view.knocked["stripe"] == "column" and view.knocked["n_edges"] == n_min(model) - 3
        # the keyboard: focus the map, move the cursor, Enter knocks out (diagonal mode by its button)
        wp.page.locator("#root button[data-stripe=diagonal]").click()
        wp.apply_saved()
        assert view.stripe == "diagonal"
        heat = wp.page.locator("#root canvas").nth(1)
        heat.focus()
        wp.page.keyboard.press("ArrowUp")  # the cursor is where the last click was: (8, 3)
        wp.page.keyboard.press("ArrowRight")
        assert "query #7 \u2192 key #4" in wp.page.locator("#root .attnkit-status").text_content()
        wp.page.keyboard.press("Enter")
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit-iv-result').textContent.includes('diagonal')")
        assert view.knocked["stripe"] == "diagonal" and (view.knocked["query"], view.knocked["key"]) == (7, 4)
        # a thumbnail of the grid opens that head's difference (Enter on the focused grid does too)
        wp.push("knocked", "diffs", "diff_heads", "diff_bin")
        box = wp.page.locator("#root canvas").nth(2).bounding_box()
        wp.page.mouse.click(box["x"] + 10, box["y"] + HEAT_TOP + 10)
        wp.apply_saved()
        assert view.selected == [1, 0]
        wp.page.wait_for_function("() => (document.querySelectorAll('#root canvas')[1].getAttribute('aria-label') || '').includes('after the knockout minus before')")
        wp.page.locator("#root canvas").nth(2).focus()
        wp.page.keyboard.press("ArrowRight")
        wp.page.keyboard.press("Enter")
        wp.apply_saved()
        assert view.selected == [1, 1]
        # arrows on the effects map pick heads
        wp.page.locator("#root canvas").nth(0).focus()
        wp.page.keyboard.press("ArrowUp")
        wp.apply_saved()
        assert view.selected == [0, 1]
        wp.screenshot(img_dir / "intervention_view.png")
        assert wp.page.locator("#root img").count() == 0 and wp.alerts() == 0
        assert wp.errors() == []
    finally:
        wp.close()


def n_min(model) -> int:
    return min(len(model.encode(t)) for t in INPUTS)


def test_without_a_kernel_the_maps_draw_and_a_click_says_it_needs_one(browser, model):
    view = ak.InterventionView(model, INPUTS, layer=1, head=0, progress=False)
    view.knock_out(0, 0, query=5, key=5, stripe="diagonal")  # saved with the state
    offline = "() => { document.documentElement.dataset.attnkitKernel = 'none'; }"
    wp = WidgetPage(browser, view, width=900, kernel=False, setup=offline)
    try:
        wp.wait_drawn()
        assert ink(wp, 0) > 500 and ink(wp, 1) > 2000 and ink(wp, 2) > 300
        assert "knocked out diagonal" in result_text(wp)  # the last result, from the state
        click_cell(wp, 6, 2, len(view.tokens))
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit-iv-result').textContent.includes('needs a running kernel')")
        assert wp.data("notice") == "kernel"
        assert wp.page.evaluate("() => window.__sent") == []
        assert wp.errors() == []
    finally:
        wp.close()


def test_dark_theme(browser, model):
    """On JupyterLab's dark theme the map's empty cells are the page's background and the
    words are light (they stayed black on white before the views read the theme)."""
    import io

    import numpy as np
    from PIL import Image

    view = ak.InterventionView(model, INPUTS, progress=False)
    wp = WidgetPage(browser, view, width=900, setup=DARK, dpr=1)
    try:
        wp.wait_drawn()
        heat = wp.page.locator("#root canvas").nth(1)
        px = float(wp.data("heat")) / len(view.tokens)
        shot = np.asarray(Image.open(io.BytesIO(heat.screenshot())).convert("RGB")).astype(int)
        corner = shot[HEAT_TOP + int(2.5 * px), int((len(view.tokens) - 2.5) * px)]  # above the diagonal
        assert np.abs(corner - DARK_BG).max() <= 3, corner
        colour = wp.page.evaluate("() => getComputedStyle(document.querySelector('#root .attnkit-iv-result')).color")
        assert sum(float(x) for x in colour[colour.index("(") + 1:].split(",")[:3]) > 500, colour
        assert wp.errors() == []
    finally:
        wp.close()


LAB_CELL = """\
import json, pathlib
import attnkit as ak
from attnkit.testing import tiny_model

model = tiny_model("gpt2")
inputs = ["The cat sat on the mat.", "A dog ran in the park."]
view = ak.InterventionView(model, inputs, layer=0, head=1, progress=False)
def record(change):  # written whole, then renamed: the test never reads a half-written file
    tmp = pathlib.Path("knocked.json.tmp")
    tmp.write_text(json.dumps(change["new"]))
    tmp.replace("knocked.json")
view.observe(record, names="knocked")
view
"""


def test_jupyterlab_click_and_keyboard_knock_out_in_the_kernel(browser, jupyter, model):
    import json

    from lab import JupyterLab, wait_for

    inputs = ["The cat sat on the mat.", "A dog ran in the park."]
    with jupyter(JupyterLab, {"iv.ipynb": [LAB_CELL]}) as lab, lab.page(browser, height=1100) as page:
        cells = lab.open(page, "iv.ipynb")
        lab.run_cell(page, cells, 0)
        root = lab.wait_view(page, "attnkit-intervention")
        heat = root.locator("canvas").nth(1)
        heat.scroll_into_view_if_needed()
        n = len(model.encode(inputs[0]))
        px = float(root.get_attribute("data-heat")) / n
        heat.click(position={"x": 2.5 * px, "y": HEAT_TOP + 6.5 * px})  # query 6, key 2
        out = lab.dir / "knocked.json"
        wait_for(out.exists, 120, "the kernel to knock the edge out")
        got = json.loads(out.read_text())
        direct = ak.knockout(model, inputs, [(0, 1, 6, 2)], progress=False).meta
        assert (got["layer"], got["head"], got["query"], got["key"]) == (0, 1, 6, 2)
        assert_close(got["after"], direct["knocked_out"], F32)  # the same sums in another process
        page.wait_for_function("() => document.querySelector('.attnkit-iv-result').textContent.startsWith('knocked out edge 6')")
        text = root.locator(".attnkit-iv-result").text_content()
        assert f"{fmt(got['before'])} \u2192 {fmt(got['after'])}" in text
        page.wait_for_function("() => (document.querySelectorAll('.attnkit-intervention canvas')[2].getAttribute('aria-label') || '').startsWith('2 later heads')")
        # the keyboard: the cursor is on (6, 2); up and Enter knock out (5, 2); JupyterLab keeps its hands off
        n_cells = page.locator(".jp-Notebook .jp-Cell").count()
        heat.focus()
        page.keyboard.press("ArrowUp")
        page.keyboard.press("Enter")
        wait_for(lambda: json.loads(out.read_text())["query"] == 5, 120, "the keyboard's knockout")
        assert json.loads(out.read_text())["key"] == 2
        assert page.locator(".jp-Notebook .jp-Cell").count() == n_cells  # the keys made no cell


def test_exported_report_draws_offline_and_says_a_knockout_needs_a_kernel(browser, tmp_path):
    from attnkit.apps import report
    from attnkit.apps.cli import main
    from prereq import skip_or_fail

    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
    out = tmp_path / "iv.html"
    nb = REPO / "tests" / "notebooks" / "intervention_widget.ipynb"
    assert main(["report", str(nb), "-o", str(out), "--execute"]) == 0
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    blocked: list[str] = []
    errors: list[str] = []
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://")
               else (blocked.append(r.request.url), r.abort()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(out.as_uri())
        root = page.locator(".attnkit-slot .attnkit-intervention")
        root.wait_for(timeout=15_000)
        page.wait_for_function("() => Number(document.querySelector('.attnkit-intervention').dataset.drawn) >= 1", timeout=15_000)
        assert root.get_attribute("data-link") == "none"
        text = root.locator(".attnkit-iv-result").text_content()
        assert text.startswith("knocked out edge 6 \u2192 2 of head 1-2")  # the state saved with the page
        inks = page.evaluate("""() => [...document.querySelectorAll('.attnkit-intervention canvas')].map((c) => {
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) ink++;
            return ink; })""")
        assert min(inks) > 300  # effects, attention, the later heads' differences
        heat = root.locator("canvas").nth(1)
        heat.click(position={"x": 40, "y": 200})
        page.wait_for_function("() => document.querySelector('.attnkit-iv-result').textContent.includes('needs a running kernel (this saved page has none)')")
        heat.focus()
        page.keyboard.press("Enter")
        assert "needs a running kernel" in root.locator(".attnkit-iv-result").text_content()
        assert blocked == [] and errors == []
    finally:
        context.close()


FRONT_CELL = """\
import attnkit as ak
from attnkit.testing import tiny_model

view = ak.InterventionView(tiny_model("gpt2"), ["The cat sat on the mat.", "A dog ran in the park."],
                           layer=0, head=1, progress=False)
"""
MARIMO_APP = f'''\
import marimo

app = marimo.App(width="full")


@app.cell
def _():
{textwrap.indent(FRONT_CELL, "    ")}
    view
    return
'''


def knock_in(page, model) -> None:
    """The view on ``page`` draws; a click on (6, 2) comes back with ak.knockout's numbers."""
    from lab import wait_for

    root = page.locator(".attnkit-intervention").first
    root.wait_for(timeout=120_000)
    wait_for(lambda: int(root.get_attribute("data-drawn") or 0) >= 1, 60, "the view to draw")
    heat = root.locator("canvas").nth(1)
    heat.scroll_into_view_if_needed()
    n = len(model.encode("The cat sat on the mat."))
    px = float(root.get_attribute("data-heat")) / n
    heat.click(position={"x": 2.5 * px, "y": HEAT_TOP + 6.5 * px})
    wait_for(lambda: (root.get_attribute("data-result") or "") != "", 120, "the kernel's knockout")
    direct = ak.knockout(model, ["The cat sat on the mat.", "A dog ran in the park."], [(0, 1, 6, 2)],
                         progress=False).meta
    assert_close(float(root.get_attribute("data-result")), direct["knocked_out"], F32)
    text = root.locator(".attnkit-iv-result").text_content()
    assert text.startswith("knocked out edge 6 \u2192 2 of head 1-2") and fmt(direct["knocked_out"]) in text
    assert root.get_attribute("data-link") == "ok"


@pytest.mark.parametrize("front", ["notebook7", "voila", "marimo"])
def test_other_front_ends_knock_out_in_the_kernel(browser, tmp_path, jupyter, voila, model, front):
    from frontends import Marimo
    from lab import Notebook7
    from prereq import require_installed

    require_installed({"notebook7": "notebook", "voila": "voila", "marimo": "marimo"}[front],
                      f"{front} is not installed")
    if front == "notebook7":
        with jupyter(Notebook7, {"iv.ipynb": [FRONT_CELL + "view"]}) as server, server.page(browser, height=1100) as page:
            cells = server.open(page, "iv.ipynb")
            server.run_cell(page, cells, 0)
            knock_in(page, model)
    elif front == "voila":
        with voila([FRONT_CELL + "view"]) as server, server.page(browser) as page:
            page.goto(server.url, wait_until="domcontentloaded", timeout=120_000)
            knock_in(page, model)
    else:
        with Marimo(tmp_path, MARIMO_APP) as server, server.page(browser) as page:
            page.goto(server.url, wait_until="domcontentloaded", timeout=120_000)
            knock_in(page, model)
