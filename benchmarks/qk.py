"""Query–key space at scale, measured side by side in one run (docs/benchmarks.md, ``## qk``):

- QKScatter of 1,000,000 points of one head, and 100,000 points in the matrix view of
  12 x 12 heads: bytes per point sent to the browser, first draw (the view's render() call
  -> the first animation frame after regl-scatterplot drew the points, with the view's
  performance measures of its parts) and pan/zoom frames per second (requestAnimationFrame
  callbacks) while the pointer drags and the wheel zooms, then how long after the camera
  stops the exact frame comes; in headless Chromium on software WebGL (SwiftShader). With
  ``--before REV`` the bundle of git revision REV is measured beside this one, on the same
  points;
- qk_embedding of one head of 100,000 points (50,000 positions): PCA and UMAP wall time;
- every head of the bundled MiniLM over EWT dev sentences (UMAP) embedded on a Dask
  LocalCluster of one worker and of two (processes, one thread each): a fresh cluster and
  a second call;
- at corpus scale (``--section scale``, issue 32): one head of UD English EWT train (about
  half a million points) and two (about a million) from a store, sampled UMAP; a
  100,000-point subset projected whole and sampled (neighbourhood preservation, faithfulness);
  every head of MiniLM over EWT dev on Dask clusters of one and two workers;
- the view of a million points of a store (``--section view``, issue 32 item 4): 15 heads of
  EWT dev read back from ``qk_embedding(..., save=)``, QKScatter's matrix view, its PNG, the
  first draw in headless Chromium and a lasso of half the points read back, for ``--before``'s
  attnkit and this tree's, each in a fresh process (time and memory side by side).

Run from the repo root:
  python benchmarks/qk.py [--section widget|embed|dask|scale|speed|view|all] [--before main] [--sentences 30] [--quick] [--root DIR]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# benchmarks/distributed.py would shadow dask's distributed package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "browser"))

from harness import WidgetPage, launch, state_bytes  # noqa: E402

from attnkit.analysis.qk import HeadPoints, QKEmbedding, embed_head  # noqa: E402
from attnkit.core.results import HeadResult  # noqa: E402
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
  const root = document.querySelector('#root .attnkit');
  const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
  const full0 = Number(root.dataset.fullFrames ?? 0), moved0 = Number(root.dataset.movedFrames ?? 0);
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
  // the exact frame once the camera rests: the first full frame after the last move
  const full = () => Number(root.dataset.fullFrames ?? 0);
  const moved = Number(root.dataset.movedFrames ?? 0) - moved0, fullAtStop = full(), tEnd = performance.now();
  let settled = null;
  while (moved > 0 && settled === null && performance.now() - tEnd < 5000) {
    await new Promise((res) => requestAnimationFrame(res));
    if (full() > fullAtStop) settled = performance.now() - tEnd;
  }
  return { fps: frames / secs, worst_frame_ms: worst, frames,
           full: fullAtStop - full0, moved,
           settle_ms: settled, full_ms: Number(root.dataset.fullMs ?? NaN) };
}"""

#: Time from the view's render() call (the harness marks it) to the first animation frame
#: after the points are drawn (the frame that shows them has been presented by then).
FIRST_DRAW_JS = """() => new Promise((resolve) => {
  const root = () => document.querySelector('#root .attnkit');
  const t0 = performance.getEntriesByName('attnkit:render')[0].startTime;
  const poll = () => {
    if (root()?.dataset.ready === '1') {
      const marks = Object.fromEntries(performance.getEntriesByType('measure').map((m) => [m.name, m.duration]));
      resolve({ first_ms: performance.now() - t0, marks, full_ms: Number(root().dataset.fullMs ?? NaN) });
    } else requestAnimationFrame(poll);
  };
  requestAnimationFrame(poll);
})"""


class _Before:
    """A view's state shown by another bundle (the implementation before, built from git)."""

    def __init__(self, view: QKScatter, esm: str) -> None:
        self._view, self._esm, self._css = view, esm, view._css

    def get_state(self) -> dict:
        state = dict(self._view.get_state())
        if self._view.mode == "matrix":  # the old wire format: one uint8 panel a point
            from attnkit.widgets._codec import read, wire

            counts = read(state["panels"])
            state["panels"] = wire(np.repeat(np.arange(len(counts)), counts), "uint8")
        return state


