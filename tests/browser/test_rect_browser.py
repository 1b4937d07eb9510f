"""Heatmap and HeadGrid of cross-attention in headless Chromium: a rectangle of target rows
over source columns, each axis labelled with its own tokens, hover naming both tokens and
the exact value of the (target, source) cell, blank past the rectangle's edge, zoomed tiles
of a long source, and the static PNG fallback."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from harness import WidgetPage

import attnkit as ak
from attnkit.core.cross import CrossAttention

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
TARGET = ["<pad>", XSS, "Hallo"]
SOURCE = ["Hello", "big", SCRIPT, "world", "</s>"]


def cross() -> CrossAttention:
    """1 layer x 2 heads, 3 target rows x 5 source columns. Head 0: row i puts 0.625 on
    column 2 i % 5 and 0.375 on the last column (exact in float16 and float32); head 1 is
    uniform (0.2)."""
    maps = np.full((1, 2, 3, 5), 0.2)
    maps[0, 0] = 0.0
    for i in range(3):
        maps[0, 0, i, (2 * i) % 5] += 0.625
        maps[0, 0, i, 4] += 0.375
    return CrossAttention(maps, TARGET, ["cls", "word", "word"], [-1, 0, 1], TARGET[1:],
                          SOURCE, ["word"] * 4 + ["sep"], [0, 1, 2, 3, -1], SOURCE[:4])


def point(wp: WidgetPage, row: float, col: float, side: int) -> tuple[float, float]:
    """Canvas point of cell (row, col) in a view of ``side`` cells a side."""
    left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
    size = float(wp.data("plot-size"))
    return left + (col + 0.5) * size / side, top + (row + 0.5) * size / side


def test_rectangular_heatmap_labels_hover_and_blank_edge(browser):
    hm = ak.Heatmap(cross(), layer=0, head=0)
    wp = WidgetPage(browser, hm, width=640)
    try:
        wp.wait_drawn()
        side = 5  # the view is the square of the longer side: 5 source columns
        size = float(wp.data("plot-size"))
        left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
        cell = size / side
        inside = wp.canvas_stats(left + 1, top + 1, size - 2, 3 * cell - 2)
        assert inside["colours"] >= 3  # three values painted over the 3 x 5 rectangle
        below = wp.canvas_stats(left + 2, top + 3 * cell + 2, size - 4, 2 * cell - 4)
        assert below["colours"] == 1  # past the last target row: blank

        # (target 1, source 2): 0.625 from XSS to SCRIPT, both named as text
        wp.move(*point(wp, 1, 2, side))
        text = wp.tooltip()
        assert text.startswith("attention: 0.625")
        assert "from (target)" in text and XSS in text and "to (source)" in text and SCRIPT in text
        wp.move(*point(wp, 0, 4, side))
        text = wp.tooltip()
        assert text.startswith("attention: 0.375") and "<pad>" in text and "</s>" in text
        wp.move(*point(wp, 2, 4, side))  # 2 * 2 % 5 = 4: 0.625 + 0.375
        text = wp.tooltip()
        assert text.startswith("attention: 1from") and "Hallo" in text and "</s>" in text
        wp.move(*point(wp, 0, 1, side))
        assert wp.tooltip().startswith("attention: 0from") and "<pad>" in wp.tooltip()
        wp.move(*point(wp, 4, 1, side))  # below the rectangle: no cell
        assert "attention" not in wp.tooltip()

        # the row labels are the target tokens, the column labels the source tokens
        for r, token in enumerate(TARGET):
            wp.move(left - 10, point(wp, r, 0, side)[1])
            assert token in wp.tooltip() and "target" in wp.tooltip()
        for c, token in enumerate(SOURCE):
            wp.move(point(wp, 0, c, side)[0], top - 10)
            assert token in wp.tooltip() and "source" in wp.tooltip()
        wp.move(left - 10, point(wp, 3.2, 0, side)[1])  # beside no target row
        assert wp.tooltip() == ""
        status = wp.page.locator("#root .attnkit-status").text_content()
        assert "of 3 target tokens" in status and "of 5 source tokens" in status
        assert wp.page.locator("#root img").count() == 0 and wp.alerts() == 0

        # the other head, pushed from Python: uniform 0.2
        hm.show(0, 1)
        drawn = int(wp.data("drawn"))
        wp.push("overview_max", "head", "title", "top", "top_nosink")
        wp.wait_drawn(drawn + 1)
        wp.move(*point(wp, 2, 3, side))
        assert wp.tooltip().startswith("attention: 0.2")
        assert wp.errors() == []
    finally:
        wp.close()


def test_long_source_zooms_into_exact_tiles(browser):
    """6 target rows over 1,100 source columns: the overview is pooled (level 2), zooming
    in asks the kernel for exact tiles of the rectangle, hover reads exact values."""
    t, s = 6, 1100
    maps = np.full((1, 1, t, s), 0.5 / (s - 1), dtype=np.float64)
    for i in range(t):
        maps[0, 0, i, 1000 + i] = 0.5 + 0.5 / (s - 1)
    tokens = [f"t{i}" for i in range(t)]
    source = [f"s{j}" for j in range(s)]
    att = CrossAttention(maps, tokens, ["word"] * t, list(range(t)), tokens, source,
                         ["word"] * s, list(range(s)), source)
    hm = ak.Heatmap(att)
    assert hm.pyramid["top"] > 0 and np.asarray(hm.overview).shape == (2, 275)
    wp = WidgetPage(browser, hm, width=700)
    try:
        wp.wait_drawn()
        left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
        wp.canvas.click(position={"x": left + 5, "y": top + 5})
        for _ in range(7):  # zoom in on the top right, around source 1,000
            wp.page.keyboard.press("+")
        # data-view is written when the zoomed view is drawn (a frame after the keys): wait for it
        view = wp.wait_data("view", "(v) => Number(v.split(',')[2]) < 20")
        size = float(wp.data("plot-size"))
        x0, y0, span = (float(v) for v in view.split(","))
        assert span < 20
        # move the view onto column 1,003 (arrow keys step an eighth of the view), each step
        # read once it is drawn
        while x0 + span < 1004:
            wp.page.keyboard.press("ArrowRight")
            view = wp.wait_data("view", "(v, old) => v !== old", view)
            x0, y0, span = (float(v) for v in view.split(","))
        while y0 > 0:
            wp.page.keyboard.press("ArrowUp")
            view = wp.wait_data("view", "(v, old) => v !== old", view)
            x0, y0, span = (float(v) for v in view.split(","))
        wp.page.wait_for_function(
            "() => document.querySelector('#root .attnkit').dataset.level === '0'")
        wp.page.wait_for_function(
            "() => document.querySelector('#root .attnkit').dataset.missing === '0'", timeout=5000)
        col, row = 1003, 3
        wp.move(left + (col - x0 + 0.5) * size / span, top + (row - y0 + 0.5) * size / span)
        wp.page.wait_for_function(
            "() => (document.querySelector('#root .attnkit-tooltip')?.textContent ?? '').includes('attention: 0.5')",
            timeout=5000)
        text = wp.tooltip()
        assert "t3" in text and "s1003" in text
        assert wp.errors() == []
    finally:
        wp.close()


def test_rectangular_head_grid_draws_and_reads_both_axes(browser):
    grid = ak.HeadGrid(cross(), progress=False)
    assert grid.thumbs["shape"] == [1, 2, 3, 5] and (grid.size, grid.size_cols) == (3, 5)
    wp = WidgetPage(browser, grid, width=500)
    try:
        wp.wait_drawn()
        assert wp.data("thumbnails") == "2"
        cell = float(wp.data("cell"))
        x = float(wp.data("grid-left"))
        y = float(wp.data("grid-top"))
        head0 = wp.canvas_stats(x + 1, y + 1, cell - 2, cell - 2)
        assert head0["ink"] > 0.9 * head0["pixels"] and head0["colours"] >= 3  # the pattern
        legend = wp.page.locator("#root .attnkit-legend-text").text_content()
        assert "3\u00d75 cells" in legend and "3 target \u00d7 5 source tokens" in legend
        wp.click(x + float(wp.data("pitch-x")) + cell / 2, y + cell / 2)
        assert wp.saved()[-1] == {"selected": [0, 1]}
        assert wp.errors() == []
    finally:
        wp.close()


def test_static_png_fallback_of_a_rectangle(browser):
    for widget in (ak.Heatmap(cross()), ak.HeadGrid(cross(), progress=False)):
        data, _ = widget._repr_mimebundle_()
        html = data["text/html"]
        assert XSS not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
        assert SCRIPT not in html
        png = base64.b64decode(data["image/png"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        page = browser.new_page()
        try:
            page.set_content(f"<!doctype html><body>{html}</body>")
            page.wait_for_function("() => document.images[0] && document.images[0].complete")
            assert page.evaluate("() => document.images[0].naturalWidth") > 100
            alt = page.evaluate("() => document.images[0].alt")
            assert XSS in alt and SCRIPT in alt  # both axes' tokens, as text
        finally:
            page.close()


def wide(t: int, s: int, peaks: list[int], values: list[float]) -> CrossAttention:
    """``t`` target rows over ``s`` source columns: row r puts ``values[r]`` on column
    ``peaks[r]`` (its argmax) and spreads the rest evenly over the other columns."""
    maps = np.empty((1, 1, t, s), dtype=np.float64)
    for r in range(t):
        maps[0, 0, r] = (1 - values[r]) / (s - 1)
        maps[0, 0, r, peaks[r]] = values[r]
    target = [f"t{i}" for i in range(t)]
    source = [f"s{j}" for j in range(s)]
    return CrossAttention(maps, target, ["word"] * t, list(range(t)), target, source,
                          ["word"] * s, list(range(s)), source)


def cell_text(wp: WidgetPage) -> tuple[float, str, str]:
    """The hovered cell's value and the (target, source) tokens the tooltip names."""
    import re

    text = wp.tooltip()
    m = re.match(r"attention: ([-0-9.e]+)from \(target\)(\S+) .*to \(source\)(\S+) ", text)
    assert m, text
    return float(m.group(1)), m.group(2), m.group(3)


