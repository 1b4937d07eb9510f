"""Each widget rendered in headless Chromium from a stand-in anywidget model: pixels drawn,
hover text, click → trait change seen by Python, tokens shown as text only.

Screenshots go to ``img_dir`` (a temporary folder; ``ATTNKIT_IMG_DIR=docs/img`` refreshes the
README's pictures).
"""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest
from harness import WidgetPage
from patterns import structured

import attnkit
from attnkit.widgets import ClusterView, HeadGrid, HeadMap, Heatmap
from tolerances import assert_close, F32

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"


def tiny_attention() -> attnkit.Attention:
    """2 layers × 2 heads over 8 tokens; head (0, 1) holds exact float16 values."""
    tokens = ["[CLS]", "the", XSS, "cat", SCRIPT, "sat", ".", "[SEP]"]
    n = len(tokens)
    maps = np.full((2, 2, n, n), 1.0 / n, dtype=np.float32)
    m = np.zeros((n, n), dtype=np.float32)
    m[:, 0] = 0.375
    m[:, n - 1] = 0.0
    for i in range(n):
        m[i, (i + 1) % n] += 0.625  # "next token", wrapping to [CLS]
    m /= m.sum(axis=1, keepdims=True)
    maps[0, 1] = m
    roles = ["cls"] + ["word"] * 6 + ["sep"]
    return attnkit.Attention(maps, tokens=tokens, roles=roles, word_ids=[-1, 0, 1, 2, 3, 4, 5, -1],
                             words=tokens[1:-1])


def cell_point(wp: WidgetPage, row: int, col: int, n: int) -> tuple[float, float]:
    left = float(wp.data("plot-left"))
    top = float(wp.data("plot-top"))
    size = float(wp.data("plot-size"))
    return left + (col + 0.5) * size / n, top + (row + 0.5) * size / n


def grid_point(wp: WidgetPage, layer: int, head: int) -> tuple[float, float]:
    cell = float(wp.data("cell"))
    x = float(wp.data("grid-left")) + head * float(wp.data("pitch-x")) + cell / 2
    y = float(wp.data("grid-top")) + layer * float(wp.data("pitch-y")) + cell / 2
    return x, y


# ---------------------------------------------------------------- Heatmap
def test_heatmap_draws_hovers_and_steps(browser, img_dir):
    att = tiny_attention()
    hm = Heatmap(att, layer=0, head=1)
    wp = WidgetPage(browser, hm, width=640)
    try:
        wp.wait_drawn()
        n = len(att)
        size = float(wp.data("plot-size"))
        plot = wp.canvas_stats(float(wp.data("plot-left")), float(wp.data("plot-top")), size, size)
        assert plot["ink"] > 0.9 * plot["pixels"]  # every cell painted (Blues is never white)
        assert plot["colours"] >= 3

        # Row "the" (1) attends to "<img ...>" (2) with 0.625 (exactly representable).
        wp.move(*cell_point(wp, 1, 2, n))
        text = wp.tooltip()
        assert text.startswith("attention: 0.625") and "the" in text and XSS in text
        wp.move(*cell_point(wp, 4, 7, n))
        text = wp.tooltip()
        assert text.startswith("attention: 0from") and SCRIPT in text and "[SEP]" in text

        # Head 1 is the last of 2 heads: "next" is disabled, "previous" steps to head 0.
        assert wp.page.locator("button[title='next head']").is_disabled()
        wp.page.locator("button[title='previous head']").click()
        assert wp.saved()[-1] == {"head": 0}
        wp.apply_saved()
        assert (hm.layer, hm.head) == (0, 0)
        assert_close(hm.matrix, att.maps[0, 0], F32)
        drawn = int(wp.data("drawn"))
        wp.push("overview_max", "head", "title", "top", "top_nosink")
        wp.wait_drawn(drawn + 1)
        wp.move(*cell_point(wp, 1, 2, n))
        assert "0.125" in wp.tooltip()  # uniform head: 1/8
        assert wp.errors() == []
    finally:
        wp.close()


