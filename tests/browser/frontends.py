"""Voila and marimo servers for end-to-end tests, and the checks every front end shares.

``Voila(folder, cells)`` serves a notebook made of ``cells`` as a Voila app (token auth);
``Marimo(folder, source)`` runs the marimo app ``source`` with ``marimo run`` (no token:
it listens on 127.0.0.1 only). Both run on a free port with attnkit and tests/ on the
kernel's path; every wait is bounded. ``Voila(folder)`` serves a folder instead:
``server.folder(name, cells, theme)`` is a test's own notebook in it, its kernels shut down at
the end (tests/browser/conftest.py's ``voila`` fixture: one such server for the session).
``views_work(page)`` is what each front end must do with the same three views (HeadGrid,
FlowView, a 2,048-token Heatmap).
"""

from __future__ import annotations

import copy
import os
import re
import secrets
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import Self

from lab import REPO, free_port, stop, wait_for

#: the three views every front end shows (tiny random BERT; a long causal map for tiles)
VIEWS_SETUP = """\
import attnkit
from attnkit.testing import tiny_model
from attnkit.widgets import FlowView, HeadGrid, Heatmap
from qk_attention import causal_random_map  # tests/ is on the kernel's path

att = tiny_model("bert").attend("The cat sat on the mat.")
n = 2048
long = attnkit.Attention.from_maps(causal_random_map(n)[None, None], ["<s>"] + [f"w{i}" for i in range(1, n)])
"""

#: Pixels of a view's canvases that differ from its background (|Δr|+|Δg|+|Δb| > 60), and
#: the background itself (the root's computed colour). Runs on the view's root element.
INK = """root => {
    const bg = getComputedStyle(root).backgroundColor.match(/[\\d.]+/g).slice(0, 3).map(Number);
    let ink = 0;
    for (const c of root.querySelectorAll('canvas')) {
        if (!c.width || !c.height) continue;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4)
            if (d[i + 3] > 200 && Math.abs(d[i] - bg[0]) + Math.abs(d[i + 1] - bg[1]) + Math.abs(d[i + 2] - bg[2]) > 60) ink++;
    }
    return {ink, bg};
}"""

#: The colour of a canvas pixel in the top left corner of a view's first canvas (its background).
CORNER = """root => { const c = root.querySelector('canvas');
    return Array.from(c.getContext('2d').getImageData(1, 1, 1, 1).data.slice(0, 3)); }"""


class _Server:
    """A server process on a free port of 127.0.0.1, its output in ``folder/server.log``."""

    def __init__(self, folder: Path) -> None:
        self.dir = self.root = Path(folder)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self._log: Any = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> dict[str, str]:
        """Write the app's files; the extra environment of the server."""
        return {}

    def log(self) -> str:
        return (self.root / "server.log").read_text(errors="replace")

    def __enter__(self) -> Self:
        extra = self.prepare()
        paths = [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
                   JUPYTER_CONFIG_DIR=str(self.dir / ".jupyter"), JUPYTER_RUNTIME_DIR=str(self.dir / ".runtime"), **extra)
        self._log = open(self.dir / "server.log", "wb")
        self.proc = subprocess.Popen(self.command(), cwd=self.dir, env=env, stdout=self._log, stderr=subprocess.STDOUT)

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.command()[2]} exited: {self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False

        try:
            wait_for(up, 90, f"{type(self).__name__} to listen")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc, self._log)

    @contextmanager
    def page(self, browser: Any, width: int = 1300, height: int = 1100, **options: Any) -> Iterator[Any]:
        """A fresh page; on failure its screenshot and the server log are kept in the folder."""
        context = browser.new_context(viewport={"width": width, "height": height}, **options)
        page = context.new_page()
        page.set_default_timeout(60_000)
        try:
            yield page
        except BaseException:
            page.screenshot(path=str(self.dir / "failure.png"), full_page=True)
            print("screenshot:", self.dir / "failure.png")
            print("log:", self.log()[-3000:])
            raise
        finally:
            context.close()


