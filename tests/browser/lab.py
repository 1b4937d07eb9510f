"""A JupyterLab server for end-to-end tests and benchmarks: notebooks written into a folder,
the server on 127.0.0.1 on a free port with token auth, attnkit's JupyterLab settings override
(jupyter/overrides.d, what the wheel installs into share/jupyter/lab/settings) in effect, and
helpers to open a notebook and run its cells in a Playwright page. Every wait is bounded.

A server can also be shared: ``server.folder(name, notebooks)`` is a test's own folder below
the server's root (its own JupyterLab workspace, its own kernels), and ``Shared`` starts one
JupyterLab and one Notebook 7 server for a whole test session (tests/browser/conftest.py's
``jupyter`` fixture): each server start costs seconds of CPU, a folder none."""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from typing_extensions import Self

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen | None, log: Any) -> None:
    """End a server process (terminate, then kill after 20 s) and close its log file."""
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if log is not None:
        log.close()


def wait_for(pred, timeout: float, what: str, step: float = 0.25):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class JupyterLab:
    """``with JupyterLab(folder, {"a.ipynb": [cell, ...]}) as lab:`` runs a server on ``folder``.

    ``disabled`` names front-end extensions the server leaves out (``("anywidget",)``: a
    server from an environment without anywidget's front end); ``save_widget_state=False``
    turns off what attnkit's settings override turns on (a server from another environment
    has ipywidgets' default: notebooks are saved without their widget state).
    """

    #: the ``jupyter`` subcommand, its settings class and where it opens a notebook
    APP, SETTINGS, TREE = "lab", "LabApp", "lab/tree"
    #: whether a folder of a shared server opens its notebooks in a workspace of its own (a
    #: fresh JupyterLab page restores the layout of its workspace: other tests' notebooks)
    WORKSPACES = True

    def __init__(self, folder: Path, notebooks: dict[str, list[str]], *, disabled: tuple[str, ...] = (),
                 save_widget_state: bool = True) -> None:
        self.dir = Path(folder)
        self.notebooks = notebooks
        self.disabled = disabled
        self.save_widget_state = save_widget_state
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.root = self.dir  # the server's root folder
        self.prefix = ""  # a shared server's folder: its path below the root ("": the server's own)
        self.workspace: str | None = None

    def url(self, name: str) -> str:
        path = f"{self.prefix}/{name}" if self.prefix else name
        tree = f"lab/workspaces/{self.workspace}/tree" if self.workspace else self.TREE
        return f"{self.base}/{tree}/{path}?token={self.token}"

    def log(self) -> str:
        return (self.root / "lab.log").read_text(errors="replace")

    def folder(self, name: str, notebooks: dict[str, list[str]]) -> Self:
        """Folder ``name`` below this (running) server's root with ``notebooks`` in it, as a
        server of its own to a test: ``with server.folder("t1", {...}) as lab:`` writes the
        notebooks, opens them in workspace ``name`` (JupyterLab), ``kernels`` and
        ``shut_kernels`` see only the kernels of its notebooks, and leaving the block shuts
        them down (the server keeps running)."""
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ValueError(f"a folder name of letters, digits, - and _: {name!r}")
        sub = copy.copy(self)
        sub.dir, sub.prefix, sub.notebooks = self.root / name, name, notebooks
        sub.workspace = name if self.WORKSPACES else None
        sub.dir.mkdir()
        return sub

    def _write_notebooks(self) -> None:
        import nbformat

        for name, cells in self.notebooks.items():
            nb = nbformat.v4.new_notebook()
            nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
            nbformat.write(nb, self.dir / name)

    def __enter__(self) -> Self:
        self._write_notebooks()
        if self.prefix:  # a folder of a running server
            return self
        settings = self.dir / ".lab-settings"
        (settings / "overrides.d").mkdir(parents=True, exist_ok=True)
        (settings / "overrides.d" / "attnkit.json").write_text(
            (REPO / "jupyter" / "overrides.d" / "attnkit.json").read_text(encoding="utf-8"), encoding="utf-8")
        if not self.save_widget_state:  # a user setting wins over the override installed with attnkit
            user = self.dir / ".jupyter" / "lab" / "user-settings" / "@jupyter-widgets" / "jupyterlab-manager"
            user.mkdir(parents=True, exist_ok=True)
            (user / "plugin.jupyterlab-settings").write_text(json.dumps({"saveState": False}), encoding="utf-8")
        if self.disabled:  # what `jupyter labextension disable NAME` writes, in this server's config folder
            (self.dir / ".jupyter" / "labconfig").mkdir(parents=True, exist_ok=True)
            (self.dir / ".jupyter" / "labconfig" / "page_config.json").write_text(
                json.dumps({"disabledExtensions": {name: True for name in self.disabled}}), encoding="utf-8")
        paths = [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths),
                   JUPYTER_CONFIG_DIR=str(self.dir / ".jupyter"), JUPYTER_RUNTIME_DIR=str(self.dir / ".runtime"))
        self._log = open(self.dir / "lab.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", self.APP, "--no-browser", "--allow-root",
             "--ip=127.0.0.1", f"--port={self.port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.dir}",
             f"--{self.SETTINGS}.app_settings_dir={settings}",
             *(["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.news_url=None"] if self.APP == "lab" else []),
             "--ServerApp.open_browser=False"],
            cwd=self.dir, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"jupyter lab exited: {self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        try:
            wait_for(up, 90, "jupyter lab to start")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.prefix:  # a folder: its kernels go, the server stays
            self.shut_kernels()
        else:
            stop(self.proc, self._log)

    # ------------------------------------------------------------ in a page
    @contextmanager
    def page(self, browser: Any, width: int = 1400, height: int = 1000) -> Iterator[Any]:
        """A fresh page; on failure its screenshot and the server log are kept in the folder."""
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(60_000)
        try:
            yield page
        except BaseException:
            page.screenshot(path=str(self.dir / "failure.png"))
            print("screenshot:", self.dir / "failure.png")
            print("log:", self.log()[-3000:])
            raise
        finally:
            context.close()

    def open(self, page: Any, name: str) -> Any:
        """Open notebook ``name`` and wait for an idle kernel; returns the code cells."""
        page.goto(self.url(name), wait_until="domcontentloaded", timeout=90_000)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        cells.first.wait_for(timeout=90_000)
        # The kernel must be connected and idle before a cell runs (else the run is dropped).
        page.locator(".jp-StatusBar-TextItem", has_text="Idle").first.wait_for(timeout=90_000)
        return cells

    @staticmethod
    def run_cell(page: Any, cells: Any, i: int) -> None:
        cells.nth(i).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")

    @staticmethod
    def wait_view(page: Any, cls: str, timeout: float = 120_000) -> Any:
        """The first output's view of class ``cls`` (e.g. ``attnkit-heatmap``), once drawn."""
        view = page.locator(f".jp-OutputArea .{cls}").first
        view.wait_for(timeout=timeout)
        page.wait_for_function(
            f"() => Number(document.querySelector('.jp-OutputArea .{cls}')?.dataset.drawn ?? 0) >= 1",
            timeout=timeout)
        return view

    def _get(self, api: str) -> Any:
        for attempt in range(4):
            try:
                with urllib.request.urlopen(f"{self.base}/api/{api}?token={self.token}", timeout=10) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as err:
                # jupyter_server answers 500 to a kernel list that catches a kernel while it
                # starts (its last_activity not set yet): ask again
                if err.code != 500 or attempt == 3:
                    raise
                time.sleep(0.5)

    def kernels(self) -> list[dict]:
        """The server's running kernels; a folder's: those of its notebooks' sessions."""
        kernels = self._get("kernels")
        if not self.prefix:
            return kernels
        mine = {s["kernel"]["id"] for s in self._get("sessions")
                if s.get("kernel") and s["path"].startswith(f"{self.prefix}/")}
        return [k for k in kernels if k["id"] in mine]

    def shut_kernels(self) -> None:
        for k in self.kernels():
            req = urllib.request.Request(f"{self.base}/api/kernels/{k['id']}?token={self.token}", method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=30).close()
            except urllib.error.HTTPError as err:  # gone meanwhile (a kernel that died)
                if err.code != 404:
                    raise


