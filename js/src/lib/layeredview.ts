// The view of CircuitView and RoutesView: a layered graph on one canvas. Hover an edge for
// its score (tooltip, text only); click it, or step through the edges with the arrow keys
// (strongest first) and press Enter, to select the head it enters (a linked Heatmap shows it).
// Escape clears the keyboard's edge. Labels are drawn with fillText (never HTML).

import { FONT, FONT_SMALL, localPoint, sizeCanvas } from "./canvas";
import { readArray, readFloats, WireArray } from "./codec";
import { DASH, edgeColor, edgeWidth, GROUP_COLORS, hitEdge, placeNodes, Placed, portOffset, PORTS, ROUTE_COLORS, SIGN_COLORS, stepEdge } from "./layered";
import { displayToken, fitText, headLabel } from "./labels";
import { legendItems } from "./legend";
import { h, HeadPickerView, noKernel, RenderProps } from "./view";

type LayeredBundle = "circuit" | "routes";

interface Data {
  labels: string[];
  rows: ArrayLike<number>;
  order: ArrayLike<number>;
  marks: ArrayLike<number>;
  rowLabels: string[];
  from: ArrayLike<number>;
  to: ArrayLike<number>;
  score: ArrayLike<number>;
  port: ArrayLike<number>;
  group: ArrayLike<number>;
  heads: ArrayLike<number>;
  text: string[];
  groups: string[];
  signed: boolean;
  shared: boolean;
  slots: number;
  top: number;
}

const LEFT = 84; // row labels
const PAD = 24;

export class LayeredView<B extends LayeredBundle> extends HeadPickerView<B> {
  private d!: Data;
  private p!: Placed;
  private canvas = h("canvas", "attnkit-canvas");
  private legend = h("div", "attnkit-legend");
  private size = { w: 0, h: 0 };
  private hover = -1;
  private focusEdge = -1;

  constructor(props: RenderProps, kind: B) {
    super(props, kind);
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    this.stage.appendChild(this.canvas);
    this.body.appendChild(this.legend);
    this.hint.textContent = "Hover an edge for its score \u00b7 click it (or arrow keys, then Enter) to select the head it enters" +
      (noKernel() ? " (showing it in a linked heatmap needs a running kernel: this saved page has none)" : "") +
      " \u00b7 layers and heads counted from 1";
    this.hoverable(this.canvas, (ev) => {
      const [x, y] = localPoint(this.canvas, ev);
      const i = this.hit(x, y);
      if (i !== this.hover) {
        this.hover = i;
        this.redraw();
      }
      if (i < 0) this.tip.hide();
      else this.tip.show(x + 12, y + 12, this.d.text[i], this.rowsOf(i));
    });
    this.listen(this.canvas, "click", (ev) => {
      const [x, y] = localPoint(this.canvas, ev as MouseEvent);
      const i = this.hit(x, y);
      if (i >= 0) this.choose(i);
    });
    this.listen(this.canvas, "keydown", (ev) => {
      const e = ev as KeyboardEvent;
      const n = this.d.from.length;
      if (e.key === "Enter" || e.key === " ") {
        if (this.focusEdge >= 0) this.choose(this.focusEdge);
      } else if (e.key === "Escape") {
        this.focusEdge = -1;
        this.tip.hide();
      } else {
        const next = stepEdge(this.focusEdge, n, e.key);
        if (next === this.focusEdge) return;
        this.focusEdge = next;
        const [ax, ay, bx, by] = this.ends(next);
        this.tip.show((ax + bx) / 2 + 8, (ay + by) / 2 + 8, this.d.text[next], this.rowsOf(next));
      }
      e.preventDefault();
      this.root.dataset.focusEdge = String(this.focusEdge);
      this.redraw();
    });
  }

  protected quiet(): any[] {
    return ["selected", "selected_edge"];
  }

  private rowsOf(i: number): [string, string][] {
    const rows: [string, string][] = [];
    const port = PORTS[this.d.port[i]] ?? "";
    if (port && port !== "out") rows.push(["input", port]);
    const hl = this.d.heads[2 * i];
    if (hl >= 0) rows.push(["head", headLabel(hl, this.d.heads[2 * i + 1])]);
    return rows;
  }

