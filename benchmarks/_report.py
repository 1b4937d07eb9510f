"""Write one section of docs/benchmarks.md, keeping the other sections as they are."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEach section is written by the script it names, measured in one run on the machine stated.\n"


def write_section(name: str, body: str) -> Path:
    """Replace (or append) the section ``## name`` of docs/benchmarks.md with ``body``."""
    text = DOC.read_text() if DOC.exists() else HEADER
    block = f"## {name}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(block + "\n", text).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + block
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text)
    return DOC
