"""Widget payload size and HeadGrid draw time, side by side with a bertviz-style payload.

For a 12-layer × 12-head input at n = 32, 128, 512 tokens, measured in one run:

- bytes a view sends to the browser: attnkit's HeadGrid (uint8 thumbnails, max-pooled to
  128 cells per side), HeadGrid at full resolution (``size=n``, no pooling) and one Heatmap
  (float16), against the JSON list of floats that a bertviz-style model view embeds for the
  same tensor (``json.dumps(maps.tolist())``, the tensor as float32);
- time to the first full draw of HeadGrid in headless Chromium (Debian's, hi-DPI 2×), from
  the view's ``render()`` call to the next presented frame, median of several page loads;
  next to it, the time Chromium needs only to ``JSON.parse`` the bertviz payload;
- time for the Python side to build the widget and its static PNG preview.

Writes the ``## widgets`` section of docs/benchmarks.md. Run from the repo root:

    python benchmarks/widgets.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "browser"))

from attnkit.widgets import HeadGrid, Heatmap  # noqa: E402
from harness import ORIGIN, WidgetPage, chromium_available, launch, wire_state  # noqa: E402
from patterns import structured  # noqa: E402

SIZES = (32, 128, 512)
L = H = 12
V8_MAX_STRING = 2**29 - 24  # characters; longer JSON cannot even be a JS string


def wire_bytes(widget, code: bool = False) -> int:
    """Bytes of the widget's state message: JSON of the plain traits + the binary buffers.

    ``code=True`` counts only the JS module and CSS (sent once per widget, the same for
    every input; a bertviz view ships its own JS too, so the data comparison leaves it out).
    """
    if code:
        return len(widget._esm.encode()) + len(widget._css.encode())
    state = wire_state(widget)
    total = 0
    plain = {}
    for k, v in state.items():
        if isinstance(v, dict) and "__b64__" in v:
            total += len(getattr(widget, k))
        else:
            plain[k] = v
    return total + len(json.dumps(plain).encode())


def bertviz_json_bytes(maps: np.ndarray, tokens: list[str]) -> int:
    """Size of ``json.dumps({"attention": maps.tolist(), "tokens": ...})``, computed one
    layer at a time so n = 512 (≈ 0.8 GB of text) fits in memory."""
    parts = [len(json.dumps(maps[l].tolist())) for l in range(maps.shape[0])]
    attn = sum(parts) + 2 * (len(parts) - 1) + 2
    rest = len(json.dumps({"attention": [], "left_text": tokens, "right_text": tokens})) - 2
    return attn + rest


def json_parse_ms(browser, text: str, repeats: int) -> float:
    """Median time for Chromium to JSON.parse ``text`` (served to the page, not timed)."""
    context = browser.new_context()
    page = context.new_page()
    page.route(f"{ORIGIN}/**", lambda r: r.fulfill(status=200, content_type="text/html",
                                                    body="<!doctype html><body></body>"))
    page.route(f"{ORIGIN}/payload.json", lambda r: r.fulfill(status=200, content_type="application/json", body=text))
    page.goto(f"{ORIGIN}/index.html")
    times = page.evaluate(
        """async (k) => {
            const text = await (await fetch('/payload.json')).text();
            const out = [];
            for (let i = 0; i < k; i++) {
                const t0 = performance.now(); const v = JSON.parse(text);
                out.push(performance.now() - t0); if (!v.attention) throw new Error('bad');
            }
            return out;
        }""",
        repeats,
    )
    context.close()
    return statistics.median(times)


def measure(repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = launch(p)
        for n in SIZES:
            att = structured(L, H, n, seed=n)
            t0 = time.perf_counter()
            grid = HeadGrid(att)
            build_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            png = grid.to_png()
            png_s = time.perf_counter() - t0
            full = HeadGrid(att, size=n)
            hm = Heatmap(att, 0, 0)
            js = bertviz_json_bytes(att.maps, att.tokens)
            draws, syncs = [], []
            # One discarded page load: the first one also pays for fonts and the JIT,
            # which a notebook page has long paid for when a widget appears.
            warm = WidgetPage(browser, grid, width=900, dpr=2)
            warm.wait_drawn(timeout=60_000)
            warm.close()
            for _ in range(repeats):
                wp = WidgetPage(browser, grid, width=900, dpr=2)
                wp.wait_drawn(timeout=60_000)
                assert wp.errors() == [], wp.errors()
                draws.append(wp.timings["first_frame_ms"])
                syncs.append(float(wp.data("first-draw-ms")))
                wp.close()
            parse = None
            if js <= V8_MAX_STRING and n <= 128:
                text = json.dumps({"attention": att.maps.tolist(), "left_text": att.tokens,
                                   "right_text": att.tokens})
                assert len(text) == js
                parse = json_parse_ms(browser, text, max(3, repeats // 2))
                del text
            rows.append({
                "n": n, "grid_bytes": wire_bytes(grid), "grid_full_bytes": wire_bytes(full),
                "heatmap_bytes": wire_bytes(hm), "json_bytes": js, "thumb": grid.size,
                "code_bytes": wire_bytes(grid, code=True),
                "draw_ms": statistics.median(draws), "draw_min": min(draws), "draw_max": max(draws),
                "sync_ms": statistics.median(syncs), "parse_ms": parse,
                "build_s": build_s, "png_s": png_s, "png_bytes": len(png),
            })
        version = browser.version
        browser.close()
    return {"rows": rows, "chromium": version, "repeats": repeats}


def mb(b: int) -> str:
    return f"{b / 1e6:.2f} MB" if b >= 1e5 else f"{b / 1e3:.1f} kB"


def report(res: dict) -> str:
    rows = res["rows"]
    load = os.getloadavg()
    lines = [
        "## widgets",
        "",
        f"`python benchmarks/widgets.py` — {L} layers × {H} heads, hand-built attention "
        f"(tests/browser/patterns.py), headless Chromium {res['chromium']} (Debian, "
        f"`--disable-gpu`, device pixel ratio 2), {res['repeats']} page loads per size; "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.1f} "
        f"during the run (the machine was shared). Measured {time.strftime('%Y-%m-%d')}.",
        "",
        "**Payload**: the data a view sends to the browser (JSON state + binary buffers; the "
        f"view's code, {mb(rows[0]['code_bytes'])} of JS module and CSS, travels once per widget "
        "and is left out on both sides):",
        "",
        "| n | bertviz-style JSON | HeadGrid | ratio | HeadGrid full-res (`size=n`) | ratio | Heatmap (1 head, float16) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {mb(r['json_bytes'])} | {mb(r['grid_bytes'])} (thumbs {r['thumb']}²) | "
            f"1/{r['json_bytes'] / r['grid_bytes']:.0f} | {mb(r['grid_full_bytes'])} | "
            f"1/{r['json_bytes'] / r['grid_full_bytes']:.0f} | {mb(r['heatmap_bytes'])} |"
        )
    lines += [
        "",
        "**Time to first full draw of HeadGrid** (`render()` → next presented frame; median, "
        "min–max), next to the time Chromium takes only to `JSON.parse` the bertviz payload:",
        "",
        "| n | HeadGrid first frame | of which synchronous draw | JSON.parse of bertviz payload | Python: build widget | Python: PNG preview |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["parse_ms"] is not None:
            parse = f"{r['parse_ms']:.0f} ms"
        elif r["json_bytes"] > V8_MAX_STRING:
            parse = "impossible: longer than V8's maximum string (2²⁹−24 chars)"
        else:
            parse = "not run"
        lines.append(
            f"| {r['n']} | {r['draw_ms']:.0f} ms ({r['draw_min']:.0f}–{r['draw_max']:.0f}) | "
            f"{r['sync_ms']:.0f} ms | {parse} | {r['build_s'] * 1e3:.0f} ms | "
            f"{r['png_s'] * 1e3:.0f} ms ({mb(r['png_bytes'])}) |"
        )
    r128 = next(r for r in rows if r["n"] == 128)
    ok_payload = all(r["grid_bytes"] * 20 <= r["json_bytes"] for r in rows)
    lines += [
        "",
        f"Targets: payload ≤ 1/20 of the JSON one — {'met' if ok_payload else 'NOT met'} at every n "
        f"(even without pooling at n ≤ 128); HeadGrid drawn < 300 ms at n = 128 — "
        f"{'met' if r128['draw_ms'] < 300 else 'NOT met'} ({r128['draw_ms']:.0f} ms median); "
        "n = 512 works (thumbnails max-pooled in Python to 128², so a thin diagonal survives).",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = old.splitlines()
    out, skip = [], False
    for line in lines:
        if line.startswith("## "):
            skip = line.strip() == "## widgets"
        if not skip:
            out.append(line)
    body = "\n".join(out).rstrip() + "\n\n" + text
    path.write_text(body.rstrip() + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = ap.parse_args()
    if not chromium_available():
        sys.exit("Chromium not found at /usr/bin/chromium (apt-get install -y chromium)")
    if not (REPO / "attnkit" / "static" / "headgrid.js").is_file():
        subprocess.run(["npm", "run", "build"], cwd=REPO / "js", check=True)
    res = measure(args.repeats)
    text = report(res)
    write_section(text, args.out)
    print(text)


if __name__ == "__main__":
    main()
