"""Hatchling build hook: build the front ends into attnkit/static/.

- js/         the widgets (one bundle per entry of BUNDLES in js/src/traits.gen.ts, the list
              generated from the widget classes, and widgets.css)
- js/report/  the offline report renderer (report.js, report.css)

Runs on every wheel, sdist and editable build. attnkit/static/ is not committed (it is in
.gitignore), so the hook also declares it an artifact for the package to include.

For each project: `npm ci` when its node_modules is missing, then `npm run build`. Without
npm, an already complete attnkit/static/ (e.g. unpacked from an sdist) is used as is;
otherwise the build stops with a message saying what to install. ATTNKIT_SKIP_JS=1 skips
the front-end build (Python-only development; widgets then show a "not built" message).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

HERE = Path(__file__).resolve().parent


def widget_bundles(root: Path = HERE) -> tuple[str, ...]:
    """The widget bundles, as js/src/traits.gen.ts lists them (generated from attnkit/widgets/
    by ``python -m attnkit.widgets._traits``): the one list of bundles."""
    text = (root / "js" / "src" / "traits.gen.ts").read_text(encoding="utf-8")
    found = re.search(r"export const BUNDLES = (\[[^\]]*\])", text)
    if found is None:
        raise RuntimeError("attnkit: js/src/traits.gen.ts has no BUNDLES list; regenerate it.")
    return tuple(f"{name}.js" for name in json.loads(found.group(1)))


PROJECTS = {
    "js": (*widget_bundles(), "widgets.css"),
    "js/report": ("report.js", "report.css"),
}


class JsBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        static = root / "attnkit" / "static"
        build_data.setdefault("artifacts", []).append("attnkit/static/")
        if os.environ.get("ATTNKIT_SKIP_JS") == "1":
            return
        npm = shutil.which("npm")
        for rel, outputs in PROJECTS.items():
            project = root / rel
            complete = all((static / name).is_file() for name in outputs)
            if not (project / "package.json").is_file():
                if complete:
                    continue
                raise RuntimeError(f"attnkit: no {rel}/ sources and no built {outputs} in {static}.")
            if npm is None:
                if complete:
                    self.app.display_warning(f"attnkit: npm not found; using the built {rel} bundle.")
                    continue
                raise RuntimeError(
                    "attnkit: building the front end needs Node.js 18+ and npm (install them, "
                    "e.g. `apt-get install nodejs npm`), or set ATTNKIT_SKIP_JS=1 for a "
                    "package without widgets."
                )
            if not (project / "node_modules").is_dir():
                self.app.display_info(f"attnkit: npm ci ({rel}/)")
                subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=project, check=True)
            self.app.display_info(f"attnkit: npm run build ({rel}/ -> attnkit/static/)")
            subprocess.run([npm, "run", "build"], cwd=project, check=True)
            missing = [name for name in outputs if not (static / name).is_file()]
            if missing:
                raise RuntimeError(f"attnkit: building {rel}/ did not produce {missing} in {static}.")
