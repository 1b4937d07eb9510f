// HeadMap: a layer × head grid of one per-head metric (entropy, relation accuracy, ...),
// with hover read-out and click-to-select. It grows and shrinks with the output's width.
// With row and column labels it is any labelled grid (composition's source × target map):
// hover names the cell by its labels, and large grids draw small cells without gaps.

import { Axes, axesGrid, drawAxes } from "./lib/axes";
import { FONT_SMALL, sizeCanvas } from "./lib/canvas";
import { readFloats, WireArray } from "./lib/codec";
import { divIndex, DIVERGING_DEFAULT, lutColor, METRIC_DEFAULT, seqIndex, textOn } from "./lib/colors";
import { bindGridPointer, GridPointer } from "./lib/gridpointer";
import { formatValue } from "./lib/labels";
import { cellName, gridAxes, GridLabels, gridSpacing } from "./lib/gridlabels";
import { cellOrigin, finiteRange, gridData, gridHit, GridLayout } from "./lib/layout";
import { colorBarV } from "./lib/legend";
import { h, HeadPickerView, mount, RenderProps } from "./lib/view";

const BAR = 84; // colour bar and its numbers

interface Data {
  layers: number;
  heads: number;
  values: Float32Array;
  name: string;
  diverging: boolean;
  cmap: string;
  lo: number;
  hi: number;
  labels: GridLabels;
}

class HeadMapView extends HeadPickerView<"headmap"> {
  private d!: Data;
  private grid!: GridLayout;
  private canvas = h("canvas", "attnkit-canvas");
  private pointer: GridPointer;
  private hintSet = false;

  constructor(props: RenderProps) {
    super(props, "headmap");
    this.stage.appendChild(this.canvas);
    this.hint.textContent = "Click a cell to select that head \u00b7 layers and heads counted from 1";
    this.pointer = bindGridPointer(this, {
      canvas: this.canvas,
      stage: this.stage,
      tip: this.tip,
      hit: (x, y) => gridHit(this.grid, x, y),
      describe: (r, c) => [cellName(this.d.labels, r, c), [[this.d.name, formatValue(this.d.values[r * this.d.heads + c])]]],
      select: (r, c) => this.pick(r, c),
      redraw: () => this.redraw(),
    });
  }

  protected load(): void {
    const layers = this.get("n_layers") as number;
    const heads = this.get("n_heads") as number;
    const values = readFloats(this.get("values") as WireArray);
    if (values.length !== layers * heads) throw new Error(`head map: expected ${layers * heads} values, got ${values.length}`);
    const diverging = Boolean(this.get("diverging"));
    let [lo, hi] = finiteRange(values);
    const vmin = this.get("vmin");
    const vmax = this.get("vmax");
    if (typeof vmin === "number" && Number.isFinite(vmin)) lo = vmin;
    if (typeof vmax === "number" && Number.isFinite(vmax)) hi = vmax;
    if (diverging) {
      const a = Math.max(Math.abs(lo), Math.abs(hi));
      lo = -a;
      hi = a;
    }
    this.d = {
      layers, heads, values, diverging, lo, hi,
      name: (this.get("value_name") as string) || "value",
      cmap: (this.get("cmap") as string) || (diverging ? DIVERGING_DEFAULT : METRIC_DEFAULT),
      labels: {
        rows: (this.get("row_labels") as string[]) ?? [],
        cols: (this.get("col_labels") as string[]) ?? [],
        rowTitle: (this.get("row_title") as string) || "layer",
        colTitle: (this.get("col_title") as string) || "head",
      },
    };
    if (!this.hintSet && (this.d.labels.rows.length || this.d.labels.cols.length)) {
      this.hint.textContent = `Hover a cell for its ${this.d.labels.rowTitle}, ${this.d.labels.colTitle} and value \u00b7 click to select it`;
      this.hintSet = true;
    }
    this.title.textContent = (this.get("title") as string) || `${this.d.name} per head`;
    this.root.dataset.cells = String(layers * heads);
    this.pointer?.reset();
    this.showSelection();
  }

  private axes(): Axes {
    return gridAxes(this.d.layers, this.d.heads, this.d.labels);
  }

  protected selectionText(): string {
    const sel = this.selection();
    return sel ? `selected ${cellName(this.d?.labels, sel[0], sel[1]).replace(/^Head /, "")}` : "";
  }

  protected layout(): void {
    const width = Math.max(240, Math.min(1200, this.avail(640)));
    const { gap, minCell } = gridSpacing(this.d.heads);
    this.grid = axesGrid(this.canvas.getContext("2d")!, this.axes(), {
      width: width - BAR, gap, below: 0, bottom: 4, minCell, maxCell: 72,
    });
    this.grid.width += BAR;
    Object.assign(this.root.dataset, gridData(this.grid));
  }

  protected draw(): void {
    const d = this.d;
    const g = this.grid;
    const th = this.theme;
    const ctx = sizeCanvas(this.canvas, g.width, g.height);
    ctx.clearRect(0, 0, g.width, g.height);
    drawAxes(ctx, th, g, this.axes());

    const showText = g.cell >= 30;
    for (let r = 0; r < d.layers; r++) {
      for (let c = 0; c < d.heads; c++) {
        const [x, y] = cellOrigin(g, r, c);
        const v = d.values[r * d.heads + c];
        const k = d.diverging ? divIndex(v, d.hi) : seqIndex(v, d.lo, d.hi);
        ctx.fillStyle = k < 0 ? th.empty : lutColor(d.cmap, k, th.bg);
        ctx.fillRect(x, y, g.cell, g.cell);
        if (k < 0) {
          ctx.strokeStyle = th.faint;
          ctx.lineWidth = 1;
          ctx.beginPath();
          ctx.moveTo(x + 3, y + g.cell - 3);
          ctx.lineTo(x + g.cell - 3, y + 3);
          ctx.stroke();
        } else if (showText) {
          ctx.fillStyle = textOn(d.cmap, k, th.bg);
          ctx.textAlign = "center";
          ctx.textBaseline = "middle";
          ctx.font = FONT_SMALL;
          ctx.fillText(formatValue(v), x + g.cell / 2, y + g.cell / 2);
        }
      }
    }
    const mark = (p: [number, number] | null, color: string, w: number) => {
      if (!p) return;
      const [x, y] = cellOrigin(g, p[0], p[1]);
      ctx.strokeStyle = color;
      ctx.lineWidth = w;
      ctx.strokeRect(x - w / 2, y - w / 2, g.cell + w, g.cell + w);
    };
    mark(this.pointer.hovered(), th.ink, 1.5);
    mark(this.selection(), th.accent, 3);
    const bx = g.left + d.heads * g.pitchX + 12;
    const bh = Math.min(200, Math.max(60, d.layers * g.pitchY - 20));
    colorBarV(ctx, th, d.cmap, bx, g.top + 16, 12, bh, d.lo, d.hi, d.diverging ? 0 : undefined, d.name);
  }
}

export default mount((props) => new HeadMapView(props));
