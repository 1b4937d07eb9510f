// ScoreView: for one head and one query token, each key's pre-softmax score as a stacked bar
// of its largest (query component × key component) terms, plus a grey "rest". A toggle groups
// components by layer; clicking (or Enter on) a head segment sets `clicked` (a linked Heatmap
// shows that head); "d" shows the selected key's per-dimension terms q_x·k_x. The pure logic
// (segments, stacking, keyboard moves) is lib/scoreparts.ts.
// Tokens and component names reach the page only as text (canvas text, textContent).

import { FONT_SMALL, localPoint, sizeCanvas } from "./lib/canvas";
import { readArray, readFloats, WireArray } from "./lib/codec";
import { displayToken, formatValue, headLabel, truncate } from "./lib/labels";
import { headToFollow, moveCursor, Segment, segmentsOf, stackStarts, valueRange } from "./lib/scoreparts";
import { legendItems } from "./lib/legend";
import { h, mount, noKernel, RenderProps, View } from "./lib/view";


const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6", "#d37295", "#a0cbe8"];
const ROW = 18;
const LABEL = 120;
const TOP = 22;

interface Box { x: number; w: number; row: number; seg: Segment }

class ScoreViewImpl extends View<"score"> {
  private canvas = h("canvas", "attnkit-canvas");
  private legend = h("div", "attnkit-legend attnkit-score-legend");
  private names: string[] = [];
  private tokens: string[] = [];
  private keys: number[] = [];
  private scores: Float32Array = new Float32Array(0);
  private sq: ArrayLike<number> = [];
  private sk: ArrayLike<number> = [];
  private sv: Float32Array = new Float32Array(0);
  private dims: Float32Array = new Float32Array(0);
  private dimCount = 0;
  private n = 0;
  private grouped = false;
  private showDims = false;
  private row = 0;
  private seg = 0;
  private boxes: Box[] = [];
  private colors = new Map<string, string>();
  private groupBtn: HTMLButtonElement;
  private dimBtn: HTMLButtonElement;

  constructor(props: RenderProps) {
    super(props, "score");
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    this.stage.appendChild(this.canvas);
    this.groupBtn = this.button("by layer", "Group components by layer (g)", () => this.toggleGroup());
    this.dimBtn = this.button("dims", "Per-dimension terms of the selected key (d)", () => this.toggleDims());
    this.groupBtn.setAttribute("aria-pressed", "false");
    this.dimBtn.setAttribute("aria-pressed", "false");
    this.controls.append(this.groupBtn, this.dimBtn);
    this.body.appendChild(this.legend);
    // a saved page (an exported report) has no kernel to show another head: say so, as MeasureSwitch does
    const follow = noKernel()
      ? "showing a head segment's head needs a running kernel (this saved page has none)"
      : "Enter/click a head segment: show that head";
    this.hint.textContent = "Up/Down (Home/End): key \u00b7 Left/Right: segment \u00b7 " + follow + " \u00b7 g: by layer \u00b7 d: per dimension \u00b7 heads counted from 1, positions from 0";
    this.listen(this.canvas, "keydown", (e) => this.key(e as KeyboardEvent));
    this.hoverable(this.canvas, (e) => this.hover(e));
    this.listen(this.canvas, "click", (e) => this.click(e as MouseEvent));
  }

  protected load(): void {
    this.names = this.get("components") as string[];
    this.tokens = this.get("tokens") as string[];
    this.keys = this.get("key_positions") as number[];
    this.n = this.get("n_segments") as number;
    this.scores = readFloats(this.get("scores") as WireArray);
    this.sq = readArray(this.get("seg_query") as WireArray).data as ArrayLike<number>;
    this.sk = readArray(this.get("seg_key") as WireArray).data as ArrayLike<number>;
    this.sv = readFloats(this.get("seg_value") as WireArray);
    const d = readArray(this.get("dims") as WireArray);
    this.dims = readFloats(this.get("dims") as WireArray);
    this.dimCount = d.shape.length === 2 ? d.shape[1] : 0;
    this.dimBtn.disabled = this.dimCount === 0;
    this.title.textContent = (this.get("title") as string) || "ScoreView";
    this.status.textContent = (this.get("note") as string) || "";
    this.row = Math.min(this.row, Math.max(0, this.keys.length - 1));
    this.root.dataset.keys = String(this.keys.length);
    this.colors.clear();
  }

