// InterventionView: does a head (an edge, a stripe of edges) matter? Left, a layer × head map
// of ablation effects (click or arrows pick a head); middle, the picked head's attention on one
// input: a click on a cell asks the kernel to knock that edge out (attnkit.knockout), Shift +
// click its key's column, Alt + click its diagonal (or the edge / column / diagonal buttons);
// with the map focused, arrows move a cursor and Enter knocks out. The status line and a live
// region say the metric before → after; right, every head of the later layers as after −
// before on a diverging scale, a click (or Enter) opens that head's difference in the middle.
// Without a kernel (a saved page) the maps and the last result still draw from the state, and
// a click says that a knockout needs a running kernel.

import { FONT, FONT_SMALL, localPoint, sizeCanvas } from "./lib/canvas";
import { readArray, readFloats, WireArray } from "./lib/codec";
import { divIndex, DIVERGING_DEFAULT, lutColor, SEQUENTIAL_DEFAULT, seqIndex, textOn } from "./lib/colors";
import { isKnocked, Knocked, kernelNotice, moveCursor, resultText, Stripe, STRIPES, stripeCells, stripeOf } from "./lib/knockout";
import { displayToken, formatValue, headLabel } from "./lib/labels";
import { moveHead } from "./lib/steps";
import { flexRow, h, HeadPickerView, KernelTimeout, mount, RenderProps } from "./lib/view";

const MAP_LEFT = 44;
const MAP_TOP = 30;
const HEAT_TOP = 18;
const THUMB_GAP = 6;

interface Data {
  layers: number;
  heads: number;
  effects: Float32Array;
  effectName: string;
  metric: string;
  tokens: string[];
  n: number;
  causal: boolean;
  maps: Float32Array | null; // [k, n, n]
  mapHeads: [number, number][];
  diffs: Float32Array | null; // [k, m, m] (pooled by diffBin)
  diffHeads: [number, number][];
  diffSide: number;
  diffBin: number;
  diffTop: number;
  knocked: Knocked | null;
}

class InterventionViewImpl extends HeadPickerView<"intervention"> {
  private d!: Data;
  private effects = h("canvas", "attnkit-canvas attnkit-iv-effects");
  private heat = h("canvas", "attnkit-canvas attnkit-iv-heat");
  private grid = h("canvas", "attnkit-canvas attnkit-iv-diffs");
  private result = h("div", "attnkit-iv-result");
  private stripeBtns: HTMLButtonElement[] = [];
  private diffBtn: HTMLButtonElement;
  private cell = 32;
  private heatSize = 320;
  private thumb = 64;
  private cols = 4;
  private cursor: [number, number] | null = null;
  private diffCursor = 0;
  private showDiff = false;
  private pending = false;