class Voila(_Server):
    """``voila app.ipynb`` on a notebook of ``cells`` (``theme``: Voila's light or dark).

    Without ``cells``, ``voila folder``: ``folder(name, cells, theme)`` then gives a test its
    own subfolder with its ``app.ipynb``, rendered at ``url`` in ``theme`` (Voila's ``?theme=``);
    leaving its ``with`` block shuts down the kernels started meanwhile."""

    def __init__(self, folder: Path, cells: list[str] | None = None, theme: str = "light") -> None:
        super().__init__(folder)
        self.cells, self.theme = cells, theme
        self.token = secrets.token_hex(16)
        self.url = f"{self.base}/?token={self.token}"
        self.prefix = ""  # a folder of a shared server: its name
        self._before: set[str] = set()

    def folder(self, name: str, cells: list[str], theme: str = "light") -> Voila:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ValueError(f"a folder name of letters, digits, - and _: {name!r}")
        sub = copy.copy(self)
        sub.dir, sub.prefix, sub.cells, sub.theme = self.root / name, name, cells, theme
        sub.url = f"{self.base}/voila/render/{name}/app.ipynb?token={self.token}&theme={theme}"
        sub.dir.mkdir()
        return sub

    def _kernel_ids(self) -> set[str]:
        """The server's kernels: its connection files (Voila has no API that lists them)."""
        return {f.stem.removeprefix("kernel-") for f in (self.root / ".connections").glob("*/kernel-*.json")}

    def __enter__(self) -> Self:
        if not self.prefix:
            return super().__enter__()
        self.prepare()
        self._before = self._kernel_ids()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.prefix:
            return super().__exit__(*exc)
        for kernel in self._kernel_ids() - self._before:  # what the page started
            req = urllib.request.Request(f"{self.base}/api/kernels/{kernel}?token={self.token}", method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=30).close()
            except urllib.error.HTTPError as err:  # gone meanwhile
                if err.code != 404:
                    raise

    def prepare(self) -> dict[str, str]:
        import nbformat

        (self.root / ".connections").mkdir(exist_ok=True)
        if self.cells is None:
            return {}
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in self.cells]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, self.dir / "app.ipynb")
        return {}

    def command(self) -> list[str]:
        return [sys.executable, "-m", "voila", "app.ipynb" if self.cells is not None else ".", "--no-browser",
                f"--port={self.port}", "--Voila.ip=127.0.0.1", f"--token={self.token}", f"--theme={self.theme}",
                "--Voila.port_retries=0", f"--Voila.connection_dir_root={self.root / '.connections'}"]


class Marimo(_Server):
    """``marimo run app.py`` on ``source`` (``theme``: marimo's display theme)."""

    def __init__(self, folder: Path, source: str, theme: str = "light") -> None:
        super().__init__(folder)
        self.source, self.theme = source, theme
        self.url = f"{self.base}/"

    def prepare(self) -> dict[str, str]:
        (self.dir / "app.py").write_text(self.source, encoding="utf-8")
        config = self.dir / ".config"
        (config / "marimo").mkdir(parents=True, exist_ok=True)
        (config / "marimo" / "marimo.toml").write_text(f'[display]\ntheme = "{self.theme}"\n', encoding="utf-8")
        return {"XDG_CONFIG_HOME": str(config), "HOME": str(self.dir)}

    def command(self) -> list[str]:
        return [sys.executable, "-m", "marimo", "run", "app.py", "--headless", "--host", "127.0.0.1",
                "--port", str(self.port), "--no-token", "--no-sandbox", "--no-check"]


def views_work(page: Any) -> dict[str, Any]:
    """The HeadGrid, FlowView and 2,048-token Heatmap on ``page`` draw, their keys work
    (arrows move the FlowView slider, ``+`` zooms the Heatmap) and the Heatmap fetches exact
    tiles from the kernel as it zooms in. Returns each view's ink and background."""
    views = {kind: page.locator(f".attnkit-{kind}").first for kind in ("headgrid", "flow", "heatmap")}
    for kind, view in views.items():
        view.wait_for(timeout=120_000)
        wait_for(lambda v=view: int(v.get_attribute("data-drawn") or 0) >= 1, 60, f"the {kind} to draw")
    found = {kind: view.evaluate(INK) for kind, view in views.items()}
    for kind, got in found.items():
        assert got["ink"] > 2000, (kind, got)

    slider = views["flow"].locator("input[type=range]")
    slider.scroll_into_view_if_needed()
    slider.focus()
    before, drawn = float(slider.input_value()), int(views["flow"].get_attribute("data-drawn"))
    for key in ("ArrowUp", "ArrowUp", "ArrowDown"):
        page.keyboard.press(key)
    assert float(slider.input_value()) == pytest.approx(before + 0.01)
    wait_for(lambda: int(views["flow"].get_attribute("data-drawn")) > drawn, 10, "the FlowView to redraw")

    hm = views["heatmap"]
    assert hm.get_attribute("data-level") == "2"  # 2,048 tokens: the 512-bin overview
    canvas = hm.locator("canvas").first
    canvas.scroll_into_view_if_needed()
    canvas.focus()
    for _ in range(4):
        page.keyboard.press("+")
    wait_for(lambda: (hm.get_attribute("data-level"), hm.get_attribute("data-missing")) == ("0", "0")
             and int(hm.get_attribute("data-tiles") or 0) > 0, 60, "exact tiles from the kernel")
    assert hm.get_attribute("data-link") == "ok"
    return found