def build_bundle(rev: str) -> str:
    """The QKScatter bundle of git revision ``rev`` (esbuild, as js/build.mjs; minified)."""
    import subprocess
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="attnkit-before-"))
    subprocess.run(f"git -C {REPO} archive {rev} js/src | tar -x -C {tmp}", shell=True, check=True)
    out = tmp / "qkscatter.js"
    script = ("const e = require(process.argv[1]); e.buildSync({entryPoints: [process.argv[2]], outfile: process.argv[3], "
              "bundle: true, format: 'esm', target: 'es2020', minify: true, legalComments: 'none', "
              "nodePaths: [process.argv[4]]});")
    subprocess.run(["node", "-e", script, str(REPO / "js" / "node_modules" / "esbuild"),
                    str(tmp / "js" / "src" / "qkscatter.ts"), str(out), str(REPO / "js" / "node_modules")], check=True)
    return out.read_text()


def widget_section(browser, quick: bool, before: str | None = None) -> list[str]:
    rows = ["| view | implementation | points | bytes/point | first draw (ms) | of which: decode / layout / WebGL setup / points to regl and first frame (ms) "
            "| pan/zoom fps | worst frame (ms) | frames moved / full while moving | exact frame after the camera rests (ms after it stops; full frame ms) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    cases = [("one head", 1_000_000 if not quick else 200_000, [(0, 0)], "head"),
             ("matrix, 12 x 12 heads", 100_000, [(l, h) for l in range(12) for h in range(12)], "matrix")]
    esm_before = build_bundle(before) if before else None
    for name, n, heads, mode in cases:
        emb = synthetic(n, heads)
        view = QKScatter(emb, mode=mode, max_bytes=8_000_000)
        impls = [("now", view)] + ([(f"before ({before})", _Before(view, esm_before))] if esm_before else [])
        for impl, shown in impls:
            payload = state_bytes(shown)
            wp = WidgetPage(browser, shown, width=760, dpr=1)
            try:
                first = wp.page.evaluate(FIRST_DRAW_JS)
                wp.page.wait_for_timeout(300)
                fps = wp.page.evaluate(FPS_JS, 3000)
                errors = wp.errors()
            finally:
                wp.context.close()
            m = first["marks"]
            parts = (f"{m['qk decode']:.0f} / {m['qk layout']:.0f} / {m['qk setup']:.0f} / {m['qk draw']:.0f}" if "qk draw" in m else "")
            settle = (f"{fps['settle_ms']:.0f} ({fps['full_ms']:.0f})" if fps.get("settle_ms") is not None else "every frame full")
            print(f"{name} [{impl}]: {view.n_points} points, first draw {first['first_ms']:.0f} ms {m}, {fps}, errors {errors}", flush=True)
            rows.append(f"| {name} | {impl} | {view.n_points:,} | {payload / view.n_points:.2f} | {first['first_ms']:.0f} | {parts} "
                        f"| {fps['fps']:.0f} | {fps['worst_frame_ms']:.0f} | {fps['moved']} / {fps['full']} | {settle} |")
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


def ewt_dev(n: int) -> list:
    """The first ``n`` sentences of UD English EWT dev (``ATTNKIT_DATA`` or ../shared/data)."""
    import attnkit as ak

    data = ak.data.data_dir()
    dev = data / "ud-english-ewt" / "en_ewt-ud-dev.conllu" if data else None
    if dev is None or not dev.is_file():
        raise SystemExit("UD English EWT dev not found: set ATTNKIT_DATA to the shared data folder.")
    return list(ak.read_conllu(dev))[:n]


