// HeadGrid: every layer × head as a thumbnail ("L-H", 1-indexed), an optional per-head
// metric drawn as a coloured bar under each thumbnail, click to select a head. Thumbnails
// arrive as uint8 log codes (attnkit/widgets/headgrid.py): code c > 0 is
// top · 10^(DECADES · (c/255 − 1)) of its head, so any colour scale can be drawn here.
// A grid that fills in (a worker thread in the kernel) shows the heads it has, blank cells for
// the rest, and its progress in the status line; each head arrives as a "push" message and
// the whole state follows every few seconds, so a copy saved half-way stays consistent.
// Cross-attention's thumbnails are rectangles (`size` target rows × `size_cols` source
// columns), each drawn into its square cell.

import { binsOf, codeValue, paintThumb, resampleRanges } from "./lib/atlas";
import { axesGrid, drawAxes, headAxes } from "./lib/axes";
import { FONT_SMALL, sizeCanvas } from "./lib/canvas";
import { readArray, readFloats, WireArray } from "./lib/codec";
import { lut, lutColor, METRIC_DEFAULT, SEQUENTIAL_DEFAULT, seqIndex } from "./lib/colors";
import { checkbox, select } from "./lib/controls";
import { bindGridPointer, GridPointer } from "./lib/gridpointer";
import { formatValue, headLabel } from "./lib/labels";
import { cellOrigin, finiteRange, gridData, gridHit, GridLayout } from "./lib/layout";
import { colorBarH } from "./lib/legend";
import { describeScale, rankRows, Scale, ScaleKind, scaleIndex } from "./lib/scale";
import { Binary } from "./lib/codec";
import { Progress } from "./lib/progress";
import { h, HeadPickerView, mount, RenderProps } from "./lib/view";

const METRIC_BAR = 22; // the metric's colour bar above the column labels

interface Data {
  layers: number;
  heads: number;
  t: number;
  /** thumbnail columns (`t` unless the maps are rectangles) */
  tc: number;
  /** source tokens of rectangular maps, 0 for square ones */
  nCols: number;
  codes: Uint8Array;
  headMax: Float32Array;
  metric: Float32Array | null;
  metricName: string;
  metricRange: [number, number];
  metricCmap: string;
  cmap: string;
  nTokens: number;
  causal: boolean;
  sinkBins: Set<number>;
  sinkNames: string;
  /** heads computed so far ([layer · heads + head] = 1), or null when all are */
  ready: Uint8Array | null;
  /** "running", "done", or "stopped: <why>" */
  computing: string;
}

class HeadGridView extends HeadPickerView<"headgrid"> {
  private d!: Data;
  private grid!: GridLayout;
  private canvas = h("canvas", "attnkit-canvas");
  private hoverRing = h("div", "attnkit-ring attnkit-ring-hover");
  private selRing = h("div", "attnkit-ring attnkit-ring-selected");
  private selLabel = h("div", "attnkit-ring-label");
  private legend = h("div", "attnkit-legend-text");
  private baseDrawn = false;
  private pointer!: GridPointer;
  private scaleSel = select(this, "scale", "scale", [["linear", "linear"], ["log", "log"], ["rank", "row rank"]],
    "colour scale of the thumbnails: linear, log, or each cell's rank within its row");
  private sinkBox = checkbox(this, "exclude_sinks", "leave attention sinks out of each head's colour scale");
  private normSel = select(this, "top", "normalize", [["head", "each head"], ["global", "all heads"]],
    "colour each head up to its own maximum, or all heads up to the largest");

  constructor(props: RenderProps) {
    super(props, "headgrid");
    // The canvas holds thumbnails and labels (drawn once per data, scale or size change);
    // hover and selection rings are positioned elements on top, so pointer moves never repaint it.
    this.stage.append(this.canvas, this.hoverRing, this.selRing, this.selLabel);
    this.body.appendChild(this.legend);
    this.controls.append(this.scaleSel.box, this.sinkBox.box, this.normSel.box);
    this.hint.textContent = "Click a head to select it \u00b7 labels are layer-head, counted from 1";
    this.pointer = bindGridPointer(this, {
      canvas: this.canvas,
      stage: this.stage,
      tip: this.tip,
      hit: (x, y) => gridHit(this.grid, x, y),
      describe: (r, c) => {
        const k = r * this.d.heads + c;
        const pending = this.d.ready !== null && !this.d.ready[k];
        const rows: [string, string][] = [
          ["layer, head", `${r + 1}, ${c + 1}`],
          ["max attention", pending ? "not computed yet" : formatValue(this.d.headMax[k])],
        ];
        if (this.d.metric) rows.push([this.d.metricName, formatValue(this.d.metric[k])]);
        return [`Head ${headLabel(r, c)}`, rows];
      },
      select: (r, c) => this.pick(r, c),
      redraw: () => this.redraw(),
    });
  }

