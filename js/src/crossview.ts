// CrossView: one layer of cross-attention as links from the target tokens (left column) to
// the source tokens (right column), a colour per head, opacity = weight (bertviz's picture).
// Weights arrive as float16 [head, target, source] bytes (attnkit/widgets/cross.py), tokens
// as text drawn with fillText. Hover a token to keep only its links; click (or Enter) sets
// `clicked` = [side, position] for Python; arrows move between tokens and columns.

import { FONT, localPoint, sizeCanvas } from "./lib/canvas";
import { readArray, WireArray } from "./lib/codec";
import { categorical } from "./lib/colors";
import { headPicker, stepper } from "./lib/controls";
import { displayToken, fitText, formatValue } from "./lib/labels";
import { legendItems } from "./lib/legend";
import { h, mount, RenderProps, View } from "./lib/view";

const TOP = 22; // room for the column titles
const LABEL = 150; // widest token label, CSS px
const GAP = 8; // between a label and its links

type Spot = [side: number, pos: number];

interface Data {
  target: string[];
  source: string[];
  heads: number;
  w: Float32Array; // [head, target, source]
  min_weight: number;
}

class CrossView extends View<"crossview"> {
  private d!: Data;
  private canvas = h("canvas", "attnkit-canvas");
  private headPick = headPicker(this, "head", "all", "one head, or every head of the layer (a colour each)");
  private layerStep = stepper(this, "Layer", "layer", "n_layers");
  private geo = { width: 0, rowH: 16, leftX: 0, rightX: 0, labels: true };
  private hover: Spot | null = null;
  private focus: Spot = [0, 0];
  private legend = h("div", "attnkit-legend");

  constructor(props: RenderProps) {
    super(props, "crossview");
    this.stage.appendChild(this.canvas);
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    this.controls.append(this.layerStep.box, this.headPick.box);
    this.body.appendChild(this.legend);
    this.hint.textContent = "Hover a token to see its links \u00b7 click (or Enter) to select it \u00b7 arrows move";
    this.onModel("change:clicked", () => this.redraw());
    this.hoverable(this.canvas, (e) => this.onMove(e));
    this.listen(this.canvas, "pointerleave", () => {
      this.hover = null;
      this.redraw();
    });
    this.listen(this.canvas, "click", (e) => {
      const [x, y] = localPoint(this.canvas, e as MouseEvent);
      const at = this.spotAt(x, y);
      if (at) this.choose(at);
    });
    this.listen(this.canvas, "keydown", (e) => this.onKey(e as KeyboardEvent));
  }

  protected quiet(): "clicked"[] {
    return ["clicked"];
  }

  protected load(): void {
    const target = (this.get("target_tokens") as string[]) ?? [];
    const source = (this.get("source_tokens") as string[]) ?? [];
    const w = readArray(this.get("weights") as WireArray);
    const heads = w.shape[0] ?? 0;
    if (w.data.length !== heads * target.length * source.length) {
      throw new Error(`cross view: expected ${heads * target.length * source.length} weights, got ${w.data.length}`);
    }
    this.d = { target, source, heads, w: w.data as Float32Array, min_weight: Number(this.get("min_weight")) || 0 };
    this.title.textContent = (this.get("title") as string) || "cross-attention";
    this.headPick.update(heads);
    this.layerStep.update();
    this.status.textContent = `${target.length} target \u00d7 ${source.length} source tokens`;
  }

  protected layout(): void {
    const d = this.d;
    const width = Math.max(320, Math.min(760, this.avail(640)));
    const rows = Math.max(1, d.target.length, d.source.length);
    const rowH = Math.max(3, Math.min(18, 900 / rows));
    this.geo = { width, rowH, leftX: LABEL, rightX: width - LABEL, labels: rowH >= 9 };
    const ds = this.root.dataset;
    ds.rowH = String(rowH);
    ds.leftX = String(LABEL);
    ds.rightX = String(width - LABEL);
    ds.top = String(TOP);
  }

