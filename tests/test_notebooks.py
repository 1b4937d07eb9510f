"""The notebooks in notebooks/ run end to end in quick mode, as CI runs them.

Every ``notebooks/*.ipynb`` (found by glob, so a new notebook is tested as soon as it is
added) is executed with nbclient in a fresh kernel of this Python (the executor of
:mod:`attnkit.apps.report`), from the notebooks/ folder, with ``ATTNKIT_QUICK=1``; a failing cell
fails the test and the message names the cell. Running them needs the real data and the
bundled model: skipped without them, except under ``CI=true``.

Checked without running anything: each notebook is stored without outputs and starts with a
code cell tagged ``parameters`` that defines MODEL, DATA and QUICK (from ATTNKIT_QUICK).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from figure_checks import check_figures

from attnkit.apps import report

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _ids(path: Path) -> str:
    return path.stem


def test_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    assert {"02_attention_flows.ipynb", "03_classroom_tour.ipynb", "04_decoder_attention.ipynb"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_stored_without_outputs(path):
    nb = report.read_notebook(path)
    dirty = [i + 1 for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs; clear them before committing "
                       "(jupyter nbconvert --clear-output --inplace)")
    assert "widgets" not in nb.metadata, f"{path.name} carries saved widget state"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_parameters_cell_first(path):
    nb = report.read_notebook(path)
    found = report.parameters_cell(nb)
    assert found is not None, f"{path.name} has no code cell tagged 'parameters'"
    index, cell = found
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert index == first_code, f"{path.name}: the parameters cell must be the first code cell"
    params = report.parameter_literals(cell.source)
    assert {"MODEL", "DATA", "QUICK"} <= set(params), sorted(params)
    assert "ATTNKIT_QUICK" in str(params["QUICK"])


def _free_names(sources: list[str]) -> set[str]:
    """Names the cells read that no cell defines (import, assignment, def, class, loop or
    comprehension target, with/except alias) and that are not Python builtins."""
    import ast
    import builtins

    defined: set[str] = set(dir(builtins))
    used: set[str] = set()
    for src in sources:
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.Name):
                (defined if isinstance(node.ctx, (ast.Store, ast.Del)) else used).add(node.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                defined.add(node.name)
    return used - defined


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_every_name_is_defined_outside_ipython_too(path):
    """A notebook imports what it uses: ``display`` is a builtin of IPython only, so a notebook
    converted to a marimo app or a script (``marimo convert``) failed with ``NameError:
    display`` where it never imported it (issue 28, item 13: notebook 05)."""
    nb = report.read_notebook(path)
    sources = ["\n".join(line for line in c.source.splitlines() if not line.lstrip().startswith(("%", "!")))
               for c in nb.cells if c.cell_type == "code"]
    assert not _free_names(sources), f"{path.name} uses names it never defines: {sorted(_free_names(sources))}"


@pytest.mark.realdata
@pytest.mark.realmodel
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
@pytest.mark.slow
def test_runs_in_quick_mode(path, data_dir, minilm, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNKIT_QUICK", "1")
    # notebook 01 keeps its stores in $ATTNKIT_RUNS (default ../runs, in the checkout)
    monkeypatch.setenv("ATTNKIT_RUNS", str(tmp_path / "runs"))
    # On a shared, oversubscribed CPU torch's spinning threads slow training several-fold
    # (training in the quick fine-tune of notebook 02: 16-18 s with one thread, 75-77 s with
    # two, measured side by side at load ~6 on 2 cores).
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = report.read_notebook(path)
    done = report.execute_notebook(nb, cwd=NOTEBOOK_DIR, timeout=600)

    code = [c for c in done.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), "some code cells did not run"
    rec = done.metadata["attnkit"]["provenance"]
    assert rec["parameters"]["QUICK"] is True, rec["parameters"]
    # every widget the notebook shows must have its state saved, or the report cannot draw it
    state = done.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    shown = {o["data"][WIDGET_VIEW]["model_id"] for c in code for o in c.get("outputs", [])
             if WIDGET_VIEW in o.get("data", {})}
    assert shown <= set(state.get("state", {})), "a displayed widget has no saved state"
    # every figure is an image in the notebook and in its report (none left as
    # "<Figure size ...>" text), and every cell that draws with ak.plot shows one
    check_figures(done, report.notebook_to_html(done, name=path.stem))
    for i, c in enumerate(done.cells):
        if c.cell_type == "code" and "ak.plot.plot_" in c.source:
            assert any("image/png" in o.get("data", {}) for o in c.outputs), f"cell {i + 1} drew no image"
