"""Render an attnkit widget in headless Chromium with a stand-in anywidget model.

The page gets exactly what Jupyter would send: the widget's ``_esm`` module text, its
``_css`` and its synced state, with ``Bytes`` traits delivered as ``DataView`` objects (as
ipywidgets does). ``model.save_changes()`` records the changes so a test can apply them to
the Python widget (``apply_saved``) and check that observers fire.

Custom messages from the view (tile requests) reach the Python widget's ``answer`` through an
exposed function, and its reply comes back as a ``msg:custom`` event with binary buffers, as
a kernel would send it (``kernel=False`` leaves the view without one).

Chromium is Debian's ``/usr/bin/chromium`` (never a downloaded browser); pages are served
from an in-memory route, so nothing touches the network.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("ATTNKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ORIGIN = "http://attnkit.test"

#: JupyterLab's dark theme, as far as the views read it (its --jp-* variables): a ``setup=``
#: script for :class:`WidgetPage`; ``DARK_BG`` is its page background.
DARK = """() => { const s = document.body.style;
  for (const [k, v] of Object.entries({'--jp-layout-color0': '#111111', '--jp-layout-color1': '#1e1e1e',
    '--jp-layout-color2': '#2b2b2b', '--jp-ui-font-color1': 'rgba(255,255,255,0.87)',
    '--jp-ui-font-color2': 'rgba(255,255,255,0.54)', '--jp-ui-font-color3': 'rgba(255,255,255,0.38)',
    '--jp-border-color1': '#555555', '--jp-border-color2': '#444444'})) s.setProperty(k, v);
  document.body.style.background = '#111111'; document.body.dataset.jpThemeLight = 'false'; }"""
DARK_BG = (17, 17, 17)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>attnkit widget</title>
<style>body { margin: 0; padding: 12px; background: #fff; } #root { width: %(width)dpx; }</style>
</head><body><div id="root"></div>
<script>
window.__saved = [];
window.__alerts = 0;
window.alert = () => { window.__alerts += 1; };
window.__errors = [];
window.addEventListener("error", (e) => window.__errors.push(String(e.message)));

class StandInModel {
  constructor(state) { this.state = state; this.handlers = new Map(); this.pending = {}; }
  get(k) { return this.state[k]; }
  set(k, v) {
    const old = this.state[k];
    this.state[k] = v;
    this.pending[k] = v;
    if (JSON.stringify(old) !== JSON.stringify(v)) this.emit(`change:${k}`);
  }
  save_changes() { window.__saved.push(JSON.parse(JSON.stringify(this.pending))); this.pending = {}; }
  on(ev, cb) { if (!this.handlers.has(ev)) this.handlers.set(ev, new Set()); this.handlers.get(ev).add(cb); }
  off(ev, cb) { if (ev && cb) this.handlers.get(ev)?.delete(cb); else if (ev) this.handlers.delete(ev); else this.handlers.clear(); }
  emit(ev, ...args) { for (const cb of this.handlers.get(ev) ?? []) cb(...args); }
  // Custom messages go to the Python widget (tests/browser/harness.py answers them) unless the
  // page plays an exported report (no kernel) or a test cut the kernel off.
  send(content) {
    window.__sent.push(content);
    if (!window.__kernel || window.__kernelOff) return;
    window.__kernel(JSON.stringify(content)).then((reply) => {
      if (!reply) return;
      const { content, buffers } = JSON.parse(reply);
      this.emit("msg:custom", content, buffers.map((b) => toView(b, 0)));
    });
  }
  // Test hook: what Python sending new state would do.
  update(changes) { for (const [k, v] of Object.entries(changes)) { this.state[k] = v; } for (const k of Object.keys(changes)) this.emit(`change:${k}`); }
}

window.__sent = [];
function toView(b64, offset) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length + offset);  // offset by one: DataViews need not be aligned
  for (let i = 0; i < bin.length; i++) bytes[i + offset] = bin.charCodeAt(i);
  return new DataView(bytes.buffer, offset, bin.length);
}
function decodeState(v) {
  if (v && typeof v === "object" && "__b64__" in v) return toView(v.__b64__, 1);
  if (Array.isArray(v)) return v.map(decodeState);
  if (v && typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = decodeState(x);
    return out;
  }
  return v;
}

const nextFrame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));

window.mount = async (esm, css, state) => {
  const style = document.createElement("style");
  style.textContent = css;
  document.head.appendChild(style);
  const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
  const tImport = performance.now();
  const mod = await import(url);
  const tLoaded = performance.now();
  const model = new StandInModel(decodeState(state));
  window.__model = model;
  const el = document.getElementById("root");
  const t0 = performance.now();
  performance.mark("attnkit:render");
  window.__cleanup = mod.default.render({ model, el });
  const tRendered = performance.now();
  await nextFrame();
  const tFrame = performance.now();
  return { import_ms: tLoaded - tImport, render_ms: tRendered - t0, first_frame_ms: tFrame - t0 };
};
</script></body></html>
"""


