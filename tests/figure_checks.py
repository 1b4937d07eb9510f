"""Checks that every figure of an executed notebook is an image, in it and in its report
(used by test_report_figures.py and test_notebooks.py)."""

from __future__ import annotations

import re

FIGURE_TEXT = re.compile(r"^<Figure size [\dx.]+ with \d+ Axes>$")


def figure_outputs(cell) -> list:
    """The outputs of a cell that stand for a matplotlib figure (its text is '<Figure ...>')."""
    return [o for o in cell.get("outputs", [])
            if FIGURE_TEXT.match(str(o.get("data", {}).get("text/plain", "")))]


def report_images(html: str) -> int:
    """Inline PNG images in a report."""
    return len(re.findall(r'<img[^>]+src="data:image/png;base64,', html))


def check_figures(nb, html: str, expected: list[int] | None = None) -> int:
    """Every figure output of the executed ``nb`` carries a PNG, the report has as many
    images as there are figures, and no figure is left as its text. Returns the count."""
    per_cell = [len(figure_outputs(c)) for c in nb.cells if c.cell_type == "code"]
    if expected is not None:
        assert per_cell == expected
    bare = [i + 1 for i, c in enumerate(nb.cells) for o in figure_outputs(c)
            if "image/png" not in o.get("data", {})]
    assert not bare, f"cells {bare} show a figure as text, not as an image"
    assert "&lt;Figure size" not in html
    n = sum(per_cell)
    # a widget's PNG: in its view's output, or (IPython) in an output of its own beside it
    widget_images = sum(1 for c in nb.cells for o in c.get("outputs", [])
                        if "image/png" in o.get("data", {})
                        and ("application/vnd.jupyter.widget-view+json" in o["data"]
                             or "static" in o.get("metadata", {}).get("attnkit", {})))
    assert report_images(html) == n + widget_images
    return n