@pytest.mark.parametrize("t, min_row", [(6, 16.0), (60, 10.0)])
def test_wide_rectangle_rows_are_readable(browser, t, min_row):
    """A summariser's cross-attention, ``t`` target rows over 1,100 source columns: the drawn
    rectangle covers at least a third of the plot's height and every row is at least
    ``min_row`` px tall (16 px: the least a wide map's rows get; 60 rows in a 740 px plot:
    the plot shared out, 12 px), the rows read back by hovering them, at the overview and
    zoomed in with ``+`` where the tiles are exact (level 0) and each row's argmax cell
    reads its exact value."""
    s = 1100
    peaks = [(523 + 7 * r) % s if r % 2 else (97 * r + 11) % s for r in range(t)]
    values = [0.25 + r / 128 for r in range(t)]  # exact in float16: each row its own value
    wp = WidgetPage(browser, ak.Heatmap(wide(t, s, peaks, values)), width=900)
    try:
        wp.wait_drawn()
        missing0 = "() => document.querySelector('#root .attnkit').dataset.missing === '0'"
        wp.page.wait_for_function(missing0, timeout=5000)
        left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
        size = float(wp.data("plot-size"))
        # the cells reach at least a third of the way down the plot: a strip across the
        # plot just above that line holds a row's low cells and its peak (two colours or
        # more), where a square view of 1,100 cells a side would leave it blank
        strip = wp.canvas_stats(left + 1, top + size / 3 - 4, size - 2, 2)
        assert strip["colours"] >= 2, strip
        row_px = float(wp.data("row-px") or 0)
        assert row_px >= min_row and t * row_px >= size / 3, (row_px, size)
        # the rectangle ends where its last row does: blank below (when it ends early)
        if t * row_px < size - 6:
            below = wp.canvas_stats(left + 1, top + t * row_px + 2, size - 2, size - t * row_px - 4)
            assert below["colours"] == 1, below
        col_px = size / s
        for r in range(t):
            y = top + (r + 0.5) * row_px
            wp.move(left + (peaks[r] + 0.5) * col_px, y)
            wp.page.wait_for_function(
                "() => /attention: [0-9]/.test(document.querySelector('#root .attnkit-tooltip')?.textContent ?? '')",
                timeout=5000)
            _, target, source = cell_text(wp)
            assert target == f"t{r}"  # the row under the pointer, exactly
            assert abs(int(source[1:]) - peaks[r]) <= 2  # columns are 0.7 px wide here
            wp.move(left - 10, y)  # the row's label names its target token
            assert wp.tooltip().startswith(f"t{r}") and "target" in wp.tooltip()

        # zoom in with +: 4 presses, 1,100 -> 69 columns: exact tiles, cells readable
        wp.canvas.click(position={"x": left + size / 2, "y": top + 2})
        for _ in range(4):
            wp.page.keyboard.press("+")
        # level 0 already holds after three presses (137 columns): wait for the fourth step
        # too (under load the page can read as level 0 between them)
        wp.page.wait_for_function(
            "() => { const d = document.querySelector('#root .attnkit').dataset;"
            " return d.level === '0' && Number((d.view ?? '').split(',')[2]) < 80; }", timeout=5000)
        wp.page.wait_for_function(missing0, timeout=5000)
        x0, y0, span = (float(v) for v in wp.data("view").split(","))
        assert span < 80
        row_px = float(wp.data("row-px") or 0)
        assert row_px >= max(min_row, size / span - 1e-9)
        checked = 0
        for r in range(t):
            if not (x0 <= peaks[r] < x0 + span and y0 <= r < y0 + size / row_px - 1):
                continue
            wp.move(left + (peaks[r] - x0 + 0.5) * size / span, top + (r - y0 + 0.5) * row_px)
            wp.page.wait_for_function(
                "(v) => (document.querySelector('#root .attnkit-tooltip')?.textContent ?? '').startsWith('attention: ' + v)",
                arg=f"{float(f'{values[r]:.4g}'):g}", timeout=5000)
            value, target, source = cell_text(wp)
            assert (target, source) == (f"t{r}", f"s{peaks[r]}")
            assert value == float(f"{values[r]:.4g}")  # the tooltip's 4 significant digits
            # its neighbour: the row's low weight, where a pooled bin would read the peak
            wp.move(left + (peaks[r] + 1 - x0 + 0.5) * size / span, top + (r - y0 + 0.5) * row_px)
            wp.page.wait_for_function(
                "(c) => (document.querySelector('#root .attnkit-tooltip')?.textContent ?? '').includes(c)",
                arg=f"s{peaks[r] + 1} ", timeout=5000)
            value, target, _ = cell_text(wp)
            assert target == f"t{r}" and value == pytest.approx((1 - values[r]) / (s - 1), rel=1e-3)
            checked += 1
        assert checked >= 3  # the odd rows' argmaxes lie in the zoomed view
        assert wp.errors() == []
    finally:
        wp.close()