def test_heatmap_512_tokens_zooms_and_stays_readable(browser, img_dir):
    att = structured(2, 2, 512, seed=1)
    hm = Heatmap(att, layer=0, head=0)
    assert hm.overview_max["shape"] == [512, 512] and hm.overview_max["dtype"] == "float32"  # exact
    wp = WidgetPage(browser, hm, width=760)
    try:
        wp.wait_drawn()
        size = float(wp.data("plot-size"))
        left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
        stats = wp.canvas_stats(left, top, size, size)
        assert stats["ink"] > 0.9 * stats["pixels"]
        # Zoom into the top-left with the wheel: the cell under a fixed pixel changes to a
        # cell nearer the origin, and labels of single rows become readable.
        probe = (size * 0.5, size * 0.5)
        wp.move(left + probe[0], top + probe[1])
        before = wp.tooltip()
        wp.move(left + 2, top + 2)
        drawn = int(wp.data("drawn"))
        wp.page.mouse.down()  # a click on the map lets the wheel zoom (the page scrolls otherwise)
        wp.page.mouse.up()
        for _ in range(6):
            wp.page.mouse.wheel(0, -400)
        wp.wait_drawn(drawn + 1)
        wp.page.wait_for_timeout(100)
        wp.move(left + probe[0], top + probe[1])
        after = wp.tooltip()
        assert before and after and before != after
        pos = int(after.split("(#")[1].split(")")[0])  # from-token position after zoom
        assert pos < 256
        wp.screenshot(img_dir / "heatmap_512_zoomed.png")
        # Double-click fits again.
        wp.page.mouse.dblclick(wp.canvas.bounding_box()["x"] + left + 5, wp.canvas.bounding_box()["y"] + top + 5)
        wp.page.wait_for_timeout(100)
        wp.move(left + probe[0], top + probe[1])
        assert wp.tooltip() == before
        assert wp.errors() == []
    finally:
        wp.close()


def test_heatmap_screenshot_and_difference_is_diverging(browser, img_dir):
    att = structured(12, 12, 24, seed=3)
    wp = WidgetPage(browser, Heatmap(att, layer=2, head=3), width=720)
    try:
        wp.wait_drawn()
        wp.screenshot(img_dir / "heatmap.png")
    finally:
        wp.close()
    other = structured(12, 12, 24, seed=4)
    other.maps[2, 3] = other.maps[2, 3][:, ::-1]  # a different pattern in one head
    diff = Heatmap.difference(att, other, layer=2, head=3, names=("pre-trained", "fine-tuned"))
    assert diff.diverging
    wp = WidgetPage(browser, diff, width=720)
    try:
        wp.wait_drawn()
        size = float(wp.data("plot-size"))
        reds, blues = wp.page.evaluate(
            """([x, y, s]) => {
                const c = document.querySelector('#root canvas'); const r = c.width / c.clientWidth;
                const d = c.getContext('2d').getImageData(x * r, y * r, s * r, s * r).data;
                let reds = 0, blues = 0;
                for (let i = 0; i < d.length; i += 4) {
                  if (d[i] > d[i + 2] + 60) reds++;
                  if (d[i + 2] > d[i] + 60) blues++;
                }
                return [reds, blues];
            }""",
            [float(wp.data("plot-left")), float(wp.data("plot-top")), size],
        )
        assert reds > 1000 and blues > 1000  # both signs drawn, in different hues
        n = 24
        wp.move(*cell_point(wp, 5, 4, n))
        want = float(att.maps[2, 3, 5, 4] - other.maps[2, 3, 5, 4])
        text = wp.tooltip()
        assert "pre-trained \u2212 fine-tuned" in text
        got = float(text.split("fine-tuned: ", 1)[1].split("from")[0])
        assert got == pytest.approx(want, rel=2e-3, abs=2e-3)
        wp.screenshot(img_dir / "heatmap_difference.png")
    finally:
        wp.close()


