// FlowView over many inputs (flow_summary): one ring per layer with a wedge per head,
// coloured by how many graph edges the head makes per input; bars of the influence share of
// each token category and of the most influential token strings. Click a wedge to select.

import { FONT_SMALL, sizeCanvas } from "../lib/canvas";
import { bindGridPointer, GridPointer } from "../lib/gridpointer";
import { readFloats, WireArray } from "../lib/codec";
import { lutColor, METRIC_DEFAULT } from "../lib/colors";
import { displayToken, fitText, formatValue, headLabel, truncate } from "../lib/labels";
import { colorBarH } from "../lib/legend";
import { bandAt, polar, Radial, ringRadius } from "../lib/radial";
import { h, HeadPickerView, RenderProps } from "../lib/view";
import { MODEL_COLORS, SINGLE } from "./data";
import { MODEL } from "./wire.gen";

const SIDE = 300;

interface Summary {
  layers: number;
  heads: number;
  nInputs: number;
  counts: Float32Array; // [L, H] edges per input
  share: Float32Array; // [L, H] share of inputs with an edge
  categories: string[];
  catShare: Float32Array;
  catStd: Float32Array;
  topTokens: string[];
  topShare: Float32Array;
}

export class CollectionView extends HeadPickerView<"flow"> {
  private s!: Summary;
  private canvas = h("canvas", "attnkit-canvas");
  private bars = h("canvas", "attnkit-canvas");
  private geo: Radial = { cx: 0, cy: 0, rIn: 0, rOut: 0, layers: 0, n: 1 };
  private size = 480;
  private pointer: GridPointer;

  constructor(props: RenderProps) {
    super(props, "flow");
    this.body.classList.add("attnkit-row");
    this.stage.appendChild(this.canvas);
    const side = h("div", "attnkit-side");
    side.appendChild(this.bars);
    this.body.appendChild(side);
    this.pointer = this.bind();
  }

  protected load(): void {
    this.s = {
      layers: this.get("n_layers"), heads: this.get("n_heads"), nInputs: this.get("n_inputs") ?? 0,
      counts: readFloats(this.get("head_counts_a") as WireArray),
      share: readFloats(this.get("head_share") as WireArray),
      categories: this.get("categories") ?? [],
      catShare: readFloats(this.get("category_share") as WireArray),
      catStd: readFloats(this.get("category_std") as WireArray),
      topTokens: this.get("top_tokens") ?? [],
      topShare: readFloats(this.get("top_share") as WireArray),
    };
    this.title.textContent = (this.get("title") as string) || "Attention flow";
    this.showSelection();
    this.hint.textContent = `Rings from the centre: layer ${this.s.layers} \u2026 layer 1; one wedge per head, coloured by graph edges per input \u00b7 hover for numbers \u00b7 click to select a head`;
  }

  showSelection(): void {
    this.status.textContent = [`${this.s.nInputs} inputs`, this.selectionText()].filter(Boolean).join(" \u00b7 ");
  }

  protected layout(): void {
    const width = this.avail(960);
    const stacked = width - SIDE - 24 < 300;
    this.body.classList.toggle("attnkit-stack", stacked);
    this.size = Math.floor(Math.max(220, Math.min(760, stacked ? width : width - SIDE - 24)));
    const rOut = this.size / 2 - 30;
    this.geo = { cx: this.size / 2, cy: this.size / 2, rIn: Math.max(14, rOut * 0.1), rOut, layers: this.s.layers, n: 1 };
    Object.assign(this.root.dataset, { cx: String(this.geo.cx), cy: String(this.geo.cy), rIn: String(this.geo.rIn), rOut: String(rOut) });
  }

  protected draw(): void {
    this.drawRings();
    this.drawBars();
  }

  private drawRings(): void {
    const s = this.s;
    const th = this.theme;
    const geo = this.geo;
    const ctx = sizeCanvas(this.canvas, this.size, this.size);
    ctx.clearRect(0, 0, this.size, this.size);
    let max = 0;
    for (const v of s.counts) max = Math.max(max, v);
    const sel = this.selection();
    const hover = this.pointer.hovered();
    for (let l = 1; l <= s.layers; l++) {
      const r0 = ringRadius(geo, l);
      const r1 = ringRadius(geo, l - 1);
      for (let hd = 0; hd < s.heads; hd++) {
        const a0 = (2 * Math.PI * hd) / s.heads;
        const a1 = (2 * Math.PI * (hd + 1)) / s.heads;
        const v = s.counts[(l - 1) * s.heads + hd];
        ctx.beginPath();
        ctx.arc(geo.cx, geo.cy, r1 - 1, a0 - Math.PI / 2 + 0.01, a1 - Math.PI / 2 - 0.01);
        ctx.arc(geo.cx, geo.cy, r0 + 1, a1 - Math.PI / 2 - 0.01, a0 - Math.PI / 2 + 0.01, true);
        ctx.closePath();
        ctx.fillStyle = max > 0 ? lutColor(METRIC_DEFAULT, (v / max) * 255) : th.empty;
        ctx.fill();
        const isHover = hover && hover[0] === l - 1 && hover[1] === hd;
        const isSel = sel && sel[0] === l - 1 && sel[1] === hd;
        if (isHover || isSel) {
          ctx.lineWidth = isSel ? 2.5 : 1.5;
          ctx.strokeStyle = isSel ? th.accent : th.ink;
          ctx.stroke();
        }
      }
    }
    ctx.font = FONT_SMALL;
    ctx.fillStyle = th.muted;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(`${s.nInputs} inputs`, geo.cx, geo.cy);
    for (let hd = 0; hd < s.heads; hd++) {
      const [x, y] = polar(geo, geo.rOut + 12, (2 * Math.PI * (hd + 0.5)) / s.heads);
      ctx.fillText(`h${hd + 1}`, x, y);
    }
  }

