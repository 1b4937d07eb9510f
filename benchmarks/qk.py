"""Query–key space at scale, measured side by side in one run (docs/benchmarks.md, ``## qk``):

- QKScatter of 1,000,000 points of one head, and 100,000 points in the matrix view of
  12 x 12 heads: bytes per point sent to the browser, first draw (mount -> points drawn by
  regl-scatterplot) and pan/zoom frames per second while the pointer drags and the wheel
  zooms, in headless Chromium on software WebGL (SwiftShader);
- qk_embedding of one head of 100,000 points (50,000 positions): PCA and UMAP wall time;
- a 12 x 12-head model (the heads' 2,000 points each, UMAP) embedded on a Dask cluster of
  one worker and of two workers (one thread each).

Run from the repo root:  python benchmarks/qk.py [--section widget|embed|dask|all] [--quick]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "browser"))

from harness import WidgetPage, launch, state_bytes  # noqa: E402

from attnkit.analysis.qk import HeadPoints, QKEmbedding, _run, embed_head  # noqa: E402
from attnkit.results import HeadResult  # noqa: E402
from attnkit.widgets import QKScatter  # noqa: E402


def synthetic(n_points: int, heads: list[tuple[int, int]], seed: int = 0) -> QKEmbedding:
    """An embedding's table of ``n_points`` over ``heads`` (clusters, as UMAP pictures look)."""
    rng = np.random.default_rng(seed)
    per = n_points // len(heads)
    frames = []
    for l, h in heads:
        centres = rng.normal(0, 5, (30, 2))
        xy = centres[rng.integers(0, 30, per)] + rng.normal(0, 0.7, (per, 2))
        half = per // 2
        frames.append(pd.DataFrame({
            "layer": l, "head": h, "item": np.tile(np.arange(half) // 25, 2)[:per],
            "position": np.tile(np.arange(half) % 25, 2)[:per], "token": "w", "role": "word",
            "kind": np.repeat(["query", "key"], [half, per - half]), "x": xy[:, 0], "y": xy[:, 1]}))
    table = pd.concat(frames, ignore_index=True)
    faith = HeadResult(pd.DataFrame({"spearman": 0.0}, index=pd.MultiIndex.from_tuples(heads, names=["layer", "head"])))
    return QKEmbedding(table, {"heads": [list(x) for x in heads], "method": "synthetic", "dims": 2},
                       faithfulness=faith)


FPS_JS = """async (ms) => {
  const c = document.querySelector('#root canvas'); const r = c.getBoundingClientRect();
  const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
  let frames = 0, worst = 0, last = performance.now(); const t0 = last; let stop = false;
  const tick = () => { const t = performance.now(); worst = Math.max(worst, t - last); last = t; frames++; if (!stop) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  let k = 0;
  const ev = (type, x, y, extra = {}) => c.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true, buttons: 1, ...extra }));
  ev('mousedown', cx, cy);
  while (performance.now() - t0 < ms) {
    k++;
    const a = k / 10;
    window.dispatchEvent(new MouseEvent('mousemove', { clientX: cx + 80 * Math.cos(a), clientY: cy + 80 * Math.sin(a), bubbles: true, buttons: 1 }));
    if (k % 5 === 0) c.dispatchEvent(new WheelEvent('wheel', { clientX: cx, clientY: cy, deltaY: k % 10 ? -40 : 40, bubbles: true, cancelable: true }));
    await new Promise((res) => requestAnimationFrame(res));
  }
  window.dispatchEvent(new MouseEvent('mouseup', { clientX: cx, clientY: cy, bubbles: true }));
  stop = true;
  const secs = (performance.now() - t0) / 1000;
  return { fps: frames / secs, worst_frame_ms: worst, frames };
}"""


def widget_section(browser, quick: bool) -> list[str]:
    rows = ["| view | points | bytes/point | first draw (ms) | pan/zoom fps | worst frame (ms) |",
            "|---|---|---|---|---|---|"]
    cases = [("one head", 1_000_000 if not quick else 200_000, [(0, 0)], "head"),
             ("matrix, 12 x 12 heads", 100_000, [(l, h) for l in range(12) for h in range(12)], "matrix")]
    for name, n, heads, mode in cases:
        emb = synthetic(n, heads)
        t0 = time.perf_counter()
        view = QKScatter(emb, mode=mode, max_bytes=8_000_000)
        build = time.perf_counter() - t0
        payload = state_bytes(view)
        wp = WidgetPage(browser, view, width=760, dpr=1)
        try:
            t0 = time.perf_counter()
            wp.page.wait_for_function("() => document.querySelector('#root .attnkit')?.dataset.ready === '1'", timeout=60000)
            first = wp.timings["render_ms"] + float(wp.data("draw-ms") or "nan")
            wall = (time.perf_counter() - t0) * 1000 + wp.timings["first_frame_ms"]
            fps = wp.page.evaluate(FPS_JS, 3000)
        finally:
            wp.context.close()
        print(f"{name}: {view.n_points} points, build {build:.2f} s, first draw {first:.0f} ms (wall {wall:.0f}), {fps}")
        rows.append(f"| {name} | {view.n_points:,} | {payload / view.n_points:.2f} | {first:.0f} | {fps['fps']:.0f} | {fps['worst_frame_ms']:.0f} |")
    return rows


def head_points(n_positions: int, d: int = 32, seed: int = 0, layer: int = 0, head: int = 0) -> HeadPoints:
    rng = np.random.default_rng(seed + 100 * layer + head)
    q = rng.normal(0, 1, (n_positions, d)).astype(np.float32) + 2
    k = rng.normal(0, 1, (n_positions, d)).astype(np.float32) - 1
    offsets = np.arange(0, n_positions + 1, 25, dtype=np.int64)
    return HeadPoints(layer, head, q, k, offsets, d ** -0.5, None, True)


def embed_section(quick: bool) -> list[str]:
    rows = ["| method | points | seconds (embedding + faithfulness) |", "|---|---|---|"]
    hp = head_points(50_000 if not quick else 10_000)
    embed_head(head_points(300), method="umap", dims=2, normalize=True, seed=0)  # numba compiles once
    for method in ("pca", "umap"):
        t0 = time.perf_counter()
        _, faith = embed_head(hp, method=method, dims=2, normalize=True, seed=0, score=False)
        proj = time.perf_counter() - t0
        t0 = time.perf_counter()
        embed_head(hp, method="pca", dims=2, normalize=True, seed=0, score=True)
        scored = time.perf_counter() - t0
        print(f"{method}: {2 * len(hp.queries)} points projected in {proj:.2f} s (pca + faithfulness {scored:.2f} s)")
        rows.append(f"| {method} | {2 * len(hp.queries):,} | {proj:.2f} (faithfulness scores add {max(scored - (proj if method == 'pca' else 0), 0):.2f}) |")
    return rows


def dask_section(quick: bool) -> list[str]:
    import distributed

    hps = [head_points(1000 if not quick else 300, layer=l, head=h) for l in range(12) for h in range(12)]
    rows = ["| workers | heads | points per head | seconds |", "|---|---|---|---|"]
    for workers in (1, 2):
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.CRITICAL)
        client = distributed.Client(cluster, set_as_default=False)
        try:
            _run(hps[:workers * 2], client, False, method="umap", dims=2, normalize=True, seed=0)  # warm up numba
            t0 = time.perf_counter()
            _run(hps, client, False, method="umap", dims=2, normalize=True, seed=0)
            secs = time.perf_counter() - t0
        finally:
            client.close()
            cluster.close()
        print(f"dask {workers} worker(s): {secs:.1f} s")
        rows.append(f"| {workers} | {len(hps)} | {2 * len(hps[0].queries):,} | {secs:.1f} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--section", default="all", choices=["widget", "embed", "dask", "all"])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    out: list[str] = []
    if args.section in ("widget", "all"):
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            b = launch(p)
            try:
                out += widget_section(b, args.quick) + [""]
            finally:
                b.close()
    if args.section in ("embed", "all"):
        out += embed_section(args.quick) + [""]
    if args.section in ("dask", "all"):
        out += dask_section(args.quick)
    print("\n".join(out))


if __name__ == "__main__":
    main()
