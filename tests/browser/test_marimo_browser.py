"""attnkit's views in marimo (issue 19: one behaviour in every front end).

``marimo run`` serves an app whose cells show a HeadGrid through ``mo.ui.anywidget`` and a
FlowView and a 2,048-token Heatmap as they are (marimo wraps any anywidget itself); the
views live in shadow roots. They draw, take their keys, and the Heatmap fetches exact tiles
from the kernel. The app runs in marimo's dark theme, which has none of JupyterLab's theme
variables: the views must turn dark with the page (they stayed white before).
"""

from __future__ import annotations

import textwrap

import pytest
from frontends import CORNER, INK, VIEWS_SETUP, Marimo, views_work
from lab import wait_for
from prereq import require_installed

pytestmark = pytest.mark.browser

APP = f'''\
import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo
{textwrap.indent(VIEWS_SETUP, "    ")}
    return FlowView, HeadGrid, Heatmap, att, long, mo


@app.cell
def _(HeadGrid, att, mo):
    grid = mo.ui.anywidget(HeadGrid(att))
    grid
    return


@app.cell
def _(FlowView, att):
    FlowView(att)
    return


@app.cell
def _(Heatmap, long):
    Heatmap(long)
    return
'''


@pytest.fixture
def marimo_dark(tmp_path):
    require_installed("marimo", "marimo is not installed (pip install marimo)")
    with Marimo(tmp_path, APP, theme="dark") as server:
        yield server


def test_views_draw_keys_tiles_and_dark_theme_in_marimo(browser, marimo_dark):
    with marimo_dark.page(browser) as page:
        page.goto(marimo_dark.url, wait_until="domcontentloaded", timeout=120_000)
        found = views_work(page)
        assert page.evaluate("() => document.body.classList.contains('dark')")  # marimo's dark theme is on
        for kind, got in found.items():
            assert sum(got["bg"]) < 3 * 60, (kind, got)  # the view's background is dark
            corner = page.locator(f".attnkit-{kind}").first.evaluate(CORNER)
            assert sum(corner) < 3 * 60, (kind, corner)  # and so is its canvas


def test_notebook_05_composition_section_shows_under_marimo_run(browser, tmp_path, monkeypatch):
    """Notebook 05 converted with ``marimo convert`` and served by ``marimo run`` (quick mode):
    its composition section shows the composition table, the random baseline, the strongest
    K-composition into each layer-2 head and the composition HeadMap (before: the table went
    through IPython's ``display`` and the strongest pairs through ``print``, which ``marimo
    run`` sends to the server's terminal: the section's numbers silently disappeared)."""
    import subprocess
    import sys

    from lab import REPO

    require_installed("marimo", "marimo is not installed (pip install marimo)")
    monkeypatch.setenv("ATTNKIT_QUICK", "1")
    app = tmp_path / "nb05.py"
    subprocess.run([sys.executable, "-m", "marimo", "convert", str(REPO / "notebooks" / "05_why_a_head_attends.ipynb"),
                    "-o", str(app)], check=True, capture_output=True, timeout=120, cwd=tmp_path)
    (tmp_path / "srv").mkdir()
    with Marimo(tmp_path / "srv", app.read_text(encoding="utf-8")) as server, server.page(browser, height=1400) as page:
        page.goto(server.url, wait_until="domcontentloaded", timeout=120_000)
        section = page.get_by_text("strongest K-composition from").first
        section.wait_for(timeout=240_000)
        text = page.evaluate("() => document.body.innerText")
        start = text.index("1. Composition from the weights")
        part = text[start:text.index("2. The induction stripe")]
        assert "source head" in part and "target head" in part, part[:800]  # the composition table
        assert "p99" in part and "random 99th percentile" in part, part[:800]  # baseline, strongest
        assert part.count("1-1") >= 2, part[:800]  # both layer-2 heads read the previous-token head 1-1
        headmap = page.locator(".attnkit-headmap").first
        headmap.wait_for(timeout=120_000)
        wait_for(lambda: int(headmap.get_attribute("data-drawn") or 0) >= 1, 60, "the composition map to draw")
        assert headmap.evaluate(INK)["ink"] > 500