  protected load(): void {
    const layers = this.get("n_layers") as number;
    const heads = this.get("n_heads") as number;
    const t = this.get("size") as number;
    const tc = (this.get("size_cols") as number) || t;
    const nCols = (this.get("n_cols") as number) || 0;
    const codes = readArray(this.get("thumbs") as WireArray).data as Uint8Array;
    if (codes.length !== layers * heads * t * tc) {
      throw new Error(`head grid: expected ${layers * heads * t * tc} thumbnail bytes, got ${codes.length}`);
    }
    const metric = readFloats(this.get("metric") as WireArray);
    const nTokens = this.get("n_tokens") as number;
    this.d = {
      layers, heads, t, tc, nCols, codes,
      headMax: readFloats(this.get("head_max") as WireArray),
      metric: metric.length === layers * heads ? metric : null,
      metricName: (this.get("metric_name") as string) || "metric",
      metricRange: metric.length === layers * heads ? finiteRange(metric) : [NaN, NaN],
      metricCmap: (this.get("metric_cmap") as string) || METRIC_DEFAULT,
      cmap: (this.get("cmap") as string) || SEQUENTIAL_DEFAULT,
      nTokens,
      causal: Boolean(this.get("causal")),
      sinkBins: binsOf(nCols || nTokens, tc, (this.get("sinks") as number[]) ?? []),
      sinkNames: (this.get("sink_names") as string) || "",
      ready: null,
      computing: (this.get("computing") as string) || "done",
    };
    const ready = this.get("ready") as WireArray | undefined;
    if (ready && (ready as { shape?: number[] }).shape) {
      const mask = Uint8Array.from(readArray(ready).data as ArrayLike<number>);
      if (mask.length === layers * heads && mask.some((x) => !x)) this.d.ready = mask;
    }
    this.progress.stepped();
    this.title.textContent = (this.get("title") as string) || `Attention of ${layers} layers \u00d7 ${heads} heads`;
    this.root.dataset.thumbnails = String(layers * heads);
    this.scaleSel.update();
    this.normSel.update();
    this.sinkBox.update(`leave out ${this.d.sinkNames || "sinks"}`);
    this.sinkBox.box.style.display = this.d.sinkNames ? "" : "none";
    this.baseDrawn = false;
    this.ownCodes = false;
    this.pointer?.reset();
    this.showSelection();
  }

  protected layout(): void {
    const d = this.d;
    const width = Math.max(300, Math.min(1400, this.avail(900)));
    this.grid = axesGrid(this.canvas.getContext("2d")!, headAxes(d.layers, d.heads), {
      width, above: d.metric ? METRIC_BAR : 0, gap: d.heads > 16 ? 4 : 8, below: d.metric ? 20 : 14, bottom: 4,
      minCell: d.heads > 16 ? 22 : 28, maxCell: 110,
    });
    Object.assign(this.root.dataset, gridData(this.grid));
    this.baseDrawn = false;
  }

  protected themeChanged(): void {
    this.baseDrawn = false;
  }

  private scale(): Scale {
    const kind = ((this.get("scale") as string) || "linear") as ScaleKind;
    return { kind, diverging: false, top: 1, decades: Number(this.get("decades")) || 3, excludeSinks: Boolean(this.get("exclude_sinks")) };
  }

