"""Hatchling build hook: build the widgets' front end (js/) into attnkit/static/.

Runs on every wheel (and editable) build. attnkit/static/ is not committed (it is in
.gitignore), so the hook also declares it an artifact for the wheel to include.

- With Node.js/npm: `npm ci` when js/node_modules is missing, then `npm run build`.
- Without npm but with a complete attnkit/static/ (e.g. a wheel built from an sdist that
  shipped the bundle): the existing bundle is used as is.
- Neither: the build fails with a message saying what to install.
Set ATTNKIT_SKIP_JS=1 to skip the front-end build (Python-only development).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUNDLES = ("heatmap.js", "headgrid.js", "headmap.js", "cluster.js", "widgets.css")


class JsBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        js = root / "js"
        static = root / "attnkit" / "static"
        build_data.setdefault("artifacts", []).append("attnkit/static/")
        if os.environ.get("ATTNKIT_SKIP_JS") == "1":
            return
        complete = all((static / name).is_file() for name in BUNDLES)
        npm = shutil.which("npm")
        if not (js / "package.json").is_file():
            if complete:
                return
            raise RuntimeError(f"attnkit: no js/ sources and no built bundle in {static}.")
        if npm is None:
            if complete:
                self.app.display_warning("attnkit: npm not found; using the existing attnkit/static bundle.")
                return
            raise RuntimeError(
                "attnkit: building the widgets needs Node.js 18+ and npm (install them, e.g. "
                "`apt-get install nodejs npm`), or set ATTNKIT_SKIP_JS=1 for a wheel without widgets."
            )
        if not (js / "node_modules").is_dir():
            self.app.display_info("attnkit: npm ci (js/)")
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=js, check=True)
        self.app.display_info("attnkit: npm run build (js/ -> attnkit/static/)")
        subprocess.run([npm, "run", "build"], cwd=js, check=True)
        missing = [name for name in BUNDLES if not (static / name).is_file()]
        if missing:
            raise RuntimeError(f"attnkit: the front-end build did not produce {missing} in {static}.")