  private choose(i: number): void {
    const layer = this.d.heads[2 * i];
    const head = this.d.heads[2 * i + 1];
    this.root.dataset.chosenEdge = String(i);
    if (layer >= 0 && noKernel()) {
      // a saved page: the linked heatmap lives in Python, so say why nothing follows
      this.status.textContent = `showing head ${headLabel(layer, head)} in a linked heatmap needs a running kernel (this saved page has none)`;
      this.redraw();
    } else if (layer >= 0) this.pick(layer, head, { selected_edge: i });
    else {
      this.save({ selected_edge: i } as any);
      this.redraw();
    }
  }

  protected load(): void {
    const g = (n: string) => this.get(n as any);
    const ints = (n: string) => readArray(g(n) as WireArray).data;
    const labels = (g("node_labels") as string[]) ?? [];
    const score = readFloats(g("edge_score") as WireArray);
    let top = 0;
    for (const s of score) top = Math.max(top, Math.abs(s));
    this.d = {
      labels,
      rows: ints("node_rows"),
      order: readFloats(g("node_order") as WireArray),
      marks: readFloats(g("node_marks") as WireArray),
      rowLabels: (g("row_labels") as string[]) ?? [],
      from: ints("edge_from"),
      to: ints("edge_to"),
      score,
      port: ints("edge_port"),
      group: ints("edge_group"),
      heads: ints("edge_heads"),
      text: (g("edge_text") as string[]) ?? [],
      groups: (g("group_names") as string[]) ?? [],
      signed: Boolean(g("signed")),
      shared: Boolean(g("shared_x")),
      slots: Number(g("slots") ?? 0),
      top,
    };
    if (this.d.from.length !== this.d.text.length) throw new Error("layered graph: edge arrays differ in length");
    this.title.textContent = (g("title") as string) || "";
    this.root.dataset.edges = String(this.d.from.length);
    this.root.dataset.nodes = String(labels.length);
    this.canvas.setAttribute("aria-label", `${this.title.textContent}: ${labels.length} nodes, ${this.d.from.length} edges; arrow keys step through the edges, Enter selects one`);
    const routes = this.kind === "routes";
    if (this.d.signed) legendItems(this.legend, "edges", [[SIGN_COLORS[0], "positive score"], [SIGN_COLORS[1], "negative score"], ["#888", "q solid \u00b7 k dashed \u00b7 v dotted"]], "line");
    else if (routes) legendItems(this.legend, "routes", this.d.groups.map((t, k) => [ROUTE_COLORS[k] ?? "#888", t] as [string, string]), "line");
    else legendItems(this.legend, "circuits", [[GROUP_COLORS[0], "in both"], [GROUP_COLORS[1], `only in ${this.d.groups[0] ?? "A"}`], [GROUP_COLORS[2], `only in ${this.d.groups[1] ?? "B"}`]], "line");
    const note = (g("note") as string) || "";
    this.showSelection();
    if (note) this.status.textContent = `${this.status.textContent} \u00b7 ${note}`;
    this.hover = -1;
    this.focusEdge = Math.min(this.focusEdge, this.d.from.length - 1);
  }

  protected layout(): void {
    const nRows = Math.max(1, this.d.rowLabels.length);
    const w = Math.max(320, Math.min(1400, this.avail(720)));
    const hgt = Math.max(160, Math.min(900, 70 * nRows + (this.d.shared ? 70 : 30)));
    this.size = { w, h: hgt };
    const bottom = this.d.shared ? 64 : 24;
    this.p = placeNodes(this.d.rows, this.d.order, nRows, { left: LEFT, top: PAD, width: w - LEFT - PAD, height: hgt - PAD - bottom }, this.d.shared, this.d.slots);
    // each edge's midpoint (canvas CSS px), for tests and tools that drive the view
    const mids: number[][] = [];
    for (let i = 0; i < this.d.from.length; i++) {
      const [ax, ay, bx, by] = this.ends(i);
      mids.push([Math.round((ax + bx) / 2), Math.round((ay + by) / 2)]);
    }
    this.root.dataset.edgeMids = JSON.stringify(mids);
  }