def chromium_available() -> bool:
    return Path(CHROMIUM).is_file() and shutil.which(CHROMIUM) is not None


def launch(playwright: Any) -> Any:
    """Launch Debian's Chromium with the project's flags."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def b64(v: Any) -> Any:
    """``v`` with every bytes value (at any depth) as ``{"__b64__": ...}``."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"__b64__": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dict):
        return {k: b64(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [b64(x) for x in v]
    return v


def wire_state(widget: Any) -> dict[str, Any]:
    """The widget's synced state as JSON, binary values as ``{"__b64__": ...}``."""
    return {k: b64(v) for k, v in widget.get_state().items() if k not in ("_esm", "_css")}


def state_bytes(widget: Any) -> int:
    """Bytes of the widget's state message: JSON of the plain values + the binary buffers
    (what Jupyter sends when the view opens; the JS module and CSS left out)."""
    total = 0

    def walk(v: Any) -> Any:
        nonlocal total
        if isinstance(v, (bytes, bytearray, memoryview)):
            total += len(v)
            return None
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    plain = {k: walk(v) for k, v in widget.get_state().items() if k not in ("_esm", "_css")}
    return total + len(json.dumps(plain).encode())


def kernel_reply(widget: Any, content_json: str) -> str | None:
    """What the kernel answers to a custom message from the view (JSON, buffers base64)."""
    answer = getattr(widget, "answer", None)
    if answer is None:
        return None
    from attnkit.widgets._codec import message

    content, buffers = message(answer(json.loads(content_json)))
    return json.dumps({"content": content,
                       "buffers": [base64.b64encode(b).decode("ascii") for b in buffers]})


class WidgetPage:
    """One browser page showing one widget."""

    def __init__(self, browser: Any, widget: Any, width: int = 900, dpr: float = 2.0,
                 height: int = 900, kernel: bool = True, setup: str | None = None) -> None:
        self.widget = widget
        self.context = browser.new_context(
            viewport={"width": width + 40, "height": height}, device_scale_factor=dpr
        )
        self.page = self.context.new_page()
        if kernel:
            self.page.expose_function("__kernel", lambda content: kernel_reply(widget, content))
        html = PAGE % {"width": width}
        self.page.route(f"{ORIGIN}/**", lambda route: route.fulfill(
            status=200, content_type="text/html", body=html))
        self.page.goto(f"{ORIGIN}/index.html")
        if setup:  # e.g. a notebook theme's CSS variables, set before the view reads them
            self.page.evaluate(setup)
        self.timings = self.page.evaluate(
            "([esm, css, state]) => window.mount(esm, css, state)",
            [widget._esm, widget._css, wire_state(widget)],
        )
        self.root = self.page.locator("#root .attnkit")
        self.canvas = self.page.locator("#root canvas").first

    # ------------------------------------------------------------- queries
    def data(self, name: str) -> str | None:
        return self.root.get_attribute(f"data-{name}")

    def wait_drawn(self, count: int = 1, timeout: float = 5000) -> None:
        self.page.wait_for_function(
            "(n) => Number(document.querySelector('#root .attnkit')?.dataset.drawn ?? 0) >= n",
            arg=count, timeout=timeout,
        )

    def wait_text(self, selector: str, pattern: str, timeout: float = 5000) -> str:
        """Wait until the text of ``selector`` (inside ``#root``) matches the regular expression
        ``pattern`` (JavaScript syntax, searched), and return that text. Views write their legend
        and status lines when they draw (on an animation frame), not in the event handler of the
        click or key that changed them: a test reads them after waiting here, never right after
        the action."""
        self.page.wait_for_function(
            """([sel, pat]) => new RegExp(pat).test(document.querySelector('#root ' + sel)?.textContent ?? '')""",
            arg=[selector, pattern], timeout=timeout,
        )
        return self.page.locator(f"#root {selector}").first.text_content() or ""

    def frame(self) -> None:
        """Wait for the next animation frame of the page. A click, key or drag queues the
        view's redraw (requestAnimationFrame) before it returns, and frame callbacks run in the
        order they were queued: once this returns, that redraw has run."""
        self.page.evaluate("() => nextFrame()")

    def wait_data(self, name: str, test: str, arg: Any = None, timeout: float = 5000) -> str:
        """Wait until ``test`` (a JavaScript function of the value and ``arg``) is true of the
        root's ``data-<name>`` ('' while absent), and return that value. Views set ``data-view``,
        ``data-level``... when they draw, an animation frame after the key or click that
        changed them: wait here for the value a test asserts, never read it right after the
        action."""
        key = "".join(w.capitalize() if i else w for i, w in enumerate(name.split("-")))
        self.page.wait_for_function(
            f"(arg) => ({test})(document.querySelector('#root .attnkit')?.dataset['{key}'] ?? '', arg)",
            arg=arg, timeout=timeout,
        )
        return self.data(name) or ""

    def canvas_stats(self, x: float = 0, y: float = 0, w: float | None = None,
                     h: float | None = None) -> dict[str, float]:
        """Pixel statistics of a CSS-pixel rectangle of the first canvas: count of pixels that
        are not blank (alpha > 0 and not white), and the number of distinct colours."""
        return self.page.evaluate(
            """([x, y, w, h]) => {
                const c = document.querySelector('#root canvas');
                const r = c.width / c.clientWidth;
                const W = w === null ? c.width : Math.round(w * r);
                const H = h === null ? c.height : Math.round(h * r);
                const d = c.getContext('2d').getImageData(Math.round(x * r), Math.round(y * r), W, H).data;
                let ink = 0; const colours = new Set();
                for (let i = 0; i < d.length; i += 4) {
                    if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) ink++;
                    if (colours.size < 5000) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                }
                return { ink, pixels: W * H, colours: colours.size, ratio: r, width: c.width, height: c.height };
            }""",
            [x, y, w, h],
        )

    def move(self, x: float, y: float) -> None:
        """Move the pointer to canvas-relative CSS pixel (x, y)."""
        box = self.canvas.bounding_box()
        self.page.mouse.move(box["x"] + x, box["y"] + y)

    def click(self, x: float, y: float) -> None:
        box = self.canvas.bounding_box()
        self.page.mouse.click(box["x"] + x, box["y"] + y)

    def tooltip(self) -> str:
        tip = self.page.locator("#root .attnkit-tooltip")
        return tip.text_content() if tip.is_visible() else ""

    def saved(self) -> list[dict[str, Any]]:
        return self.page.evaluate("() => window.__saved")

    def apply_saved(self) -> None:
        """Send the browser's saved changes to the Python widget, as the kernel would."""
        for change in self.saved():
            self.widget.set_state(change)
        self.page.evaluate("() => { window.__saved = []; }")

    def push(self, *names: str) -> None:
        """Send new trait values from the Python widget to the page, as the kernel would."""
        state = wire_state(self.widget)
        changes = {k: state[k] for k in names} if names else state
        self.page.evaluate("(changes) => window.__model.update(decodeState(changes))", changes)

    def errors(self) -> list[str]:
        return self.page.evaluate("() => window.__errors")

    def alerts(self) -> int:
        return self.page.evaluate("() => window.__alerts")

    def screenshot(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.root.screenshot(path=str(path))

    def close(self) -> None:
        self.context.close()


def dumps(obj: Any) -> str:
    return json.dumps(obj)
