"""Check that the environment uv installed is pip's resolution (``make check-resolution``).

Usage: ``python tools/check_resolution.py REPORT.json``, run by the environment's own Python,
REPORT.json from ``pip install --dry-run --ignore-installed --report REPORT.json ...`` (pip's
resolver and pip's package sources, nothing installed). Every package pip would install must
be installed at pip's version; each one that is not is printed, and the exit status is 1.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def differences(report: dict) -> list[str]:
    """``name: pip X, installed Y`` for each package of the report installed at another version."""
    found = []
    for item in report["install"]:
        if "dir_info" in item["download_info"]:
            continue  # a local folder (the editable project itself)
        name, wanted = item["metadata"]["name"], item["metadata"]["version"]
        try:
            have = version(name)
        except PackageNotFoundError:
            have = "none"
        if have != wanted:
            found.append(f"{name}: pip {wanted}, installed {have}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write(__doc__ or "")
        return 2
    report = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    found = differences(report)
    for line in found:
        print(line)
    print(f"{len(report['install']) - len(found)} packages at pip's version, {len(found)} not")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
