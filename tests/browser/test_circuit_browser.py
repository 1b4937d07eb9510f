"""CircuitView and RoutesView in headless Chromium: edges drawn, hover names an edge's score,
a click or the keyboard selects the head it enters (and a linked heatmap follows), two
circuits compared, user text as text only, a dark notebook theme; and in every front end
(JupyterLab, Notebook 7, Voila, marimo): both views draw, a click on an edge into a head
reaches the kernel, whose linked Heatmap comes back showing that head, and the labels stay
legible in Voila's and marimo's dark themes; in an offline report a click says that showing
the head needs a running kernel."""

from __future__ import annotations

import json
import textwrap

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
        # a click on the edge into head 2-2: no kernel behind the page, and the view says so
        page.mouse.click(box["x"] + x, box["y"] + y)
        assert circuit_root.get_attribute("data-chosen-edge") == "1"
        status = circuit_root.locator(".attnkit-status").text_content()
        assert "showing head 2-2 in a linked heatmap needs a running kernel (this saved page has none)" in status
        assert "needs a running kernel" in circuit_root.locator(".attnkit-hint").text_content()
        assert blocked == [] and errors == []
    finally:
        context.close()


# ------------------------------------------------------------------ every front end
FRONT_CELL = """\
import networkx as nx
import attnkit as ak
from attnkit.testing import tiny_model

G = nx.MultiDiGraph(n_layers=2, n_heads=2, tokens=None, metric="m", method="hand")
for name, layer, kind in [("embed", -1, "embed"), ("1-1", 0, "head"), ("2-2", 1, "head"), ("logits", 2, "logits")]:
    G.add_node(name, layer=layer, kind=kind)
for up, down, key, score in [("1-1", "2-2", "k", 0.9), ("embed", "2-2", "v", 0.7), ("2-2", "logits", "out", 1.5), ("embed", "1-1", "q", -0.2)]:
    G.add_edge(up, down, key=key, score=score, input=key)
circuit = ak.CircuitView(G)
circuit_map = circuit.link(ak.Heatmap(tiny_model("gpt2").attend("The cat sat on the mat.")))
llama = tiny_model("llama")
routes = ak.RoutesView(ak.flow_routes(llama, "The cat sat on the mat.", threshold=0.1))
routes_map = routes.link(ak.Heatmap(llama.attend("The cat sat on the mat.")))
"""
VIEWS = ("circuit", "circuit_map", "routes", "routes_map")
MARIMO_APP = "import marimo\n\napp = marimo.App(width=\"full\")\n\n\n@app.cell\ndef _():\n" + \
    textwrap.indent(FRONT_CELL, "    ") + f"    return {', '.join(VIEWS)}\n" + "".join(
        f"\n\n@app.cell\ndef _({v}):\n    {v}\n    return\n" for v in VIEWS)

#: Row labels (the canvas's left 80 CSS px hold nothing else): how many pixels they cover and
#: their mean brightness (0-255, alpha-weighted): light text on a dark theme, dark on a light one.
LABELS = """root => { const c = root.querySelector('canvas'); const r = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(0, 0, Math.round(80 * r), c.height).data;
    let n = 0, sum = 0, w = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 60) {
        n++; w += d[i + 3]; sum += d[i + 3] * (d[i] + d[i + 1] + d[i + 2]) / 3; }
    return {n, mean: w ? sum / w : 0}; }"""


def _routes_target():
    """The first drawn route edge through a head other than head 1-1 (which the routes'
    heatmap shows first), and that head: computed here from the same seeded model."""
    view = ak.RoutesView(ak.flow_routes(tiny_model("llama"), "The cat sat on the mat.", threshold=0.1))
    for i in range(view.n_edges):
        view.selected_edge = i
        if view.selected and list(view.selected) != [0, 0]:
            return i, tuple(view.selected)
    raise AssertionError("no route edge through another head")


def _click_edge(page, root, i):
    canvas = root.locator("canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    x, y = json.loads(root.get_attribute("data-edge-mids"))[i]
    page.mouse.click(box["x"] + x, box["y"] + y)


def views_round_trip(page, dark: bool) -> None:
    """Both views and their heatmaps draw; a click on an edge into a head goes to the kernel,
    whose linked Heatmap comes back showing that head; the row labels are light on a dark
    theme and dark on a light one."""
    from frontends import INK
    from lab import wait_for

    roots = {"circuit": page.locator(".attnkit-circuit").first, "routes": page.locator(".attnkit-routes").first,
             "circuit_map": page.locator(".attnkit-heatmap").nth(0), "routes_map": page.locator(".attnkit-heatmap").nth(1)}
    for kind, root in roots.items():
        root.wait_for(timeout=120_000)
        wait_for(lambda r=root: int(r.get_attribute("data-drawn") or 0) >= 1, 60, f"the {kind} view to draw")
    assert roots["circuit"].get_attribute("data-edges") == "4"
    assert int(roots["routes"].get_attribute("data-edges")) >= 2
    for kind in ("circuit", "routes"):
        assert roots[kind].evaluate(INK)["ink"] > 300, kind

    def title(kind):
        return roots[kind].locator(".attnkit-title").text_content()

    assert "layer 1, head 1" in title("circuit_map") and "layer 1, head 1" in title("routes_map")
    _click_edge(page, roots["circuit"], 1)  # 1-1 -> 2-2.k, the second strongest
    wait_for(lambda: "layer 2, head 2" in title("circuit_map"), 120, "the kernel to show head 2-2")
    assert roots["circuit"].get_attribute("data-selected") == "2-2"
    i, (layer, head) = _routes_target()
    _click_edge(page, roots["routes"], i)
    wait_for(lambda: f"layer {layer + 1}, head {head + 1}" in title("routes_map"), 120,
             f"the kernel to show head {layer + 1}-{head + 1}")
    for kind in ("circuit", "routes"):
        assert roots[kind].get_attribute("data-link") == "ok"
        labels = roots[kind].evaluate(LABELS)
        assert labels["n"] > 30, (kind, labels)
        assert (labels["mean"] > 160) if dark else (labels["mean"] < 128), (kind, dark, labels)


@pytest.mark.parametrize("front", ["jupyterlab", "notebook7", "voila", "marimo"])
def test_front_ends_draw_the_views_and_open_the_heads_heatmap_in_the_kernel(browser, tmp_path, jupyter, voila, front):
    from frontends import Marimo
    from lab import JupyterLab, Notebook7
    from prereq import require_installed

    require_installed({"jupyterlab": "jupyterlab", "notebook7": "notebook", "voila": "voila",
                       "marimo": "marimo"}[front], f"{front} is not installed")
    cell = FRONT_CELL + f"display({', '.join(VIEWS)})"
    if front in ("jupyterlab", "notebook7"):
        server_type = JupyterLab if front == "jupyterlab" else Notebook7
        with jupyter(server_type, {"c.ipynb": [cell]}) as server, server.page(browser, height=1400) as page:
            cells = server.open(page, "c.ipynb")
            server.run_cell(page, cells, 0)
            views_round_trip(page, dark=False)
    elif front == "voila":  # Voila's dark theme: JupyterLab's theme variables
        with voila([cell], theme="dark") as server, server.page(browser, height=1400) as page:
            page.goto(server.url, wait_until="domcontentloaded", timeout=120_000)
            views_round_trip(page, dark=True)
    else:  # marimo's dark theme: none of JupyterLab's variables
        with Marimo(tmp_path, MARIMO_APP, theme="dark") as server, server.page(browser, height=1400) as page:
            page.goto(server.url, wait_until="domcontentloaded", timeout=120_000)
            views_round_trip(page, dark=True)
