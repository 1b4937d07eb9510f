"""CircuitView and RoutesView in headless Chromium: edges drawn, hover names an edge's score,
a click or the keyboard selects the head it enters (and a linked heatmap follows), two
circuits compared, user text as text only, a dark notebook theme."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from harness import DARK, WidgetPage

import attnkit as ak
from attnkit.testing import tiny_model

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


def circuit(edges, n_layers=2, n_heads=2, name=None):
    g = nx.MultiDiGraph(n_layers=n_layers, n_heads=n_heads, tokens=None, metric="m",
                        method="hand")
    if name:
        g.graph["name"] = name
    for up, down, port, score in edges:
        for c in (up, down):
            if c in g:
                continue
            if c == "embed":
                g.add_node(c, layer=-1, kind="embed")
            elif c == "logits":
                g.add_node(c, layer=n_layers, kind="logits")
            else:
                g.add_node(c, layer=int(c.split("-")[0]) - 1, kind="head")
        g.add_edge(up, down, key=port, score=score, input=port)
    return g


EDGES = [("1-1", "2-2", "k", 0.9), ("embed", "2-2", "v", 0.7), ("2-2", "logits", "out", 1.5),
         ("embed", "1-1", "q", -0.2)]


def mids(wp: WidgetPage) -> list[list[float]]:
    return json.loads(wp.data("edge-mids"))


def test_circuit_view_draws_hovers_clicks_and_links(browser, img_dir):
    view = ak.CircuitView(circuit(EDGES), title=XSS)
    heatmap = view.link(ak.Heatmap(tiny_model("llama").attend("The cat sat.")))
    wp = WidgetPage(browser, view, width=700)
    try:
        wp.wait_drawn()
        assert wp.data("edges") == "4" and wp.data("nodes") == "4"
        s = wp.canvas_stats()
        assert s["ink"] > 500 and s["colours"] > 10  # blue and red edges, nodes, labels
        m = mids(wp)
        i = view.edge_text.index("1-1 → 2-2.k: score +0.9")
        wp.move(*m[i])
        tip = wp.tooltip()
        assert "1-1 → 2-2.k: score +0.9" in tip and "input" in tip and "head2-2" in tip
        wp.click(*m[i])
        wp.apply_saved()
        assert view.selected_edge == i and view.selected == [1, 1]
        assert (heatmap.layer, heatmap.head) == (1, 1)
        # the title is text, not HTML
        assert wp.page.locator("#root .attnkit-title").text_content() == XSS
        assert wp.page.locator("#root img").count() == 0 and wp.alerts() == 0
        wp.screenshot(img_dir / "circuitview.png")
        assert wp.errors() == []
    finally:
        wp.close()


def test_circuit_view_keyboard_steps_through_edges_strongest_first(browser):
    view = ak.CircuitView(circuit(EDGES))
    wp = WidgetPage(browser, view, width=700)
    try:
        wp.wait_drawn()
        wp.canvas.focus()
        drawn = int(wp.data("drawn"))
        wp.page.keyboard.press("ArrowRight")
        wp.wait_drawn(drawn + 1)
        assert wp.data("focus-edge") == "0" and "2-2 → logits.out" in wp.tooltip()
        wp.page.keyboard.press("ArrowRight")
        assert wp.data("focus-edge") == "1" and "1-1 → 2-2.k" in wp.tooltip()
        wp.page.keyboard.press("Enter")
        wp.apply_saved()
        assert view.selected == [1, 1] and view.selected_edge == 1
        wp.page.keyboard.press("ArrowLeft")
        wp.page.keyboard.press("ArrowLeft")
        assert wp.data("focus-edge") == "3"  # wraps to the weakest
        wp.page.keyboard.press("Escape")
        assert wp.tooltip() == ""
        assert wp.errors() == []
    finally:
        wp.close()


def test_two_circuits_side_by_side_in_a_dark_theme(browser, img_dir):
    a = circuit(EDGES, name="pre-trained")
    b = circuit([("1-1", "2-2", "k", 0.5), ("2-1", "logits", "out", 0.8)], name="fine-tuned")
    view = ak.CircuitView(a, other=b)
    wp = WidgetPage(browser, view, width=700, setup=DARK)
    try:
        wp.wait_drawn()
        legend = wp.page.locator("#root .attnkit-legend").text_content()
        assert "in both" in legend and "only in pre-trained" in legend and "only in fine-tuned" in legend
        assert "1 shared, 3 only in pre-trained, 1 only in fine-tuned" in wp.page.locator(
            "#root .attnkit-status").text_content()
        m = mids(wp)
        i = [t.startswith("1-1 → 2-2.k") for t in view.edge_text].index(True)
        wp.move(*m[i])
        assert "pre-trained +0.9; fine-tuned +0.5" in wp.tooltip()
        # labels drawn in the dark theme's light ink: light pixels on the transparent canvas
        light = wp.page.evaluate("""() => { const c = document.querySelector('#root canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && d[i] > 180 && d[i + 1] > 180 && d[i + 2] > 180) n++;
            return n; }""")
        assert light > 50
        wp.screenshot(img_dir / "circuitview-compare-dark.png")
        assert wp.errors() == []
    finally:
        wp.close()


def test_routes_view_draws_the_toys_induction_route_and_links(browser, img_dir):
    model = ak.toy.induction_model()
    N = 32
    item = ak.induction_inputs(model, 1, N, seed=1)[0]
    t = N + 9
    g = ak.flow_routes(model, item, position=t, threshold=0.3)
    view = ak.RoutesView(g)
    heatmap = view.link(ak.Heatmap(model.attend(item)))
    wp = WidgetPage(browser, view, width=700)
    try:
        wp.wait_drawn()
        assert wp.data("edges") == str(g.number_of_edges())
        m = mids(wp)
        i = [f"(position {t - N + 1}, level 1)" in s and f"(position {t}, level 2)" in s
             for s in view.edge_text].index(True)
        wp.move(*m[i])
        assert "2-" in wp.tooltip()  # an induction head of layer 2, with its share
        wp.click(*m[i])
        wp.apply_saved()
        assert view.selected[0] == 1 and (heatmap.layer, heatmap.head) == tuple(view.selected)
        wp.screenshot(img_dir / "routesview.png")
        assert wp.errors() == []
    finally:
        wp.close()


# ------------------------------------------------------------------ offline report
@pytest.mark.slow
def test_circuit_views_live_in_an_offline_report(browser, tmp_path):
    """tests/notebooks/circuit_widgets.ipynb executed into a report and opened from file://
    with the network cut off: both views draw from the saved state, hover reads an edge's
    score, the keyboard steps through edges, and nothing is requested or logged as an error."""
    from attnkit.apps import report
    from attnkit.apps.cli import main
    from prereq import REPO, skip_or_fail

    if not (report.STATIC / "report.js").is_file():
        skip_or_fail("report renderer not built: npm --prefix js/report ci && npm --prefix js/report run build")
    out = tmp_path / "circuits.html"
    assert main(["report", str(REPO / "tests" / "notebooks" / "circuit_widgets.ipynb"), "-o",
                 str(out), "--execute"]) == 0
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()
    blocked, errors = [], []
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://")
               else (blocked.append(r.request.url), r.abort()))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(out.as_uri())
        page.wait_for_function(
            "[...document.querySelectorAll('.attnkit-slot .attnkit')].filter(r => Number(r.dataset.drawn) >= 1).length === 2",
            timeout=20_000)
        circuit_root = page.locator(".attnkit-slot .attnkit-circuit")
        routes_root = page.locator(".attnkit-slot .attnkit-routes")
        assert circuit_root.get_attribute("data-edges") == "4"
        assert int(routes_root.get_attribute("data-edges")) >= 1
        canvas = circuit_root.locator("canvas").first
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        x, y = json.loads(circuit_root.get_attribute("data-edge-mids"))[1]
        page.mouse.move(box["x"] + x, box["y"] + y)
        assert "1-1 → 2-2.k: score +0.9" in circuit_root.locator(".attnkit-tooltip").text_content()
        canvas.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "document.querySelector('.attnkit-slot .attnkit-circuit').dataset.focusEdge === '0'")
        assert blocked == [] and errors == []
    finally:
        context.close()
