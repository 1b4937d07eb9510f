"""Execute a notebook and write one self-contained HTML report that works offline.

The report is nbconvert's lab layout with every network load taken out and, inlined:
the widget state saved at execution (models, their ``_esm`` front-end modules, binary
buffers as base64), the Jupyter widget HTML manager and anywidget's front end bundled from
npm at build time (``attnkit/static/report.js``, built from ``js/report/``), and their CSS.
Opened from ``file://`` it draws every widget live (hover, click, zoom work on the front end;
nothing reaches a kernel). Each widget output first shows its static fallback (the PNG in
its ``_repr_mimebundle_``, else its text); the live view replaces it once it has drawn, so a
viewer without JavaScript sees the PNGs. IPython shows an attnkit widget's picture as an
output of its own before the view's (``attnkit.widgets._base.display_beside``); the report
folds that picture back into the view's output (:func:`fold_static_outputs`).

Provenance, shown in a header at the top of the report and as ``<meta name="attnkit-...">``:

- Parameters: the top-level assignments of the code cell tagged ``parameters`` (the
  papermill convention). With ``execute=True`` their values are read back from the kernel
  after the run (so ``QUICK = os.environ.get("ATTNKIT_QUICK") == "1"`` is recorded as it
  was); otherwise the literal values in the cell.
- Model: the parameter named ``MODEL`` (or ``MODEL_NAME``/``MODEL_ID``, any case), else
  ``metadata.attnkit.runtime.model`` of the notebook; the names of the :class:`attnkit.Model` objects
  alive in the kernel at the end are listed as well.
- Data: the parameter named ``DATA`` (or ``DATA_DIR``/``DATA_PATH``/``TREEBANK``/
  ``DATASET``), else ``metadata.attnkit.data``, else the data folder attnkit used
  (``ATTNKIT_DATA`` or ``../shared/data``).
- attnkit version: the one imported by the kernel that ran the notebook; the environment
  variables starting with ``ATTNKIT_`` (e.g. ``ATTNKIT_QUICK=1``) are listed too.

An executed notebook keeps this record in ``metadata.attnkit.provenance``, so exporting it
again later (without ``execute``) still names what it was made with.
"""

from __future__ import annotations

import ast
import copy
import datetime as _dt
import json
import os
import re
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core import validate
from ..errors import ReportError

#: Bytes of zoom levels each attnkit Heatmap of an executed report keeps in its widget state
#: (below the overview it always has): a report cannot ask a kernel for tiles, so it zooms
#: within what is embedded and says so beyond it. Set ``ATTNKIT_EMBED_BYTES`` to change it.
EMBED_BYTES = 4_000_000
EMBED_ENV = "ATTNKIT_EMBED_BYTES"

STATIC = Path(__file__).resolve().parents[1] / "static"
TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "attnkit_report"
PROVENANCE_MIME = "application/vnd.attnkit.provenance+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"

#: ``on_cell(index, total, cell, seconds)``: called when code cell ``index`` of ``total``
#: (1-based, empty cells not counted) starts, with ``seconds=None``, and when it has run,
#: with its wall time. ``cell`` is the ``nbformat`` cell (``cell.source`` is its code).
CellCallback = Callable[[int, int, Any, "float | None"], None]

MODEL_KEYS = ("model", "model_name", "model_id")
DATA_KEYS = ("data", "data_dir", "data_path", "treebank", "dataset")


# ----------------------------------------------------------------------- reading
def read_notebook(path: str | Path) -> Any:
    """Read a Jupyter notebook.

    Parameters
    ----------
    path : str or Path
        The ``.ipynb`` file.

    Returns
    -------
    nbformat.NotebookNode
        The notebook, as nbformat version 4.

    Raises
    ------
    ReportError
        When the file does not exist or is not a readable notebook.

    Examples
    --------
    >>> from attnkit.apps.report import read_notebook
    >>> read_notebook("no-such-notebook.ipynb")
    Traceback (most recent call last):
    ...
    attnkit.errors.ReportError: notebook no-such-notebook.ipynb does not exist; ...
    """
    import nbformat

    path = Path(path)
    if not path.is_file():
        raise ReportError(f"notebook {path} does not exist; pass the path of an .ipynb file.")
    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for a bad file
        raise ReportError(f"{path} is not a readable Jupyter notebook ({exc}).") from exc