def test_tall_rectangle_minimap_has_the_maps_shape(browser):
    """A tall cross-attention (200 target rows over 40 source columns): the minimap is the
    map's own shape, 40 / 200 of its height wide, and nothing is painted beside it (before:
    the square of the longer side, four fifths of it an empty box)."""
    from test_issue19_items_browser import grab

    rows, cols = 200, 40
    rng = np.random.default_rng(0)
    maps = rng.random((1, 1, rows, cols))
    maps /= maps.sum(-1, keepdims=True)
    tgt, src = [f"t{i}" for i in range(rows)], [f"s{j}" for j in range(cols)]
    att = CrossAttention(maps, tgt, ["word"] * rows, list(range(rows)), tgt, src, ["word"] * cols, list(range(cols)), src)
    wp = WidgetPage(browser, ak.Heatmap(att, layer=0, head=0), width=700)
    try:
        wp.wait_drawn()
        x, y, mini = (float(wp.data(k)) for k in ("mini-left", "mini-top", "mini-size"))
        mw, mh = mini * cols / rows, mini
        drawn, _ = grab(wp, x + 1, y + 1, mw - 2, mh - 2)
        assert (drawn[..., 3] > 0).mean() > 0.95  # the map itself fills its box
        beside, _ = grab(wp, x + mw + 3, y + 2, mini - mw - 4, mh - 4)
        assert (beside[..., 3] == 0).all()  # nothing past the map's last column
        assert (float(wp.data("mini-width")), float(wp.data("mini-height"))) == (mw, mh)
    finally:
        wp.close()