  protected layout(): void {}

  private tokenLabel(pos: number): string {
    return `${truncate(displayToken(this.tokens[pos] ?? String(pos)), 14)} ${pos}`;
  }

  private color(seg: Segment): string {
    if (seg.q === "rest") return this.theme.faint;
    const key = `${seg.q}\u0000${seg.k}`;
    let c = this.colors.get(key);
    if (!c) {
      c = PALETTE[this.colors.size % PALETTE.length];
      this.colors.set(key, c);
    }
    return c;
  }

  protected draw(): void {
    const width = Math.max(320, Math.min(1200, this.avail(720)));
    const rows = this.showDims ? this.dimCount : this.keys.length;
    const height = TOP + rows * ROW + 8;
    const ctx = sizeCanvas(this.canvas, width, height);
    const th = this.theme;
    ctx.clearRect(0, 0, width, height);
    ctx.font = FONT_SMALL;
    this.boxes = [];
    const plotW = width - LABEL - 16;
    if (this.showDims) {
      const base = this.row * this.dimCount;
      let a = 1e-12;
      for (let x = 0; x < this.dimCount; x++) a = Math.max(a, Math.abs(this.dims[base + x]));
      const zero = LABEL + plotW / 2;
      ctx.fillStyle = th.muted;
      ctx.textBaseline = "bottom";
      ctx.fillText(`key ${this.tokenLabel(this.keys[this.row])}: scaling \u00b7 q_x k_x per dimension`, LABEL, TOP - 6);
      for (let x = 0; x < this.dimCount; x++) {
        const v = this.dims[base + x];
        const y = TOP + x * ROW;
        const w = (Math.abs(v) / a) * (plotW / 2);
        ctx.fillStyle = v >= 0 ? PALETTE[0] : PALETTE[2];
        ctx.fillRect(v >= 0 ? zero : zero - w, y + 3, w, ROW - 6);
        ctx.fillStyle = th.ink;
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        ctx.fillText(`dim ${x + 1}`, LABEL - 6, y + ROW / 2);
        ctx.textAlign = "left";
      }
      this.canvas.setAttribute("aria-label", `Per-dimension terms of key ${this.keys[this.row]}`);
      legendItems(this.legend, "per dimension", [[PALETTE[0], "q_x k_x > 0 (raises the score)"], [PALETTE[2], "q_x k_x < 0 (lowers it)"]]);
      return;
    }
    const all: Segment[][] = [];
    for (let r = 0; r < this.keys.length; r++) all.push(segmentsOf(this.names, this.sq, this.sk, this.sv, r, this.n, this.grouped));
    const [lo, hi] = valueRange(all, this.scores);
    const sx = (v: number) => LABEL + ((v - lo) / (hi - lo)) * plotW;
    ctx.strokeStyle = th.faint;
    ctx.beginPath();
    ctx.moveTo(sx(0), TOP - 4);
    ctx.lineTo(sx(0), height - 4);
    ctx.stroke();
    ctx.fillStyle = th.muted;
    ctx.textBaseline = "bottom";
    ctx.textAlign = "left";
    ctx.fillText(`${formatValue(lo)} \u2026 ${formatValue(hi)}  (bars: query component \u00d7 key component; tick: score)`, LABEL, TOP - 6);
    for (let r = 0; r < all.length; r++) {
      const y = TOP + r * ROW;
      if (r === this.row) {
        ctx.fillStyle = th.faint;
        ctx.globalAlpha = 0.35;
        ctx.fillRect(0, y, width, ROW);
        ctx.globalAlpha = 1;
      }
      ctx.fillStyle = th.ink;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(this.tokenLabel(this.keys[r]), LABEL - 6, y + ROW / 2);
      const starts = stackStarts(all[r]);
      all[r].forEach((s, i) => {
        const a = starts[i];
        const x0 = sx(a);
        const w = Math.max(0.5, sx(a + Math.abs(s.v)) - x0);
        ctx.fillStyle = this.color(s);
        ctx.fillRect(x0, y + 3, w, ROW - 6);
        if (r === this.row && i === this.seg) {
          ctx.strokeStyle = th.ink;
          ctx.lineWidth = 2;
          ctx.strokeRect(x0, y + 2, w, ROW - 4);
        }
        this.boxes.push({ x: x0, w, row: r, seg: s });
      });
      ctx.strokeStyle = th.ink;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      ctx.moveTo(sx(this.scores[r]), y + 1);
      ctx.lineTo(sx(this.scores[r]), y + ROW - 1);
      ctx.stroke();
    }
    // the colour of every (query component × key component) pair drawn, in order of first use
    const items: [string, string][] = [];
    for (const [key, color] of this.colors) {
      const [q, k] = key.split("\u0000");
      items.push([color, `${q} \u00d7 ${k}`]);
    }
    items.push([th.faint, "rest: every other pair"]);
    legendItems(this.legend, "query component \u00d7 key component", items);
    this.root.dataset.legend = String(items.length);
        Object.assign(this.root.dataset, { plotTop: String(TOP), rowHeight: String(ROW), plotLeft: String(LABEL), row: String(this.row), seg: String(this.seg) });
    const cur = all[this.row]?.[this.seg];
    this.canvas.setAttribute("aria-label", cur ? `key ${this.keys[this.row]}, score ${formatValue(this.scores[this.row])}; ${cur.q} \u00d7 ${cur.k}: ${formatValue(cur.v)}` : "no keys");
  }

