"""attnkit.apps.report: executing a notebook, keeping widget state and buffers, writing the HTML.

The notebook tests/notebooks/tiny_widgets.ipynb defines an anywidget whose bytes are known
([0, 64, 128, 255] in quick mode), so what survives the export can be checked exactly.
Executing starts a real kernel (a few seconds each); the browser side is in
tests/browser/test_report.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

import attnkit
from attnkit.apps import report
from attnkit.apps.cli import main
from attnkit.errors import ReportError

HERE = Path(__file__).resolve().parent
TINY = HERE / "notebooks" / "tiny_widgets.ipynb"
QUICK_BYTES = bytes([0, 64, 128, 255])
STATE = "application/vnd.jupyter.widget-state+json"


def _need_bundle() -> None:
    if not (report.STATIC / "report.js").is_file():
        reason = "report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each <script> by type."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[str, str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in = dict(attrs).get("type", "text/javascript")
            self.scripts.append((self._in, ""))

    def handle_data(self, data):
        if self._in is not None:
            kind, text = self.scripts[-1]
            self.scripts[-1] = (kind, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in = None


def _parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def executed(tmp_path_factory, monkeypatch_module):
    """The tiny notebook run through the CLI in quick mode: (report path, executed notebook)."""
    _need_bundle()
    monkeypatch_module.setenv("ATTNKIT_QUICK", "1")
    out = tmp_path_factory.mktemp("report")
    html, nb = out / "tiny.html", out / "tiny.executed.ipynb"
    assert main(["report", str(TINY), "-o", str(html), "--execute", "--save-notebook", str(nb)]) == 0
    return html, nbformat.read(nb, as_version=4)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


# ------------------------------------------------------------------ pure helpers
def test_parameter_literals():
    src = (
        "import os\n"
        "MODEL = 'minilm'\n"
        "N: int = 50\n"
        "QUICK = os.environ.get('ATTNKIT_QUICK') == '1'\n"
        "a, b = 1, 2\n"
        "LAYERS = [1, 2]\n"
        "N = 60\n"
    )
    assert report.parameter_literals(src) == {
        "MODEL": "minilm",
        "N": 60,  # the later assignment wins
        "QUICK": "os.environ.get('ATTNKIT_QUICK') == '1'",  # not a literal: its source
        "LAYERS": "[1, 2]",
    }
    assert report.parameter_literals("MODEL = (") == {}


def test_provenance_of_an_unexecuted_notebook():
    nb = new_notebook(cells=[
        new_markdown_cell("# t"),
        new_code_cell("model = 'bert-base-uncased'\nTREEBANK = 'ud/en_ewt-ud-dev.conllu'", metadata={"tags": ["parameters"]}),
    ])
    rec = report.provenance(nb)
    assert rec["model"] == "bert-base-uncased"
    assert rec["data"] == "ud/en_ewt-ud-dev.conllu"
    assert rec["exported_with"] == attnkit.__version__
    assert "attnkit" not in rec and "executed" not in rec

    nb.cells[1].metadata.tags = []  # no parameters cell: notebook metadata is used
    nb.metadata["attnkit"] = {"model": "minilm", "data": "EWT dev"}
    rec = report.provenance(nb)
    assert (rec["model"], rec["data"], rec["parameters"]) == ("minilm", "EWT dev", {})


def test_script_embedding_cannot_close_the_element():
    nasty = {"s": "</script><!-- <script>alert(1)</script> & \u2028"}
    text = report._json_for_script(nasty)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == nasty
    js = 'a="</script>";b=/<\\/SCRIPT/;c="<!--";'
    safe = report._script_safe(js)
    assert "</script" not in safe.lower() and "<!--" not in safe
    assert safe == 'a="<\\/script>";b=/<\\/SCRIPT/;c="<\\u0021--";'


# -------------------------------------------------------------------- execution
def test_widget_state_keeps_esm_and_binary_buffers(executed):
    _, nb = executed
    state = nb.metadata.widgets[STATE]["state"]
    anys = [m for m in state.values() if m["model_name"] == "AnyModel"]
    assert len(anys) == 1
    (cells,) = anys
    assert "export default { render }" in cells["state"]["_esm"]
    (buf,) = cells["buffers"]
    assert buf["path"] == ["values"] and buf["encoding"] == "base64"
    assert base64.b64decode(buf["data"]) == QUICK_BYTES  # quick mode reached the kernel
    assert any(m["model_name"] == "IntSliderModel" and m["state"]["value"] == 3 for m in state.values())


def test_provenance_read_back_from_the_kernel(executed):
    _, nb = executed
    rec = nb.metadata.attnkit.provenance
    assert rec["attnkit"] == attnkit.__version__
    assert rec["env"]["ATTNKIT_QUICK"] == "1"
    assert rec["parameters"]["QUICK"] is True  # evaluated in the kernel, not the literal source
    assert rec["parameters"]["VALUES"] == list(QUICK_BYTES)
    assert rec["parameters"]["MODEL"] == "none (hand-made widget)"
    assert re.match(r"\d{4}-\d\d-\d\dT", rec["executed"])
    assert len(nb.cells) == len(nbformat.read(TINY, as_version=4).cells)  # probe cell removed


def test_html_is_self_contained_with_fallbacks(executed):
    html_path, nb = executed
    html = html_path.read_text(encoding="utf-8")
    doc = _parse(html)
    # nothing to fetch: no external script/style/img/iframe; every src is inline data
    for tag, attrs in doc.tags:
        assert tag not in ("link", "iframe"), (tag, attrs)
        src = attrs.get("src")
        if src is not None:
            assert src.startswith("data:image/png;base64,"), (tag, src[:60])
    assert "https://cdn" not in html and "unpkg.com" not in html and "cdnjs" not in html

    # one slot per widget output, each with its static fallback before the view
    slots = re.findall(r'<div class="[^"]*attnkit-slot[^"]*"', html)
    assert len(slots) == 2
    png = next(o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {}))
    assert f'src="data:image/png;base64,{png.data["image/png"]}"' in html
    assert "IntSlider(value=3" in html  # the slider's text fallback

    # the state in the page is the notebook's state, buffers included
    scripts = dict(doc.scripts)
    assert json.loads(scripts[STATE]) == nb.metadata.widgets[STATE]
    prov = json.loads(scripts["application/vnd.attnkit.provenance+json"])
    assert prov["model"] == "none (hand-made widget)" and prov["data"] == "four hand-written bytes"
    assert prov["front_end"]["anywidget"] and prov["front_end"]["@jupyter-widgets/html-manager"]
    metas = {a.get("name"): a.get("content") for t, a in doc.tags if t == "meta"}
    assert metas["attnkit-version"] == attnkit.__version__
    assert metas["attnkit-model"] == "none (hand-made widget)"
    assert metas["attnkit-data"] == "four hand-written bytes"
    assert "&lt;b&gt;markup&lt;/b&gt;" in html  # printed text stays text


def test_reexport_without_execute_keeps_provenance(executed, tmp_path):
    html_path, _ = executed
    saved = html_path.parent / "tiny.executed.ipynb"
    out = tmp_path / "again.html"
    assert main(["report", str(saved), "-o", str(out)]) == 0
    prov = json.loads(dict(_parse(out.read_text(encoding="utf-8")).scripts)["application/vnd.attnkit.provenance+json"])
    assert prov["attnkit"] == attnkit.__version__ and prov["env"]["ATTNKIT_QUICK"] == "1"
    # every ATTNKIT_ variable of the run, and nothing else (ATTNKIT_DATA when it is set),
    # plus the embedding budget the report's kernel runs with (attnkit.apps.report.EMBED_BYTES) and
    # ATTNKIT_PROGRESSIVE=0 (views whole when their cell ends)
    expected = {k: v for k, v in os.environ.items() if k.startswith("ATTNKIT_")}
    expected.setdefault(report.EMBED_ENV, str(report.EMBED_BYTES))
    expected.setdefault("ATTNKIT_PROGRESSIVE", "0")
    assert prov["env"] == expected


def test_anywidget_version_mismatch_warns(executed):
    _, nb = executed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same version: no warning
        assert "attnkit-slot" in report.notebook_to_html(nb)
    other = nbformat.from_dict(json.loads(json.dumps(nb)))
    for m in other.metadata.widgets[STATE]["state"].values():
        if m["model_module"] == "anywidget":
            m["model_module_version"] = "~0.99.*"
    with pytest.warns(UserWarning, match=r"anywidget ~0\.99\.\*"):
        report.notebook_to_html(other)


def _failing(tmp_path: Path) -> Path:
    nb = new_notebook(
        cells=[
            new_code_cell("import sys\nx = 1\nprint(sys.executable)"),
            new_code_cell("raise ValueError('boom ' + str(x))"),
            new_code_cell("print('after')"),
        ],
        # a kernel this machine does not have: the report runs the current Python anyway
        metadata={"kernelspec": {"name": "no-such-kernel", "display_name": "?", "language": "python"}},
    )
    path = tmp_path / "failing.ipynb"
    nbformat.write(nb, path)
    return path


def test_failing_cell_is_named_and_no_report_written(tmp_path):
    _need_bundle()
    path = _failing(tmp_path)
    out = tmp_path / "r.html"
    with pytest.raises(ReportError, match=r"cell 2 `raise ValueError\('boom ' \+ str\(x\)\)` raised ValueError: boom 1;"):
        report.write_report(path, out, execute=True)
    assert not out.exists()
    assert main(["report", str(path), "-o", str(out), "--execute", "--allow-errors"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "boom 1" in html and "after" in html
    assert sys.executable in html  # the kernel ran this very interpreter
    assert "not imported by the notebook" in html  # attnkit's version is only claimed when used


def test_cell_timeout_names_the_cell(tmp_path):
    nb = new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("import time\ntime.sleep(60)"), new_code_cell("y = 2")])
    with pytest.raises(ReportError, match=r"cell 2 `import time` ran longer than 2 s"):
        report.execute_notebook(nb, cwd=tmp_path, timeout=2)


def test_missing_inputs_raise_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(ReportError, match="does not exist"):
        report.write_report(tmp_path / "nope.ipynb", tmp_path / "r.html")
    (tmp_path / "bad.ipynb").write_text("{not json", encoding="utf-8")
    with pytest.raises(ReportError, match="not a readable Jupyter notebook"):
        report.write_report(tmp_path / "bad.ipynb", tmp_path / "r.html")
    monkeypatch.setattr(report, "STATIC", tmp_path)
    with pytest.raises(ReportError, match="report renderer is not built"):
        report.write_report(TINY, tmp_path / "r.html")
    assert main(["report", str(tmp_path / "nope.ipynb")]) == 2