def parameters_cell(nb: Any) -> tuple[int, Any] | None:
    """The first code cell tagged ``parameters`` (the papermill convention).

    Parameters
    ----------
    nb : nbformat.NotebookNode
        A notebook.

    Returns
    -------
    (int, cell) or None
        Its index and the cell, or None when no cell is tagged.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell, new_notebook
    >>> from attnkit.apps.report import parameters_cell
    >>> nb = new_notebook(cells=[new_code_cell("import os"),
    ...                          new_code_cell("N = 3", metadata={"tags": ["parameters"]})])
    >>> parameters_cell(nb)[0]
    1
    """
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            return i, cell
    return None


def parameter_literals(source: str) -> dict[str, Any]:
    r"""The top-level assignments of a cell's source.

    Parameters
    ----------
    source : str
        Python code (a parameters cell).

    Returns
    -------
    dict
        Each assigned name → its value when it is a literal (str, number, bool, None), else
        the expression's source text. Later assignments win; code that does not parse
        gives ``{}``.

    Examples
    --------
    >>> from attnkit.apps.report import parameter_literals
    >>> parameter_literals("MODEL = 'minilm'\nN = 100 if QUICK else None\nN_EPOCHS: int = 8")
    {'MODEL': 'minilm', 'N': '100 if QUICK else None', 'N_EPOCHS': 8}
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names:
            continue
        try:
            val: Any = ast.literal_eval(value)
            if not isinstance(val, (str, int, float, bool, type(None))):
                val = ast.get_source_segment(source, value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            val = ast.get_source_segment(source, value)
        for name in names:
            out[name] = val
    return out


# --------------------------------------------------------------------- executing
_PROBE = r'''
def __attnkit_provenance(names):
    import json, os, sys, platform
    from IPython.display import display
    ns = globals()
    params = {}
    for k in names:
        if k in ns:
            v = ns[k]
            if isinstance(v, os.PathLike):
                v = os.fspath(v)
            try:
                text = json.dumps(v)
            except (TypeError, ValueError):
                text = None
            params[k] = v if text is not None and len(text) <= 300 else repr(v)[:300]
    out = {"parameters": params, "python": platform.python_version(),
           "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("ATTNKIT_")}}
    ak = sys.modules.get("attnkit")  # only if the notebook used it: importing costs seconds
    if ak is not None:
        out["attnkit"] = getattr(ak, "__version__", None)
        try:
            d = ak.data.data_dir()
            out["data_dir"] = None if d is None else os.fspath(d)
        except Exception:
            pass
        Model = getattr(ak, "Model", None)
        if Model is not None:
            names_seen = []
            for v in list(ns.values()):
                if isinstance(v, Model) and v.name not in names_seen:
                    names_seen.append(v.name)
            out["models_loaded"] = names_seen
    display({"%s": out}, raw=True)
__attnkit_provenance(%s)
del __attnkit_provenance
'''


def _current_python_kernel() -> Any:
    """A kernel manager that starts ipykernel with this interpreter (``sys.executable``),
    whatever kernel the notebook's metadata names: the report runs in the current venv."""
    from ipykernel.kernelspec import get_kernel_dict
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    spec = {k: v for k, v in get_kernel_dict().items() if k in ("argv", "display_name", "language", "metadata")}

    class _CurrentPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(resource_dir="", **spec)

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=_CurrentPython())