  private ends(i: number): [number, number, number, number] {
    const a = this.d.from[i];
    const b = this.d.to[i];
    const off = portOffset(this.d.port[i], this.p.port);
    return [this.p.x[a], this.p.y[a], this.p.x[b] + off, this.p.y[b] + 5];
  }

  private hit(x: number, y: number): number {
    return hitEdge(x, y, this.d.from.length, (i) => this.ends(i));
  }

  protected draw(): void {
    const d = this.d;
    const th = this.theme;
    const { w, h: hgt } = this.size;
    const ctx = sizeCanvas(this.canvas, w, hgt);
    ctx.clearRect(0, 0, w, hgt);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    const nRows = Math.max(1, d.rowLabels.length);
    const pitch = nRows > 1 ? (hgt - PAD - (d.shared ? 64 : 24)) / (nRows - 1) : 0;
    for (let r = 0; r < nRows; r++) {
      const y = PAD + (nRows - 1 - r) * pitch;
      ctx.fillStyle = th.muted;
      ctx.fillText(fitText(ctx, d.rowLabels[r], LEFT - 8), LEFT - 8, y);
      ctx.strokeStyle = th.line;
      ctx.lineWidth = 0.5;
      ctx.beginPath();
      ctx.moveTo(LEFT, y);
      ctx.lineTo(w - PAD / 2, y);
      ctx.stroke();
    }
    const sel = this.selection();
    const chosen = Number(this.get("selected_edge" as any));
    // weakest first so the strongest lie on top
    for (let i = d.from.length - 1; i >= 0; i--) {
      const [ax, ay, bx, by] = this.ends(i);
      ctx.strokeStyle = edgeColor(d.score[i], d.group[i], d.signed, this.kind === "routes");
      ctx.lineWidth = edgeWidth(d.score[i], d.top);
      ctx.setLineDash(DASH[PORTS[d.port[i]] ?? ""] ?? []);
      ctx.globalAlpha = 0.85;
      ctx.beginPath();
      ctx.moveTo(ax, ay);
      ctx.lineTo(bx, by);
      ctx.stroke();
      const hl = i === this.hover || i === this.focusEdge || i === chosen;
      if (hl) {
        ctx.globalAlpha = 1;
        ctx.setLineDash([]);
        ctx.strokeStyle = th.accent;
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        ctx.moveTo(ax, ay);
        ctx.lineTo(bx, by);
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
    ctx.setLineDash([]);
    ctx.font = FONT_SMALL;
    ctx.textAlign = "center";
    for (let i = 0; i < d.labels.length; i++) {
      const x = this.p.x[i];
      const y = this.p.y[i];
      ctx.fillStyle = th.bg;
      ctx.strokeStyle = th.ink;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.arc(x, y, 4.5, 0, 2 * Math.PI);
      ctx.fill();
      ctx.stroke();
      if (d.marks[i] > 0) {
        ctx.fillStyle = "#d95f02";
        ctx.fillRect(x + 6, y - 3, 6, 6);
      }
      ctx.fillStyle = th.ink;
      const label = d.shared ? displayToken(d.labels[i]) : d.labels[i];
      if (!d.shared || d.rows[i] > 0) {
        ctx.textAlign = "left";
        ctx.fillText(fitText(ctx, label, 70), x + 8, y - 9);
        ctx.textAlign = "center";
      } else {
        ctx.save();
        ctx.translate(x, y + 12);
        ctx.rotate(Math.PI / 4);
        ctx.textAlign = "left";
        ctx.fillText(fitText(ctx, label, 60), 0, 0);
        ctx.restore();
      }
    }
    if (sel) this.root.dataset.selected = headLabel(sel[0], sel[1]);
    this.root.dataset.drawn = String(Number(this.root.dataset.drawn ?? "0") + 1);
  }
}
