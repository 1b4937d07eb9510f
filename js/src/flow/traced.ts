// The radial view of one traced attention graph (DeRose et al. 2020): the source on the
// innermost ring, earlier layers outward, input tokens outermost. Hover a token to trace its
// dependencies; head glyphs count each head's edges per layer and a click restricts that
// layer to the clicked heads (the kernel re-traces). The single and compare modes extend it.

import { Axes, axesSpace, drawAxes } from "../lib/axes";
import { FONT_SMALL, localPoint, sizeCanvas } from "../lib/canvas";
import { bindGridPointer, GridPointer } from "../lib/gridpointer";
import { gridHit, GridLayout } from "../lib/layout";
import { displayToken, fitText, formatValue, headLabel, truncate } from "../lib/labels";
import { angleOf, nearestPoint, nodeKey, nodeXY, polar, Radial, ringRadius, roomOutward, spiral, traceThrough } from "../lib/radial";
import { h, HeadPickerView, noKernel, RenderProps } from "../lib/view";
import { Trait } from "../traits.gen";
import { edge, edgeHasHead, edgeList, Graph, node, readGraph } from "./data";

/** Length of one step of an influence rating bar (a 5/5 bar is 25 px: ratings 1 and 3 read apart). */
const BAR_PX = 5;

const BUCKETS = 8;
const CHUNK = 64;
const GLYPH_MIN = 200; // side panel width at least
const RADIAL_MIN = 300;

export abstract class TracedView extends HeadPickerView<"flow"> {
  protected g!: Graph;
  protected canvas = h("canvas", "attnkit-canvas");
  protected glyphs = h("canvas", "attnkit-canvas attnkit-glyphs");
  protected legend = h("div", "attnkit-legend");
  protected geo: Radial = { cx: 0, cy: 0, rIn: 0, rOut: 0, layers: 0, n: 0 };
  protected size = 600;
  protected glyph: GridLayout = { rows: 0, cols: 0, left: 34, top: 22, cell: 18, pitchX: 20, pitchY: 20, width: 280, height: 300 };
  protected hoverNode = -1;
  protected trace: Set<number> | null = null;
  protected heads!: GridPointer; // the head glyphs: hovered one [layer 0-indexed, head]
  private paths: Float32Array[] = [];
  private nodeXYs = new Float32Array(0);
  private pending = false;
  private thrBox = h("label", "attnkit-slider");
  private thr = h("input", "");
  private thrValue = h("span", "attnkit-stepper-value");
  private allHeads = this.button("All heads", "remove the head restriction", () => {
    this.save({ restrict: [] });
    this.pending = true;
    this.updateStatus();
    this.redraw();
  }, "attnkit-btn attnkit-btn-text");

  constructor(props: RenderProps) {
    super(props, "flow");
    this.root.classList.add("attnkit-flow");
    this.thr.type = "range";
    this.thr.min = "0.01";
    this.thr.max = "0.95";
    this.thr.step = "0.01";
    this.thr.setAttribute("aria-label", "threshold");
    this.thrBox.append(h("span", "attnkit-stepper-label", "threshold"), this.thr, this.thrValue);
    this.controls.append(this.thrBox, this.allHeads);
    this.body.classList.add("attnkit-row");
    this.stage.appendChild(this.canvas);
    const side = h("div", "attnkit-side");
    side.append(this.glyphs, this.legend);
    this.body.appendChild(side);
    this.hint.textContent = "Centre: the source after the last layer; each ring outward one layer earlier; outermost: the input tokens \u00b7 hover a token to trace it \u00b7 click a head glyph to restrict its layer to it";
    this.bind();
  }

  // --------------------------------------------------------------- mode hooks
  protected abstract edgeColor(i: number): string;
  protected abstract nodeColor(i: number): string;
  protected abstract buildLegend(): void;
  /** Bar length 0..5 of an influence score: clamped at the score a full rating stands for. */
  protected barOf(score: number | undefined): number {
    const top = Number(this.get("rating_top")) || 5;
    return score && score > 0 ? 5 * Math.min(1, score / top) : 0;
  }

  /** Influence bars beside token p: [length 0..5, colour] per model. */
  protected abstract bars(p: number): [number, string][];
  protected abstract influenceRows(p: number): [string, string][];
  protected abstract headRows(l: number, hd: number): [string, string][];
  protected abstract paintGlyph(ctx: CanvasRenderingContext2D, l: number, hd: number, x: number, y: number, max: number): void;
  /** Colour of lit edges while tracing. */
  protected abstract litColor(i: number): string;