# ---------------------------------------------------------------- HeadGrid
def test_headgrid_thumbnails_hover_click_and_link(browser, img_dir):
    att = structured(12, 12, 40, seed=2)
    rng = np.random.default_rng(0)
    metric = pd.DataFrame(
        {"entropy": rng.uniform(0.5, 3.5, 144)},
        index=pd.MultiIndex.from_product([range(12), range(12)], names=["layer", "head"]),
    )
    grid = HeadGrid(att, metric=metric)
    hm = grid.link(Heatmap(att))
    seen = []
    grid.observe(lambda ch: seen.append(ch["new"]), names="selected")
    wp = WidgetPage(browser, grid, width=900)
    try:
        wp.wait_drawn()
        assert wp.data("thumbnails") == "144"
        cell = float(wp.data("cell"))
        blank = []
        for l in range(12):
            for h in range(12):
                x, y = grid_point(wp, l, h)
                s = wp.canvas_stats(x - cell / 2 + 1, y - cell / 2 + 1, cell - 2, cell - 2)
                if s["ink"] < 0.95 * s["pixels"] or s["colours"] < 2:
                    blank.append((l, h))
        assert blank == []  # all 144 thumbnails drawn, each with a pattern

        wp.move(*grid_point(wp, 2, 4))
        text = wp.tooltip()
        assert "Head 3-5" in text and "entropy" in text
        assert f"{metric.loc[(2, 4), 'entropy']:.3g}"[:4] in text

        wp.click(*grid_point(wp, 6, 9))
        assert wp.saved()[-1] == {"selected": [6, 9]}
        wp.apply_saved()
        assert grid.selected == [6, 9] and seen[-1] == [6, 9]
        assert (hm.layer, hm.head) == (6, 9)  # the linked heatmap followed
        assert_close(hm.matrix, att.maps[6, 9], F32)
        assert "selected 7-10" in wp.page.locator("#root .attnkit-status").text_content()
        wp.move(5, 5)
        wp.screenshot(img_dir / "headgrid.png")

        # Python selecting a head redraws the outline in the browser.
        drawn = int(wp.data("drawn"))
        grid.selected = [0, 0]
        wp.push("selected")
        wp.wait_drawn(drawn + 1)
        assert "selected 1-1" in wp.page.locator("#root .attnkit-status").text_content()
        assert wp.errors() == []
    finally:
        wp.close()


def test_headgrid_512_tokens(browser):
    att = structured(12, 12, 512, seed=5)
    grid = HeadGrid(att)
    assert grid.size == 105 and grid.thumbs["shape"] == [12, 12, 105, 105]  # within 1.6 MB
    wp = WidgetPage(browser, grid, width=900)
    try:
        wp.wait_drawn()
        x, y = grid_point(wp, 0, 0)
        cell = float(wp.data("cell"))
        s = wp.canvas_stats(x - cell / 2 + 1, y - cell / 2 + 1, cell - 2, cell - 2)
        assert s["ink"] > 0.95 * s["pixels"] and s["colours"] > 2
        assert wp.errors() == []
    finally:
        wp.close()


# ---------------------------------------------------------------- HeadMap
def test_headmap_hover_click(browser, img_dir):
    L, H = 6, 12
    idx = pd.MultiIndex.from_product([range(L), range(H)], names=["layer", "head"])
    acc = np.linspace(0.1, 0.9, L * H)
    df = pd.DataFrame({"accuracy": acc, "count": np.arange(L * H)}, index=idx).drop(index=(5, 11))
    hmap = HeadMap(df, value="accuracy", n_layers=L, n_heads=H)
    wp = WidgetPage(browser, hmap, width=700)
    try:
        wp.wait_drawn()
        assert wp.data("cells") == str(L * H)
        cell = float(wp.data("cell"))
        s = wp.canvas_stats(float(wp.data("grid-left")), float(wp.data("grid-top")), H * float(wp.data("pitch-x")), L * float(wp.data("pitch-y")))
        assert s["colours"] > 20
        wp.move(*grid_point(wp, 3, 7))
        text = wp.tooltip()
        assert "Head 4-8" in text and f"{acc[3 * H + 7]:.3f}"[:4] in text
        wp.move(*grid_point(wp, 5, 11))
        assert "n/a" in wp.tooltip()  # the dropped head has no value
        wp.click(*grid_point(wp, 1, 2))
        wp.apply_saved()
        assert hmap.selected == [1, 2]
        assert cell > 20
        wp.move(1, 1)
        wp.screenshot(img_dir / "headmap.png")
        assert wp.errors() == []
    finally:
        wp.close()