def dask_section(quick: bool, n_sentences: int) -> list[str]:
    """Every head of the bundled MiniLM (6 x 12) over EWT dev sentences, UMAP, embedded by
    qk_embedding on a LocalCluster of one worker and of two (processes, one thread each):
    a fresh cluster (imports and numba compilation in each worker included) and a second
    call on the same cluster."""
    import distributed

    import attnkit as ak

    sentences = ewt_dev(n_sentences if not quick else 8)
    model = ak.load("minilm")
    sset = ak.extract(model, sentences, level="token", keep="qk", progress=False)
    n_pos = sum(len(sset.qk_states(i).tokens or []) for i in range(len(sset)))
    n_heads = model.n_layers * model.n_heads
    rows = [f"{n_heads} heads of the bundled MiniLM ({model.n_layers} x {model.n_heads}) over the first {len(sset)} "
            f"EWT dev sentences: {n_pos:,} tokens, {2 * n_pos:,} points (queries and keys) a head, UMAP.", "",
            "| workers | fresh cluster (s) | same cluster again (s) | CPU s (sum over workers, second call) |", "|---|---|---|---|"]
    # numba's on-disk cache filled once beforehand, so neither cluster pays for the other
    import subprocess

    subprocess.run([sys.executable, "-c", "import numpy as np; from attnkit.analysis.qk import project; "
                    "project(np.random.default_rng(0).normal(size=(300, 8)), method='umap')"], check=True)
    tables = {}
    for workers in (1, 2):
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.CRITICAL)
        client = distributed.Client(cluster, set_as_default=False)
        try:
            client.wait_for_workers(workers)
            t0 = time.perf_counter()
            ak.qk_embedding(sset, method="umap", client=client, progress=False)
            cold = time.perf_counter() - t0
            cpu0 = sum(client.run(time.process_time).values())
            t0 = time.perf_counter()
            emb = ak.qk_embedding(sset, method="umap", client=client, progress=False)
            warm = time.perf_counter() - t0
            cpu = sum(client.run(time.process_time).values()) - cpu0
        finally:
            client.close()
            cluster.close()
        tables[workers] = emb.table
        print(f"dask {workers} worker(s): fresh {cold:.1f} s, again {warm:.1f} s (worker CPU {cpu:.1f} s); {time.ctime()} load {os.getloadavg()}", flush=True)
        rows.append(f"| {workers} | {cold:.1f} | {warm:.1f} | {cpu:.1f} |")
    same = np.array_equal(tables[1][["x", "y"]].to_numpy(), tables[2][["x", "y"]].to_numpy())
    rows.append("")
    rows.append(f"The two clusters give {'the same' if same else 'DIFFERENT'} coordinates (bit for bit).")
    return rows


# ------------------------------------------------------------------ corpus scale (issue 32)
#: The head of the one-head rows (0-indexed; 3-4 displayed) and the second head of the
#: million points.
SCALE_HEADS = [(2, 3), (4, 7)]


def _store(split: str, root: Path) -> object:
    """EWT ``split`` extracted with keep="qk" (every layer) into ``root`` (resumed if there)."""
    import attnkit as ak

    data = ak.data.data_dir()
    sents = list(ak.read_conllu(data / "ud-english-ewt" / f"en_ewt-ud-{split}.conllu"))
    t0 = time.perf_counter()
    # an existing store is resumed without re-reading it (verify=False): made by this script
    sset = ak.extract(ak.load("minilm"), sents, level="token", keep="qk", store=root / f"ewt-{split}.zarr",
                      verify=False, progress=False)
    print(f"store {split}: {len(sset)} sentences in {time.perf_counter() - t0:.1f} s ({sset.run_info})", flush=True)
    return sset


def _own_peak() -> int:
    """This process's own high-water mark of resident memory in bytes (0 where /proc has none):
    ru_maxrss carries the forking parent's over execve; /proc's VmHWM belongs to the new
    address space."""
    status = Path("/proc/self/status")
    hwm = [ln for ln in status.read_text().splitlines() if ln.startswith("VmHWM:")] if status.is_file() else []
    return int(hwm[0].split()[1]) * 1024 if hwm else 0


