"""CrossView in headless Chromium: links drawn, hover keeps one token's links and reads them
out, click and keyboard set `clicked` for Python, another head comes from the widget, and
tokens stay text."""

from __future__ import annotations

import numpy as np
import pytest
from harness import WidgetPage

import attnkit as ak
from attnkit.core.cross import CrossAttention

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def cross() -> CrossAttention:
    """1 layer x 2 heads; head 0 reverses (target i -> source 2 - i, weight 0.75), head 1 is
    uniform."""
    maps = np.full((1, 2, 3, 3), 1 / 3)
    maps[0, 0] = 0.125
    for i in range(3):
        maps[0, 0, i, 2 - i] = 0.75
    return CrossAttention(maps, ["<s>", XSS, "c"], ["cls", "word", "word"], [-1, 0, 1], [XSS, "c"],
                          ["x", "y", "z"], ["word", "word", "word"], [0, 1, 2], ["x", "y", "z"])


def spot(wp: WidgetPage, side: int, pos: int) -> tuple[float, float]:
    x = float(wp.data("left-x")) - 20 if side == 0 else float(wp.data("right-x")) + 20
    return x, float(wp.data("top")) + (pos + 0.5) * float(wp.data("row-h"))


def test_links_hover_click_and_keys(browser):
    view = ak.CrossView(cross(), head=0)
    wp = WidgetPage(browser, view, width=600)
    try:
        wp.wait_drawn()
        mid = (float(wp.data("left-x")) + float(wp.data("right-x"))) / 2
        stats = wp.canvas_stats(mid - 40, float(wp.data("top")), 80, 3 * float(wp.data("row-h")))
        assert stats["ink"] > 50  # links drawn between the columns
        wp.move(*spot(wp, 0, 1))
        text = wp.tooltip()
        assert XSS in text and "y" in text and "0.75" in text
        assert wp.page.locator("#root img").count() == 0 and wp.alerts() == 0
        wp.click(*spot(wp, 1, 2))
        assert wp.saved()[-1] == {"clicked": [1, 2]}
        wp.apply_saved()
        assert view.links()["target"].iloc[0] == "<s>"
        wp.canvas.focus()
        wp.page.keyboard.press("ArrowLeft")
        wp.page.keyboard.press("ArrowUp")
        wp.page.keyboard.press("Enter")
        assert wp.saved()[-1] == {"clicked": [0, 1]}
        wp.page.locator("select[aria-label='head']").select_option("2")
        assert wp.saved()[-1] == {"head": 1}
        assert wp.errors() == []
    finally:
        wp.close()