# ---------------------------------------------------------------- ClusterView
def test_cluster_view_hover_click_and_text_only_labels(browser, img_dir):
    L, H = 12, 12
    rng = np.random.default_rng(7)
    kinds = ["broad", "previous token", "[SEP]", XSS]
    labels = [kinds[(l * 7 + h * 3) % 4] for l in range(L) for h in range(H)]
    centres = {k: c for k, c in zip(kinds, [(0, 0), (4, 0), (0, 4), (4, 4)])}
    emb = np.array([centres[k] for k in labels], dtype=float) + rng.normal(0, 0.6, (L * H, 2))
    cv = ClusterView(emb, labels=labels, n_heads=H, label_name="behaviour")
    wp = WidgetPage(browser, cv, width=760)
    try:
        wp.wait_drawn()
        assert wp.data("points") == str(L * H)
        # Hover head (3, 5) where the front end's fit puts it (equal units, 30 px padding: cluster.ts PAD,
        # centred).
        target = 3 * H + 5
        size = float(wp.canvas.bounding_box()["width"])
        x0, x1 = emb[:, 0].min(), emb[:, 0].max()
        y0, y1 = emb[:, 1].min(), emb[:, 1].max()
        scale = min((size - 60) / (x1 - x0), (size - 60) / (y1 - y0))
        px = size / 2 + (emb[target, 0] - (x0 + x1) / 2) * scale
        py = size / 2 - (emb[target, 1] - (y0 + y1) / 2) * scale
        wp.move(px, py)
        text = wp.tooltip()
        assert text.startswith("Head 4-6") and labels[target] in text
        wp.click(px, py)
        wp.apply_saved()
        assert cv.selected == [3, 5]
        legend = wp.page.locator("#root .attnkit-legend").text_content()
        assert XSS in legend and "behaviour" in legend
        assert wp.page.locator("#root img").count() == 0
        wp.move(1, 1)
        wp.screenshot(img_dir / "cluster.png")
        assert wp.errors() == [] and wp.alerts() == 0
    finally:
        wp.close()


def drag(wp: WidgetPage, x: float, y: float, dx: float, dy: float) -> str:
    """Press at canvas pixel (x, y), move by (dx, dy) in steps, release; the cursor mid-drag."""
    box = wp.canvas.bounding_box()
    wp.page.mouse.move(box["x"] + x, box["y"] + y)
    wp.page.mouse.down()
    wp.page.mouse.move(box["x"] + x + dx, box["y"] + y + dy, steps=6)
    cursor = wp.page.evaluate("() => document.querySelector('#root canvas').style.cursor")
    wp.page.mouse.up()
    return cursor


def test_drag_pans_the_heatmap_and_the_cluster_view(browser):
    hm = Heatmap(structured(1, 1, 64, seed=2))
    wp = WidgetPage(browser, hm, width=760)
    try:
        wp.wait_drawn()
        wp.page.get_by_role("button", name="zoom in").click()
        wp.page.get_by_role("button", name="zoom in").click()
        # data-view is written when the view is drawn, a frame after the click: wait for it
        view = wp.wait_data("view", "(v) => Number(v.split(',')[2]) === 16")
        x0, y0, size = map(float, view.split(","))
        assert size == 16
        plot = float(wp.data("plot-size"))
        left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
        assert drag(wp, left + plot / 2, top + plot / 2, -plot / 4, -plot / 8) == "grabbing"
        # frames drawn during the drag show part of the pan: wait for the whole pan drawn
        view = wp.wait_data("view", """(v, [x0, y0, size]) => { const [x, y, s] = v.split(',').map(Number);
            return s === size && Math.abs(x - x0 - size / 4) < 0.5 && Math.abs(y - y0 - size / 8) < 0.5; }""",
            [x0, y0, size])
        x1, y1, size1 = map(float, view.split(","))
        # dragging the map left and up shows cells to the right and below: a quarter and an eighth of the view
        assert size1 == size and abs((x1 - x0) - size / 4) < 0.5 and abs((y1 - y0) - size / 8) < 0.5
        assert wp.errors() == []
    finally:
        wp.close()

    emb = np.random.default_rng(3).normal(0, 1, (16, 2))
    cv = ClusterView(emb, n_heads=4)
    wp = WidgetPage(browser, cv, width=760)
    try:
        wp.wait_drawn()
        wp.page.get_by_role("button", name="zoom in").click()
        wp.frame()  # the zoomed picture drawn
        before = wp.page.evaluate("() => document.querySelector('#root canvas').toDataURL()")
        size = float(wp.data("plot-size"))
        assert drag(wp, size / 2, size / 2, 60, 30) == "grabbing"
        wp.frame()  # the panned picture drawn
        after = wp.page.evaluate("() => document.querySelector('#root canvas').toDataURL()")
        assert after != before and wp.data("zoom") == "2.000"
        assert wp.saved() == []  # the click that ends a drag selects nothing
        assert wp.errors() == []
    finally:
        wp.close()