  /** The threshold and the restriction are the view's own: the kernel's new graph reloads it. */
  protected quiet(): Trait<"flow">[] {
    return [...super.quiet(), "threshold", "restrict"];
  }

  protected load(): void {
    this.g = readGraph((name) => this.get(name));
    this.pending = false;
    this.title.textContent = (this.get("title") as string) || "Attention flow";
    const t = Number(this.get("threshold"));
    this.thr.value = String(t);
    this.thrValue.textContent = t.toFixed(2);
    const off = noKernel();
    this.thr.disabled = off;
    this.thrBox.title = off ? "changing the threshold needs a running kernel" : "edges need attention above this";
    this.root.dataset.nodes = String(this.g.nNodes);
    this.root.dataset.edges = String(this.g.nEdges);
    this.hoverNode = -1;
    this.trace = null;
    this.buildLegend();
    const note = (this.get("rating_note") as string) || "";
    if (note) this.legend.appendChild(h("div", "attnkit-legend-note", note));
    this.updateStatus();
  }

  protected updateStatus(): void {
    const g = this.g;
    const restrict = (this.get("restrict") as number[][]) ?? [];
    this.allHeads.disabled = restrict.length === 0 || noKernel();
    const parts = [`${g.nNodes} nodes, ${g.nEdges} edges`];
    const note = (this.get("threshold_note") as string) || "";
    // the note counts the edges of the chosen threshold: not once the slider moved from it
    if (note && !this.pending && Number(this.thr.value) === Number(this.get("threshold"))) {
      parts.push(`threshold ${Number(this.get("threshold")).toFixed(2)} ${note}`);
    }
    if (g.nEdgesTotal > g.nEdges) parts.push(`drawing the strongest edges of each layer: ${g.nEdges} of ${g.nEdgesTotal} (raise the threshold to see them all)`);
    if (restrict.length) parts.push(`restricted to ${restrict.map(([l, hd]) => headLabel(l, hd)).join(", ")}`);
    if (this.pending) parts.push("recomputing\u2026");
    const sel = this.selectionText();
    if (sel) parts.push(sel);
    this.status.textContent = parts.join(" \u00b7 ");
  }

  showSelection(): void {
    this.updateStatus();
  }

  protected layout(): void {
    const g = this.g;
    const width = this.avail(960);
    const H = Math.max(1, g.heads);
    const cell = Math.max(10, Math.min(22, Math.floor(260 / H) - 2));
    const pitch = cell + 2;
    const { left, top, below } = axesSpace(this.glyphs.getContext("2d")!, this.glyphAxes());
    this.glyph = {
      rows: g.layers, cols: H, left, top, cell, pitchX: pitch, pitchY: pitch,
      width: left + H * pitch + 8, height: top + Math.max(Math.max(1, g.layers) * pitch, below) + 8,
    };
    const side = Math.max(this.glyph.width, GLYPH_MIN);
    // Narrow outputs put the glyphs under the rings instead of beside them.
    const stacked = width - side - 24 < RADIAL_MIN + 60;
    this.body.classList.toggle("attnkit-stack", stacked);
    this.size = Math.floor(Math.max(220, Math.min(760, stacked ? width : width - side - 24)));
    const labelSpace = Math.min(112, Math.max(64, this.size * 0.16)); // bars (BAR_PX a rating) and labels
    const rOut = this.size / 2 - labelSpace;
    this.geo = { cx: this.size / 2, cy: this.size / 2, rIn: Math.max(14, rOut * 0.1), rOut, layers: g.layers, n: Math.max(1, g.tokens.length) };
    this.paths = [];
    for (let i = 0; i < g.nEdges; i++) this.paths.push(spiral(this.geo, edge(g, i, "upper"), edge(g, i, "from"), edge(g, i, "to")));
    this.nodeXYs = new Float32Array(2 * g.nNodes);
    for (let i = 0; i < g.nNodes; i++) {
      const [x, y] = nodeXY(this.geo, node(g, i, "level"), node(g, i, "position"));
      this.nodeXYs[2 * i] = x;
      this.nodeXYs[2 * i + 1] = y;
    }
    Object.assign(this.root.dataset, {
      cx: String(this.geo.cx), cy: String(this.geo.cy), rIn: String(this.geo.rIn), rOut: String(this.geo.rOut),
      glyphLeft: String(this.glyph.left), glyphTop: String(this.glyph.top), glyphCell: String(this.glyph.cell), glyphPitch: String(this.glyph.pitchX),
      stacked: String(stacked),
    });
  }

