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
from frontends import CORNER, VIEWS_SETUP, Marimo, views_work
from prereq import skip_or_fail

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
    try:
        import marimo  # noqa: F401
    except ImportError:
        skip_or_fail("marimo is not installed (pip install marimo)")
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
