"""Turn pip's installation report into a package index for uv: pip chooses, uv installs.

Usage: ``python tools/pip_report_index.py REPORT.json OUT_DIR`` (``make install`` runs it).

``pip install --dry-run --report REPORT.json ...`` resolves with pip's own resolver and pip's
own configuration (pip.conf and PIP_* find-links and extra indexes, the -c constraints) and
downloads nothing but metadata. This writes

- ``OUT_DIR/simple/<name>/index.html``: a one-link simple index (PEP 503) per chosen package,
  the link being the very file pip would have installed (its URL and hash), and
- ``OUT_DIR/requirements.txt``: each chosen package pinned to pip's version,

so that ``uv pip install --no-deps --index-url file://OUT_DIR/simple -r OUT_DIR/requirements.txt``
installs exactly pip's resolution (uv's own resolver, which can choose other versions, never
runs; uv downloads and unpacks in parallel and skips the bytecode pip compiles up front).
Packages that pip would install from a local folder (the editable project itself) are left
out: pip installs those.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote


def normalized(name: str) -> str:
    """The PEP 503 normal form of a project name: ``Python_Dateutil`` -> ``python-dateutil``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def write_index(report: dict, out: Path) -> int:
    """Write ``out/simple/`` and ``out/requirements.txt`` from a pip report; return the count."""
    simple = out / "simple"
    simple.mkdir(parents=True, exist_ok=True)
    pins = []
    for item in report["install"]:
        info = item["download_info"]
        if "dir_info" in info:
            continue
        if "vcs_info" in info:
            raise SystemExit(f"pip_report_index: {info['url']} is a VCS requirement; uv cannot pin it here.")
        name, version = normalized(item["metadata"]["name"]), item["metadata"]["version"]
        url = info["url"]
        hashed = info.get("archive_info", {}).get("hash")
        if hashed:
            url = f"{url}#{hashed}"
        filename = unquote(url.split("#", 1)[0].rsplit("/", 1)[-1])
        page = simple / name
        page.mkdir(exist_ok=True)
        page.joinpath("index.html").write_text(
            f'<!DOCTYPE html><html><body><a href="{html.escape(url)}">{html.escape(filename)}</a>'
            "</body></html>\n",
            encoding="utf-8",
        )
        pins.append(f"{name}=={version}")
    (out / "requirements.txt").write_text("".join(f"{pin}\n" for pin in sorted(pins)), encoding="utf-8")
    return len(pins)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(__doc__ or "")
        return 2
    report = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    write_index(report, Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
