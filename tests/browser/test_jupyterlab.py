"""End to end in a real JupyterLab: run a notebook, see the HeadGrid drawn, click a head,
read the new ``selected`` back in the kernel.

The server listens on 127.0.0.1 on a free port with token auth; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest
from conftest import REPO, _skip_or_fail

pytestmark = pytest.mark.browser

SETUP = """\
import json, pathlib
import numpy as np
import attnkit
from attnkit.widgets import HeadGrid

n, L, H = 12, 4, 4
tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
maps = np.full((L, H, n, n), 0.02, dtype=np.float32)
for l in range(L):
    for h in range(H):
        maps[l, h, np.arange(n), (np.arange(n) + l + h) % n] = 1.0
maps /= maps.sum(-1, keepdims=True)
att = attnkit.Attention(maps, tokens=tokens, roles=["cls"] + ["word"] * (n - 2) + ["sep"],
                        word_ids=[-1] + list(range(n - 2)) + [-1], words=tokens[1:-1])
grid = HeadGrid(att)
def record(change):  # written whole, then renamed: the test never reads a half-written file
    tmp = pathlib.Path("selected.json.tmp")
    tmp.write_text(json.dumps(change["new"]))
    tmp.replace("selected.json")
grid.observe(record, names="selected")
grid
"""
READ = 'print("SELECTED", grid.selected)'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout: float, what: str, step: float = 0.25):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def lab(tmp_path):
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        _skip_or_fail("jupyterlab is not installed (pip install jupyterlab)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(READ)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "grid.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"), JUPYTER_RUNTIME_DIR=str(tmp_path / ".runtime"))
    log = open(tmp_path / "lab.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
         "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.news_url=None", "--ServerApp.open_browser=False"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
    )

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited: {(tmp_path / 'lab.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(up, 90, "jupyter lab to start")
        yield {"url": f"http://127.0.0.1:{port}/lab/tree/grid.ipynb?token={token}", "dir": tmp_path}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def test_headgrid_click_reaches_the_kernel(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(lab["url"], wait_until="domcontentloaded", timeout=90_000)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        cells.first.wait_for(timeout=90_000)
        # The kernel must be connected and idle before a cell runs (else the run is dropped).
        page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=90_000)
        cells.nth(0).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        grid = page.locator(".jp-OutputArea .attnkit-headgrid")
        grid.wait_for(timeout=90_000)
        page.wait_for_function(
            "() => Number(document.querySelector('.attnkit-headgrid')?.dataset.drawn ?? 0) >= 1",
            timeout=60_000)
        assert grid.get_attribute("data-thumbnails") == "16"
        ink = page.evaluate("""() => {
            const c = document.querySelector('.attnkit-headgrid canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] && d[i] < 200) ink++;
            return ink;
        }""")
        assert ink > 1000

        # Click head (2, 3), i.e. "3-4".
        canvas = grid.locator("canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        cell = float(grid.get_attribute("data-cell"))
        x = float(grid.get_attribute("data-grid-left")) + 3 * float(grid.get_attribute("data-pitch-x")) + cell / 2
        y = float(grid.get_attribute("data-grid-top")) + 2 * float(grid.get_attribute("data-pitch-y")) + cell / 2
        page.mouse.click(box["x"] + x, box["y"] + y)
        sel = lab["dir"] / "selected.json"
        wait_for(sel.exists, 60, "the kernel to observe the click")
        assert json.loads(sel.read_text()) == [2, 3]

        # Run the second cell and read the value back from the kernel's output.
        cells.nth(1).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        out = cells.nth(1).locator(".jp-OutputArea-output")
        out.first.wait_for(timeout=60_000)
        page.wait_for_function(
            "() => document.querySelectorAll('.jp-CodeCell')[1]?.innerText.includes('SELECTED')",
            timeout=60_000)
        assert "SELECTED [2, 3]" in out.first.inner_text()
    except BaseException:
        page.screenshot(path=str(lab["dir"] / "failure.png"))
        print("screenshot:", lab["dir"] / "failure.png")
        print("log:", (lab["dir"] / "lab.log").read_text()[-3000:])
        raise
    finally:
        context.close()
