"""The defects found trying every widget in four notebook front ends (issue: views that
scale, item 7), each checked in headless Chromium: keyboard kept out of the notebook,
labels not cut, no stray scrollbars, narrow layouts, dark themes, resizing, zoom."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from harness import DARK, WidgetPage
from patterns import structured

import attnkit
from attnkit.widgets import ClusterView, FlowView, HeadGrid, HeadMap, Heatmap

pytestmark = pytest.mark.browser


def all_views() -> dict[str, object]:
    att = structured(4, 6, 40, seed=1)
    idx = pd.MultiIndex.from_product([range(4), range(6)], names=["layer", "head"])
    rng = np.random.default_rng(0)
    return {
        "heatmap": Heatmap(att, layer=1, head=2),
        "headgrid": HeadGrid(att, metric=pd.DataFrame({"entropy": rng.random(24)}, index=idx)),
        "headmap": HeadMap(pd.DataFrame({"acc": rng.random(24)}, index=idx), value="acc"),
        "cluster": ClusterView(rng.normal(size=(24, 2)), n_heads=6),
        "flow": FlowView(att, threshold=0.4),
    }


def overflow(wp: WidgetPage) -> dict[str, float]:
    return wp.page.evaluate("""() => { const r = document.querySelector('#root .attnkit');
        const out = { root: r.scrollWidth - r.clientWidth, page: document.documentElement.scrollWidth - document.documentElement.clientWidth };
        out.children = Math.max(0, ...[...r.querySelectorAll('canvas, .attnkit-side, .attnkit-header')].map(
            e => e.getBoundingClientRect().right - r.getBoundingClientRect().right));
        return out; }""")


@pytest.mark.parametrize("width", [600, 700, 777, 850, 1024])
def test_no_view_is_wider_than_its_box(browser, width):
    for name, view in all_views().items():
        wp = WidgetPage(browser, view, width=width)
        try:
            wp.wait_drawn()
            o = overflow(wp)
            assert o["root"] <= 0 and o["page"] <= 0 and o["children"] <= 0.5, (name, width, o)
            assert wp.errors() == []
        finally:
            wp.close()


def test_narrow_flow_view_stacks_its_glyphs_and_spaces_ring_labels(browser):
    att = structured(12, 12, 28, seed=3)
    wp = WidgetPage(browser, FlowView(att, threshold=0.4), width=600)
    try:
        wp.wait_drawn()
        assert wp.data("stacked") == "true"
        box = wp.page.locator("#root canvas.attnkit-glyphs").bounding_box()
        root = wp.root.bounding_box()
        assert box["x"] >= root["x"] and box["x"] + box["width"] <= root["x"] + root["width"]
        # ring labels at least a line apart: (rOut - rIn) / 12 rings * label step >= 13 px
        r_in, r_out = float(wp.data("r-in")), float(wp.data("r-out"))
        spacing = (r_out - r_in) / 12
        step = max(1, -(-13 // max(1, int(spacing))), 2)
        assert spacing * step >= 13
        wide = WidgetPage(browser, FlowView(att, threshold=0.4), width=1100)
        try:
            wide.wait_drawn()
            assert wide.data("stacked") == "false"
        finally:
            wide.close()
    finally:
        wp.close()


def test_keyboard_in_controls_never_reaches_the_notebook(browser):
    view = FlowView(structured(4, 4, 20, seed=2), threshold=0.3)
    # a notebook listens for shortcuts on the document: count what reaches it
    setup = "() => { window.__notebookKeys = []; document.addEventListener('keydown', e => window.__notebookKeys.push(e.key)); }"
    wp = WidgetPage(browser, view, width=900, setup=setup)
    try:
        wp.wait_drawn()
        slider = wp.page.locator("#root input[type=range]")
        slider.focus()
        before = float(slider.input_value())
        wp.page.keyboard.press("ArrowRight")
        wp.page.keyboard.press("ArrowRight")
        assert float(slider.input_value()) == pytest.approx(before + 0.02)
        assert wp.saved()[-1] == {"threshold": pytest.approx(before + 0.02)}
        assert wp.page.evaluate("() => window.__notebookKeys") == []
        # JupyterLab's own rule: no shortcut for events from inside the widget
        assert wp.root.get_attribute("data-lm-suppress-shortcuts") == "true"
        # keys outside the widget still reach the notebook
        wp.page.evaluate("() => document.activeElement.blur()")
        wp.page.keyboard.press("ArrowDown")
        assert wp.page.evaluate("() => window.__notebookKeys") == ["ArrowDown"]
    finally:
        wp.close()


def test_hovered_heatmap_label_is_not_cut(browser):
    tokens = ["[CLS]", "because", "WWWWWWWWWWWWWWWWWW", "it", "was", "tired", "[SEP]"]
    maps = np.full((1, 1, 7, 7), 1 / 7, dtype=np.float32)
    hm = Heatmap(attnkit.Attention.from_maps(maps, tokens))
    wp = WidgetPage(browser, hm, width=640)
    try:
        wp.wait_drawn()
        left, top, size = (float(wp.data(k)) for k in ("plot-left", "plot-top", "plot-size"))
        # the bold label (as drawn when hovered) fits left of the plot, with its first letter
        need = wp.page.evaluate("""() => { const c = document.createElement('canvas').getContext('2d');
            c.font = 'bold 12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'; return c.measureText('because').width; }""")
        assert need + 6 <= left
        for row in (1, 2):  # a very wide token is shortened to fit, never cut at the edge
            wp.move(left + size / 14, top + (row + 0.5) * size / 7)
            wp.page.wait_for_timeout(50)
            ink = wp.canvas_stats(0, top + row * size / 7, 3, size / 7)
            assert ink["ink"] == 0  # nothing touches the left edge: no letter cut there
    finally:
        wp.close()


def test_selected_cluster_label_stays_inside(browser):
    emb = np.array([[0.0, 0.0], [1.0, 0.5], [10.0, 0.2], [0.5, 10.0]])
    cv = ClusterView(emb, n_heads=2)
    wp = WidgetPage(browser, cv, width=700)
    try:
        wp.wait_drawn()
        size = float(wp.data("plot-size"))
        cv.selected = [1, 0]  # the point at the right edge
        drawn = int(wp.data("drawn"))
        wp.push("selected")
        wp.wait_drawn(drawn + 1)
        # its bold "2-1" label is drawn to the left of the point, whole, not cut at the edge
        w = wp.page.evaluate("""() => { const c = document.createElement('canvas').getContext('2d');
            c.font = 'bold 10px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'; return c.measureText('2-1').width; }""")
        right = size - 30  # the fit's padding (cluster.ts PAD): the point's x
        ink = wp.canvas_stats(right - 12 - w, 0, w + 2, size)
        assert ink["ink"] > 10
    finally:
        wp.close()


def test_dark_theme_colours_come_from_the_notebook(browser):
    for name, view in all_views().items():
        wp = WidgetPage(browser, view, width=900, setup=DARK)
        try:
            wp.wait_drawn()
            bg = wp.page.evaluate("() => getComputedStyle(document.querySelector('#root .attnkit')).backgroundColor")
            assert bg == "rgb(17, 17, 17)", name
            # text drawn on the canvas is light (grey-white pixels: labels, not data colours)
            light = wp.page.evaluate("""() => { const c = document.querySelector('#root canvas');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
                for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 100 && d[i] > 120 && d[i + 1] > 120 && d[i + 2] > 120 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) < 12) n++;
                return n; }""")
            assert light > 20, name
            assert wp.errors() == []
        finally:
            wp.close()


def test_headmap_and_cluster_view_resize_and_cluster_view_zooms(browser):
    idx = pd.MultiIndex.from_product([range(6), range(8)], names=["layer", "head"])
    rng = np.random.default_rng(3)
    views = [HeadMap(pd.DataFrame({"v": rng.random(48)}, index=idx), value="v"),
             ClusterView(np.r_[rng.normal(size=(46, 2)), [[40.0, 40.0], [-40.0, -40.0]]], n_heads=8)]
    for view in views:
        wp = WidgetPage(browser, view, width=1000)
        try:
            wp.wait_drawn()
            wide = wp.canvas.bounding_box()["width"]
            drawn = int(wp.data("drawn"))
            wp.page.evaluate("() => { document.getElementById('root').style.width = '480px'; }")
            wp.wait_drawn(drawn + 1)
            wp.page.wait_for_timeout(100)
            narrow = wp.canvas.bounding_box()["width"]
            assert narrow < wide - 100 and overflow(wp)["root"] <= 0
        finally:
            wp.close()
    # two outliers squeeze the cloud: zoom into it (click, then wheel) and fit back
    cv = views[1]
    wp = WidgetPage(browser, cv, width=800)
    try:
        wp.wait_drawn()
        size = float(wp.data("plot-size"))
        box = wp.canvas.bounding_box()
        wp.page.mouse.click(box["x"] + size / 2, box["y"] + size / 2)
        for _ in range(5):
            wp.page.mouse.wheel(0, -300)
        wp.page.wait_for_function("() => Number(document.querySelector('#root .attnkit').dataset.zoom) > 4")
        wp.page.mouse.dblclick(box["x"] + 3, box["y"] + 3)
        wp.page.wait_for_function("() => Number(document.querySelector('#root .attnkit').dataset.zoom) === 1")
    finally:
        wp.close()


@pytest.mark.realmodel
def test_minilm_flow_view_is_readable_and_its_ratings_tell_words_apart(browser, minilm):
    """Readable by default (the threshold is chosen from the graph and the view says which)
    and influence ratings that differ between words (clamped at 5, as in the paper)."""
    import re

    from test_flow_browser import node_point

    att = minilm.attend("The cat sat on the mat because it was tired of chasing the mouse.")
    view = FlowView(att)
    n, layers = len(att.tokens), att.n_layers
    wp = WidgetPage(browser, view, width=1000)
    try:
        wp.wait_drawn()
        status = wp.page.locator("#root .attnkit-status").text_content()
        assert f"threshold {view.threshold:.2f} chosen for a readable graph: {view.n_edges} edges" in status
        assert 20 <= int(wp.data("edges")) <= 150
        rated = {}
        drawn = {v for _, v in view.graph.edges() if v[0] == 0}  # input tokens with an edge
        for pos, role in enumerate(att.roles):
            if (0, pos) not in drawn:
                continue
            wp.move(*node_point(wp, 0, pos, layers, n))
            found = re.search(r"rating (\d)/5", wp.tooltip())
            assert found, wp.tooltip()
            rated[pos] = (str(role), int(found.group(1)))
        assert rated[0][1] == 5  # [CLS], the source, clamped at 5
        assert len({r for role, r in rated.values() if role == "word"}) >= 3
        assert "clamped at 5" in wp.page.locator("#root").text_content()
        assert wp.errors() == []
    finally:
        wp.close()


def test_screenshots_go_to_a_temporary_folder(img_dir):
    """``make test`` writes no tracked file: pictures land in docs/img only when asked."""
    import os
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    if os.environ.get("ATTNKIT_IMG_DIR"):
        pytest.skip("ATTNKIT_IMG_DIR asks for pictures in a chosen folder")
    assert not img_dir.resolve().is_relative_to(repo)
