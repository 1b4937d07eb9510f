"""FlowView in headless Chromium: drawn rings, hover tracing, head glyph click restricting the
traversal (recomputed by the Python side), the threshold slider, text-only tokens."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from harness import WidgetPage
from patterns import structured

from attnkit.widgets import FlowView

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from flow_cases import ROLES, att_a, make_att, two_layer_maps  # noqa: E402

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def node_point(wp: WidgetPage, level: int, pos: int, layers: int, n: int) -> tuple[float, float]:
    cx, cy = float(wp.data("cx")), float(wp.data("cy"))
    r_in, r_out = float(wp.data("r-in")), float(wp.data("r-out"))
    r = r_in + (r_out - r_in) * (layers - level) / layers
    a = 2 * math.pi * pos / n
    return cx + r * math.sin(a), cy - r * math.cos(a)


def glyph_point(wp: WidgetPage, layer: int, head: int) -> tuple[float, float]:
    """Page coordinates of head glyph (layer, head), 0-indexed."""
    box = wp.page.locator("#root canvas.attnkit-glyphs").bounding_box()
    left, top = float(wp.data("glyph-left")), float(wp.data("glyph-top"))
    cell, pitch = float(wp.data("glyph-cell")), float(wp.data("glyph-pitch"))
    return box["x"] + left + head * pitch + cell / 2, box["y"] + top + layer * pitch + cell / 2


def test_flow_view_traces_restricts_and_rethresholds(browser):
    tokens = ["[CLS]", "a", XSS, "[SEP]"]
    view = FlowView(make_att(two_layer_maps(), tokens, ROLES, model="pre"), threshold=0.3)
    wp = WidgetPage(browser, view, width=900)
    dialogs = []
    wp.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        wp.wait_drawn()
        assert (wp.data("nodes"), wp.data("edges")) == ("7", "7")
        assert wp.canvas_stats()["ink"] > 1000

        # Hover input token "a": the four edges of every path reaching it light up (the
        # same set as attnkit.subgraph_through(g, 1)); the tooltip names it with its influence.
        wp.move(*node_point(wp, 0, 1, 2, 4))
        text = wp.tooltip()
        assert text.startswith("a") and "input" in text and "influence" in text
        assert wp.data("trace") == "4"
        wp.move(*node_point(wp, 0, 2, 2, 4))
        assert wp.tooltip().startswith(XSS)  # shown literally
        assert wp.page.locator("#root img").count() == 0

        # Click head glyph L1, head 2 (layer 0, head 1): the layer is restricted to it.
        x, y = glyph_point(wp, 0, 1)
        wp.page.mouse.move(x, y)
        assert "Head 1-2" in wp.tooltip() and "edges3" in wp.tooltip().replace(" ", "")
        wp.page.mouse.click(x, y)
        assert wp.saved()[-1] == {"selected": [0, 1], "restrict": [[0, 1]]}
        assert "recomputing" in wp.page.locator("#root .attnkit-status").text_content()
        wp.apply_saved()
        assert view.n_edges == 5
        drawn = int(wp.data("drawn"))
        wp.push()
        wp.wait_drawn(drawn + 1)
        assert wp.data("edges") == "5"
        assert "restricted to 1-2" in wp.page.locator("#root .attnkit-status").text_content()

        # "All heads" releases it; the threshold slider re-traces at 0.5.
        wp.page.get_by_role("button", name="All heads").click()
        wp.page.evaluate("""() => { const s = document.querySelector('#root input[type=range]');
            s.value = '0.5'; s.dispatchEvent(new Event('input')); s.dispatchEvent(new Event('change')); }""")
        wp.apply_saved()
        assert view.restrict == [] and view.threshold == 0.5 and view.n_edges == 2
        drawn = int(wp.data("drawn"))
        wp.push()
        wp.wait_drawn(drawn + 1)
        assert wp.data("edges") == "2"
        assert wp.errors() == [] and wp.alerts() == 0 and dialogs == []
    finally:
        wp.close()


def test_flow_view_without_a_kernel_disables_recomputation(browser):
    view = FlowView(att_a())
    wp = WidgetPage.__new__(WidgetPage)
    # Mount on a page that says no kernel answers (as attnkit's HTML reports do).
    ctx = browser.new_context(viewport={"width": 940, "height": 900})
    page = ctx.new_page()
    try:
        from harness import ORIGIN, PAGE, wire_state

        page.route(f"{ORIGIN}/**", lambda r: r.fulfill(status=200, content_type="text/html", body=PAGE % {"width": 900}))
        page.goto(f"{ORIGIN}/index.html")
        page.evaluate("() => { document.documentElement.dataset.attnkitKernel = 'none'; }")
        page.evaluate("([e, c, s]) => window.mount(e, c, s)", [view._esm, view._css, wire_state(view)])
        assert page.locator("#root input[type=range]").is_disabled()
        box = page.locator("#root canvas.attnkit-glyphs").bounding_box()
        root = page.locator("#root .attnkit")
        left, top = float(root.get_attribute("data-glyph-left")), float(root.get_attribute("data-glyph-top"))
        cell = float(root.get_attribute("data-glyph-cell"))
        page.mouse.click(box["x"] + left + cell / 2, box["y"] + top + cell / 2)
        assert page.evaluate("() => window.__saved") == [{"selected": [0, 0]}]  # no restrict
    finally:
        ctx.close()
    del wp


def test_flow_screenshots(browser, img_dir):
    att = structured(12, 12, 28, seed=3)
    other = structured(12, 12, 28, seed=4)
    other.maps[9:] = other.maps[9:, ::-1]
    views = {
        "flow.png": FlowView(att, threshold=0.5),
        "flow_compare.png": FlowView(att, other=other, threshold=0.5, names=("pre-trained", "fine-tuned")),
        "flow_collection.png": FlowView.collection([structured(12, 12, n, seed=n) for n in (16, 20, 24, 28, 32)], threshold=0.5),
    }
    for name, view in views.items():
        wp = WidgetPage(browser, view, width=1000)
        try:
            wp.wait_drawn()
            assert wp.canvas_stats()["ink"] > 5000
            if view.mode == "single":
                wp.move(*node_point(wp, 6, 5, 12, 28))
                assert int(wp.data("trace")) > 0
            wp.screenshot(img_dir / name)
            assert wp.errors() == []
        finally:
            wp.close()


@pytest.mark.realmodel
def test_real_model_screenshots(browser, img_dir, minilm):
    """README pictures from the bundled all-MiniLM-L6-v2 (skipped without it)."""
    from attnkit.widgets import HeadGrid, Heatmap

    att = minilm.attend("The cat sat on the mat because it was tired of chasing the mouse.")
    shots = {
        "real_headgrid.png": (HeadGrid(att), 900),
        "real_heatmap.png": (Heatmap(att, layer=2, head=5), 720),
        "real_flow.png": (FlowView(att), 1000),  # the threshold chosen for a readable graph
    }
    for name, (view, width) in shots.items():
        wp = WidgetPage(browser, view, width=width)
        try:
            wp.wait_drawn()
            assert wp.canvas_stats()["ink"] > 5000 and wp.errors() == []
            wp.screenshot(img_dir / name)
        finally:
            wp.close()


def test_large_graphs_draw_the_strongest_edges_and_say_so(browser):
    view = FlowView(structured(12, 12, 128, seed=1), threshold=0.05)
    assert view.n_edges_total > 5000 and view.n_edges <= 12 * 400
    assert view.n_edges == sum(min(400, c) for c in np.bincount([u[0] for u, _ in view.graph.edges()]))
    wp = WidgetPage(browser, view, width=1000)
    try:
        wp.wait_drawn(timeout=30_000)
        status = wp.page.locator("#root .attnkit-status").text_content()
        assert f"{view.n_edges} edges" in status
        assert f"drawing the strongest edges of each layer: {view.n_edges} of {view.n_edges_total}" in status
        assert wp.canvas_stats()["ink"] > 20_000 and wp.errors() == []
    finally:
        wp.close()


def test_collection_wedge_click_selects_the_head(browser):
    view = FlowView.collection([structured(4, 6, n, seed=n) for n in (12, 16)], threshold=0.5)
    wp = WidgetPage(browser, view, width=1000)
    try:
        wp.wait_drawn()
        status = wp.page.locator("#root .attnkit-status")
        assert status.text_content() == "2 inputs"
        # layer 2 (the second band from the outside), head 3 (the third wedge clockwise from the top)
        cx, cy = float(wp.data("cx")), float(wp.data("cy"))
        r_in, r_out = float(wp.data("r-in")), float(wp.data("r-out"))
        r = r_in + (r_out - r_in) * (4 - 1.5) / 4
        a = 2 * math.pi * 2.5 / 6
        wp.move(cx + r * math.sin(a), cy - r * math.cos(a))
        assert wp.tooltip().startswith("Head 2-3")
        wp.click(cx + r * math.sin(a), cy - r * math.cos(a))
        assert wp.saved() == [{"selected": [1, 2]}]
        assert status.text_content() == "2 inputs \u00b7 selected 2-3"
        wp.apply_saved()
        assert view.selected == [1, 2]
        # a selection from Python (or a linked view) shows too
        view.selected = [0, 0]
        wp.push("selected")
        assert status.text_content() == "2 inputs \u00b7 selected 1-1"
        assert wp.errors() == []
    finally:
        wp.close()
