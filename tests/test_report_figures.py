"""Every figure a notebook shows is an image in the notebook and in its report, and
``attnkit report --execute`` says which cell it is running.

Figures built without pyplot (attnkit's own, returned as a cell's value) once showed as the
text ``<Figure size 550x340 with 1 Axes>`` when no pyplot figure had been drawn before them
(notebook 01, Figs. 2 and 4). The notebook below draws them first, then a pyplot one.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from prereq import skip_or_fail
from figure_checks import check_figures
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnkit.apps import report
from attnkit.apps.cli import main

SETUP = """\
import attnkit as ak
from attnkit.testing import tiny_model
att = tiny_model("bert").attend("The cat sat on the mat.")
stats = ak.head_stats([att])"""

#: (source, figures it shows)
CELLS = [
    (SETUP, 0),
    ("ak.plot.plot_special_attention(stats)", 1),  # a pyplot-free Figure, before any pyplot
    ("ak.plot.plot_head_grid(att.maps)", 1),
    ("ak.plot.plot_entropy(stats)", 1),
    ("import matplotlib.pyplot as plt\nplt.plot([0, 1]);", 1),  # pyplot: shown by the backend
    ("fig = ak.plot.plot_special_attention(stats)\nfig", 1),
    ("x = 1", 0),
]
@pytest.fixture()
def bundle():
    """The report renderer must be built (attnkit/static/report.js)."""
    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && "
                     "npm --prefix js/report run build")


@pytest.mark.slow
def test_every_figure_is_an_image_and_cells_report_progress(tmp_path, capsys, bundle):
    nb = new_notebook(cells=[new_markdown_cell("# figures")]
                      + [new_code_cell(src) for src, _ in CELLS])
    path, html, done = tmp_path / "figs.ipynb", tmp_path / "figs.html", tmp_path / "done.ipynb"
    nbformat.write(nb, path)
    capsys.readouterr()
    assert main(["report", str(path), "-o", str(html), "--execute", "--save-notebook", str(done)]) == 0
    err = capsys.readouterr().err
    total = len(CELLS)
    starts = re.findall(rf"^\s+\[\s*(\d+)/{total}\] (.*)$", err, re.MULTILINE)
    assert [int(i) for i, text in starts if not text.startswith("done in")] == list(range(1, total + 1))
    assert f"[1/{total}] import attnkit as ak" in err
    executed = nbformat.read(done, as_version=4)
    assert check_figures(executed, html.read_text(encoding="utf-8"), [n for _, n in CELLS]) == 5


def test_on_cell_hears_each_code_cell(tmp_path):
    nb = new_notebook(cells=[new_code_cell("a = 1"), new_markdown_cell("text"), new_code_cell(""),
                             new_code_cell("import time\ntime.sleep(0.2)")])
    events = []
    report.execute_notebook(nb, cwd=tmp_path,
                            on_cell=lambda i, n, cell, s: events.append((i, n, cell.source, s)))
    assert [(i, n, src) for i, n, src, _ in events] == [
        (1, 2, "a = 1"), (1, 2, "a = 1"),
        (2, 2, "import time\ntime.sleep(0.2)"), (2, 2, "import time\ntime.sleep(0.2)")]
    assert events[0][3] is None and events[2][3] is None
    assert events[3][3] >= 0.2


def test_quiet_report_prints_no_cell_lines(tmp_path, capsys, bundle):
    path = tmp_path / "one.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1")]), path)
    assert main(["report", str(path), "-o", str(tmp_path / "one.html"), "--execute", "-q"]) == 0
    assert "[1/1]" not in capsys.readouterr().err
