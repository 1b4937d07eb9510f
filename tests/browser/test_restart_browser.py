"""A kernel restarted while a view fills in leaves a consistent view (issue 19), end to end in
a real JupyterLab:

- a HeadGrid over lazy attention is restarted (Kernel menu, "Restart Kernel…", the dialog's
  Restart) after some heads are drawn: the heads it had keep their pixels, the others stay
  blank in the blank colour (nothing stale arrives later), the status says within a few
  seconds that the computation stopped because the kernel was restarted (not "computing…"),
  the console stays free of errors, and running the cell again gives a fresh grid that fills in
  completely;
- the same for a long-input Heatmap whose overview fills in band by band: the rows read keep
  their pixels, the rest stay blank.

The server listens on 127.0.0.1 on a free port with token auth (one for the session: each test
in a folder and workspace of its own, its kernel restarted or killed alone,
tests/browser/conftest.py); every wait is bounded.
"""

from __future__ import annotations

import time

import pytest
from lab import JupyterLab

pytestmark = pytest.mark.browser

# 16 heads of 8,192 tokens take ~7 s to fill in (8 took 3.7 s in one thread, measured): the
# restart comes after 2
GRID = """\
from attnkit.widgets import HeadGrid
from qk_attention import QKAttention  # tests/ is on the kernel's path

HeadGrid(QKAttention(8192, 4, 4))
"""
HEATMAP = """\
from attnkit.widgets import Heatmap
from qk_attention import QKAttention  # tests/ is on the kernel's path

Heatmap(QKAttention(16384, 1, 1, d=1024))  # wide queries and keys: a slow head to read
"""
#: seconds after the restart within which the status must say the computation stopped
SAYS_WITHIN_MS = 5_000

# Every thumbnail's pixels (one string per head) and whether it is one flat colour (blank).
THUMBS = """(root) => {
    const c = root.querySelector('canvas'); const r = c.width / c.clientWidth;
    const cell = Number(root.dataset.cell), left = Number(root.dataset.gridLeft), top = Number(root.dataset.gridTop);
    const px = Number(root.dataset.pitchX), py = Number(root.dataset.pitchY);
    const heads = Number(root.dataset.thumbnails), cols = 4, out = [];
    const ctx = c.getContext('2d');
    for (let k = 0; k < heads; k++) {
        const x = Math.round((left + (k % cols) * px + 1) * r), y = Math.round((top + Math.floor(k / cols) * py + 1) * r);
        const d = ctx.getImageData(x, y, Math.floor((cell - 2) * r), Math.floor((cell - 2) * r)).data;
        let flat = true;
        for (let i = 4; i < d.length; i += 4)
            if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) { flat = false; break; }
        out.push({ flat, first: [d[0], d[1], d[2]].join(','), pixels: Array.from(d).join(',') });
    }
    return { thumbs: out, ready: Number(root.dataset.ready), computing: root.dataset.computing,
             status: root.querySelector('.attnkit-status').textContent };
}"""

# The overview's first column (a cell 1.4 px wide at 512 cells), one pixel per device pixel row: the
# first tokens, a sink every row attends to, so never blank once read.
COLUMN = """(root) => {
    const c = root.querySelector('canvas'); const r = c.width / c.clientWidth;
    const left = Number(root.dataset.plotLeft), top = Number(root.dataset.plotTop), plot = Number(root.dataset.plotSize);
    const d = c.getContext('2d').getImageData(Math.floor((left + 0.7) * r), Math.round(top * r), 1, Math.floor(plot * r)).data;
    const rows = [];
    for (let i = 0; i < d.length; i += 4) rows.push([d[i], d[i + 1], d[i + 2]].join(','));
    return { rows, ready: Number(root.dataset.rowsReady), computing: root.dataset.computing,
             status: root.querySelector('.attnkit-status').textContent };
}"""


@pytest.fixture
def lab(jupyter):
    with jupyter(JupyterLab, {"grid.ipynb": [GRID], "heatmap.ipynb": [HEATMAP]}) as server:
        yield server


def _errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    return errors