def tall(rows: int, cols: int, seed: int = 0) -> CrossAttention:
    """``rows`` target rows over ``cols`` source columns, each row random weights in
    [0.5, 1.5) normalised (every weight above 1e-3: the tooltip's 4 significant digits)."""
    rng = np.random.default_rng(seed)
    maps = rng.random((1, 1, rows, cols)) + 0.5
    maps /= maps.sum(-1, keepdims=True)
    tgt, src = [f"t{i}" for i in range(rows)], [f"s{j}" for j in range(cols)]
    return CrossAttention(maps, tgt, ["word"] * rows, list(range(rows)), tgt, src,
                          ["word"] * cols, list(range(cols)), src)


def tip_value(v: float) -> float:
    """A weight as the tooltip writes it: 4 significant digits."""
    return float(f"{v:.4g}")


@pytest.mark.parametrize("rows, cols", [(200, 40), (1100, 60)])
def test_tall_rectangle_columns_are_readable(browser, rows, cols):
    """A tall cross-attention (many more target rows than source columns): its columns are
    drawn wide (at least 16 px or the plot shared out, filling at least half the plot's width,
    every row shown), so the cells fill the plot instead of a sliver of the square of the
    longer side; hovering the middle cell reads its (row, column, weight) against the numpy
    map, the column labels name the source tokens, and zooming in until cells are as wide as
    those columns makes the cells square, exact at level 0."""
    att = tall(rows, cols)
    m = att.maps[0, 0]
    wp = WidgetPage(browser, ak.Heatmap(att), width=900)
    try:
        wp.wait_drawn()
        missing0 = "() => document.querySelector('#root .attnkit').dataset.missing === '0'"
        wp.page.wait_for_function(missing0, timeout=5000)
        left, top = float(wp.data("plot-left")), float(wp.data("plot-top"))
        size = float(wp.data("plot-size"))
        # the cells fill the plot's width: a strip down the middle of the plot holds many
        # colours (the square view of the longer side left it blank, the columns a sliver)
        strip = wp.canvas_stats(left + size / 2 - 1, top + 1, 2, size - 2)
        assert strip["colours"] >= 8, strip
        col_px = float(wp.data("col-px") or 0)
        row_px = float(wp.data("row-px") or 0)
        assert row_px == pytest.approx(size / rows)  # every row, the plot's height shared out
        assert col_px >= min(16.0, size / cols) - 1e-9 and cols * col_px >= size / 2, (col_px, size)
        assert wp.data("level") == "0"  # exact columns (the rows pooled where thinner than bins)
        strip = wp.canvas_stats(left + (cols - 0.5) * col_px - 1, top + 1, 2, size - 2)
        assert strip["colours"] >= 8, strip  # the last column, down every row
        if cols * col_px < size - 6:  # blank past the last column
            beside = wp.canvas_stats(left + cols * col_px + 2, top + 1, size - cols * col_px - 4, size - 2)
            assert beside["colours"] == 1, beside

        # the middle cell: its column exactly, its row within a pixel's worth, its exact weight
        r, c = rows // 2, cols // 2
        wp.move(left + (c + 0.5) * col_px, top + (r + 0.5) * row_px)
        wp.page.wait_for_function(
            "() => /attention: [0-9]/.test(document.querySelector('#root .attnkit-tooltip')?.textContent ?? '')",
            timeout=5000)
        value, target, source = cell_text(wp)
        assert source == f"s{c}" and abs(int(target[1:]) - r) <= 1, (target, source)
        assert value == tip_value(float(m[int(target[1:]), c]))
        wp.move(left + (c + 0.5) * col_px, top - 10)  # the column's label: its source token
        assert wp.tooltip().startswith(f"s{c}") and "source" in wp.tooltip()

        # zoom in (+ at the plot's centre): the columns keep their width until the cells
        # are as wide, then the cells are square
        wp.canvas.click(position={"x": left + size / 2, "y": top + size / 2})
        wp.page.keyboard.press("Escape")
        wp.canvas.focus()
        for _ in range(8):
            before = wp.data("view")
            wp.page.keyboard.press("+")
            wp.page.wait_for_function(
                "(v) => document.querySelector('#root .attnkit').dataset.view !== v", arg=before, timeout=5000)
            x0, y0, span = (float(v) for v in wp.data("view").split(","))
            cell = size / span
            if cell < col_px:  # still stretched: every column shown, each as wide as before
                assert float(wp.data("col-px")) == pytest.approx(col_px) and x0 == 0
                assert float(wp.data("row-px")) == pytest.approx(cell)
            else:
                break
        assert cell >= col_px
        assert float(wp.data("col-px")) == pytest.approx(cell) and float(wp.data("row-px")) == pytest.approx(cell)
        wp.page.wait_for_function(
            "() => document.querySelector('#root .attnkit').dataset.level === '0'", timeout=5000)
        wp.page.wait_for_function(missing0, timeout=5000)
        r, c = int(y0 + span / 2), int(x0 + span / 2)
        assert c < cols
        wp.move(left + (c - x0 + 0.5) * cell, top + (r - y0 + 0.5) * cell)
        wp.page.wait_for_function(
            "(c) => (document.querySelector('#root .attnkit-tooltip')?.textContent ?? '').includes(c)",
            arg=f"s{c} ", timeout=5000)
        wp.page.wait_for_function(
            "() => /attention: [0-9]/.test(document.querySelector('#root .attnkit-tooltip')?.textContent ?? '')",
            timeout=5000)
        value, target, source = cell_text(wp)
        assert (target, source) == (f"t{r}", f"s{c}") and value == tip_value(float(m[r, c]))
        assert wp.errors() == []
    finally:
        wp.close()