  // -------------------------------------------------------------------- edges
  private strokeBatch(ctx: CanvasRenderingContext2D, ids: Iterable<number>, color: (i: number) => string,
    alpha: (b: number) => number, width: (b: number) => number): void {
    // One path per (colour, weight bucket), stroked in chunks: thousands of separate strokes
    // are slow, and so is one huge many-subpath path.
    const bucketOf = (w: number) => Math.min(BUCKETS - 1, Math.max(0, Math.floor(w * BUCKETS)));
    const groups = new Map<string, number[]>();
    for (const i of ids) {
      const key = `${color(i)}|${bucketOf(this.g.weight[i])}`;
      let list = groups.get(key);
      if (!list) groups.set(key, (list = []));
      list.push(i);
    }
    for (const [key, list] of groups) {
      const [c, bs] = key.split("|");
      const b = Number(bs);
      ctx.globalAlpha = alpha(b);
      ctx.strokeStyle = c;
      ctx.lineWidth = width(b);
      for (let start = 0; start < list.length; start += CHUNK) {
        ctx.beginPath();
        for (let j = start; j < Math.min(list.length, start + CHUNK); j++) {
          const p = this.paths[list[j]];
          ctx.moveTo(p[0], p[1]);
          for (let k = 2; k < p.length; k += 2) ctx.lineTo(p[k], p[k + 1]);
        }
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
  }

  private drawEdges(ctx: CanvasRenderingContext2D): Set<number> | null {
    const g = this.g;
    const head = this.heads.hovered();
    const focus: Set<number> | null = this.trace ?? (head ? new Set<number>() : null);
    if (head) {
      for (let i = 0; i < g.nEdges; i++) if (edge(g, i, "upper") === head[0] + 1 && edgeHasHead(g, i, head[1])) focus!.add(i);
    }
    const mid = (b: number) => (b + 0.5) / BUCKETS;
    const all = Array.from({ length: g.nEdges }, (_, i) => i);
    if (focus) {
      const rest = all.filter((i) => !focus.has(i));
      this.strokeBatch(ctx, rest, () => this.theme.faint, () => 0.07, (b) => 0.4 + 1.8 * mid(b));
      this.strokeBatch(ctx, focus, (i) => this.litColor(i), () => 0.95, (b) => 0.4 + 1.8 * mid(b));
    } else {
      this.strokeBatch(ctx, all, (i) => this.edgeColor(i), (b) => 0.3 + 0.6 * mid(b), (b) => 0.4 + 1.8 * mid(b));
    }
    return focus;
  }

  // --------------------------------------------------------------------- draw
  protected draw(): void {
    this.drawRadial();
    this.drawGlyphs();
  }

  private drawRadial(): void {
    const g = this.g;
    const th = this.theme;
    const geo = this.geo;
    const ctx = sizeCanvas(this.canvas, this.size, this.size);
    ctx.clearRect(0, 0, this.size, this.size);
    const n = geo.n;
    ctx.lineWidth = 0.6;
    ctx.strokeStyle = th.line;
    for (let lv = 0; lv <= g.layers; lv++) {
      ctx.beginPath();
      ctx.arc(geo.cx, geo.cy, ringRadius(geo, lv), 0, 2 * Math.PI);
      ctx.stroke();
    }
    const focus = this.drawEdges(ctx);
    const touched = new Set<number>();
    if (focus) {
      for (const i of focus) {
        touched.add(nodeKey(edge(g, i, "upper"), edge(g, i, "from")));
        touched.add(nodeKey(edge(g, i, "upper") - 1, edge(g, i, "to")));
      }
    }
    const src = new Set(g.source.map(([lv, p]) => nodeKey(lv, p)));
    for (let i = 0; i < g.nNodes; i++) {
      const key = nodeKey(node(g, i, "level"), node(g, i, "position"));
      const faded = focus !== null && !touched.has(key) && i !== this.hoverNode;
      const isSrc = src.has(key);
      ctx.globalAlpha = faded ? 0.25 : 1;
      ctx.beginPath();
      ctx.arc(this.nodeXYs[2 * i], this.nodeXYs[2 * i + 1], isSrc ? 5.5 : i === this.hoverNode ? 5 : 3.2, 0, 2 * Math.PI);
      ctx.fillStyle = this.nodeColor(i);
      ctx.fill();
      ctx.lineWidth = isSrc || i === this.hoverNode ? 1.8 : 0.8;
      ctx.strokeStyle = i === this.hoverNode ? th.accent : isSrc ? th.ink : th.bg;
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    // ring labels: as many as the ring spacing leaves room for
    ctx.font = FONT_SMALL;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const spacing = (geo.rOut - geo.rIn) / Math.max(1, g.layers);
    const labelStep = Math.max(1, Math.ceil(13 / Math.max(1, spacing)), Math.ceil(g.layers / 6));
    for (let lv = 0; lv <= g.layers; lv++) {
      if (lv !== 0 && lv !== g.layers && lv % labelStep !== 0) continue;
      if (lv === g.layers && g.layers % labelStep !== 0 && spacing * (g.layers % labelStep) < 13) continue;
      const [x, y] = polar(geo, ringRadius(geo, lv), -Math.PI / n);
      const text = lv === 0 ? "input" : `L${lv}`;
      ctx.lineWidth = 3;
      ctx.strokeStyle = th.halo;
      ctx.strokeText(text, x - 3, y);
      ctx.fillStyle = th.faint;
      ctx.fillText(text, x - 3, y);
    }
    // influence bars (the displayed 0-5 rating) and token labels around the outside
    const step = (2 * Math.PI) / n;
    const barR = geo.rOut + 8;
    for (let p = 0; p < g.tokens.length; p++) {
      const a = angleOf(p, n);
      const bars = this.bars(p);
      bars.forEach(([rating, color], k) => {
        if (!(rating > 0)) return;
        const off = bars.length > 1 ? (k === 0 ? -0.22 : 0.22) * Math.min(step, 0.1) : 0;
        const [x0, y0] = polar(geo, barR, a + off);
        const [x1, y1] = polar(geo, barR + BAR_PX * rating, a + off);
        ctx.strokeStyle = color;
        ctx.lineWidth = bars.length > 1 ? 3 : 4;
        ctx.beginPath();
        ctx.moveTo(x0, y0);
        ctx.lineTo(x1, y1);
        ctx.stroke();
      });
    }
    const labelR = barR + BAR_PX * 5 + 6;
    const arc = (2 * Math.PI * labelR) / n;
    const stride = arc >= 11 ? 1 : Math.ceil(11 / arc);
    const hoverPos = this.hoverNode >= 0 ? node(g, this.hoverNode, "position") : -1;
    const traced = new Set<number>();
    if (focus) for (const i of focus) if (edge(g, i, "upper") === 1) traced.add(edge(g, i, "to"));
    for (let p = 0; p < g.tokens.length; p++) {
      const strong = p === hoverPos || traced.has(p);
      if (p % stride !== 0 && p !== hoverPos) continue;
      const a = angleOf(p, n);
      const [x, y] = polar(geo, labelR, a);
      ctx.save();
      ctx.translate(x, y);
      // text runs outward along the radius; on the left half it is turned to read left-to-right
      const flip = a > Math.PI;
      ctx.rotate(a - Math.PI / 2 + (flip ? Math.PI : 0));
      ctx.textAlign = flip ? "right" : "left";
      ctx.textBaseline = "middle";
      ctx.font = strong ? `bold ${FONT_SMALL}` : FONT_SMALL;
      ctx.fillStyle = p === hoverPos ? th.accentInk : strong ? th.ink : focus ? th.faint : th.ink;
      ctx.fillText(fitText(ctx, truncate(displayToken(g.tokens[p]), 16), roomOutward(this.size, x, y, a) - 2), 0, 0);
      ctx.restore();
    }
  }

  protected countsMax(): number {
    let m = 0;
    for (const v of this.g.countsA) m = Math.max(m, v);
    for (const v of this.g.countsB) m = Math.max(m, v);
    return m;
  }

  /** The glyph grid's axes: heads across, layers (as the rings name them) down. */
  private glyphAxes(): Axes {
    return { rows: this.g.layers, cols: this.g.heads, rowLabel: (l) => `L${l + 1}`, colTitle: "head" };
  }

  private drawGlyphs(): void {
    const g = this.g;
    const th = this.theme;
    const { left, top, cell, pitchX: pitch, width, height } = this.glyph;
    const ctx = sizeCanvas(this.glyphs, width, height);
    ctx.clearRect(0, 0, width, height);
    const H = g.heads;
    const max = this.countsMax();
    const restrict = new Set(((this.get("restrict") as number[][]) ?? []).map(([l, hd]) => l * 1000 + hd));
    drawAxes(ctx, th, this.glyph, this.glyphAxes());
    const hover = this.heads.hovered();
    ctx.font = FONT_SMALL;
    ctx.textBaseline = "middle";
    for (let l = 0; l < g.layers; l++) {
      const y = top + l * pitch;
      for (let hd = 0; hd < H; hd++) {
        const x = left + hd * pitch;
        this.paintGlyph(ctx, l, hd, x, y, max);
        const isHover = hover && hover[0] === l && hover[1] === hd;
        if (restrict.has(l * 1000 + hd) || isHover) {
          ctx.strokeStyle = restrict.has(l * 1000 + hd) ? th.accent : th.ink;
          ctx.lineWidth = restrict.has(l * 1000 + hd) ? 2.2 : 1.2;
          ctx.strokeRect(x - 1, y - 1, cell + 2, cell + 2);
        }
      }
    }
  }

  // -------------------------------------------------------------- interaction
  /** Tooltip of head glyph (l, hd): its edges and what a click does. */
  private headTip(l: number, hd: number): [string, [string, string][]] {
    const rows = this.headRows(l, hd);
    const restricted = ((this.get("restrict") as number[][]) ?? []).some(([a, b]) => a === l && b === hd);
    rows.push(["click", noKernel() ? "needs a running kernel" : restricted ? "release this head" : `trace layer ${l + 1} through this head only`]);
    return [`Head ${headLabel(l, hd)}`, rows];
  }

  /** A click on head glyph (l, hd) selects the head; with a kernel, its layer is also restricted to it (or released). */
  private clickHead(l: number, hd: number): void {
    const also: Record<string, unknown> = {};
    if (!noKernel()) {
      const cur = ((this.get("restrict") as number[][]) ?? []).map((p) => [p[0], p[1]]);
      const k = cur.findIndex(([a, b]) => a === l && b === hd);
      if (k >= 0) cur.splice(k, 1);
      else cur.push([l, hd]);
      also.restrict = cur;
      this.pending = true;
    }
    this.pick(l, hd, also);
  }

  private bind(): void {
    // the tooltip lives in the root so it can sit over the glyph panel too
    this.root.style.position = "relative";
    this.tip.attach(this.root);
    this.listen(this.canvas, "pointermove", (e) => {
      const ev = e as PointerEvent;
      const g = this.g;
      const [x, y] = localPoint(this.canvas, ev);
      const i = nearestPoint(this.nodeXYs, x, y, 9);
      if (i >= 0) {
        const lv = node(g, i, "level");
        const p = node(g, i, "position");
        const rows: [string, string][] = [
          ["level", lv === 0 ? "input" : `output of layer ${lv}`],
          ["position", `#${p + 1}`],
          ...(lv === 0 ? this.influenceRows(p) : []),
        ];
        const [sx, sy] = localPoint(this.root, ev);
        this.tip.show(sx, sy, displayToken(g.tokens[p] ?? ""), this.nodeRows(i, rows));
      } else {
        this.tip.hide();
      }
      if (i !== this.hoverNode) {
        this.hoverNode = i;
        this.trace = i >= 0 ? traceThrough(edgeList(g), node(g, i, "level"), node(g, i, "position")) : null;
        this.root.dataset.trace = this.trace ? String(this.trace.size) : "";
        this.canvas.style.cursor = i >= 0 ? "crosshair" : "";
        this.redraw();
      }
    });
    this.listen(this.canvas, "pointerleave", () => {
      this.tip.hide();
      if (this.hoverNode >= 0) {
        this.hoverNode = -1;
        this.trace = null;
        this.redraw();
      }
    });
    this.heads = bindGridPointer(this, {
      canvas: this.glyphs,
      stage: this.root,
      tip: this.tip,
      hit: (x, y) => gridHit(this.glyph, x, y),
      describe: (l, hd) => this.headTip(l, hd),
      select: (l, hd) => this.clickHead(l, hd),
      redraw: () => {
        // a hovered head lights its edges instead of a traced token
        this.trace = null;
        this.hoverNode = -1;
        this.redraw();
      },
    });
    this.listen(this.thr, "input", () => {
      this.thrValue.textContent = Number(this.thr.value).toFixed(2);
    });
    this.listen(this.thr, "change", () => {
      this.save({ threshold: Number(this.thr.value) });
      this.pending = true;
      this.updateStatus();
    });
    const marks = () => {
      this.updateStatus();
      this.redraw();
    };
    this.onModel("change:restrict", marks);
  }

  /** Mode-specific rows of a node's tooltip (compare adds which model has it). */
  protected nodeRows(_i: number, rows: [string, string][]): [string, string][] {
    return rows;
  }

  protected fmt(v: number): string {
    return formatValue(v);
  }
}
