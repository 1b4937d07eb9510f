"""Sphinx configuration of attnkit's API reference: ``make docs`` builds it into build/docs.

One page per module is generated at build time (into ``docs/api/modules/``, ignored by git)
from the modules found in the installed package, so a new module gets its page without
editing this folder; the index lists them by package.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

import attnkit  # noqa: E402

project = "attnkit"
author = "attnkit contributors"
release = attnkit.__version__
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.intersphinx", "sphinx.ext.viewcode", "numpydoc"]
exclude_patterns = ["_build", "index.template.rst"]
html_theme = "alabaster"
html_title = f"attnkit {release} API reference"
html_static_path: list[str] = []

# a package page documents what the package itself defines; what it re-exports from its
# modules is documented on their pages (no duplicates)
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections give the types
autodoc_mock_imports: list[str] = []
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
intersphinx_mapping: dict[str, tuple[str, None]] = {}  # offline: no inventories fetched
nitpicky = False

#: Modules that are entry points, not API (running them has side effects).
SKIP = {"attnkit.apps.finetune.__main__", "attnkit.__main__"}


def modules() -> list[str]:
    """Every importable module of attnkit, public ones first in package order."""
    names = ["attnkit"]
    for info in pkgutil.walk_packages(attnkit.__path__, "attnkit."):
        if info.name in SKIP or any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        names.append(info.name)
    return sorted(names)


def write_pages() -> None:
    out = HERE / "modules"
    out.mkdir(exist_ok=True)
    names = modules()
    for name in names:
        importlib.import_module(name)
        title = f"``{name}``"
        text = f"{title}\n{'=' * len(title)}\n\n.. automodule:: {name}\n"
        if name == "attnkit":
            # the package re-exports the public API; its pages live with their modules
            text += "   :no-members:\n"
        page = out / f"{name}.rst"
        if not page.exists() or page.read_text() != text:
            page.write_text(text)
    for stale in out.glob("*.rst"):
        if stale.stem not in names:
            stale.unlink()
    toc = "\n".join(f"   {n}" for n in names)
    index = (HERE / "index.template.rst").read_text().replace("{{ modules }}", toc)
    index = index.replace("{{ tasks }}", by_task())
    target = HERE / "modules" / "index.rst"
    if not target.exists() or target.read_text() != index:
        target.write_text(index)


def by_task() -> str:
    """The public names of ``attnkit`` grouped by task (``attnkit.GROUPS``), each linked to
    the page of the module that defines it."""
    import inspect

    lines = []
    for group, names in attnkit.GROUPS.items():
        lines += [group[0].upper() + group[1:], "~" * len(group), ""]
        for name in names:
            obj = getattr(attnkit, name)
            if inspect.ismodule(obj):
                lines.append(f"- :mod:`{obj.__name__}`: {_first_line(obj)}")
            elif inspect.isclass(obj):
                lines.append(f"- :class:`~{obj.__module__}.{obj.__qualname__}`: {_first_line(obj)}")
            elif callable(obj):
                lines.append(f"- :func:`~{obj.__module__}.{obj.__qualname__}`: {_first_line(obj)}")
            else:
                lines.append(f"- ``attnkit.{name}``")
        lines.append("")
    return "\n".join(lines)


def _first_line(obj: object) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip().split("\n\n")[0]
    return " ".join(doc.split()).rstrip(".") + "." if doc else ""


def skip_aliases(app, what, name, obj, skip, options):  # noqa: ANN001
    """Leave out type aliases (``HeadId = tuple[int, int]``): autodoc cannot format them as
    classes; the module docstring of :mod:`attnkit.core.types` describes them."""
    import types
    import typing

    if isinstance(obj, (types.GenericAlias, typing._GenericAlias)):  # type: ignore[attr-defined]
        return True
    return skip


def setup(app) -> None:  # noqa: ANN001
    app.connect("autodoc-skip-member", skip_aliases)


write_pages()
root_doc = "modules/index"