class Notebook7(JupyterLab):
    """The same, served by Notebook 7 (the ``notebook`` package): one notebook per page."""

    APP, SETTINGS, TREE = "notebook", "JupyterNotebookApp", "notebooks"
    WORKSPACES = False  # a notebook page restores no layout

    def open(self, page: Any, name: str) -> Any:
        page.goto(self.url(name), wait_until="domcontentloaded", timeout=90_000)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        cells.first.wait_for(timeout=90_000)
        # Notebook 7's header shows the kernel's state only while it is not idle: ask the server
        wait_for(lambda: any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0
                             for k in self.kernels()), 90, "the notebook's kernel to be idle and connected")
        return cells


class Shared:
    """One server of each kind (JupyterLab, Notebook 7, frontends.Voila) for many tests, each
    started on first use in its own folder below ``root``: ``shared.folder(JupyterLab,
    test_name, notebooks)`` is a test's own folder of it (see ``JupyterLab.folder``). A server
    that has died is started again; ``close()`` stops them all."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.servers: dict[type, Any] = {}
        self.folders = 0

    def server(self, kind: type) -> Any:
        server = self.servers.get(kind)
        if server is None or server.proc is None or server.proc.poll() is not None:
            if server is not None:
                server.__exit__(None, None, None)
            folder = self.root / f"{kind.__name__.lower()}-{secrets.token_hex(3)}"
            folder.mkdir(parents=True)
            new = kind(folder, {}) if issubclass(kind, JupyterLab) else kind(folder)
            self.servers[kind] = server = new.__enter__()
        return server

    def folder(self, kind: type, test: str, *args: Any, **kwargs: Any) -> Any:
        """A new folder for ``test`` in the server of ``kind``: ``server.folder(name, *args, **kwargs)``."""
        self.folders += 1
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", test).strip("-")[:80]
        return self.server(kind).folder(f"{name}-{self.folders}", *args, **kwargs)

    def close(self) -> None:
        for server in self.servers.values():
            server.__exit__(None, None, None)
        self.servers.clear()
