"""QKScatter in headless Chromium (software WebGL): points drawn, hover shows the token in
its sentence as text, a click and a lasso reach Python, the matrix view opens a head, keys
move the camera, dark theme."""

from __future__ import annotations

import io

import numpy as np
import pytest
from harness import WidgetPage

import attnkit as ak
from attnkit.core.qkstates import QKStates
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


def _cloud(n: int, seed: int = 5):
    """An embedding's table of ``n`` clustered points of one head (no model: the view's cost
    does not depend on where the points come from)."""
    import pandas as pd

    from attnkit.analysis import QKEmbedding
    from attnkit.core.results import HeadResult

    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 5, (40, 2))
    xy = centres[rng.integers(0, 40, n)] + rng.normal(0, 0.6, (n, 2))
    half = n // 2
    table = pd.DataFrame({"layer": 0, "head": 0, "item": np.tile(np.arange(half) // 20, 2),
                          "position": np.tile(np.arange(half) % 20, 2), "token": "w", "role": "word",
                          "kind": np.repeat(["query", "key"], half), "x": xy[:, 0], "y": xy[:, 1]})
    faith = HeadResult(pd.DataFrame({"spearman": [0.0]}, index=pd.MultiIndex.from_tuples([(0, 0)], names=["layer", "head"])))
    return QKEmbedding(table, {"heads": [[0, 0]], "method": "synthetic", "dims": 2}, faithfulness=faith)


# Pan and zoom with dispatched events; keep three pictures of the canvas: a frame while the
# camera moves (the last exact frame moved), the frame once it rests, and a fresh full draw
# at that view (a theme change forgets the kept frame and draws again); mean absolute
# differences per channel (0..255) between them.
MOVE_AND_COMPARE = """async () => {
  const root = document.querySelector('#root .attnkit');
  const c = document.querySelector('#root canvas'); const r = c.getBoundingClientRect();
  const frame = () => new Promise((res) => requestAnimationFrame(res));
  const pixels = () => c.getContext('2d').getImageData(0, 0, c.width, c.height).data.slice();
  const diff = (a, b) => { let s = 0; for (let i = 0; i < a.length; i++) s += Math.abs(a[i] - b[i]); return s / a.length; };
  const fullFrames = () => Number(root.dataset.fullFrames ?? 0);
  const before = pixels();
  const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
  window.dispatchEvent(new MouseEvent('mousemove', { clientX: cx, clientY: cy, bubbles: true }));
  await frame();
  c.dispatchEvent(new MouseEvent('mousedown', { clientX: cx, clientY: cy, bubbles: true, buttons: 1 }));
  for (let k = 1; k <= 12; k++) {
    window.dispatchEvent(new MouseEvent('mousemove', { clientX: cx + 3 * k, clientY: cy + 2 * k, bubbles: true, buttons: 1 }));
    if (k % 4 === 0) c.dispatchEvent(new WheelEvent('wheel', { clientX: cx, clientY: cy, deltaY: -30, ctrlKey: true, bubbles: true, cancelable: true }));  // Ctrl: zoom without a click first
    await frame();
  }
  window.dispatchEvent(new MouseEvent('mouseup', { clientX: cx + 36, clientY: cy + 24, bubbles: true }));
  await frame(); await frame();
  const moving = pixels();
  const movedFrames = Number(root.dataset.movedFrames ?? 0);
  const full0 = fullFrames();
  for (let i = 0; i < 400 && fullFrames() === full0; i++) await frame();
  await frame();
  const rested = pixels();
  const full1 = fullFrames();
  document.body.className = 'attnkit-test-' + Math.random();
  for (let i = 0; i < 400 && fullFrames() === full1; i++) await frame();
  await frame();
  const fresh = pixels();
  return { movedFrames, fullMs: Number(root.dataset.fullMs), settled: full1 > full0,
           restedVsFresh: diff(rested, fresh), movingVsFresh: diff(moving, fresh), beforeVsFresh: diff(before, fresh) };
}"""


def test_moving_frames_reuse_the_last_frame_and_the_resting_frame_is_exact(browser):
    view = ak.QKScatter(_cloud(200_000))
    wp = WidgetPage(browser, view, width=600, dpr=1)
    try:
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit')?.dataset.ready === '1'", timeout=30000)
        wp.page.wait_for_timeout(300)
        got = wp.page.evaluate(MOVE_AND_COMPARE)
        # software WebGL draws 200,000 points slower than a frame: moving frames reuse the last one
        assert got["fullMs"] > 12 and got["movedFrames"] > 0, got
        # the camera moved (the picture changed), a moving frame is not the exact picture ...
        assert got["beforeVsFresh"] > 5.0 and got["movingVsFresh"] > 1.0, got
        # ... and once the camera rests the points are drawn again: the same as a fresh draw
        assert got["settled"] and got["restedVsFresh"] < 0.02, got
        assert wp.errors() == []
    finally:
        wp.context.close()


#: The lasso's selection as the page's model holds it: the wire dict with its bytes in base64.
SELECTION_JS = """() => { const s = window.__model.get('selection');
  if (!s || !s.buffer) return null;
  const b = new Uint8Array(s.buffer.buffer, s.buffer.byteOffset, s.buffer.byteLength);
  let bin = ''; for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]);
  return { dtype: s.dtype, shape: s.shape, b64: btoa(bin) }; }"""


def test_store_backed_lasso_reads_back_and_a_click_opens_the_linked_heatmap(browser, tmp_path):
    """An embedding of a store (queries and keys only): a lasso in the page selects points,
    and the selection, handed to Python as the kernel would, reads back the rows of those
    points (tokens from the store); a click on a query opens its input's map, computed from
    the stored queries and keys, in the linked Heatmap."""
    import base64

    from attnkit.testing import tiny_model
    from tolerances import F16, assert_close

    texts = ["The cat sat on the mat.", "We read it.", "A dog barked twice at night."]
    model = tiny_model("bert")
    sset = ak.extract(model, texts, level="token", keep="qk", store=tmp_path / "s.zarr", progress=False)
    emb = ak.qk_embedding(sset, method="pca", progress=False)
    view = ak.QKScatter(emb, layer=1, head=0)
    box = view.linked_heatmap()
    wp = WidgetPage(browser, view, width=760)
    try:
        wp.page.wait_for_function("() => document.querySelector('#root .attnkit')?.dataset.ready === '1'", timeout=15000)
        n = view.n_points
        assert wp.data("points") == str(n)
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
        got = wp.page.evaluate(SELECTION_JS)
        assert got is not None and got["dtype"] == "uint32"
        view.set_state({"selection": {"dtype": "uint32", "shape": got["shape"],
                                      "buffer": base64.b64decode(got["b64"])}})
        sel = view.selected
        left = [j for j in range(n) if _screen(view, wp, j)[0] < size / 2 - 8]
        right = [j for j in range(n) if _screen(view, wp, j)[0] > size / 2 + 8]
        drawn = read(view.selection).tolist()
        assert len(sel) == len(drawn) >= 0.8 * len(left) and not set(drawn) & set(right)
        # the rows read back are the embedding's rows of those drawn points
        rows = emb.head_rows(1, 0)[drawn]
        assert sel.rows.tolist() == rows.tolist()
        assert sel["token"].tolist() == emb.table["token"].to_numpy()[rows].tolist()
        # a click on a query point: the page sets `clicked`, the kernel opens its input's map
        i = next(j for j in range(n) if emb.column("kind", emb.head_rows(1, 0)[j : j + 1])[0] == "query"
                 and 20 < _screen(view, wp, j)[0] < size - 20 and 20 < _screen(view, wp, j)[1] < size - 20)
        x, y = _screen(view, wp, i)
        wp.page.keyboard.press("Escape")
        wp.click(x, y)
        wp.page.wait_for_timeout(300)
        clicks = [c["clicked"] for c in wp.saved() if "clicked" in c]
        assert clicks, wp.saved()
        view.set_state({"clicked": clicks[-1]})
        p = view.point(clicks[-1])
        heat = box.children[0]
        assert type(heat).__name__ == "Heatmap" and f"item {p['item']}, head 2-1" in heat.title
        eager = model.attend(texts[p["item"]])
        assert heat.tokens == eager.tokens
        assert_close(heat.matrix, eager.map(1, 0), F16, scale=1)
        assert wp.errors() == []
    finally:
        wp.context.close()
