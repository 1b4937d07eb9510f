"""CheckpointScrubber in headless Chromium (issue 31): the slider's keys, play, a head picked
by click and by arrow keys, its attention drawn at the chosen step, Python stepping the view,
and tokens only ever as text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from harness import WidgetPage

import attnkit as ak
from attnkit.training import SeriesResult

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def series_result() -> SeriesResult:
    """3 checkpoints (steps 0, 10, 20) of 2 layers x 2 heads; head (1, 0)'s score rises
    0.1 -> 0.5 -> 0.9; the maps of 6 tokens are uniform over the visible keys."""
    steps = [0, 10, 20]
    idx = pd.MultiIndex.from_product([steps, [0, 1], [0, 1]], names=["step", "layer", "head"])
    ind = np.array([[0.0, 0.0, 0.1, 0.0], [0.0, 0.0, 0.5, 0.1], [0.0, 0.0, 0.9, 0.2]]).ravel()
    r = SeriesResult(pd.DataFrame({"induction": ind}, index=idx),
                     {"n_layers": 2, "n_heads": 2, "value": "induction"})
    r.steps = pd.DataFrame({"training_loss": [np.nan, 5.0, 0.5], "loss": [6.0, 5.5, 3.0],
                            "early_loss": [6.0, 6.0, 6.0], "late_loss": [6.0, 5.0, 0.4],
                            "icl": [0.0, -1.0, -5.6]}, index=pd.Index(steps, name="step"))
    n = 6
    causal = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    r.maps = np.broadcast_to(causal, (3, 2, 2, n, n)).astype(np.float16).copy()
    r.tokens = ["<bos>", "dat", XSS, "dif", "dat", "dif"]
    return r


def canvas_ink(wp: WidgetPage, k: int) -> int:
    return wp.page.evaluate(
        """(k) => { const c = document.querySelectorAll('#root canvas')[k];
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) ink++;
            return ink; }""", k)


def region_ink(wp: WidgetPage, k: int, x0: float, y0: float, x1: float, y1: float) -> int:
    """Inked pixels of canvas ``k`` inside a box given in CSS pixels."""
    return wp.page.evaluate(
        """([k, x0, y0, x1, y1]) => { const c = document.querySelectorAll('#root canvas')[k];
            const r = c.width / c.getBoundingClientRect().width;
            const d = c.getContext('2d').getImageData(Math.round(x0 * r), Math.round(y0 * r),
                Math.round((x1 - x0) * r), Math.round((y1 - y0) * r)).data; let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) ink++;
            return ink; }""", [k, x0, y0, x1, y1])


def test_scrubber_steps_plays_and_picks_heads(browser, img_dir):
    view = ak.CheckpointScrubber(series_result())
    wp = WidgetPage(browser, view, width=900)
    try:
        wp.wait_drawn()
        assert wp.data("checkpoints") == "3" and wp.data("step") == "20"
        assert "step 20 (3 of 3)" in wp.root.text_content()
        assert canvas_ink(wp, 0) > 500 and canvas_ink(wp, 1) > 500  # the curve and the map
        # the slider's own keys step through training, and Python hears it
        slider = wp.page.locator("#root input[type=range]")
        assert slider.get_attribute("aria-label") == "training step"
        slider.focus()
        wp.page.keyboard.press("Home")
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit').dataset.step === '0'")
        wp.page.keyboard.press("ArrowRight")
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit').dataset.step === '10'")
        wp.apply_saved()
        assert view.step == 10
        # a click on the map picks head 2-1; its attention at step 10 is drawn
        cell = float(wp.data("cell"))
        box = wp.page.locator("#root canvas").nth(1).bounding_box()
        wp.page.mouse.click(box["x"] + 40 + cell / 2, box["y"] + 28 + cell + cell / 2)
        wp.apply_saved()
        assert view.selected == [1, 0]
        assert "head 2-1: induction 0.5" in wp.page.locator("#root .attnkit-status").text_content()
        wp.page.wait_for_function("() => (document.querySelectorAll('#root canvas')[2]"
                                  ".getAttribute('aria-label') || '').startsWith('attention of head')")
        assert canvas_ink(wp, 2) > 1000
        heat = wp.page.locator("#root canvas").nth(2).get_attribute("aria-label")
        assert heat.startswith("attention of head 2-1 at step 10") and "6 tokens" in heat
        # the heatmap's rows and columns carry the 6 tokens, drawn as text in its margins
        canvas = wp.page.locator("#root canvas").nth(2)
        assert canvas.get_attribute("data-labels") == "6"
        margin = float(canvas.get_attribute("data-margin"))
        size = canvas.bounding_box()["width"] - margin
        assert region_ink(wp, 2, 0, 16 + margin, margin, 16 + margin + size) > 50  # rows
        assert region_ink(wp, 2, margin, 16, margin + size, 16 + margin) > 50  # columns
        # arrow keys on the focused map move the selected head
        wp.page.locator("#root canvas").nth(1).focus()
        wp.page.keyboard.press("ArrowRight")
        wp.apply_saved()
        assert view.selected == [1, 1]
        # Python steps the view
        view.show(0)
        wp.push("index")
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit').dataset.step === '0'")
        # play steps on by itself; pause stops it
        play = wp.page.locator("#root button", has_text="Play")
        play.click()
        wp.apply_saved()
        assert view.playing
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit').dataset.step !== '0'",
                                  timeout=5000)
        wp.page.locator("#root button", has_text="Pause").click()
        wp.apply_saved()
        assert not view.playing and wp.data("playing") == "false"
        wp.screenshot(img_dir / "checkpoint_scrubber.png")
        # the token with markup reached no HTML
        assert wp.page.locator("#root img").count() == 0 and wp.alerts() == 0
        assert wp.errors() == []
    finally:
        wp.close()