def execute_notebook(
    nb: Any,
    *,
    cwd: str | Path | None = None,
    timeout: int | None = None,
    allow_errors: bool = False,
    on_cell: CellCallback | None = None,
) -> Any:
    """Run every cell of ``nb`` in a fresh kernel of the current Python.

    The kernel inherits this process's environment (so ``ATTNKIT_QUICK=1`` and friends reach
    it). Widget state, binary buffers included, is saved in ``metadata.widgets``; the
    provenance record (see the module doc) in ``metadata.attnkit.provenance``.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook; left unchanged.
    cwd : str or Path, optional
        The folder the kernel starts in (default: the current folder).
    timeout : int, optional
        Per-cell limit in seconds (None: no limit).
    allow_errors : bool
        Keep going past failing cells (their errors stay in their outputs).
    on_cell : callable, optional
        ``on_cell(index, total, cell, seconds)`` (:data:`CellCallback`), told when each code
        cell starts and ends, e.g. to show progress; the library itself prints nothing.

    Returns
    -------
    nbformat.NotebookNode
        A new, executed notebook.

    Raises
    ------
    ReportError
        Naming the cell that failed (unless ``allow_errors``), ran past ``timeout``, or was
        running when the kernel died.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell, new_notebook
    >>> from attnkit.apps.report import execute_notebook
    >>> seen = []
    >>> done = execute_notebook(new_notebook(cells=[new_code_cell("6 * 7")]),
    ...                         on_cell=lambda i, n, cell, s: seen.append((i, n, s is None)))
    >>> done.cells[0].outputs[0]["data"]["text/plain"], seen
    ('42', [(1, 1, True), (1, 1, False)])
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from nbformat.v4 import new_code_cell

    run = copy.deepcopy(nb)
    found = parameters_cell(run)
    names = list(parameter_literals(found[1].source)) if found else []
    probe = new_code_cell(_PROBE % (PROVENANCE_MIME, json.dumps(names)))
    hooks = _cell_hooks(run, on_cell) if on_cell is not None else {}
    run.cells.append(probe)
    client = NotebookClient(
        run,
        km=_current_python_kernel(),
        timeout=timeout,
        startup_timeout=120,
        allow_errors=allow_errors,
        store_widget_state=True,
        resources={"metadata": {"path": str(Path(cwd) if cwd else Path.cwd())}},
        **hooks,
    )
    started = _dt.datetime.now(_dt.timezone.utc)
    try:
        with _embedding_budget():
            client.execute()
    except CellExecutionError as exc:
        trace = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
        raise ReportError(
            f"{_failed_cell(run)} raised {exc.ename}: {exc.evalue}; no report was written. Fix "
            "the notebook, or pass allow_errors=True (--allow-errors) to keep the error in the "
            f"report.\n{trace}"
        ) from exc
    except CellTimeoutError as exc:
        raise ReportError(
            f"{_running_cell(run)} ran longer than {timeout} s; raise the per-cell timeout "
            "(--timeout) or run in quick mode (ATTNKIT_QUICK=1)."
        ) from exc
    except DeadKernelError as exc:
        raise ReportError(
            f"the kernel died while running {_running_cell(run)} (out of memory?): {exc}"
        ) from exc
    run.cells.pop()
    record = _probe_record(probe)
    record["executed"] = started.replace(microsecond=0).isoformat()
    run.metadata.setdefault("attnkit", {})["provenance"] = record
    return run


@contextmanager
def _embedding_budget():
    """The kernel of a report run inherits ``ATTNKIT_EMBED_BYTES`` (default
    :data:`EMBED_BYTES`), so its Heatmaps embed zoom levels for the offline page, and
    ``ATTNKIT_PROGRESSIVE=0``, so every view is whole when its cell ends (the page is written
    from the cells' outputs: a view still filling in would be saved half-drawn)."""
    defaults = {EMBED_ENV: str(EMBED_BYTES), "ATTNKIT_PROGRESSIVE": "0"}
    unset = [k for k in defaults if k not in os.environ]
    for k in unset:
        os.environ[k] = defaults[k]
    try:
        yield
    finally:
        for k in unset:
            os.environ.pop(k, None)
def _cell_hooks(nb: Any, on_cell: CellCallback) -> dict[str, Any]:
    """nbclient's ``on_cell_execute``/``on_cell_executed`` hooks calling ``on_cell`` for the
    code cells of ``nb`` (cells appended later, like the provenance probe, are not told)."""
    order = {i: k for k, i in enumerate(
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip())}
    started: dict[int, float] = {}

    def start(cell: Any, cell_index: int, **_: Any) -> None:
        if cell_index in order:
            started[cell_index] = time.perf_counter()
            on_cell(order[cell_index] + 1, len(order), cell, None)

    def done(cell: Any, cell_index: int, **_: Any) -> None:
        if cell_index in started:
            on_cell(order[cell_index] + 1, len(order), cell,
                    time.perf_counter() - started.pop(cell_index))

    return {"on_cell_execute": start, "on_cell_executed": done}


def _failed_cell(nb: Any) -> str:
    """'cell N `first line`' of the last code cell that has an error output."""
    for i in range(len(nb.cells) - 1, -1, -1):
        cell = nb.cells[i]
        if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            return _describe(i, cell)
    return "a cell"


def _running_cell(nb: Any) -> str:
    """'cell N `first line`' of the cell that started but never got its reply."""
    for i, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" not in timing:
            return _describe(i, cell)
    return "a cell"


def _describe(i: int, cell: Any) -> str:
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
    return f"cell {i + 1} `{first[:60]}`"


def _probe_record(probe: Any) -> dict[str, Any]:
    for out in probe.get("outputs", []):
        data = out.get("data", {})
        if PROVENANCE_MIME in data:
            rec = data[PROVENANCE_MIME]
            return dict(rec) if isinstance(rec, dict) else json.loads(rec)
    return {}


# -------------------------------------------------------------------- provenance
def _pick(params: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lower = {k.lower(): v for k, v in params.items()}
    for k in keys:
        if k in lower and lower[k] not in (None, ""):
            return lower[k]
    return None


def provenance(nb: Any) -> dict[str, Any]:
    """What the notebook was made with: attnkit version, model, data, parameters, run date.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        A notebook, executed or not.

    Returns
    -------
    dict
        From ``metadata.attnkit.provenance`` when the notebook was executed by
        :func:`execute_notebook`; otherwise from the literals of its ``parameters`` cell
        and ``metadata.attnkit`` (attnkit version then unknown). Values are plain JSON
        types; ``model`` and ``data`` come from the parameters named ``MODEL`` / ``DATA``
        (and their variants).

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell, new_notebook
    >>> from attnkit.apps.report import provenance
    >>> nb = new_notebook(cells=[new_code_cell("MODEL = 'minilm'", metadata={"tags": ["parameters"]})])
    >>> rec = provenance(nb)
    >>> rec["model"], rec["parameters"]
    ('minilm', {'MODEL': 'minilm'})
    """
    meta = nb.metadata.get("attnkit", {}) or {}
    rec: dict[str, Any] = dict(meta.get("provenance", {}) or {})
    if "parameters" not in rec:
        found = parameters_cell(nb)
        rec["parameters"] = parameter_literals(found[1].source) if found else {}
    params = rec["parameters"]
    rec["model"] = _pick(params, MODEL_KEYS) or meta.get("model")
    data = _pick(params, DATA_KEYS) or meta.get("data") or rec.get("data_dir")
    rec["data"] = None if data is None else str(data)
    from ..version import __version__

    rec["exported_with"] = __version__
    rec["front_end"] = _front_end_versions()
    return json.loads(json.dumps(rec, default=str))


def _front_end_versions() -> dict[str, str]:
    path = STATIC / "report.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _attnkit_text(rec: dict[str, Any]) -> str:
    if rec.get("attnkit"):
        return str(rec["attnkit"])
    if rec.get("executed"):
        return f"not imported by the notebook (exported with {rec['exported_with']})"
    return f"unknown: not executed by attnkit report (exported with {rec['exported_with']})"


def _rows(rec: dict[str, Any]) -> list[tuple[str, str]]:
    """The provenance header as (label, text) rows; every value is shown as text."""
    model = rec.get("model")
    loaded = [m for m in rec.get("models_loaded", []) if m != model]
    if model and loaded:
        model_text = f"{model} (models in the kernel: {', '.join(map(str, loaded))})"
    elif model:
        model_text = str(model)
    elif loaded:
        model_text = ", ".join(map(str, loaded))
    else:
        model_text = "not recorded (set MODEL in the notebook's parameters cell)"
    rows = [
        ("Model", model_text),
        ("Data", rec.get("data") or "not recorded (set DATA in the notebook's parameters cell)"),
        ("attnkit", _attnkit_text(rec)),
    ]
    params = rec.get("parameters") or {}
    if params:
        rows.append(("Parameters", ", ".join(f"{k} = {v!r}" for k, v in params.items())))
    env = rec.get("env") or {}
    if env:
        rows.append(("Environment", ", ".join(f"{k}={v}" for k, v in env.items())))
    if rec.get("executed"):
        rows.append(("Executed", f"{rec['executed']} with Python {rec.get('python', '?')}"))
    else:
        rows.append(("Executed", "outputs as saved in the notebook"))
    fe = rec.get("front_end") or {}
    if fe:
        rows.append(("Widgets", "drawn offline by " + ", ".join(f"{k} {v}" for k, v in fe.items())))
    return rows


# ---------------------------------------------------------------------- exporting
def _bundle() -> tuple[str, str]:
    js, css = STATIC / "report.js", STATIC / "report.css"
    if not (js.is_file() and css.is_file()):
        raise ReportError(
            f"attnkit's report renderer is not built ({js} is missing). In a source checkout run "
            "`npm --prefix js/report ci && npm --prefix js/report run build` (needs Node.js), "
            "or reinstall attnkit from a wheel."
        )
    css_text = re.sub(r"</(style)", r"<\\/\1", css.read_text(encoding="utf-8"), flags=re.I)
    return _script_safe(js.read_text(encoding="utf-8")), css_text


def _script_safe(js: str) -> str:
    """``js`` made safe to inline in ``<script>``. ``</script`` and ``<!--`` can only occur
    in the minified bundle inside string or regex literals, where ``<\\/`` and ``\\u0021``
    mean the same characters."""
    js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.I)
    return js.replace("<!--", "<\\u0021--")


def _json_for_script(value: Any) -> str:
    """JSON that cannot end or confuse the ``<script>`` element holding it."""
    return (
        json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _check_anywidget_version(nb: Any, bundled: str | None) -> None:
    """Warn when the notebook's anywidget models come from another minor version than the
    bundled front end (their protocol may differ; the widgets may not draw)."""
    if not bundled:
        return
    want = ".".join(bundled.split(".")[:2])
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
    for model in state.values():
        if model.get("model_module") == "anywidget":
            got = re.sub(r"^[~^]", "", str(model.get("model_module_version", ""))).split(".")
            if ".".join(got[:2]) != want:
                warnings.warn(
                    f"the notebook's widgets were made with anywidget {model.get('model_module_version')}, "
                    f"the report's front end is anywidget {bundled}; they may not draw. Rebuild "
                    "js/report against the installed anywidget version.",
                    stacklevel=3,
                )
                return


#: The output metadata by which an attnkit widget's static picture and its view's output name
#: each other (``{"attnkit": {"static": key}}``, written by attnkit.widgets' display_beside).
STATIC_META = "attnkit"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def _static_key(output: Any) -> str | None:
    meta = output.get("metadata", {}).get(STATIC_META)
    return meta.get("static") if isinstance(meta, dict) else None


def fold_static_outputs(nb: Any) -> Any:
    """A copy of ``nb`` where each attnkit widget's static picture, an output of its own,
    is moved into the output of the view it stands for, with its description as the view's
    text (the report shows it there until the live view has drawn); a picture whose view's
    output is missing stays as it is.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        An executed notebook; it is not changed.

    Returns
    -------
    nbformat.NotebookNode
        The copy.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell, new_notebook, new_output
    >>> cell = new_code_cell("view", outputs=[
    ...     new_output("display_data", {"image/png": "iVBO", "text/plain": "layer 1, head 1"},
    ...                metadata={"attnkit": {"static": "k1"}}),
    ...     new_output("display_data", {"text/plain": "",
    ...                "application/vnd.jupyter.widget-view+json": {"model_id": "m1"}},
    ...                metadata={"attnkit": {"static": "k1"}})])
    >>> [(sorted(o.data), o.data["text/plain"])
    ...  for o in fold_static_outputs(new_notebook(cells=[cell])).cells[0].outputs]
    [(['application/vnd.jupyter.widget-view+json', 'image/png', 'text/plain'], 'layer 1, head 1')]
    """
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        outputs = cell.get("outputs") or []
        views = {_static_key(o): o for o in outputs if WIDGET_VIEW_MIME in o.get("data", {}) and _static_key(o)}
        kept = []
        for out in outputs:
            key = _static_key(out)
            view = views.get(key) if key and WIDGET_VIEW_MIME not in out.get("data", {}) else None
            if view is None:
                kept.append(out)
            else:  # the picture and its description (the report's alt text)
                for mime in ("image/png", "text/plain"):
                    if out.get("data", {}).get(mime):
                        view.data[mime] = out.data[mime]
        if outputs:
            cell.outputs = kept
    return nb


def notebook_to_html(nb: Any, *, name: str = "report") -> str:
    """The offline HTML report of an (executed) notebook.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook, usually executed by :func:`execute_notebook`.
    name : str
        The page title when the notebook's metadata has none.

    Returns
    -------
    str
        One self-contained HTML page: outputs, widget state and the front end inlined, a
        provenance header; it needs no network.

    Raises
    ------
    ReportError
        When attnkit's report renderer is not built (a source checkout without npm).
    """
    from nbconvert import HTMLExporter

    js, css = _bundle()
    nb = fold_static_outputs(nb)
    rec = provenance(nb)
    _check_anywidget_version(nb, rec["front_end"].get("anywidget"))
    meta = [("generator", f"attnkit {rec['exported_with']}")]
    for key in ("attnkit", "model", "data", "executed"):
        if rec.get(key):
            meta.append((f"attnkit-{'version' if key == 'attnkit' else key}", str(rec[key])))
    exporter = HTMLExporter(
        template_name=TEMPLATE_NAME,
        extra_template_basedirs=[str(TEMPLATES)],
        exclude_anchor_links=True,
    )
    exporter.register_filter("attnkit_json", _json_for_script)
    resources = {
        "metadata": {"name": name},
        "attnkit": {
            "js": js,
            "css": css,
            "heading": f"Made with attnkit {rec.get('attnkit') or rec['exported_with']}",
            "rows": _rows(rec),
            "meta": meta,
            "provenance": rec,
        },
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body


def write_report(
    notebook: str | Path,
    out: str | Path,
    *,
    execute: bool = False,
    timeout: int | None = None,
    allow_errors: bool = False,
    save_notebook: str | Path | None = None,
    on_cell: CellCallback | None = None,
) -> Path:
    """Write the offline HTML report of a notebook.

    Parameters
    ----------
    notebook : str or Path
        The ``.ipynb`` file.
    out : str or Path
        The HTML file to write (folders are created).
    execute : bool
        Run the notebook first in a fresh kernel of the current Python, from the notebook's
        folder (:func:`execute_notebook`). Without it, the outputs and widget state saved in
        the file are used (widgets without saved state show their static fallback).
    timeout : int, optional
        Per-cell limit in seconds when executing.
    allow_errors : bool
        Keep going past failing cells; their errors show in the report.
    save_notebook : str or Path, optional
        Also write the (executed) notebook here.
    on_cell : callable, optional
        Told when each cell starts and ends (:data:`CellCallback`).

    Returns
    -------
    Path
        ``out``.

    Raises
    ------
    ReportError
        When the notebook cannot be read, a cell fails (unless ``allow_errors``) or times
        out, or the report renderer is not built; no report is written then.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import nbformat
    >>> from nbformat.v4 import new_markdown_cell, new_notebook
    >>> import attnkit as ak
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     src = pathlib.Path(folder, "hello.ipynb")
    ...     nbformat.write(new_notebook(cells=[new_markdown_cell("# Hello")]), src)
    ...     html = ak.write_report(src, pathlib.Path(folder, "hello.html"))
    ...     html.name, "Hello" in html.read_text(encoding="utf-8")
    ('hello.html', True)
    """
    validate.path(notebook, "notebook")
    validate.path(out, "out")
    if save_notebook is not None:
        validate.path(save_notebook, "save_notebook")
    import nbformat

    src = Path(notebook)
    nb = read_notebook(src)
    if execute:
        nb = execute_notebook(nb, cwd=src.resolve().parent, timeout=timeout,
                              allow_errors=allow_errors, on_cell=on_cell)
    if save_notebook is not None:
        Path(save_notebook).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(save_notebook))
    html = notebook_to_html(nb, name=src.stem)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