def test_tall_rectangle_head_grid_thumbnails_keep_every_column(browser):
    """HeadGrid of a tall cross-attention (200 target rows over 40 source columns): each
    thumbnail is the whole map drawn into its cell, not the square of its longer side (blank
    right of the 40 columns): row r's peak on column r * 40 // 200 runs from the cell's
    top-left corner to its bottom-right one."""
    from test_issue19_items_browser import grab

    rows, cols = 200, 40
    maps = np.full((1, 1, rows, cols), 0.2 / (cols - 1))
    for r in range(rows):
        maps[0, 0, r, r * cols // rows] = 0.8
    tgt, src = [f"t{i}" for i in range(rows)], [f"s{j}" for j in range(cols)]
    att = CrossAttention(maps, tgt, ["word"] * rows, list(range(rows)), tgt, src, ["word"] * cols, list(range(cols)), src)
    grid = ak.HeadGrid(att, progress=False)
    assert grid.thumbs["shape"] == [1, 1, 128, 40]
    wp = WidgetPage(browser, grid, width=500)
    try:
        wp.wait_drawn()
        cell = float(wp.data("cell"))
        x, y = float(wp.data("grid-left")), float(wp.data("grid-top"))
        px, _ = grab(wp, x + 1, y + 1, cell - 2, cell - 2)
        rgb = px[..., :3].astype(int)
        flat = rgb.reshape(-1, 3)
        colours, counts = np.unique(flat, axis=0, return_counts=True)
        low = colours[counts.argmax()]  # the spread weight: most of the map
        peak = np.abs(rgb - low).sum(-1) > 60
        h, w = peak.shape
        band = max(2, h // 10)
        top_x = np.nonzero(peak[:band].any(0))[0]
        bottom_x = np.nonzero(peak[-band:].any(0))[0]
        assert top_x.size and top_x.max() < 0.2 * w, top_x  # the first rows peak on the left
        assert bottom_x.size and bottom_x.min() > 0.8 * w, bottom_x  # the last rows on the right
        legend = wp.page.locator("#root .attnkit-legend-text").text_content()
        assert "128\u00d740 cells" in legend and "200 target \u00d7 40 source tokens" in legend
        assert wp.errors() == []
    finally:
        wp.close()