  private drawBars(): void {
    const s = this.s;
    const th = this.theme;
    const rows = s.categories.length + s.topTokens.length;
    const height = 40 + rows * 16 + 60;
    const ctx = sizeCanvas(this.bars, SIDE, height);
    ctx.clearRect(0, 0, SIDE, height);
    let y = 4;
    const section = (label: string, names: string[], values: Float32Array, std: Float32Array | null, color: string) => {
      ctx.font = `bold ${FONT_SMALL}`;
      ctx.fillStyle = th.ink;
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      ctx.fillText(label, 0, y);
      y += 16;
      let max = 0;
      values.forEach((v, i) => {
        if (Number.isFinite(v)) max = Math.max(max, v + (std && Number.isFinite(std[i]) ? std[i] : 0));
      });
      names.forEach((name, i) => {
        const v = values[i];
        ctx.font = FONT_SMALL;
        ctx.fillStyle = th.ink;
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        ctx.fillText(fitText(ctx, truncate(displayToken(name), 14), 84), 86, y + 6);
        if (!Number.isFinite(v)) {
          ctx.fillStyle = th.muted;
          ctx.textAlign = "left";
          ctx.fillText("none in these inputs", 92, y + 6);
        } else if (max > 0) {
          const w = (170 * v) / max;
          ctx.fillStyle = color;
          ctx.fillRect(92, y + 1, w, 10);
          if (std && Number.isFinite(std[i])) {
            ctx.strokeStyle = th.ink;
            ctx.lineWidth = 1;
            ctx.beginPath();
            ctx.moveTo(92 + (170 * Math.max(0, v - std[i])) / max, y + 6);
            ctx.lineTo(92 + (170 * (v + std[i])) / max, y + 6);
            ctx.stroke();
          }
          ctx.fillStyle = th.muted;
          ctx.textAlign = "left";
          const text = formatValue(v);
          ctx.fillText(text, Math.min(92 + w + 4, SIDE - ctx.measureText(text).width - 1), y + 6); // measured: never cut at the edge
        }
        y += 16;
      });
      y += 8;
    };
    section("influence share by token kind", s.categories, s.catShare, s.catStd, SINGLE);
    section("influence share per occurrence (top tokens)", s.topTokens, s.topShare, null, MODEL_COLORS[MODEL.b]);
    let max = 0;
    for (const v of s.counts) if (Number.isFinite(v)) max = Math.max(max, v);
    ctx.font = `bold ${FONT_SMALL}`;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText("wedge colour: graph edges per input", 0, y);
    colorBarH(ctx, th, METRIC_DEFAULT, 24, y + 20, 180, 9, 0, max);
  }

  private wedgeAt(x: number, y: number): [number, number] | null {
    const dx = x - this.geo.cx;
    const dy = y - this.geo.cy;
    const band = bandAt(this.geo, Math.hypot(dx, dy));
    if (band === 0) return null;
    let a = Math.atan2(dx, -dy);
    if (a < 0) a += 2 * Math.PI;
    return [band - 1, Math.min(this.s.heads - 1, Math.floor((a / (2 * Math.PI)) * this.s.heads))];
  }

  private bind(): GridPointer {
    return bindGridPointer(this, {
      canvas: this.canvas,
      stage: this.stage,
      tip: this.tip,
      hit: (x, y) => this.wedgeAt(x, y),
      describe: (l, hd) => {
        const k = l * this.s.heads + hd;
        return [`Head ${headLabel(l, hd)}`, [
          ["edges per input", formatValue(this.s.counts[k])],
          ["inputs with an edge", `${Math.round(100 * (this.s.share[k] ?? 0))}%`],
        ]];
      },
      select: (l, hd) => this.pick(l, hd),
      redraw: () => this.redraw(),
    });
  }
}


