"""QKScatter in headless Chromium (software WebGL): points drawn, hover shows the token in
its sentence as text, a click and a lasso reach Python, the matrix view opens a head, keys
move the camera, dark theme."""

from __future__ import annotations

import io

import numpy as np
import pytest
from harness import WidgetPage

import attnkit as ak
from attnkit.qkstates import QKStates
from attnkit.widgets._codec import read

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def _embedding():
    rng = np.random.default_rng(3)
    n = 40
    tokens = [f"w{i}" for i in range(n)]
    tokens[7] = XSS
    att = ak.Attention.from_maps(np.full((2, 2, n, n), 1 / n), tokens)
    q = rng.normal(size=(2, n, 8)).astype(np.float32)
    k = rng.normal(size=(2, n, 8)).astype(np.float32)
    att.qk = QKStates({0: q, 1: q[::-1].copy()}, {0: k, 1: k[::-1].copy()}, {0: 0.35, 1: 0.35})
    return ak.qk_embedding(att, method="pca", progress=False)


def _ink(wp) -> int:
    from PIL import Image

    png = wp.canvas.screenshot()
    px = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    bg = px[2, 2]
    return int((np.abs(px - bg).sum(-1) > 60).sum())


def _screen(view, wp, i):
    pts = read(view.points).astype(float)
    size = float(wp.canvas.bounding_box()["width"])
    return (pts[i, 0] + 1) / 2 * size, (1 - pts[i, 1]) / 2 * size


def test_draws_hovers_clicks_and_lassoes(browser, img_dir):
    emb = _embedding()
    view = ak.QKScatter(emb, layer=0, head=1)
    box = view.linked_heatmap()
    wp = WidgetPage(browser, view, width=760)
    try:
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit')?.dataset.ready === '1'", timeout=15000)
        assert wp.data("points") == str(80) and _ink(wp) > 200
        wp.page.screenshot(path=str(img_dir / "qkscatter.png"))
        # hover the query of the XSS token: its sentence comes back from the kernel, as text
        i = 7
        x, y = _screen(view, wp, i)
        wp.move(x, y)
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit-tooltip')?.textContent.includes('sentence')", timeout=8000)
        text = wp.tooltip()
        assert XSS in text and "query" in text
        assert wp.page.locator("#root img").count() == 0 and wp.page.evaluate("() => window.__alerts") == 0
        # a click on that query sets `clicked`; Python shows its sentence's map
        wp.click(x, y)
        wp.page.wait_for_timeout(300)
        wp.apply_saved()
        assert view.clicked == i and type(box.children[0]).__name__ == "Heatmap"
        # Shift + drag: a lasso round the left half selects points; Python reads them
        size = float(wp.canvas.bounding_box()["width"])
        b = wp.canvas.bounding_box()
        wp.page.keyboard.down("Shift")
        wp.page.mouse.move(b["x"] + 5, b["y"] + 5)
        wp.page.mouse.down()
        for px, py in [(size / 2, 5), (size / 2, size - 5), (5, size - 5), (5, 5)]:
            wp.page.mouse.move(b["x"] + px, b["y"] + py, steps=8)
        wp.page.mouse.up()
        wp.page.keyboard.up("Shift")
        wp.page.wait_for_timeout(500)
        got = wp.page.evaluate("() => { const s = window.__model.get('selection'); return s && s.buffer ? Array.from(new Uint32Array(s.buffer.buffer, s.buffer.byteOffset, s.shape[0])) : []; }")
        left = [j for j in range(80) if _screen(view, wp, j)[0] < size / 2 - 8]
        assert len(got) >= len(left) * 0.8 and len(got) < 80
        view.select(got)
        assert len(view.selected) == len(got) and set(view.selected["kind"]) <= {"query", "key"}
        assert wp.errors() == []
    finally:
        wp.context.close()


def test_matrix_view_opens_a_head_and_keys_move(browser):
    emb = _embedding()
    view = ak.QKScatter(emb, mode="matrix", color_by="position")
    wp = WidgetPage(browser, view, width=760,
                    setup="document.documentElement.style.setProperty('--attnkit-bg', '#111')")
    try:
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit')?.dataset.ready === '1'", timeout=15000)
        assert wp.data("mode") == "matrix" and wp.page.locator("#root .attnkit-qk-label").count() == 4
        assert "1-1" in wp.page.locator("#root .attnkit-qk-labels").text_content()
        assert len(view.categories) > 2  # positions in bins, a legend item each
        assert wp.page.locator("#root .attnkit-legend-item").count() == len(view.categories)
        wp.canvas.focus()
        wp.page.keyboard.press("+")
        wp.page.keyboard.press("ArrowLeft")
        wp.page.keyboard.press("ArrowUp")
        wp.page.wait_for_timeout(400)
        wp.page.keyboard.press("Enter")   # opens the panel under the centre
        wp.page.wait_for_timeout(200)
        wp.apply_saved()
        assert view.mode == "head" and (view.layer, view.head) in [(0, 0), (0, 1), (1, 0), (1, 1)]
        wp.push("mode", "points", "panels", "layer", "head", "n_points", "codes")
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit')?.dataset.mode === 'head'")
        assert wp.page.locator("#root .attnkit-qk-label").count() == 0
        assert wp.errors() == []
    finally:
        wp.context.close()
