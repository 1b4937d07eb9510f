// Axis labels of the layer × head grids (HeadMap, HeadGrid, the flow view's head glyphs): column
// numbers above the cells with their title ("head") before them, row numbers left of the cells
// with their title ("layer") turned along them. Every label is measured in the font it is drawn
// in: the margins a grid needs come from the measured text (axesSpace), columns and rows are
// labelled as often as their measured size allows, and nothing is drawn past the grid's box,
// so no label is ever cut at a canvas edge. Labels are drawn with fillText: text, never HTML.

import { FONT_SMALL } from "./canvas";
import { labelStride } from "./labels";
import { GridLayout, gridLayout, GridOptions } from "./layout";
import { Theme } from "./theme";

export interface Axes {
  rows: number;
  cols: number;
  /** text of row r (default: r + 1) */
  rowLabel?: (r: number) => string;
  /** text of column c (default: c + 1) */
  colLabel?: (c: number) => string;
  /** drawn turned, left of the row labels, running down from the first row */
  rowTitle?: string;
  /** drawn before the column labels, on their line */
  colTitle?: string;
}

/** What a grid must leave for its axes (CSS px). */
export interface AxesSpace {
  /** from the canvas's left edge to the first column */
  left: number;
  /** above the first row (the line of column labels) */
  top: number;
  /** the grid must reach at least this far below its first row (the turned row title) */
  below: number;
}

/** The axes of a layer × head grid: heads across, layers down, both counted from 1. */
export function headAxes(layers: number, heads: number): Axes {
  return { rows: layers, cols: heads, rowTitle: "layer", colTitle: "head" };
}

/** Gap between a label and the cells. */
const PAD = 6;
/** Gap between neighbouring labels. */
const GAP = 4;

type Measure = Pick<CanvasRenderingContext2D, "measureText" | "font">;

const number = (i: number) => String(i + 1);

function widest(ctx: Measure, n: number, label: (i: number) => string): number {
  let w = 0;
  for (let i = 0; i < n; i++) w = Math.max(w, ctx.measureText(label(i)).width);
  return w;
}

/** Height of a line of text in the current font: its measured ascent and descent. */
function lineHeight(ctx: Measure): number {
  const m = ctx.measureText("0123456789Hhdgy");
  const h = (m.actualBoundingBoxAscent ?? NaN) + (m.actualBoundingBoxDescent ?? NaN);
  return Number.isFinite(h) && h > 0 ? Math.ceil(h) : 12;
}

interface Measured {
  row: number;
  col: number;
  rowTitle: number;
  colTitle: number;
  line: number;
}

function measure(ctx: Measure, a: Axes): Measured {
  ctx.font = FONT_SMALL;
  return {
    row: widest(ctx, a.rows, a.rowLabel ?? number),
    col: widest(ctx, a.cols, a.colLabel ?? number),
    rowTitle: a.rowTitle ? ctx.measureText(a.rowTitle).width : 0,
    colTitle: a.colTitle ? ctx.measureText(a.colTitle).width : 0,
    line: lineHeight(ctx),
  };
}

/** The margins the axes `a` need, from their measured text. */
export function axesSpace(ctx: Measure, a: Axes): AxesSpace {
  const m = measure(ctx, a);
  const rowSide = (a.rowTitle ? m.line + GAP : 0) + m.row + PAD;
  const colSide = a.colTitle ? m.colTitle + GAP : 0;
  return {
    left: Math.ceil(Math.max(rowSide, colSide) + 2),
    top: m.line + PAD,
    below: a.rowTitle ? Math.ceil(m.rowTitle) + 2 : 0,
  };
}

/**
 * Lay out the grid of axes `a` with the margins their measured text needs; `above` is more
 * room over the column labels (a legend).
 */
export function axesGrid(ctx: Measure, a: Axes, o: Omit<GridOptions, "rows" | "cols" | "left" | "top"> & { above?: number }): GridLayout {
  const space = axesSpace(ctx, a);
  const g = gridLayout({ ...o, rows: a.rows, cols: a.cols, left: space.left, top: space.top + (o.above ?? 0) });
  g.height = Math.max(g.height, g.top + space.below);
  return g;
}

/**
 * Draw axes `a` of grid `g` (laid out with at least axesSpace's margins). Columns get a
 * label every `stride` columns where their measured width needs it, rows likewise.
 */
export function drawAxes(ctx: CanvasRenderingContext2D, th: Theme, g: GridLayout, a: Axes): void {
  const m = measure(ctx, a);
  const colLabel = a.colLabel ?? number;
  const rowLabel = a.rowLabel ?? number;
  ctx.save();
  ctx.fillStyle = th.muted;
  // column labels, centred on their cells but kept inside the grid's box
  ctx.textAlign = "left";
  ctx.textBaseline = "bottom";
  const colStride = labelStride(g.pitchX, m.col + GAP);
  let firstLeft = Infinity;
  for (let c = 0; c < a.cols; c += colStride) {
    const text = colLabel(c);
    const w = ctx.measureText(text).width;
    const x = Math.max(0, Math.min(g.width - w, g.left + c * g.pitchX + g.cell / 2 - w / 2));
    firstLeft = Math.min(firstLeft, x);
    ctx.fillText(text, x, g.top - 3);
  }
  if (a.colTitle) {
    ctx.textAlign = "right";
    ctx.fillText(a.colTitle, Math.max(m.colTitle, Math.min(g.left - GAP, firstLeft - GAP)), g.top - 3);
  }
  // row labels, right-aligned against the cells
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const rowStride = labelStride(g.pitchY, m.line);
  for (let r = 0; r < a.rows; r += rowStride) ctx.fillText(rowLabel(r), g.left - PAD, g.top + r * g.pitchY + g.cell / 2);
  // the row title, turned to read upwards, left of the widest row label
  if (a.rowTitle) {
    ctx.translate(Math.max(m.line / 2, g.left - PAD - m.row - GAP - m.line / 2), g.top + 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "right";
    ctx.fillText(a.rowTitle, 0, 0);
  }
  ctx.restore();
}