# ---------------------------------------------------------------- text only
def test_tokens_never_become_html(browser):
    att = tiny_attention()
    for widget in (Heatmap(att, layer=0, head=1), HeadGrid(att)):
        wp = WidgetPage(browser, widget, width=640)
        dialogs = []
        wp.page.on("dialog", lambda d, seen=dialogs: (seen.append(d.message), d.dismiss()))
        try:
            wp.wait_drawn()
            if isinstance(widget, Heatmap):
                wp.move(*cell_point(wp, 2, 4, len(att)))
                text = wp.tooltip()
                assert XSS in text and SCRIPT in text
            assert wp.page.locator("#root img, #root script").count() == 0
            wp.page.wait_for_timeout(200)
            assert wp.alerts() == 0 and dialogs == []
            assert wp.errors() == []
        finally:
            wp.close()


def test_static_html_fallback_shows_the_image_and_escapes_alt_text(browser):
    att = tiny_attention()
    data, _ = Heatmap(att, layer=0, head=1)._repr_mimebundle_()
    html = data["text/html"]
    assert XSS not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    png = base64.b64decode(data["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.set_content(f"<!doctype html><body>{html}</body>")
        page.wait_for_function("() => document.images[0] && document.images[0].complete")
        assert page.evaluate("() => document.images.length") == 1
        assert page.evaluate("() => document.images[0].naturalWidth") > 200
        assert XSS in page.evaluate("() => document.images[0].alt")
        page.wait_for_timeout(200)
        assert dialogs == []
    finally:
        page.close()


# ---------------------------------------------------------------- ScoreView
HEAD_NAME = re.compile(r"\b\d+-\d+\b")


def score_view_and_heatmap(top: int = 4):
    """A ScoreView of a tiny Llama's head 2-2 from the last token, with hostile token text,
    linked to a Heatmap of the same model."""
    from attnkit.testing import tiny_model

    model = tiny_model("llama", heads=4, hidden=32)
    text = "A student reads the new book in the library."
    n = len(model.encode(text))
    r = attnkit.score_attribution(model, text, layer=1, head=1, queries=[n - 1], top=top)
    r.meta["tokens"] = [XSS if i % 3 == 1 else SCRIPT if i % 3 == 2 else t
                        for i, t in enumerate(r.meta["tokens"])]
    view = attnkit.ScoreView(r, top=top)
    heatmap = view.link(Heatmap(model.attend(text)))
    return view, heatmap


def row_y(wp: WidgetPage, row: int) -> float:
    return float(wp.data("plot-top")) + (row + 0.5) * float(wp.data("row-height"))


def press(wp: WidgetPage, key: str) -> None:
    """Press ``key`` and wait for the frame that draws its effect."""
    drawn = int(wp.data("drawn") or 0)
    wp.page.keyboard.press(key)
    wp.wait_drawn(drawn + 1)


def scan_row(wp: WidgetPage, row: int) -> list[tuple[float, str]]:
    """(x, tooltip) along key row ``row``, one position per distinct tooltip."""
    width = float(wp.canvas.bounding_box()["width"])
    seen: list[tuple[float, str]] = []
    x = float(wp.data("plot-left")) + 1
    while x < width - 2:
        wp.move(x, row_y(wp, row))
        text = wp.tooltip()
        if text and (not seen or seen[-1][1] != text):
            seen.append((x, text))
        x += 2
    return seen


def test_score_view_renders_bars_as_text_only(browser, img_dir):
    view, _ = score_view_and_heatmap()
    wp = WidgetPage(browser, view, width=720)
    try:
        wp.wait_drawn()
        keys = view.key_positions
        assert wp.data("keys") == str(len(keys))
        s = wp.canvas_stats()
        assert s["ink"] > 1000 and s["colours"] > 4  # bars in several pair colours
        # the title (with the query token's hostile text) is text, shown as written
        title = wp.page.locator("#root .attnkit-title").text_content()
        assert title == view.title and (XSS in title or SCRIPT in title or "library" in title)
        # hover: the tooltip names the key's (hostile) token as text, the pair and its value
        row = next(r for r, k in enumerate(keys) if view.tokens[k] == XSS)
        found = scan_row(wp, row)
        assert found, f"no segment under the pointer on key row {row}"
        text = found[0][1]
        assert text.startswith("key <img") and str(keys[row]) in text
        assert "query component" in text and "contribution" in text
        assert wp.page.locator("#root img, #root script").count() == 0
        assert wp.alerts() == 0
        wp.move(1, 1)
        wp.screenshot(img_dir / "scoreview.png")
        assert wp.errors() == []
    finally:
        wp.close()


def test_score_view_keyboard_navigation(browser):
    view, heatmap = score_view_and_heatmap()
    wp = WidgetPage(browser, view, width=720)
    try:
        wp.wait_drawn()
        keys = view.key_positions
        wp.canvas.focus()
        press(wp, "ArrowDown")
        assert wp.data("row") == "1"
        press(wp, "End")
        assert wp.data("row") == str(len(keys) - 1)
        press(wp, "Home")
        assert wp.data("row") == "0"
        press(wp, "ArrowDown")
        wp.apply_saved()
        assert view.selected_key == keys[1]
        label = wp.canvas.get_attribute("aria-label")
        assert label.startswith(f"key {keys[1]}, score")
        # Right walks the row's segments; Enter on a head segment shows that head
        followed = None
        for _ in range(view.n_segments):
            label = wp.canvas.get_attribute("aria-label")
            heads = HEAD_NAME.findall(label.split(";", 1)[1].split(":")[0])
            if heads:
                followed = heads
                break
            press(wp, "ArrowRight")
        assert followed, "no head segment on key row 1"
        press(wp, "Enter")
        wp.apply_saved()
        # the key component's head when it is one, else the query component's
        name = followed[-1]
        layer, head = (int(x) - 1 for x in re.findall(r"\d+", name))
        assert view.clicked == [layer, head] and (heatmap.layer, heatmap.head) == (layer, head)
        # g groups a layer's heads; d shows the selected key's dimensions, and back
        group = wp.page.locator("#root button[title='Group components by layer (g)']")
        press(wp, "g")
        assert group.get_attribute("aria-pressed") == "true"
        assert "1-attn" in wp.canvas.get_attribute("aria-label") or wp.data("seg") == "0"
        press(wp, "d")
        assert wp.canvas.get_attribute("aria-label") == f"Per-dimension terms of key {keys[1]}"
        press(wp, "d")
        press(wp, "g")
        assert group.get_attribute("aria-pressed") == "false"
        assert wp.errors() == []
    finally:
        wp.close()


def test_score_view_click_head_segment_links_heatmap(browser):
    view, heatmap = score_view_and_heatmap()
    wp = WidgetPage(browser, view, width=720)
    try:
        wp.wait_drawn()
        target = None
        for row in range(len(view.key_positions)):
            for x, text in scan_row(wp, row):
                key_side = text.split("key component", 1)[1].split("contribution", 1)[0]
                query_side = text.split("query component", 1)[1].split("key component", 1)[0]
                name = (HEAD_NAME.findall(key_side) or HEAD_NAME.findall(query_side) or [None])[0]
                if name:
                    target = (row, x, name)
                    break
            if target:
                break
        assert target, "no head segment in any bar"
        row, x, name = target
        wp.click(x, row_y(wp, row))
        wp.apply_saved()
        layer, head = (int(v) - 1 for v in re.findall(r"\d+", name))
        assert view.clicked == [layer, head]
        assert (heatmap.layer, heatmap.head) == (layer, head)
        assert view.selected_key == view.key_positions[row]
        assert wp.errors() == []
    finally:
        wp.close()


# ---------------------------------------------------------------- composition map
def test_composition_map_names_cells_by_their_labels(browser):
    from attnkit.testing import tiny_model

    comp = attnkit.composition(tiny_model("llama", layers=3, heads=2), samples=4, progress=False)
    view = comp.widget(kind="k")
    wp = WidgetPage(browser, view, width=600)
    try:
        wp.wait_drawn()
        wp.move(*grid_point(wp, 1, 2))  # source 1-2 -> target 3-1
        text = wp.tooltip()
        assert text.startswith("source 1-2, target 3-1") and "k-composition" in text
        wp.move(*grid_point(wp, 2, 0))  # source 2-1 -> target 2-1: no such pair
        assert "n/a" in wp.tooltip()
        wp.click(*grid_point(wp, 0, 3))
        wp.apply_saved()
        assert view.selected == [0, 3]
        assert wp.page.locator("#root .attnkit-status").text_content() == "selected source 1-1, target 3-2"
        assert wp.errors() == []
    finally:
        wp.close()