def _restart(page) -> float:
    """Restart the kernel as a user does (Kernel menu, then the dialog's Restart); returns
    performance.now() at the confirmation."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel").first.click()
    page.locator(".jp-Dialog-button.jp-mod-accept").click()
    return page.evaluate("() => performance.now()")


def _stopped_within(page, cls: str, t0: float) -> float:
    """Milliseconds from ``t0`` until the view's status says the kernel was restarted."""
    status = f"document.querySelector('.jp-OutputArea .{cls} .attnkit-status')?.textContent ?? ''"
    try:
        page.wait_for_function(f"() => ({status}).includes('stopped: the kernel was restarted')",
                               timeout=SAYS_WITHIN_MS + 20_000, polling=100)
    except Exception as err:  # noqa: BLE001 - say what the status said instead
        raise AssertionError(f"{SAYS_WITHIN_MS + 20_000} ms after the restart the status says "
                             f"{page.evaluate(f'() => {status}')!r}") from err
    return page.evaluate("() => performance.now()") - t0


def _rerun(lab, page, cells) -> None:
    """Once the new kernel is idle, run the cell again."""
    page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=60_000)
    lab.run_cell(page, cells, 0)


def test_headgrid_keeps_its_heads_when_the_kernel_restarts(browser, lab):
    with lab.page(browser, height=1100) as page:
        errors = _errors(page)
        cells = lab.open(page, "grid.ipynb")
        lab.run_cell(page, cells, 0)
        grid = lab.wait_view(page, "attnkit-headgrid", timeout=60_000)
        v = "document.querySelector('.jp-OutputArea .attnkit-headgrid')"
        page.wait_for_function(f"() => Number({v}.dataset.ready) >= 2", timeout=60_000, polling=50)
        before = grid.evaluate(THUMBS)
        assert before["computing"] == "running" and before["ready"] < 16, before["status"]
        t0 = _restart(page)
        said_ms = _stopped_within(page, "attnkit-headgrid", t0)
        time.sleep(1.5)  # anything the old kernel still sent has arrived by now
        after = grid.evaluate(THUMBS)
        assert said_ms < SAYS_WITHIN_MS, f"the status said the kernel was restarted {said_ms:.0f} ms after it"
        ready = after["ready"]
        assert 2 <= ready < 16 and after["computing"].startswith("stopped"), (ready, after["computing"])
        assert f"{ready} of 16 heads computed; stopped: the kernel was restarted" in after["status"], after["status"]
        assert "computing thumbnails" not in after["status"]
        # the heads it had keep their pixels; exactly `ready` heads are drawn, the rest blank
        for k, (b, a) in enumerate(zip(before["thumbs"], after["thumbs"])):
            if not b["flat"]:
                assert a["pixels"] == b["pixels"], f"head {k} changed after the restart"
        drawn = [k for k, a in enumerate(after["thumbs"]) if not a["flat"]]
        assert len(drawn) == ready, (drawn, ready)
        blank = {a["first"] for a in after["thumbs"] if a["flat"]}
        assert blank == {b["first"] for b in before["thumbs"] if b["flat"]} and len(blank) == 1, blank
        # nothing stale arrives later, and the status stays put (not "computing…" again)
        time.sleep(2)
        later = grid.evaluate(THUMBS)
        assert later == after
        # running the cell again gives a fresh grid that fills in completely
        _rerun(lab, page, cells)
        page.wait_for_function(f"() => {v}?.dataset.computing === 'done' && {v}.dataset.ready === '16'",
                               timeout=120_000)
        fresh = page.locator(".jp-OutputArea .attnkit-headgrid").first.evaluate(THUMBS)
        assert not any(t["flat"] for t in fresh["thumbs"]) and "stopped" not in fresh["status"]
        assert errors == [], errors
        print(f"restart: {ready} of 16 heads kept; status said so after {said_ms:.0f} ms")