def _case(args: argparse.Namespace) -> None:
    """One measurement in this (fresh) process; prints one JSON line with its peak RSS."""
    import json
    import resource

    import attnkit as ak
    from attnkit.analysis import qk, qkscale

    root = Path(args.root)
    out: dict = {"case": args.case}
    if args.case in ("head", "million"):
        sset = ak.open_store(root / "ewt-train.zarr")
        heads = SCALE_HEADS[:1] if args.case == "head" else SCALE_HEADS
        t0 = time.perf_counter()
        emb = ak.qk_embedding(sset, heads=heads, method="umap", progress=False)
        out["seconds"] = time.perf_counter() - t0
        out["points"] = len(emb.table)
        out["sample"] = emb.meta["sample"]
        out["heads"] = emb.faithfulness.table.reset_index().to_dict("records")
    elif args.case == "subset":
        sset = ak.open_store(root / "ewt-train.zarr")
        (hp,) = qk.store_head_points(sset, SCALE_HEADS[:1], progress=False)
        cut = int(np.searchsorted(hp.offsets, args.subset // 2, side="right")) - 1
        n = int(hp.offsets[cut])
        hp = qk.HeadPoints(hp.layer, hp.head, hp.queries[:n].copy(), hp.keys[:n].copy(), hp.offsets[:cut + 1],
                           hp.scaling, hp.softcap, hp.causal)
        q, k = qk.normalize_qk(hp.queries, hp.keys)
        space = np.concatenate([q, k])
        pictures = {}
        for name, sample, placement in (("sampled, knn", "auto", "knn"), ("full", None, "knn")):
            t0 = time.perf_counter()
            y, f = qk.embed_head(hp, method="umap", dims=2, normalize=True, seed=0, sample=sample, placement=placement)
            f["wall"] = time.perf_counter() - t0
            pictures[name] = y
            out[name] = f
            print(name, f, flush=True)
        out["points"] = 2 * n
        out["sampled_vs_full"] = qkscale.neighbourhood_preservation(pictures["sampled, knn"], pictures["full"], k=10, n_eval=1000)
        out["space_check"] = qkscale.neighbourhood_preservation(pictures["full"], space, k=10, n_eval=1000)
    elif args.case == "placement":
        # the placement rule, chosen on EWT dev: one head's UMAP fitted on a 5,000-point
        # stratified sample once, the other points placed by each rule
        from sklearn.neighbors import NearestNeighbors

        sset = ak.open_store(root / "ewt-dev.zarr")
        (hp,) = qk.store_head_points(sset, SCALE_HEADS[:1], progress=False)
        q, k = qk.normalize_qk(hp.queries, hp.keys)
        x = np.concatenate([q, k]).astype(np.float32)
        n = len(hp.queries)
        idx = qkscale.stratified_sample(qk.point_strata(hp.offsets), 5000, seed=0)
        t0 = time.perf_counter()
        ys, transform = qk.fit_projection(x[idx], method="umap", seed=0)
        out["fit"] = time.perf_counter() - t0
        out["points"] = len(x)
        rest = np.ones(len(x), dtype=bool)
        rest[idx] = False
        lm, y = x[idx], ys.astype(np.float64)
        dist, near = NearestNeighbors(n_neighbors=10, algorithm="brute").fit(lm).kneighbors(x[rest])
        rules = {}

        def rule(name, place):
            t0 = time.perf_counter()
            got = place()
            pic = np.empty((len(x), 2))
            pic[idx], pic[rest] = ys, got
            f = qk.head_faithfulness(hp, pic[:n], pic[n:], q, k)
            rules[name] = {"seconds": time.perf_counter() - t0,
                           "preservation": qkscale.neighbourhood_preservation(pic, x, k=10, n_eval=1000),
                           "distinct": int(len(np.unique(pic.round(5), axis=0))),
                           "spearman": f["spearman"], "nearest_key": f["nearest_key"]}
            print(name, rules[name], flush=True)

        def idw(kk):
            w = 1 / np.maximum(dist[:, :kk], 1e-12)
            return np.einsum("nk,nkc->nc", w / w.sum(1, keepdims=True), y[near[:, :kk]])

        rule("nearest fitted point", lambda: y[near[:, 0]])
        rule("inverse-distance mean of 3", lambda: idw(3))
        rule("inverse-distance mean of 10", lambda: idw(10))
        for step in (1.0, 0.2, 0.05):
            rule(f"nearest + {step} x local ridge map (30)", lambda s=step: qkscale.place_knn(lm, ys, x[rest], step=s))
        rule("UMAP's transform", lambda: transform(x[rest]))
        out["rules"] = rules
    elif args.case == "dev-heads":
        import distributed

        sset = ak.open_store(root / "ewt-dev.zarr")
        qk_ = sset.info["qk"]
        heads = [(l, h) for l in qk_["layers"] for h in range(qk_["heads"])][: args.heads]
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.CRITICAL)
        client = distributed.Client(cluster, set_as_default=False)
        try:
            client.wait_for_workers(args.workers)
            t0 = time.perf_counter()
            emb = ak.qk_embedding(sset, heads=heads, method="umap", client=client, progress=False)
            out["seconds"] = time.perf_counter() - t0
            # the client's peak while qk_embedding ran (the LocalCluster's scheduler lives in
            # this process too), before anything builds the result's table
            out["client_peak_rss"] = _own_peak()
            out["worker_peak_rss"] = max(client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024).values())
        finally:
            client.close()
            cluster.close()
        f = emb.faithfulness.table
        out.update(heads=len(heads), workers=args.workers, points=len(emb) // len(heads), sample=emb.meta["sample"],
                   streamed=emb.meta["streamed"],
                   mean_fit=float(f["fit_seconds"].mean()), mean_place=float(f["place_seconds"].mean()),
                   mean_head=float(f["seconds"].mean()), mean_preservation=float(f["preservation"].mean()))
    if args.case == "dev-heads":
        t1 = time.perf_counter()
        table = emb.table  # built on first reading, as a user's first look builds it
        out["table_seconds"] = time.perf_counter() - t1
        del table
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["peak_rss"] = ru.ru_maxrss * 1024
    out["own_peak_rss"] = _own_peak() or out["peak_rss"]
    out["cpu"] = ru.ru_utime + ru.ru_stime  # this process, every thread (the load makes wall time long)
    out["load_after"] = os.getloadavg()
    print("RESULT " + json.dumps(out, default=float), flush=True)


