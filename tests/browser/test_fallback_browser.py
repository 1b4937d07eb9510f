"""The static picture wherever the front-end extension is missing (issue 19, item 3).

A Jupyter server from another environment than the attnkit kernel has a widget manager but no
anywidget front end. It renders only the widget view of an output that offers one, so the PNG
beside the view never showed: a live run drew an error widget, and a reopened notebook (the
models went with the kernel) said "Error displaying widget: model not found". IPython now
shows each attnkit widget as two outputs, its picture and then its view; the view hides the
picture once it has drawn (js/src/lib/fallback.ts).

Here: Notebook 7 with anywidget's front end disabled (what ``jupyter labextension disable
anywidget``) and ipywidgets' default settings (notebooks saved without widget state) shows the pictures in a live run and after a reopen; JupyterLab with the front end
shows each figure once, the live view, its picture hidden.
"""

from __future__ import annotations

import pytest
from prereq import skip_or_fail
from lab import JupyterLab, Notebook7, wait_for

pytestmark = pytest.mark.browser

VIEWS = """\
import numpy as np
import attnkit
from attnkit.widgets import FlowView, HeadGrid, Heatmap

rng = np.random.default_rng(0)
maps = rng.dirichlet(np.full(10, 0.3), size=(2, 2, 10)).astype(np.float32)
att = attnkit.Attention.from_maps(maps, ["[CLS]"] + [f"w{i}" for i in range(8)] + ["[SEP]"])
display(HeadGrid(att))
Heatmap(att, layer=1, head=0)
"""

#: Each static picture: shown (laid out with a size) and decoded (a PNG, not a broken image).
PICTURES = """() => [...document.querySelectorAll('.jp-OutputArea img.attnkit-static')].map(img => ({
    shown: img.getBoundingClientRect().width > 50 && img.getBoundingClientRect().height > 50,
    decoded: img.complete && img.naturalWidth > 50,
    hidden: img.closest('.jp-OutputArea-child')?.dataset.attnkitStatic === 'hidden'}))"""


def _server(kind, tmp_path, **options):
    try:
        import jupyterlab  # noqa: F401
        import notebook  # noqa: F401
    except ImportError:
        skip_or_fail("jupyterlab and notebook are not installed (pip install jupyterlab notebook)")
    return kind(tmp_path, {"views.ipynb": [VIEWS]}, **options)


def test_pictures_show_where_anywidget_is_missing(browser, tmp_path):
    # a server of its own: anywidget's front end disabled, widget state not saved
    with _server(Notebook7, tmp_path, disabled=("anywidget",), save_widget_state=False) as nb7, \
            nb7.page(browser, height=1400) as page:
        cells = nb7.open(page, "views.ipynb")
        nb7.run_cell(page, cells, 0)
        # the live run: the widget manager cannot load anywidget, the pictures stay
        page.wait_for_function(f"() => {{ const p = ({PICTURES})(); return p.length === 2 && p.every(x => x.shown && x.decoded); }}",
                               timeout=120_000)
        assert page.locator(".attnkit-heatmap, .attnkit-headgrid").count() == 0  # no view drew

        # save, end the kernel, reopen: the models are gone, the pictures are not
        page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        saved = nb7.dir / "views.ipynb"
        wait_for(lambda: saved.read_text(encoding="utf-8").count("attnkit-static-") >= 2, 60, "the notebook to be saved")
        assert "widget-state" not in saved.read_text(encoding="utf-8")
        nb7.shut_kernels()
        page.reload(wait_until="domcontentloaded")
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=90_000)
        page.wait_for_function(f"() => {{ const p = ({PICTURES})(); return p.length === 2 && p.every(x => x.shown && x.decoded && !x.hidden); }}",
                               timeout=90_000)
        # the widget manager has given up on the models by now ("model not found"): the
        # pictures stand above its note
        page.wait_for_function("() => document.querySelector('.jp-Notebook').innerText.includes('model not found')",
                               timeout=60_000)
        text = page.locator(".jp-Notebook").inner_text()
        assert text.count("model not found") == 2, text


def test_a_live_view_hides_its_picture(browser, jupyter):
    with jupyter(JupyterLab, {"views.ipynb": [VIEWS]}) as lab, lab.page(browser, height=1400) as page:
        cells = lab.open(page, "views.ipynb")
        lab.run_cell(page, cells, 0)
        lab.wait_view(page, "attnkit-headgrid")
        lab.wait_view(page, "attnkit-heatmap")
        page.wait_for_function(f"() => {{ const p = ({PICTURES})(); return p.length === 2 && p.every(x => x.hidden && !x.shown); }}",
                               timeout=30_000)
        # each figure once: two views and nothing else visible in the outputs
        shown = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-child')]
            .filter(o => o.getBoundingClientRect().height > 0).map(o => o.querySelector('.attnkit')?.className ?? o.innerText)""")
        assert shown == ["attnkit attnkit-headgrid", "attnkit attnkit-heatmap"], shown