  protected draw(): void {
    const d = this.d;
    const g = this.geo;
    const rows = Math.max(d.target.length, d.source.length);
    const ctx = sizeCanvas(this.canvas, g.width, TOP + rows * g.rowH + 6);
    ctx.fillStyle = this.theme.bg;
    ctx.fillRect(0, 0, g.width, TOP + rows * g.rowH + 6);
    const only = this.hover ?? this.clickedSpot();
    const head = this.get("head") as number;
    const heads = head < 0 ? Array.from({ length: d.heads }, (_, i) => i) : [head];
    const t = d.target.length;
    const s = d.source.length;
    const x1 = g.leftX + GAP;
    const x2 = g.rightX - GAP;
    ctx.lineWidth = 1.5;
    // every head: one link per token pair, in the colour of the head that attends most there
    // (overlaid links of several heads blended into colours no head has)
    for (let i = 0; i < t; i++) {
      if (only && only[0] === 0 && only[1] !== i) continue;
      for (let j = 0; j < s; j++) {
        if (only && only[0] === 1 && only[1] !== j) continue;
        let best = -1;
        let v = -Infinity;
        for (const hh of heads) {
          const x = d.w[(hh * t + i) * s + j];
          if (x > v) {
            v = x;
            best = hh;
          }
        }
        if (best < 0 || !(v > d.min_weight) || v < 0.01) continue;
        ctx.strokeStyle = categorical(best);
        ctx.globalAlpha = Math.min(1, v);
        ctx.beginPath();
        ctx.moveTo(x1, this.y(i));
        ctx.lineTo(x2, this.y(j));
        ctx.stroke();
      }
    }
    if (heads.length > 1) {
      legendItems(this.legend, "head (the strongest of each link)", heads.map((hh) => [categorical(hh), `head ${hh + 1}`] as [string, string]), "line");
    } else this.legend.replaceChildren();
    ctx.globalAlpha = 1;
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    ctx.fillStyle = this.theme.muted;
    ctx.textAlign = "right";
    ctx.fillText("target", g.leftX, TOP / 2);
    ctx.textAlign = "left";
    ctx.fillText("source", g.rightX, TOP / 2);
    if (g.labels) {
      const mark = only ?? (document.activeElement === this.canvas ? this.focus : null);
      for (const [side, tokens] of [[0, d.target], [1, d.source]] as [number, string[]][]) {
        ctx.textAlign = side === 0 ? "right" : "left";
        tokens.forEach((tok, p) => {
          const on = mark !== null && mark[0] === side && mark[1] === p;
          ctx.fillStyle = on ? this.theme.accentInk : this.theme.ink;
          ctx.fillText(fitText(ctx, displayToken(tok), LABEL - 6), side === 0 ? g.leftX : g.rightX, this.y(p));
        });
      }
    }
    const sel = this.clickedSpot();
    this.root.dataset.clicked = sel ? sel.join(",") : "";
    this.canvas.setAttribute("aria-label", `cross-attention from ${t} target tokens to ${s} source tokens`);
  }

  private y(p: number): number {
    return TOP + (p + 0.5) * this.geo.rowH;
  }

  private clickedSpot(): Spot | null {
    const c = this.get("clicked") as number[];
    return Array.isArray(c) && c.length === 2 ? [c[0], c[1]] : null;
  }

  private spotAt(x: number, y: number): Spot | null {
    const g = this.geo;
    const p = Math.floor((y - TOP) / g.rowH);
    if (p < 0) return null;
    if (x <= g.leftX + GAP && p < this.d.target.length) return [0, p];
    if (x >= g.rightX - GAP && p < this.d.source.length) return [1, p];
    return null;
  }

  private choose(at: Spot): void {
    this.focus = at;
    this.save({ clicked: at });
    this.redraw();
  }

  private onMove(ev: PointerEvent): void {
    const [x, y] = localPoint(this.canvas, ev);
    const at = this.spotAt(x, y);
    const same = at && this.hover && at[0] === this.hover[0] && at[1] === this.hover[1];
    if (!same) {
      this.hover = at;
      this.redraw();
    }
    if (!at) {
      this.tip.hide();
      return;
    }
    const d = this.d;
    const head = this.get("head") as number;
    const heads = head < 0 ? Array.from({ length: d.heads }, (_, i) => i) : [head];
    const t = d.target.length;
    const s = d.source.length;
    const links: [number, number, number][] = []; // weight, head, other position
    for (const hh of heads) {
      if (at[0] === 0) for (let j = 0; j < s; j++) links.push([d.w[(hh * t + at[1]) * s + j], hh, j]);
      else for (let i = 0; i < t; i++) links.push([d.w[(hh * t + i) * s + at[1]], hh, i]);
    }
    links.sort((a, b) => b[0] - a[0]);
    const other = at[0] === 0 ? d.source : d.target;
    const tokens = at[0] === 0 ? d.target : d.source;
    const rows: [string, string][] = links.slice(0, 4).map(([v, hh, p]) => [
      `${at[0] === 0 ? "\u2192" : "\u2190"} ${displayToken(other[p] ?? "")} (head ${hh + 1})`, formatValue(v),
    ]);
    const here = localPoint(this.stage, ev);
    this.tip.show(here[0], here[1], `${at[0] === 0 ? "target" : "source"} ${displayToken(tokens[at[1]] ?? "")}`, rows);
  }

  private onKey(ev: KeyboardEvent): void {
    const d = this.d;
    const [side, pos] = this.focus;
    const count = (sd: number) => (sd === 0 ? d.target.length : d.source.length);
    let next: Spot | null = null;
    if (ev.key === "ArrowUp") next = [side, Math.max(0, pos - 1)];
    else if (ev.key === "ArrowDown") next = [side, Math.min(count(side) - 1, pos + 1)];
    else if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
      const sd = ev.key === "ArrowLeft" ? 0 : 1;
      next = [sd, Math.min(count(sd) - 1, pos)];
    } else if (ev.key === "Enter") {
      ev.preventDefault();
      this.choose(this.focus);
      return;
    }
    if (!next) return;
    ev.preventDefault();
    this.focus = next;
    this.hover = next;
    this.unhover(); // the keys moved away from the pointer: its tooltip would name another token
    this.redraw();
  }
}

export default mount((props) => new CrossView(props));
