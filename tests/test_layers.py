"""The import layers of attnkit hold (pyproject's import-linter contracts), and no module
imports another module's private name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from prereq import REPO

PACKAGE = REPO / "attnkit"


def _private_imports() -> list[str]:
    """``from M import _name`` (any depth) where ``M`` is another module: the name is private
    to ``M``. Dunder names (``__version__``) are public."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("attnkit")):
                base = path.parent
                for _ in range(max(0, node.level - 1)):
                    base = base.parent
                if not node.level:
                    base = PACKAGE.parent
                base = base.joinpath(*(node.module or "").split(".")) if node.module else base
                for alias in node.names:
                    # a private module is the private_modules contract's business, not this one's
                    is_module = (base / f"{alias.name}.py").exists() or (base / alias.name).is_dir()
                    if alias.name.startswith("_") and not alias.name.startswith("__") and not is_module:
                        rel = path.relative_to(REPO)
                        found.append(f"{rel}:{node.lineno} imports {alias.name} from {'.' * node.level}{node.module or ''}")
    return found


def test_no_module_imports_a_private_name_of_another():
    assert _private_imports() == []


def test_the_private_name_check_sees_one(tmp_path, monkeypatch):
    # the checker itself: a module that imports a private function is reported
    pkg = tmp_path / "attnkit"
    pkg.mkdir()
    (pkg / "a.py").write_text("def _hidden():\n    return 1\n")
    (pkg / "b.py").write_text("def f():\n    from .a import _hidden\n    return _hidden()\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert _private_imports() == ["attnkit/b.py:2 imports _hidden from .a"]


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install attnkit[dev])")
    out = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_every_path_contributing_names_exists():
    """CONTRIBUTING.md's checklists name the files a newcomer touches: each must exist
    (templates with ``<name>`` are skipped; ``../shared`` is beside the checkout)."""
    import re

    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    paths = {p for p in re.findall(r"`([\w./-]+/[\w.-]+)`", text) if "." in p.rsplit("/", 1)[-1]}
    assert len(paths) > 10
    missing = sorted(p for p in paths if not p.startswith("../") and not (REPO / p).exists())
    assert missing == []


def test_vulture_whitelist_is_current():
    """tools/vulture_whitelist.py is what tools/vulture_names.py generates from the public
    API and the widget traits (a name added there cannot hide dead code elsewhere)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vulture_names", REPO / "tools" / "vulture_names.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (REPO / "tools" / "vulture_whitelist.py").read_text(encoding="utf-8") == module.whitelist()


def _layer_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("layer_tool", REPO / "tools" / "layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_contributing_draws_the_layers_of_the_contract():
    """CONTRIBUTING.md §0 holds exactly the picture tools/layers.py draws from pyproject's
    contracts (run ``python tools/layers.py --write`` after changing them)."""
    tool = _layer_tool()
    assert tool.block() in (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_the_picture_names_every_folder_and_root_module():
    picture = _layer_tool().picture()
    names = {line.split()[0].lstrip("|>").strip("/") for line in picture.splitlines()}
    names |= {line.split()[1].strip("/") for line in picture.splitlines() if line.split()[0] in "|>"}
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    roots = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert folders | roots <= names


def test_the_root_holds_the_face_and_what_every_layer_shares():
    roots = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(roots) <= 8, roots


def test_the_contracts_declare_no_exception():
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert [c["id"] for c in contracts if c.get("ignore_imports")] == []
    assert all(c.get("exhaustive") for c in contracts if c["type"] == "layers")
