"""The front end's bundles and trait names come from the widget classes: js/src/traits.gen.ts
must be what `python -m attnkit.widgets._traits` writes (js/build.mjs builds its BUNDLES; the
views read traits by its names, which tsc checks)."""

from __future__ import annotations

from pathlib import Path

from attnkit.widgets import FlowView, _flow_wire, _traits

ROOT = Path(__file__).resolve().parents[1]


def test_traits_gen_is_current():
    assert _traits.GENERATED.read_text(encoding="utf-8") == _traits.typescript()
    assert {"heatmap", "headgrid", "headmap", "cluster", "flow", "score", "qkscatter",
            "image", "crossview"} <= set(_traits.bundles())
    assert "export const BUNDLES = [" in _traits.typescript()


def _hatch_build(monkeypatch):
    """hatch_build.py, imported with a stand-in for hatchling (only pip's build env has it)."""
    import importlib.util
    import sys
    import types

    for name in ("hatchling", "hatchling.builders", "hatchling.builders.hooks",
                 "hatchling.builders.hooks.plugin"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    interface = types.ModuleType("hatchling.builders.hooks.plugin.interface")
    interface.BuildHookInterface = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, interface.__name__, interface)
    spec = importlib.util.spec_from_file_location("attnkit_hatch_build", ROOT / "hatch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_bundle_has_a_source_and_is_packaged(monkeypatch):
    packaged = _hatch_build(monkeypatch).PROJECTS["js"]
    for name, traits in _traits.bundles().items():
        assert (ROOT / "js" / "src" / f"{name}.ts").is_file(), name
        assert f"{name}.js" in packaged, f"hatch_build.py does not package {name}.js"
        assert "title" in traits and not any(t.startswith("_") for t in traits)
    assert "layout" not in _traits.synced_traits(FlowView)  # ipywidgets' own traits are not listed


def test_flow_wire_arrays_are_flow_view_traits():
    assert set(_flow_wire.FIELDS) | set(_flow_wire.TABLES) <= set(_traits.synced_traits(FlowView))
