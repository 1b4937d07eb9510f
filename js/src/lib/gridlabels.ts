// Labels of a HeadMap grid: layers × heads by default, or any labelled rows × columns (the
// source × target map of head composition). Plain strings only: callers draw them with
// fillText or put them in the DOM with textContent.

import { Axes } from "./axes";
import { headLabel } from "./labels";

export interface GridLabels {
  /** text of each row; empty: layers counted from 1 */
  rows: string[];
  /** text of each column; empty: heads counted from 1 */
  cols: string[];
  rowTitle: string;
  colTitle: string;
}

/** True when the grid's rows and columns are layers and heads (no labels given). */
export function isHeadGrid(l: GridLabels | undefined): boolean {
  return !l || (l.rows.length === 0 && l.cols.length === 0);
}

/** The axes of a grid of `rows` × `cols` cells with labels `l`. */
export function gridAxes(rows: number, cols: number, l: GridLabels): Axes {
  const a: Axes = { rows, cols, rowTitle: l.rowTitle, colTitle: l.colTitle };
  if (l.rows.length === rows) a.rowLabel = (r) => l.rows[r];
  if (l.cols.length === cols) a.colLabel = (c) => l.cols[c];
  return a;
}

/** What hover and the status line call cell (r, c): "Head 2-3", or "source 1-2, target 2-1". */
export function cellName(l: GridLabels | undefined, r: number, c: number): string {
  if (!l || isHeadGrid(l)) return `Head ${headLabel(r, c)}`;
  const row = l.rows[r] ?? String(r + 1);
  const col = l.cols[c] ?? String(c + 1);
  return `${l.rowTitle} ${row}, ${l.colTitle} ${col}`;
}

/** Gap and smallest cell (CSS px) for a grid `cols` wide: 2 and 12 up to 64 columns, then
 * no gap and cells down to 2 px, so a 1,000 × 1,000 map stays a few thousand pixels wide. */
export function gridSpacing(cols: number): { gap: number; minCell: number } {
  return cols <= 64 ? { gap: 2, minCell: 12 } : { gap: 0, minCell: Math.max(2, Math.floor(768 / cols)) };
}