  /** Colour indices (0..255) of head (l, hd)'s thumbnail under the current scale. */
  private indices(l: number, hd: number, s: Scale, globalTop: number, out: Uint8Array): void {
    const d = this.d;
    const per = d.t * d.tc;
    const off = (l * d.heads + hd) * per;
    const top = d.headMax[l * d.heads + hd];
    if (s.kind === "rank") {
      const vals = new Float32Array(per);
      for (let i = 0; i < per; i++) vals[i] = d.codes[off + i];
      const ranks = rankRows(vals, d.t, d.tc, (i, j) => !d.causal || j <= i, (j) => s.excludeSinks && d.sinkBins.has(j));
      for (let i = 0; i < per; i++) out[i] = Number.isFinite(ranks[i]) ? Math.round(ranks[i] * 255) : 0;
      return;
    }
    // the scale's top for this head: its max, or its max outside the sink columns
    let headTop = top;
    if (s.excludeSinks && d.sinkBins.size) {
      let c = 0;
      for (let i = 0; i < d.t; i++) for (let j = 0; j < d.tc; j++) if (!d.sinkBins.has(j)) c = Math.max(c, d.codes[off + i * d.tc + j]);
      headTop = codeValue(c, top);
    }
    const scaleTop = this.get("normalize") === "global" ? globalTop : headTop;
    const index = scaleIndex({ ...s, top: scaleTop > 0 ? scaleTop : 1 });
    const table = new Uint8Array(256);
    for (let c = 0; c < 256; c++) table[c] = Math.max(0, index(codeValue(c, top)));
    for (let i = 0; i < per; i++) out[i] = table[d.codes[off + i]];
  }