def _run_case(root: Path, case: str, *extra: str) -> dict:
    import json
    import subprocess

    load = os.getloadavg()
    t = time.strftime("%H:%M")
    p = subprocess.run([sys.executable, __file__, "--case", case, "--root", str(root), *extra], capture_output=True,
                       text=True, cwd=REPO)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if p.returncode or not line:
        raise SystemExit(f"case {case} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    res = json.loads(line[0][len("RESULT "):])
    res["load_before"], res["at"] = load, t
    print(res, flush=True)
    return res


def scale_section(root: Path, quick: bool, cases: str = "head,million,subset,dev",
                  dev_runs: tuple = ((12, 1), (12, 2), (72, 2))) -> list[str]:
    """qk_embedding of stores of UD English EWT (MiniLM, every layer's queries and keys):
    one head of train, two heads (a million points), a 100,000-point subset projected whole
    and sampled, and every head of dev on Dask clusters of one and two workers. Each case is
    one fresh process (its peak RSS is the process's)."""
    root.mkdir(parents=True, exist_ok=True)
    _store("dev", root)
    if not quick:
        _store("train", root)
    mb = 1e6
    rows = ["| case | points | wall (s) | CPU (s) | of which per head: fit / place / whole head (s) | peak RSS (MB) | preservation | Spearman / nearest key | load before → after |",
            "|---|---:|---:|---:|---|---:|---:|---|---|"]

    def load(r: dict) -> str:
        return f"{r['load_before'][0]:.1f} → {r['load_after'][0]:.1f}"

    chosen = cases.split(",")
    for case in ([] if quick else [c for c in ("head", "million") if c in chosen]):
        r = _run_case(root, case)
        hs = r["heads"]
        names = ", ".join("{}-{}".format(h["layer"] + 1, h["head"] + 1) for h in hs)
        per = "; ".join("{}-{}: {:.1f} / {:.1f} / {:.1f}".format(h["layer"] + 1, h["head"] + 1, h["fit_seconds"],
                                                                 h["place_seconds"], h["seconds"]) for h in hs)
        pres = ", ".join("{:.3f}".format(h["preservation"]) for h in hs)
        faith = ", ".join("{:.3f} / {:.3f}".format(h["spearman"], h["nearest_key"]) for h in hs)
        rows.append(f"| {case} ({names}; sample {r['sample']}) | {r['points']:,} | {r['seconds']:.1f} | {r['cpu']:.1f} | {per} | "
                    f"{r['peak_rss'] / mb:.0f} | {pres} | {faith} | {load(r)} |")
    out = rows + [""]
    if "placement" in chosen:
        r = _run_case(root, "placement")
        out += [f"Placement rules on EWT dev, head {SCALE_HEADS[0][0] + 1}-{SCALE_HEADS[0][1] + 1} ({r['points']:,} points; UMAP fitted on a 5,000-point "
                f"stratified sample in {r['fit']:.1f} s; at {r['at']}, load {load(r)}):", "",
                "| rule | seconds | preservation (k=10) | distinct positions | Spearman | nearest key |", "|---|---:|---:|---:|---:|---:|"]
        for name, f in r["rules"].items():
            out.append(f"| {name} | {f['seconds']:.1f} | {f['preservation']:.3f} | {f['distinct']:,} | {f['spearman']:.3f} | {f['nearest_key']:.3f} |")
        out.append("")
    if not quick and "subset" in chosen:
        r = _run_case(root, "subset", "--subset", "100000")
        out += [f"A {r['points']:,}-point subset of head {SCALE_HEADS[0][0] + 1}-{SCALE_HEADS[0][1] + 1} (the first EWT train sentences), projected whole and "
                f"sampled (at {r['at']}, load {load(r)}):", "",
                "| picture | fitted on | wall (s) | preservation (normalised q-k space, k=10) | Spearman | nearest key |", "|---|---:|---:|---:|---:|---:|"]
        for name in ("full", "sampled, knn"):
            f = r[name]
            out.append(f"| {name} | {f['fitted']:,} | {f['wall']:.1f} | {f['preservation']:.3f} | {f['spearman']:.3f} | {f['nearest_key']:.3f} |")
        out += ["", f"Neighbourhoods of the sampled picture kept in the full one (k=10, 1,000 points): {r['sampled_vs_full']:.3f}.", ""]
    if "dev" not in chosen:
        return out
    out += ["| heads of MiniLM over EWT dev | workers | points a head | sample | streamed | wall (s) | mean per head: fit / place / whole (s) | worker peak RSS (MB) | client and scheduler peak RSS (MB): at the result / after its table | mean preservation | at, load before → after |",
            "|---|---:|---:|---:|---|---:|---|---:|---:|---:|---|"]
    for heads, workers in dev_runs:
        r = _run_case(root, "dev-heads", "--heads", str(heads), "--workers", str(workers))
        out.append(f"| {r['heads']} | {workers} | {r['points']:,} | {r['sample']} | {r['streamed']} | {r['seconds']:.1f} | "
                   f"{r['mean_fit']:.1f} / {r['mean_place']:.1f} / {r['mean_head']:.1f} | "
                   f"{r['worker_peak_rss'] / mb:.0f} | {r['client_peak_rss'] / mb:.0f} / {r['own_peak_rss'] / mb:.0f} | {r['mean_preservation']:.3f} | {r['at']}, {load(r)} |")
    return out


#: One head of a store embedded in a fresh process (``--section speed``), run for this tree
#: and for the ``--before`` revision's attnkit (from ``git archive``) side by side.
SPEED_CASE = """
import json, os, resource, sys, time
t0 = time.perf_counter()
import attnkit as ak
sset = ak.open_store(sys.argv[1])
emb = ak.qk_embedding(sset, heads=[tuple(int(v) for v in sys.argv[2].split("-"))], method="umap", progress=False)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
f = emb.faithfulness.table.iloc[0]
print("RESULT " + json.dumps({"attnkit": ak.__file__, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
      "peak_rss": ru.ru_maxrss * 1024, "points": len(emb.table), "fit": f["fit_seconds"], "place": f["place_seconds"],
      "head": f["seconds"], "preservation": f["preservation"], "spearman": f["spearman"],
      "nearest_key": f["nearest_key"], "load_after": os.getloadavg()[0]}), flush=True)
"""


def speed_section(root: Path, before: str, split: str) -> list[str]:
    """One head (``SCALE_HEADS[0]``) of the EWT ``split`` store embedded with UMAP in a fresh
    process (imports, reading, fit, placement, scores; numba's caches already filled by an
    earlier run), by ``before``'s attnkit and by this tree's, the two processes started
    together so that they share the machine's load."""
    import json
    import subprocess
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="attnkit-before-"))
    subprocess.run(f"git -C {REPO} archive {before} attnkit | tar -x -C {tmp}", shell=True, check=True)
    store = root / f"ewt-{split}.zarr"
    head = "{}-{}".format(*SCALE_HEADS[0])
    load, at = os.getloadavg()[0], time.strftime("%H:%M")
    procs = {name: subprocess.Popen([sys.executable, "-c", SPEED_CASE, str(store), head], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(path)},
                                    cwd=path)  # python -c puts its folder first on sys.path
             for name, path in ((f"before ({before})", tmp), ("now", REPO))}
    rows = [f"One head ({SCALE_HEADS[0][0] + 1}-{SCALE_HEADS[0][1] + 1}) of EWT {split}, UMAP, `sample=\"auto\"`, a fresh process "
            f"each, both started together at {at} (load average {load:.1f}):", "",
            "| attnkit | points | wall (s) | CPU (s) | per head: fit / place / whole (wall s) | peak RSS (MB) | preservation | Spearman / nearest key | load after |",
            "|---|---:|---:|---:|---|---:|---:|---|---:|"]
    for name, p in procs.items():
        out, err = p.communicate()
        line = [x for x in out.splitlines() if x.startswith("RESULT ")]
        if p.returncode or not line:
            raise SystemExit(f"{name} failed:\n{out[-3000:]}\n{err[-3000:]}")
        r = json.loads(line[0][len("RESULT "):])
        print(name, r, flush=True)
        rows.append(f"| {name} | {r['points']:,} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['fit']:.1f} / {r['place']:.1f} / {r['head']:.1f} | "
                    f"{r['peak_rss'] / 1e6:.0f} | {r['preservation']:.3f} | {r['spearman']:.3f} / {r['nearest_key']:.3f} | {r['load_after']:.1f} |")
    return rows


