// Grid layout maths of HeadGrid and HeadMap: L rows (layers) × H columns (heads).

export interface GridLayout {
  rows: number;
  cols: number;
  left: number; // x of the first column's cells
  top: number; // y of the first row's cells
  cell: number; // drawn square size of one cell (CSS px)
  pitchX: number; // distance between columns
  pitchY: number; // distance between rows
  width: number; // total width
  height: number; // total height
}

export interface GridOptions {
  rows: number;
  cols: number;
  width: number; // available width
  left: number; // margin for row labels
  top: number; // margin for column labels (and legend)
  gap: number; // space between cells
  below: number; // space under each cell (its "L-H" label)
  bottom: number;
  minCell: number;
  maxCell: number;
}

export function gridLayout(o: GridOptions): GridLayout {
  const avail = Math.max(0, o.width - o.left - 4);
  const fit = Math.floor(avail / o.cols - o.gap);
  const cell = Math.max(o.minCell, Math.min(o.maxCell, fit));
  const pitchX = cell + o.gap;
  const pitchY = cell + o.gap + o.below;
  return {
    rows: o.rows,
    cols: o.cols,
    left: o.left,
    top: o.top,
    cell,
    pitchX,
    pitchY,
    width: o.left + o.cols * pitchX + 4,
    height: o.top + o.rows * pitchY + o.bottom,
  };
}

/** A grid's geometry as the root's data attributes (data-cell, data-grid-left, ...), for tests and tools. */
export function gridData(g: GridLayout): Record<string, string> {
  return { cell: String(g.cell), gridLeft: String(g.left), gridTop: String(g.top), pitchX: String(g.pitchX), pitchY: String(g.pitchY) };
}

/** Top-left corner of cell (row, col). */
export function cellOrigin(g: GridLayout, row: number, col: number): [number, number] {
  return [g.left + col * g.pitchX, g.top + row * g.pitchY];
}

/** The (row, col) whose drawn cell or label contains (x, y), or null over a gap/margin. */
export function gridHit(g: GridLayout, x: number, y: number): [number, number] | null {
  const col = Math.floor((x - g.left) / g.pitchX);
  const row = Math.floor((y - g.top) / g.pitchY);
  if (row < 0 || col < 0 || row >= g.rows || col >= g.cols) return null;
  const [x0, y0] = cellOrigin(g, row, col);
  if (x - x0 > g.cell || y - y0 > g.pitchY - (g.pitchX - g.cell)) return null;
  return [row, col];
}

/** min and max of the finite values (NaN when there are none). */
export function finiteRange(values: ArrayLike<number>): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : [NaN, NaN];
}
