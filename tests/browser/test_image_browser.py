"""ImageAttention in headless Chromium: the image and its overlay drawn, hover read-out, a
click or an arrow key choosing the query (seen by Python), the kernel's new matrix drawn,
special tokens listed as text only, the dark theme, and the view without a kernel."""

from __future__ import annotations

import numpy as np
import pytest
from harness import WidgetPage

import attnkit as ak

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def image_attention() -> ak.Attention:
    """1 layer x 2 heads over [CLS] and a 3 x 4 grid of patches of a 48 x 64 image. Head 0:
    every position attends to the patch at row 2, column 3 (0.75) and [CLS] (0.25); head 1:
    uniform. The class token is named like an HTML tag."""
    rows, cols, n = 3, 4, 13
    maps = np.full((1, 2, n, n), 1.0 / n, dtype=np.float32)
    maps[0, 0] = 0.0
    maps[0, 0, :, 0] = 0.25
    maps[0, 0, :, n - 1] = 0.75
    tokens = [XSS] + [f"{r},{c}" for r in range(rows) for c in range(cols)]
    att = ak.Attention.from_maps(maps, tokens, ["cls"] + ["word"] * (n - 1))
    image = np.zeros((48, 64, 3), dtype=np.uint8)
    image[:, :, 1] = np.linspace(0, 255, 64, dtype=np.uint8)[None, :]
    att.meta.update(grid=[rows, cols], first_patch=1, patch_size=16, image=image)
    return att


def patch_point(wp: WidgetPage, row: int, col: int, rows: int = 3, cols: int = 4) -> tuple[float, float]:
    left, top = float(wp.data("img-left")), float(wp.data("img-top"))
    w, h = float(wp.data("img-width")), float(wp.data("img-height"))
    return left + (col + 0.5) * w / cols, top + (row + 0.5) * h / rows


def test_draws_hovers_clicks_and_steps_with_keys(browser):
    view = ak.ImageAttention(image_attention(), head=0, opacity=0.8)
    wp = WidgetPage(browser, view, width=520)
    try:
        wp.wait_drawn()
        w, h = float(wp.data("img-width")), float(wp.data("img-height"))
        assert w / h == pytest.approx(64 / 48, rel=0.02)
        stats = wp.canvas_stats(float(wp.data("img-left")), float(wp.data("img-top")), w, h)
        assert stats["ink"] > 0.9 * stats["pixels"] and stats["colours"] > 20  # image + overlay
        assert float(wp.data("top")) == pytest.approx(0.75, abs=1e-3)
        wp.move(*patch_point(wp, 2, 3))
        text = wp.tooltip()
        assert "patch 2,3" in text and "0.75" in text
        # the class token has no patch: its value is listed as text, never as HTML
        legend = wp.page.locator("#root .attnkit-legend-text").text_content()
        assert XSS in legend and "0.25" in legend
        assert wp.page.locator("#root img").count() == 0 and wp.alerts() == 0

        wp.click(*patch_point(wp, 1, 2))
        assert wp.saved()[-1] == {"query": 1 + 4 + 2}
        wp.apply_saved()
        assert view.query == 7
        wp.canvas.focus()
        wp.page.keyboard.press("ArrowDown")
        assert wp.saved()[-1] == {"query": 1 + 2 * 4 + 2}
        wp.page.keyboard.press("Home")
        assert wp.saved()[-1] == {"query": 0}
        wp.apply_saved()
        assert wp.errors() == []
    finally:
        wp.close()


def test_another_head_comes_from_the_kernel(browser):
    view = ak.ImageAttention(image_attention(), head=0)
    wp = WidgetPage(browser, view, width=520)
    try:
        wp.wait_drawn()
        wp.page.locator("select[aria-label='head']").select_option("2")  # counted from 1
        assert wp.saved()[-1] == {"head": 1}
        wp.apply_saved()
        np.testing.assert_allclose(view.row(), 1 / 13, rtol=2e-3)
        wp.push("matrix", "head")
        # the view also redraws on its own (a tooltip refreshed after each draw): wait for the
        # draw of the pushed head, not for any next draw
        wp.page.wait_for_function(
            "(want) => Math.abs(Number(document.querySelector('#root .attnkit')?.dataset.top) - want) < 2e-3 * want",
            arg=1 / 13, timeout=5000)
        assert float(wp.data("top")) == pytest.approx(1 / 13, rel=2e-3)
        wp.page.locator("select[aria-label='overlay']").select_option("rollout")
        assert wp.saved()[-1] == {"overlay": "rollout"}
        assert wp.errors() == []
    finally:
        wp.close()


def test_dark_theme_and_no_kernel(browser):
    dark = """() => { document.body.style.setProperty('--jp-layout-color0', '#111111');
      document.body.style.setProperty('--jp-ui-font-color1', 'rgba(255,255,255,0.87)');
      document.body.style.background = '#111111';
      document.documentElement.dataset.attnkitKernel = 'none'; }"""
    view = ak.ImageAttention(image_attention())
    wp = WidgetPage(browser, view, width=520, kernel=False, setup=dark)
    try:
        wp.wait_drawn()
        bg = wp.page.evaluate("() => getComputedStyle(document.querySelector('#root .attnkit')).backgroundColor")
        assert bg == "rgb(17, 17, 17)"
        corner = wp.page.evaluate("""() => { const c = document.querySelector('#root canvas');
            return Array.from(c.getContext('2d').getImageData(1, 1, 1, 1).data); }""")
        assert corner[:3] == [17, 17, 17]  # the canvas is painted with the theme's background
        assert wp.page.locator("select[aria-label='head']").is_disabled()
        assert "kernel" in (wp.page.locator("select[aria-label='head']").get_attribute("title") or "")
        wp.click(*patch_point(wp, 0, 1))  # the query still works: the matrix is in the page
        # the click is handled in the page's next task; wait for it rather than race it
        wp.page.wait_for_function(
            "() => document.querySelector('#root .attnkit')?.dataset.query === '2'", timeout=5000)
        assert wp.data("query") == "2"
        assert wp.errors() == []
    finally:
        wp.close()