#: The view of a million points of a store, in a fresh process (``--section view``): the
#: embedding read back from its ``save=`` folder, QKScatter in the matrix view (the PNG a
#: notebook embeds included), the first draw in headless Chromium, and a lasso of every
#: other point read back in Python. argv: store, save folder, heads "l-h,l-h,...".
VIEW_CASE = """
import json, os, resource, sys, time
import numpy as np
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmRSS'))
t_start = time.perf_counter()
import attnkit as ak
sys.path.insert(0, os.path.join(os.getcwd(), 'tests', 'browser'))
from harness import WidgetPage, launch
from playwright.sync_api import sync_playwright
sys.path.insert(0, os.path.join(os.getcwd(), 'benchmarks'))
out = {'attnkit': ak.__file__, 'rss_imports': rss()}
sset = ak.open_store(sys.argv[1])
heads = [tuple(int(v) for v in h.split('-')) for h in sys.argv[3].split(',')]
t0 = time.perf_counter()
emb = ak.qk_embedding(sset, heads=heads, method='pca', save=sys.argv[2], progress=False)
out['embedding_s'] = time.perf_counter() - t0
out['rss_embedding'] = rss()
t0 = time.perf_counter()
view = ak.QKScatter(emb, mode='matrix')
out['view_s'] = time.perf_counter() - t0
t0 = time.perf_counter()
png = view.to_png()
out['png_s'] = time.perf_counter() - t0
out['rss_view'] = rss()
out['points'] = view.n_points
first_draw = sys.argv[4]
with sync_playwright() as p:
    b = launch(p)
    t0 = time.perf_counter()
    wp = WidgetPage(b, view, width=760, dpr=1)
    first = wp.page.evaluate(first_draw)
    out['browser_s'] = time.perf_counter() - t0
    out['first_draw_ms'] = first['first_ms']
    out['errors'] = wp.errors()
    wp.context.close()
    b.close()
out['to_first_draw_s'] = out['embedding_s'] + out['view_s'] + out['png_s'] + out['browser_s']
t0 = time.perf_counter()
view.select(np.arange(0, view.n_points, 2))
sel = view.selected
out['selected_points'] = len(sel)
out['selected_s'] = time.perf_counter() - t0
out['rss_selected'] = rss()
t0 = time.perf_counter()
tokens = sel['token'].tolist()[:3]
out['selected_tokens_s'] = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
out['peak_rss'] = ru.ru_maxrss * 1024
out['cpu'] = ru.ru_utime + ru.ru_stime
out['load_after'] = os.getloadavg()[0]
print('RESULT ' + json.dumps(out, default=float), flush=True)
"""