  private current(): Segment | null {
    return this.boxes.find((b) => b.row === this.row && this.boxes.filter((c) => c.row === this.row).indexOf(b) === this.seg)?.seg ?? null;
  }

  private follow(seg: Segment | null): void {
    const head = headToFollow(seg);
    if (!head) return;
    if (noKernel()) {
      this.status.textContent = `showing head ${headLabel(head[0], head[1])} needs a running kernel (this saved page has none)`;
      return;
    }
    this.save({ clicked: head });
  }

  private toggleGroup(): void {
    this.grouped = !this.grouped;
    this.groupBtn.setAttribute("aria-pressed", String(this.grouped));
    this.seg = 0;
    this.redraw();
  }

  private toggleDims(): void {
    if (this.dimCount === 0) return;
    this.showDims = !this.showDims;
    this.dimBtn.setAttribute("aria-pressed", String(this.showDims));
    this.redraw();
  }

  private key(e: KeyboardEvent): void {
    const segs = this.boxes.filter((b) => b.row === this.row).length;
    const moved = moveCursor(e.key, this.row, this.seg, this.keys.length, segs);
    if (moved) {
      this.row = moved.row;
      this.seg = Math.min(moved.seg, Math.max(0, this.boxes.filter((b) => b.row === moved.row).length - 1));
    } else if (e.key === "Enter") this.follow(this.current());
    else if (e.key === "g") this.toggleGroup();
    else if (e.key === "d") this.toggleDims();
    else return;
    e.preventDefault();
    this.save({ selected_key: this.keys[this.row] ?? -1 });
    this.redraw();
  }

  private hit(ev: MouseEvent): Box | null {
    const [x, y] = localPoint(this.canvas, ev);
    const row = Math.floor((y - TOP) / ROW);
    return this.boxes.find((b) => b.row === row && x >= b.x && x <= b.x + b.w) ?? null;
  }

  private hover(ev: PointerEvent): void {
    if (this.showDims) return this.tip.hide();
    const b = this.hit(ev);
    if (!b) return this.tip.hide();
    const [x, y] = localPoint(this.stage, ev);
    this.tip.show(x, y, `key ${this.tokenLabel(this.keys[b.row])}`, [
      ["query component", b.seg.q], ["key component", b.seg.k], ["contribution", formatValue(b.seg.v)], ["score", formatValue(this.scores[b.row])],
    ]);
  }

  private click(ev: MouseEvent): void {
    if (this.showDims) return;
    const b = this.hit(ev);
    if (!b) return;
    this.row = b.row;
    this.seg = this.boxes.filter((c) => c.row === b.row).indexOf(b);
    this.save({ selected_key: this.keys[this.row] });
    this.follow(b.seg);
    this.redraw();
  }
}

export default mount((props) => new ScoreViewImpl(props));