  private drawBase(): void {
    const d = this.d;
    const g = this.grid;
    const th = this.theme;
    const ctx = sizeCanvas(this.canvas, g.width, g.height);
    const dpr = this.canvas.width / g.width;
    ctx.clearRect(0, 0, g.width, g.height);
    const s = this.scale();
    const table = lut(d.cmap, th.bg);
    const lut32 = new Uint32Array(table.buffer, table.byteOffset, 256);
    let globalTop = 0;
    for (const v of d.headMax) globalTop = Math.max(globalTop, v);
    const px = Math.max(1, Math.round(g.cell * dpr));
    const img = ctx.createImageData(px, px);
    const out = new Uint32Array(img.data.buffer);
    const ranges = resampleRanges(d.t, px);
    const rangesC = d.tc === d.t ? ranges : resampleRanges(d.tc, px);
    const idx = new Uint8Array(d.t * d.tc);
    for (let l = 0; l < d.layers; l++) {
      for (let hd = 0; hd < d.heads; hd++) {
        if (d.ready && !d.ready[l * d.heads + hd]) {
          const [x, y] = cellOrigin(g, l, hd);
          ctx.fillStyle = th.empty;
          ctx.fillRect(x, y, g.cell, g.cell);
          continue;
        }
        this.indices(l, hd, s, globalTop, idx);
        paintThumb(idx, 0, d.t, px, lut32, out, ranges, d.tc, rangesC);
        const [x, y] = cellOrigin(g, l, hd);
        ctx.putImageData(img, Math.round(x * dpr), Math.round(y * dpr));
      }
    }
    drawAxes(ctx, th, g, headAxes(d.layers, d.heads));
    if (d.metric) {
      const [lo, hi] = d.metricRange;
      colorBarH(ctx, th, d.metricCmap, g.left + 40, 8, 120, 9, lo, hi, d.metricName, g.width - 2);
    }
    ctx.strokeStyle = th.line;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let r = 0; r < d.layers; r++) {
      for (let c = 0; c < d.heads; c++) {
        const [x, y] = cellOrigin(g, r, c);
        ctx.rect(x - 0.5, y - 0.5, g.cell + 1, g.cell + 1);
      }
    }
    ctx.stroke();
    ctx.font = FONT_SMALL;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    for (let r = 0; r < d.layers; r++) {
      for (let c = 0; c < d.heads; c++) {
        const [x, y] = cellOrigin(g, r, c);
        let ly = y + g.cell + 2;
        if (d.metric) {
          const k = seqIndex(d.metric[r * d.heads + c], d.metricRange[0], d.metricRange[1]);
          ctx.fillStyle = k < 0 ? th.empty : lutColor(d.metricCmap, k);
          ctx.fillRect(x, ly, g.cell, 5);
          ly += 6;
        }
        ctx.fillStyle = d.ready && !d.ready[r * d.heads + c] ? th.faint : th.ink;
        ctx.fillText(headLabel(r, c), x, ly);
      }
    }
    const norm = this.get("normalize") === "global" ? "top: the largest weight of all heads" : "top: each head's own largest weight";
    const cells = d.nCols
      ? `${d.t}\u00d7${d.tc} cells, max-pooled from ${d.nTokens} target \u00d7 ${d.nCols} source tokens`
      : `${d.t}\u00d7${d.t} cells, max-pooled from ${d.nTokens} tokens`;
    const axes = d.nCols ? "rows = from (target), columns = to (source)" : "rows = from, columns = to";
    this.legend.textContent = `Thumbnails: ${axes}; ${describeScale({ ...s, top: NaN }, d.sinkNames)}; ${s.kind === "rank" ? "" : norm + "; "}${cells}.`;
    this.baseDrawn = true;
  }

  private progress = new Progress(() => this.showSelection(), () => this.kernelGone);

  /** One head's thumbnail, sent by the kernel's worker as soon as it is computed. */
  protected pushed(content: Record<string, any>, _buffers: Binary[]): void {
    if (content.what !== "thumb") return;
    const d = this.d;
    const l = Number(content.layer);
    const hd = Number(content.head);
    const per = d.t * d.tc;
    const codes = readArray(content.array as WireArray, _buffers).data as ArrayLike<number>;
    if (!(l >= 0 && l < d.layers && hd >= 0 && hd < d.heads) || codes.length !== per) return;
    const k = l * d.heads + hd;
    // a copy: the trait's array may be shared with the model
    if (!this.ownCodes) {
      d.codes = Uint8Array.from(d.codes);
      d.headMax = Float32Array.from(d.headMax);
      this.ownCodes = true;
    }
    d.codes.set(codes, k * per);
    d.headMax[k] = Number(content.max);
    if (!d.ready) d.ready = new Uint8Array(d.layers * d.heads);
    d.ready[k] = 1;
    d.computing = Number(content.done) >= Number(content.total) ? "done" : "running";
    if (d.ready.every((x) => x)) d.ready = null;
    this.progress.stepped();
    this.baseDrawn = false;
    this.showSelection();
    this.redraw();
  }

  private ownCodes = false;

  /** "computing thumbnails: 12 of 64 heads", what stopped it, or "" when every head is there. */
  private progressText(): string {
    const d = this.d;
    if (!d || !d.ready) return "";
    let done = 0;
    for (const x of d.ready) done += x;
    const first = d.metric ? ` (largest ${d.metricName} first)` : "";
    return this.progress.text("thumbnails", done, d.layers * d.heads, "heads", d.computing, first);
  }

  showSelection(): void {
    const progress = this.progressText();
    const sel = this.selectionText() || "no head selected";
    this.status.textContent = progress ? `${sel} \u00b7 ${progress}` : sel;
    this.root.dataset.ready = this.d?.ready ? String(this.d.ready.reduce((a, x) => a + x, 0)) : String(this.d ? this.d.layers * this.d.heads : 0);
    this.root.dataset.computing = this.d ? this.progress.state(this.d.computing) : "";
  }

  protected linkChanged(): void {
    this.showSelection();
    this.redraw();
  }

  dispose(): void {
    this.progress.dispose();
    super.dispose();
  }

  private place(el: HTMLElement, p: [number, number] | null, pad: number): void {
    if (!p) {
      el.style.display = "none";
      return;
    }
    const [x, y] = cellOrigin(this.grid, p[0], p[1]);
    el.style.display = "block";
    el.style.left = `${x - pad}px`;
    el.style.top = `${y - pad}px`;
    el.style.width = `${this.grid.cell + 2 * pad}px`;
    el.style.height = `${this.grid.cell + 2 * pad}px`;
  }

  protected draw(): void {
    if (!this.baseDrawn) this.drawBase();
    const sel = this.selection();
    const hover = this.pointer.hovered();
    const same = hover && sel && hover[0] === sel[0] && hover[1] === sel[1];
    this.place(this.hoverRing, same ? null : hover, 2);
    this.place(this.selRing, sel, 4);
    if (sel) {
      const [x, y] = cellOrigin(this.grid, sel[0], sel[1]);
      this.selLabel.style.display = "block";
      this.selLabel.style.left = `${x}px`;
      this.selLabel.style.top = `${y + this.grid.cell + 2 + (this.d.metric ? 6 : 0)}px`;
      this.selLabel.textContent = headLabel(sel[0], sel[1]);
    } else {
      this.selLabel.style.display = "none";
    }
  }
}

export default mount((props) => new HeadGridView(props));