  constructor(props: RenderProps) {
    super(props, "intervention");
    for (const s of STRIPES) {
      const b = this.button(s, `a click knocks out ${s === "edge" ? "the clicked edge" : s === "column" ? "every query's edge to the clicked key (Shift + click)" : "every edge at the clicked offset (Alt + click)"}`, () => this.save({ stripe: s }), "attnkit-btn attnkit-iv-stripe");
      b.dataset.stripe = s;
      this.stripeBtns.push(b);
    }
    this.diffBtn = this.button("after \u2212 before", "show the selected head's map after the knockout minus before (or its attention)", () => {
      this.showDiff = !this.showDiff && this.diffIndex(this.selection()) >= 0;
      this.redraw();
    });
    this.controls.append(...this.stripeBtns, this.diffBtn);
    this.effects.tabIndex = 0;
    this.effects.setAttribute("role", "grid");
    this.effects.setAttribute("aria-label", "ablation effect per head: arrow keys pick a head");
    this.heat.tabIndex = 0;
    this.heat.setAttribute("role", "img");
    this.grid.tabIndex = 0;
    this.grid.setAttribute("role", "grid");
    this.result.setAttribute("role", "status");
    this.result.setAttribute("aria-live", "polite");
    const row = flexRow("attnkit-iv-row", 14, this.effects, this.heat, this.grid);
    this.stage.append(row, this.result);
    this.hint.textContent = "Click a head on the left (or arrows) \u00b7 click a cell of its map to knock that edge out (Shift: the key's column, Alt: the diagonal), or focus the map, move with the arrows and press Enter \u00b7 right: later heads after \u2212 before, click to open \u00b7 positions from 0, heads from 1";

    this.listen(this.effects, "click", (e) => {
      const hit = this.effectHit(...localPoint(this.effects, e as MouseEvent));
      if (hit) this.open(hit[0], hit[1], false);
    });
    this.listen(this.effects, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      const to = moveHead(this.selection(), ev.key, this.d.layers, this.d.heads);
      if (to) {
        ev.preventDefault();
        this.open(to[0], to[1], false);
      }
    });
    this.hoverable(this.heat, (ev) => this.hoverHeat(ev));
    this.listen(this.heat, "click", (e) => {
      const ev = e as MouseEvent;
      const hit = this.heatHit(...localPoint(this.heat, ev));
      if (!hit) return;
      this.cursor = hit;
      this.knock(hit[0], hit[1], stripeOf(ev, this.mode()));
    });
    this.listen(this.heat, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        const c = this.cursor ?? [this.d.n - 1, 0];
        this.cursor = c;
        this.knock(c[0], c[1], stripeOf(ev, this.mode()));
        return;
      }
      const to = moveCursor(this.cursor, ev.key, this.d.n, this.d.causal);
      if (to) {
        ev.preventDefault();
        this.cursor = to;
        this.unhover();
        this.describeCursor();
        this.redraw();
      }
    });
    this.listen(this.grid, "click", (e) => {
      const i = this.thumbHit(...localPoint(this.grid, e as MouseEvent));
      if (i >= 0) this.openDiff(i);
    });
    this.listen(this.grid, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      const k = this.d.diffHeads.length;
      if (!k) return;
      const step: Record<string, number> = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -this.cols, ArrowDown: this.cols };
      if (ev.key in step) {
        ev.preventDefault();
        this.diffCursor = Math.max(0, Math.min(k - 1, this.diffCursor + step[ev.key]));
        this.redraw();
      } else if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        this.openDiff(this.diffCursor);
      }
    });
    this.listen(this.grid, "focus", () => this.redraw());
    this.listen(this.grid, "blur", () => this.redraw());
    this.onModel("change:stripe", () => this.syncStripe());
  }

  protected quiet(): ("selected" | "stripe")[] {
    return ["selected", "stripe"];
  }

  private mode(): Stripe {
    const s = this.get("stripe") as Stripe;
    return STRIPES.includes(s) ? s : "edge";
  }

  private syncStripe(): void {
    for (const b of this.stripeBtns) b.setAttribute("aria-pressed", String(b.dataset.stripe === this.mode()));
    this.root.dataset.stripe = this.mode();
    this.redraw();
  }

  protected load(): void {
    const layers = Number(this.get("n_layers"));
    const heads = Number(this.get("n_heads"));
    const effects = readFloats(this.get("effects_values") as WireArray);
    if (effects.length !== layers * heads) throw new Error(`intervention: expected ${layers * heads} effects, got ${effects.length}`);
    const tokens = (this.get("tokens") as string[]) ?? [];
    const n = tokens.length;
    const mapsWire = this.get("maps") as WireArray | null;
    let maps: Float32Array | null = null;
    if (mapsWire && mapsWire.shape) {
      const a = readArray(mapsWire);
      maps = a.data instanceof Float32Array ? a.data : Float32Array.from(a.data);
    }
    const diffWire = this.get("diffs") as WireArray | null;
    let diffs: Float32Array | null = null;
    let diffSide = 0;
    let diffTop = 0;
    if (diffWire && diffWire.shape) {
      const a = readArray(diffWire);
      diffs = a.data instanceof Float32Array ? a.data : Float32Array.from(a.data);
      diffSide = a.shape[a.shape.length - 1];
      for (const v of diffs) if (Math.abs(v) > diffTop) diffTop = Math.abs(v);
    }
    const knocked = this.get("knocked");
    this.d = {
      layers, heads, effects, tokens, n, maps, diffs, diffSide, diffTop,
      effectName: (this.get("effect_name") as string) || "effect",
      metric: (this.get("metric_name") as string) || "metric",
      causal: Boolean(this.get("causal")),
      mapHeads: ((this.get("map_heads") as number[][]) ?? []).map((p) => [p[0], p[1]] as [number, number]),
      diffHeads: ((this.get("diff_heads") as number[][]) ?? []).map((p) => [p[0], p[1]] as [number, number]),
      diffBin: Number(this.get("diff_bin")) || 1,
      knocked: isKnocked(knocked) ? knocked : null,
    };
    this.diffCursor = Math.min(this.diffCursor, Math.max(0, this.d.diffHeads.length - 1));
    if (this.showDiff && this.diffIndex(this.selection()) < 0) this.showDiff = false;
    this.title.textContent = (this.get("title") as string) || `knock out edges: ${this.d.metric}`;
    this.root.dataset.knocked = this.d.knocked ? "1" : "";
    this.syncStripe();
    this.showResult();
    this.showSelection();
  }

  // ------------------------------------------------------------------ state
  private mapIndex(sel: [number, number] | null): number {
    if (!sel) return -1;
    return this.d.mapHeads.findIndex(([l, hd]) => l === sel[0] && hd === sel[1]);
  }

  private diffIndex(sel: [number, number] | null): number {
    if (!sel || !this.d) return -1;
    return this.d.diffHeads.findIndex(([l, hd]) => l === sel[0] && hd === sel[1]);
  }

  private open(layer: number, head: number, diff: boolean): void {
    this.cursor = null;
    this.showDiff = diff;
    this.pick(layer, head);
  }

  private openDiff(i: number): void {
    const p = this.d.diffHeads[i];
    if (!p) return;
    this.diffCursor = i;
    this.open(p[0], p[1], true);
    this.heat.focus();
  }

  protected selectionText(): string {
    const sel = this.selection();
    if (!sel || !this.d) return "";
    const v = this.d.effects[sel[0] * this.d.heads + sel[1]];
    return `head ${headLabel(sel[0], sel[1])}: ${this.d.effectName} ${formatValue(v)} on ${this.d.metric}`;
  }

  /** The result line: the last knockout, or why a click cannot make one. */
  private showResult(note = ""): void {
    const k = this.d.knocked;
    const text = note || (k ? resultText(k) : "no edge knocked out yet: click a cell of the map");
    this.result.textContent = text;
    this.root.dataset.result = k ? String(k.after) : "";
  }

  private describeCursor(): void {
    const c = this.cursor;
    const sel = this.selection();
    if (!c || !sel) return;
    const w = this.value(c[0], c[1]);
    const t = this.d.tokens;
    this.heat.setAttribute("aria-label", `${this.showDiff ? "change of" : "attention of"} head ${headLabel(sel[0], sel[1])}: query #${c[0]} ${displayToken(t[c[0]] ?? "")} \u2192 key #${c[1]} ${displayToken(t[c[1]] ?? "")}: ${formatValue(w)}; Enter knocks it out`);
    this.status.textContent = `cursor: query #${c[0]} \u2192 key #${c[1]} (${formatValue(w)}) \u00b7 Enter knocks out the ${this.mode()}`;
  }

  /** Attention (or difference) of the shown head at (query, key), NaN where not in the state. */
  private value(q: number, k: number): number {
    const sel = this.selection();
    const n = this.d.n;
    if (this.showDiff) {
      const i = this.diffIndex(sel);
      if (i < 0 || !this.d.diffs) return NaN;
      const m = this.d.diffSide;
      const b = this.d.diffBin;
      return this.d.diffs[(i * m + Math.floor(q / b)) * m + Math.floor(k / b)];
    }
    const i = this.mapIndex(sel);
    if (i < 0 || !this.d.maps) return NaN;
    return this.d.maps[(i * n + q) * n + k];
  }

  // ---------------------------------------------------------------- kernel
  private knock(query: number, key: number, stripe: Stripe): void {
    const sel = this.selection();
    if (!sel) return;
    const missing = kernelNotice(this.link, this.kernelGone);
    if (missing) {
      this.showResult(missing);
      this.root.dataset.notice = "kernel";
      return;
    }
    if (this.d.causal && key > query) {
      this.showResult(`key #${key} is after query #${query}: a decoder never reads later tokens`);
      return;
    }
    if (this.pending) return;
    this.pending = true;
    this.root.dataset.pending = "1";
    this.showResult(`knocking out the ${stripe} through query #${query} \u2192 key #${key} of head ${headLabel(sel[0], sel[1])}\u2026`);
    this.redraw();
    this.request({ type: "knockout", layer: sel[0], head: sel[1], query, key, stripe }, 60000)
      .then((reply) => {
        const r = reply.content.result;
        if (isKnocked(r)) this.d.knocked = r; // the traits carry the rest (and reload the view)
        this.showResult();
      })
      .catch((err: Error) => {
        const why = err instanceof KernelTimeout ? `${err.message}; try again when it is free` : kernelNotice(this.link, this.kernelGone) || err.message;
        this.showResult(`no knockout: ${why}`);
      })
      .finally(() => {
        this.pending = false;
        this.root.dataset.pending = "";
        this.redraw();
      });
  }

  protected linkChanged(): void {
    if (this.link === "none") this.root.dataset.offline = "1";
    this.redraw();
  }

  // ---------------------------------------------------------------- layout
  protected layout(): void {
    const width = Math.max(320, Math.min(1400, this.avail(960)));
    this.cell = Math.max(14, Math.min(44, Math.floor(200 / Math.max(this.d.layers, this.d.heads))));
    const rest = width - this.effectsWidth() - 28;
    const k = this.d.diffHeads.length;
    this.cols = k ? Math.min(k, Math.max(2, Math.ceil(Math.sqrt(k)))) : 0;
    this.heatSize = Math.max(180, Math.min(420, Math.floor(rest * (k ? 0.58 : 1))));
    const gridW = Math.max(120, rest - this.heatSize - 14);
    this.thumb = k ? Math.max(28, Math.min(96, Math.floor((gridW - (this.cols - 1) * THUMB_GAP) / this.cols))) : 0;
    this.root.dataset.cell = String(this.cell);
    this.root.dataset.heat = String(this.heatSize);
  }

  private effectsWidth(): number {
    return MAP_LEFT + this.d.heads * this.cell + 8;
  }

  private effectHit(x: number, y: number): [number, number] | null {
    const c = Math.floor((x - MAP_LEFT) / this.cell);
    const r = Math.floor((y - MAP_TOP) / this.cell);
    if (c < 0 || r < 0 || c >= this.d.heads || r >= this.d.layers) return null;
    return [r, c];
  }

  private heatHit(x: number, y: number): [number, number] | null {
    const n = this.d.n;
    const px = this.heatSize / Math.max(1, n);
    const k = Math.floor(x / px);
    const q = Math.floor((y - HEAT_TOP) / px);
    if (k < 0 || q < 0 || k >= n || q >= n) return null;
    return [q, k];
  }

  private thumbHit(x: number, y: number): number {
    const t = this.thumb;
    const c = Math.floor(x / (t + THUMB_GAP));
    const r = Math.floor((y - HEAT_TOP) / (t + 14 + THUMB_GAP));
    if (x - c * (t + THUMB_GAP) > t || c < 0 || r < 0 || c >= this.cols) return -1;
    const i = r * this.cols + c;
    return i < this.d.diffHeads.length ? i : -1;
  }

  private hoverHeat(ev: PointerEvent): void {
    const [x, y] = localPoint(this.heat, ev);
    const hit = this.heatHit(x, y);
    const sel = this.selection();
    if (!hit || !sel) {
      this.tip.hide();
      return;
    }
    const [q, k] = hit;
    const t = this.d.tokens;
    const v = this.value(q, k);
    const rows: [string, string][] = [[this.showDiff ? "after \u2212 before" : "attention", formatValue(v)]];
    if (!this.showDiff) rows.push(["click", `knock out the ${stripeOf(ev, this.mode())}`]);
    this.tip.show(x, y, `#${q} ${displayToken(t[q] ?? "")} \u2192 #${k} ${displayToken(t[k] ?? "")}`, rows);
  }

  // ------------------------------------------------------------------ draw
  protected draw(): void {
    this.drawEffects();
    this.drawHeat();
    this.drawGrid();
    this.diffBtn.disabled = this.diffIndex(this.selection()) < 0;
    this.diffBtn.setAttribute("aria-pressed", String(this.showDiff));
  }

  private drawEffects(): void {
    const d = this.d;
    const th = this.theme;
    const c = this.cell;
    const W = this.effectsWidth();
    const H = MAP_TOP + d.layers * c + 8;
    const ctx = sizeCanvas(this.effects, W, H);
    ctx.clearRect(0, 0, W, H);
    let top = 0;
    for (const v of d.effects) if (Number.isFinite(v) && Math.abs(v) > top) top = Math.abs(v);
    ctx.font = FONT;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(`${d.effectName} on ${d.metric}`, 0, 0);
    ctx.font = FONT_SMALL;
    ctx.fillStyle = th.muted;
    ctx.textAlign = "center";
    for (let hd = 0; hd < d.heads; hd++) ctx.fillText(String(hd + 1), MAP_LEFT + hd * c + c / 2, 17);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let l = 0; l < d.layers; l++) ctx.fillText(`layer ${l + 1}`, MAP_LEFT - 4, MAP_TOP + l * c + c / 2);
    for (let l = 0; l < d.layers; l++) {
      for (let hd = 0; hd < d.heads; hd++) {
        const v = d.effects[l * d.heads + hd];
        const k = divIndex(v, top);
        const x = MAP_LEFT + hd * c;
        const y = MAP_TOP + l * c;
        ctx.fillStyle = k < 0 ? th.empty : lutColor(DIVERGING_DEFAULT, k, th.bg);
        ctx.fillRect(x + 1, y + 1, c - 2, c - 2);
        if (c >= 34 && k >= 0) {
          ctx.fillStyle = textOn(DIVERGING_DEFAULT, k, th.bg);
          ctx.textAlign = "center";
          ctx.fillText(formatValue(v), x + c / 2, y + c / 2);
        }
      }
    }
    const kn = d.knocked;
    if (kn) {
      ctx.strokeStyle = th.ink;
      ctx.setLineDash([3, 2]);
      ctx.lineWidth = 1.5;
      ctx.strokeRect(MAP_LEFT + kn.head * c + 2, MAP_TOP + kn.layer * c + 2, c - 4, c - 4);
      ctx.setLineDash([]);
    }
    const sel = this.selection();
    if (sel) {
      ctx.strokeStyle = th.accent;
      ctx.lineWidth = 3;
      ctx.strokeRect(MAP_LEFT + sel[1] * c, MAP_TOP + sel[0] * c, c, c);
    }
  }

  private drawHeat(): void {
    const d = this.d;
    const th = this.theme;
    const S = this.heatSize;
    const ctx = sizeCanvas(this.heat, S, S + HEAT_TOP);
    ctx.clearRect(0, 0, S, S + HEAT_TOP);
    const sel = this.selection();
    ctx.font = FONT;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    const n = d.n;
    const px = S / Math.max(1, n);
    if (!sel) {
      ctx.fillStyle = th.muted;
      ctx.fillText("pick a head to see its attention", 0, 0);
      this.heat.setAttribute("aria-label", "no head picked");
      return;
    }
    const [l, hd] = sel;
    if (this.showDiff) {
      const i = this.diffIndex(sel);
      ctx.fillText(`head ${headLabel(l, hd)}: after \u2212 before (\u00b1${formatValue(d.diffTop)})`, 0, 0);
      const m = d.diffSide;
      const b = d.diffBin;
      for (let r = 0; r < m; r++) {
        for (let c = 0; c < m; c++) {
          const v = d.diffs![(i * m + r) * m + c];
          if (v === 0) continue;
          ctx.fillStyle = lutColor(DIVERGING_DEFAULT, divIndex(v, d.diffTop), th.bg);
          ctx.fillRect(c * b * px, HEAT_TOP + r * b * px, Math.max(b * px, 1), Math.max(b * px, 1));
        }
      }
      this.heat.setAttribute("aria-label", `head ${headLabel(l, hd)}: its map after the knockout minus before, on a diverging scale of \u00b1${formatValue(d.diffTop)}; rows are queries, columns keys`);
    } else {
      const i = this.mapIndex(sel);
      ctx.fillText(`head ${headLabel(l, hd)}: attention (${n} tokens)`, 0, 0);
      if (i < 0 || !d.maps) {
        ctx.fillStyle = th.muted;
        const why = this.link === "none" ? "this head's map needs a running kernel (the saved page keeps another head's)" : "loading this head's map\u2026";
        ctx.fillText(why, 0, HEAT_TOP + 4);
        this.heat.setAttribute("aria-label", why);
      } else {
        let top = 0;
        const off = i * n * n;
        for (let j = 0; j < n * n; j++) if (d.maps[off + j] > top) top = d.maps[off + j];
        for (let r = 0; r < n; r++) {
          for (let c = 0; c < n; c++) {
            const v = d.maps[off + r * n + c];
            if (!(v > 0)) continue;
            ctx.fillStyle = lutColor(SEQUENTIAL_DEFAULT, seqIndex(v, 0, top), th.bg);
            ctx.fillRect(c * px, HEAT_TOP + r * px, Math.max(px, 1), Math.max(px, 1));
          }
        }
        this.heat.setAttribute("aria-label", `attention of head ${headLabel(l, hd)} on ${n} tokens from ${displayToken(d.tokens[0] ?? "")}; rows are queries (from), columns keys (to); focus and use the arrows and Enter to knock an edge out`);
      }
      const kn = d.knocked;
      if (kn && kn.layer === l && kn.head === hd) {
        ctx.strokeStyle = "#d62728";
        ctx.lineWidth = Math.max(1, Math.min(2, px / 4));
        for (const [q, k] of stripeCells(kn.query, kn.key, kn.stripe, n, d.causal).cells) ctx.strokeRect(k * px, HEAT_TOP + q * px, px, px);
      }
    }
    ctx.strokeStyle = th.line;
    ctx.lineWidth = 1;
    ctx.strokeRect(0, HEAT_TOP, S, S);
    if (this.cursor) {
      const [q, k] = this.cursor;
      ctx.strokeStyle = th.accent;
      ctx.lineWidth = 2;
      ctx.strokeRect(k * px - 1, HEAT_TOP + q * px - 1, Math.max(px, 3) + 2, Math.max(px, 3) + 2);
    }
  }

  private drawGrid(): void {
    const d = this.d;
    const th = this.theme;
    const k = d.diffHeads.length;
    if (!k || !d.diffs) {
      const W = 160;
      const ctx = sizeCanvas(this.grid, W, 40);
      ctx.clearRect(0, 0, W, 40);
      ctx.font = FONT_SMALL;
      ctx.fillStyle = th.muted;
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      const why = d.knocked ? "no later layer to compare" : "later heads: after a knockout";
      ctx.fillText(why, 0, 0);
      this.grid.setAttribute("aria-label", why);
      return;
    }
    const t = this.thumb;
    const rows = Math.ceil(k / this.cols);
    const W = this.cols * (t + THUMB_GAP);
    const H = HEAT_TOP + rows * (t + 14 + THUMB_GAP);
    const ctx = sizeCanvas(this.grid, W, H);
    ctx.clearRect(0, 0, W, H);
    ctx.font = FONT;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(`later heads: after \u2212 before (\u00b1${formatValue(d.diffTop)})`, 0, 0);
    const m = d.diffSide;
    const px = t / Math.max(1, m);
    const sel = this.selection();
    for (let i = 0; i < k; i++) {
      const x0 = (i % this.cols) * (t + THUMB_GAP);
      const y0 = HEAT_TOP + Math.floor(i / this.cols) * (t + 14 + THUMB_GAP);
      ctx.fillStyle = th.bg;
      ctx.fillRect(x0, y0, t, t);
      let big = 0;
      for (let r = 0; r < m; r++) {
        for (let c = 0; c < m; c++) {
          const v = d.diffs[(i * m + r) * m + c];
          if (Math.abs(v) > big) big = Math.abs(v);
          if (v === 0) continue;
          ctx.fillStyle = lutColor(DIVERGING_DEFAULT, divIndex(v, d.diffTop), th.bg);
          ctx.fillRect(x0 + c * px, y0 + r * px, Math.max(px, 1), Math.max(px, 1));
        }
      }
      ctx.strokeStyle = th.line;
      ctx.lineWidth = 1;
      ctx.strokeRect(x0, y0, t, t);
      const [l, hd] = d.diffHeads[i];
      if (sel && sel[0] === l && sel[1] === hd) {
        ctx.strokeStyle = th.accent;
        ctx.lineWidth = 3;
        ctx.strokeRect(x0 - 1, y0 - 1, t + 2, t + 2);
      }
      if (document.activeElement === this.grid && i === this.diffCursor) {
        ctx.strokeStyle = th.ink;
        ctx.setLineDash([3, 2]);
        ctx.lineWidth = 1.5;
        ctx.strokeRect(x0 - 3, y0 - 3, t + 6, t + 6);
        ctx.setLineDash([]);
      }
      ctx.font = FONT_SMALL;
      ctx.fillStyle = th.muted;
      ctx.fillText(`${headLabel(l, hd)} \u00b1${formatValue(big)}`, x0, y0 + t + 2);
    }
    const c = d.diffHeads[this.diffCursor];
    this.grid.setAttribute("aria-label", `${k} later heads, each its map after the knockout minus before; arrows move, Enter opens; at ${c ? headLabel(c[0], c[1]) : ""}`);
  }
}

export default mount((props) => new InterventionViewImpl(props));
