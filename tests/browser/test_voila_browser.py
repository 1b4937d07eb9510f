"""attnkit's views in Voila (issue 19: one behaviour in every front end).

Voila runs the notebook and shows only its outputs, rendered by JupyterLab's output area and
widget manager: the HeadGrid, FlowView and a 2,048-token Heatmap draw, the static pictures
IPython shows beside them are hidden once they have, the FlowView slider takes the arrow
keys, ``+`` zooms the Heatmap and exact tiles come from the kernel (custom messages).
"""

from __future__ import annotations

import pytest
from frontends import VIEWS_SETUP, views_work

pytestmark = pytest.mark.browser

CELLS = [VIEWS_SETUP, "display(HeadGrid(att))\nFlowView(att)", "Heatmap(long)"]


def test_views_draw_keys_and_tiles_in_voila(browser, voila):
    with voila(CELLS) as server, server.page(browser) as page:
        page.goto(server.url, wait_until="domcontentloaded", timeout=120_000)
        views_work(page)
        # each figure once: the three pictures are in the page, hidden
        states = page.evaluate("""() => [...document.querySelectorAll('img.attnkit-static')].map(img => [
            img.closest('.jp-OutputArea-child')?.dataset.attnkitStatic, img.getBoundingClientRect().height])""")
        assert states == [["hidden", 0]] * 3, states
