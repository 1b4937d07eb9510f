"""Browser fixtures: Debian Chromium driven by Python playwright.

Without /usr/bin/chromium (or without playwright) the browser tests skip, except under
CI=true, where that is a failure. Never run `playwright install`: install Chromium with
`apt-get install -y chromium`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from frontends import Voila  # noqa: E402
from harness import CHROMIUM, chromium_available, launch  # noqa: E402
from lab import JupyterLab, Shared  # noqa: E402
from prereq import REPO, require_installed, skip_or_fail  # noqa: E402


# One for the session (playwright's sync API allows one instance at a time per process; every
# module uses this one): each launch of playwright's driver and Chromium costs about 0.8 s of
# CPU. Tests open pages in contexts of their own (browser.new_context / new_page).
@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed (pip install playwright; no browser download needed)")
    if not chromium_available():
        skip_or_fail(f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def img_dir(tmp_path_factory) -> Path:
    """Where screenshots go: a temporary folder, or ``$ATTNKIT_IMG_DIR`` when set (e.g.
    ``ATTNKIT_IMG_DIR=docs/img pytest tests/browser`` refreshes the README's pictures).
    Tests never write into the checkout on their own."""
    target = os.environ.get("ATTNKIT_IMG_DIR")
    path = Path(target).resolve() if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session", autouse=True)
def _bundle_built():
    static = REPO / "attnkit" / "static"
    if not (static / "headgrid.js").is_file():
        skip_or_fail(f"front end not built ({static} is empty): run `make js-build`")


@pytest.fixture(scope="session")
def _shared_jupyter(tmp_path_factory):
    shared = Shared(tmp_path_factory.mktemp("servers"))
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def jupyter(_shared_jupyter, request):
    """``with jupyter(JupyterLab, {"a.ipynb": [cell, ...]}) as lab:`` (or ``Notebook7``): the
    test's own folder, with those notebooks, in the session's one server of that kind (started
    on first use). The folder has the server's methods; it opens its notebooks in a JupyterLab
    workspace of its own (no other test's tabs), sees only its own kernels, and shuts them down
    at the end of the ``with`` block. A test that needs a server configured otherwise, or that
    stops it, starts its own (``with JupyterLab(tmp_path, ...)``)."""

    def folder(kind: type[JupyterLab], notebooks: dict[str, list[str]]) -> JupyterLab:
        require_installed("jupyterlab" if kind.APP == "lab" else "notebook",
                          f"{kind.__name__} is not installed (pip install jupyterlab notebook)")
        return _shared_jupyter.folder(kind, request.node.name, notebooks)

    return folder


@pytest.fixture
def voila(_shared_jupyter, request):
    """``with voila(cells, theme="dark") as server:``: the test's own notebook of ``cells`` in
    the session's one Voila server (serving a folder; started on first use), rendered at
    ``server.url`` in ``theme``; its kernels are shut down at the end of the ``with`` block."""

    def folder(cells: list[str], theme: str = "light") -> Voila:
        require_installed("voila", "voila is not installed (pip install voila)")
        return _shared_jupyter.folder(Voila, request.node.name, cells, theme=theme)

    return folder
