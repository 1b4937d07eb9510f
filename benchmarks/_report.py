"""Write one ``## name`` section of a Markdown file (docs/benchmarks.md by default),
keeping the other sections as they are."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEach section is written by the script it names, measured in one run on the machine stated.\n"


def write_section(name: str, body: str, doc: Path = DOC, header: str = HEADER) -> Path:
    """Replace (or append) the section ``## name`` of ``doc`` with ``body``.

    ``header`` starts the file when it does not exist yet.
    """
    doc = Path(doc)
    text = doc.read_text(encoding="utf-8") if doc.exists() else header
    block = f"## {name}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text).rstrip() + "\n"  # body taken literally
    else:
        text = text.rstrip() + "\n\n" + block
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text, encoding="utf-8")
    return doc