def test_heatmap_keeps_its_rows_when_the_kernel_restarts(browser, lab):
    with lab.page(browser, height=1300) as page:
        errors = _errors(page)
        cells = lab.open(page, "heatmap.ipynb")
        lab.run_cell(page, cells, 0)
        hm = lab.wait_view(page, "attnkit-heatmap", timeout=60_000)
        v = "document.querySelector('.jp-OutputArea .attnkit-heatmap')"
        page.wait_for_function(f"() => Number({v}.dataset.rowsReady) >= 24", timeout=60_000, polling=50)
        before = hm.evaluate(COLUMN)
        assert before["computing"] == "running" and before["ready"] < 512, before["status"]
        t0 = _restart(page)
        said_ms = _stopped_within(page, "attnkit-heatmap", t0)
        time.sleep(1.5)
        after = hm.evaluate(COLUMN)
        assert said_ms < SAYS_WITHIN_MS, f"the status said the kernel was restarted {said_ms:.0f} ms after it"
        ready = after["ready"]
        assert before["ready"] <= ready < 512 and after["computing"].startswith("stopped"), (ready, after["computing"])
        assert f"{ready} of 512 rows of cells computed; stopped: the kernel was restarted" in after["status"], after["status"]
        assert "computing the overview" not in after["status"]
        # rows read before keep their pixels; rows never read are the blank colour
        n = len(after["rows"])
        was = int(n * before["ready"] / 512) - 1
        assert after["rows"][:was] == before["rows"][:was]
        empty = after["rows"][-1]
        read = int(n * ready / 512) - 1
        assert empty not in after["rows"][:read], "a read row is drawn in the blank colour"
        assert set(after["rows"][int(n * ready / 512) + 2:]) == {empty}, "rows never read are not blank"
        time.sleep(2)
        assert hm.evaluate(COLUMN) == after
        _rerun(lab, page, cells)
        page.wait_for_function(f"() => {v}?.dataset.computing === 'done' && {v}.dataset.rowsReady === '512'",
                               timeout=120_000)
        fresh = page.locator(".jp-OutputArea .attnkit-heatmap").first.evaluate(COLUMN)
        assert empty not in fresh["rows"][:-2] and "stopped" not in fresh["status"]
        assert errors == [], errors
        print(f"restart: {ready} of 512 rows kept; status said so after {said_ms:.0f} ms")


# ------------------------------------------------------- a kernel that dies (issue 28)
GRID_PID = "import os, pathlib\npathlib.Path('kernel.pid').write_text(str(os.getpid()))\n" + GRID


@pytest.mark.parametrize("server", ["jupyterlab", "notebook7"])
def test_headgrid_says_at_once_that_its_kernel_died(browser, jupyter, server):
    """The kernel process is killed (SIGKILL, as the out-of-memory killer does) while a
    HeadGrid fills in; nobody restarts it. The view's status says within SAYS_WITHIN_MS that
    the computation stopped because the kernel died, and keeps the heads it had (before: it
    waited for its requests to time out, about 20 s, and said the kernel was silent)."""
    import os
    import signal

    from lab import Notebook7

    cls = JupyterLab if server == "jupyterlab" else Notebook7
    with jupyter(cls, {"grid.ipynb": [GRID_PID]}) as lab, lab.page(browser, height=1100) as page:
        errors = _errors(page)
        cells = lab.open(page, "grid.ipynb")
        lab.run_cell(page, cells, 0)
        grid = lab.wait_view(page, "attnkit-headgrid", timeout=60_000)
        v = "document.querySelector('.jp-OutputArea .attnkit-headgrid')"
        page.wait_for_function(f"() => Number({v}.dataset.ready) >= 2", timeout=60_000, polling=50)
        before = grid.evaluate(THUMBS)
        assert before["computing"] == "running" and before["ready"] < 16, before["status"]
        os.kill(int((lab.dir / "kernel.pid").read_text()), signal.SIGKILL)
        t0 = page.evaluate("() => performance.now()")
        status = f"{v}?.querySelector('.attnkit-status')?.textContent ?? ''"
        page.wait_for_function(f"() => ({status}).includes('stopped: the kernel died')", timeout=30_000, polling=100)
        said_ms = page.evaluate("() => performance.now()") - t0
        after = grid.evaluate(THUMBS)
        assert said_ms < SAYS_WITHIN_MS, f"the status said the kernel died {said_ms:.0f} ms after it"
        ready = after["ready"]
        assert f"{ready} of 16 heads computed; stopped: the kernel died" in after["status"], after["status"]
        assert grid.evaluate("(root) => root.dataset.kernel") == "gone"
        for k, (b, a) in enumerate(zip(before["thumbs"], after["thumbs"])):
            if not b["flat"]:
                assert a["pixels"] == b["pixels"], f"head {k} changed after the kernel died"
        # Notebook 7's own page throws this when its kernel dies, with no widget on the page
        # (a notebook of `1 + 1`, the kernel killed: the same error)
        errors = [e for e in errors if not (server == "notebook7" and "reading 'schema'" in e)]
        assert errors == [], errors
        print(f"{server}: the kernel died; the status said so after {said_ms:.0f} ms")