def view_section(root: Path, before: str, n_heads: int = 15) -> list[str]:
    """A million points of EWT dev (``n_heads`` heads of MiniLM, 68,028 points each, PCA)
    from a store to the first drawn frame, for ``before``'s attnkit (from ``git archive``,
    with this tree's front-end bundle: the wire format is the same) and for this tree's:
    each a fresh process, one after the other (memory is each process's own; the times
    share the machine's load). The embedding is written once with ``save=`` and read back
    by both, so what is measured is the result, the view and the draw, not the projection."""
    import json
    import shutil
    import subprocess
    import tempfile

    import attnkit as ak

    store = root / "ewt-dev.zarr"
    if not store.is_dir():
        _store("dev", root)
    heads = [(l, h) for l in range(6) for h in range(12)][:n_heads]
    folder = root / f"dev-pca-{n_heads}"
    ak.qk_embedding(ak.open_store(store), heads=heads, method="pca", save=folder, progress=False)
    tmp = Path(tempfile.mkdtemp(prefix="attnkit-before-"))
    subprocess.run(f"git -C {REPO} archive {before} attnkit tests | tar -x -C {tmp}", shell=True, check=True)
    shutil.copytree(REPO / "attnkit" / "static", tmp / "attnkit" / "static", dirs_exist_ok=True)
    arg = ",".join(f"{l}-{h}" for l, h in heads)
    rows = [f"{n_heads} heads of MiniLM over EWT dev in QKScatter's matrix view (PCA, read back from `save=`), "
            f"a fresh process each, one after the other (started {time.strftime('%H:%M')}, load average "
            f"{os.getloadavg()[0]:.1f}):", "",
            "| attnkit | points | qk_embedding (s) | QKScatter + PNG (s) | browser: mount to drawn (s; first draw ms) | to first draw (s) "
            "| RSS after imports / embedding / view (MB) | peak RSS (MB) | `view.selected` of every other point (s; RSS after, MB) | load after |",
            "|---|---:|---:|---:|---|---:|---|---:|---|---:|"]
    mb = 1e6
    for name, path in ((f"before ({before})", tmp), ("now", REPO)):
        p = subprocess.run([sys.executable, "-c", VIEW_CASE, str(store), str(folder), arg, FIRST_DRAW_JS],
                           capture_output=True, text=True, cwd=path, env={**os.environ, "PYTHONPATH": str(path)})
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode or not line:
            raise SystemExit(f"{name} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        r = json.loads(line[0][len("RESULT "):])
        print(name, r, flush=True)
        rows.append(f"| {name} | {r['points']:,} | {r['embedding_s']:.2f} | {r['view_s']:.2f} + {r['png_s']:.2f} | "
                    f"{r['browser_s']:.2f} ({r['first_draw_ms']:.0f}) | {r['to_first_draw_s']:.2f} | "
                    f"{r['rss_imports'] / mb:.0f} / {r['rss_embedding'] / mb:.0f} / {r['rss_view'] / mb:.0f} | {r['peak_rss'] / mb:.0f} | "
                    f"{r['selected_points']:,} points: {r['selected_s']:.3f} ({r['rss_selected'] / mb:.0f}) | {r['load_after']:.1f} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--section", default="all", choices=["widget", "embed", "dask", "scale", "speed", "view", "all"])
    ap.add_argument("--root", default="/tmp/attnkit-qk-scale",
                    help="folder of the EWT stores of the scale section (made once, resumed)")
    ap.add_argument("--cases", default="head,million,subset,dev", help="cases of the scale section")
    ap.add_argument("--dev-runs", default="12x1,12x2,72x2", help="heads x workers of the scale section's dev case")
    ap.add_argument("--split", default="train", choices=["dev", "train"], help="EWT store of the speed section")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--subset", type=int, default=100_000, help=argparse.SUPPRESS)
    ap.add_argument("--heads", type=int, default=72, help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sentences", type=int, default=30, help="EWT dev sentences of the Dask section")
    ap.add_argument("--before", default=None,
                    help="git revision whose QKScatter bundle is measured beside this one (e.g. main)")
    args = ap.parse_args()
    if args.case:
        _case(args)
        return
    out: list[str] = []
    if args.section in ("widget", "all"):
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            b = launch(p)
            try:
                out += widget_section(b, args.quick, args.before) + [""]
            finally:
                b.close()
    if args.section in ("embed", "all"):
        out += embed_section(args.quick) + [""]
    if args.section in ("dask", "all"):
        out += dask_section(args.quick, args.sentences) + [""]
    if args.section in ("scale", "all"):
        runs = tuple(tuple(int(v) for v in r.split("x")) for r in args.dev_runs.split(","))
        out += scale_section(Path(args.root), args.quick, args.cases, runs if not args.quick else ((2, 1), (2, 2)))
    if args.section == "speed":
        out += speed_section(Path(args.root), args.before or "main", args.split)
    if args.section == "view":
        out += view_section(Path(args.root), args.before or "main")
    print("\n".join(out))


if __name__ == "__main__":
    main()
