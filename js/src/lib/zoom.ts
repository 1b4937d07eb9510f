// View-window maths of the zoomable heatmap. A view is the range of cells shown, in cell
// units: columns [x0, x0 + w), rows [y0, y0 + h); the view is always square (w === h) so
// cells stay square, and stays inside [0, n].

export interface View {
  x0: number;
  y0: number;
  size: number;
}

export const MIN_CELLS = 4;

export function fullView(n: number): View {
  return { x0: 0, y0: 0, size: n };
}

/** Keep a view inside the map and its size within [min(MIN_CELLS, n), n]. */
export function clampView(v: View, n: number): View {
  const size = Math.min(n, Math.max(Math.min(MIN_CELLS, n), v.size));
  const x0 = Math.min(Math.max(0, v.x0), n - size);
  const y0 = Math.min(Math.max(0, v.y0), n - size);
  return { x0, y0, size };
}

/**
 * Zoom by `factor` (> 1 zooms in) keeping the cell under the pointer fixed. `fx`, `fy` are the
 * pointer's position as fractions (0..1) of the plot area.
 */
export function zoomAt(v: View, factor: number, fx: number, fy: number, n: number): View {
  const size = Math.min(n, Math.max(Math.min(MIN_CELLS, n), v.size / factor));
  const cx = v.x0 + fx * v.size;
  const cy = v.y0 + fy * v.size;
  return clampView({ x0: cx - fx * size, y0: cy - fy * size, size }, n);
}

/** Move by (dx, dy) CSS pixels of drag on a plot area `plotPx` pixels wide. */
export function panBy(v: View, dx: number, dy: number, plotPx: number, n: number): View {
  const cells = v.size / plotPx;
  return clampView({ x0: v.x0 - dx * cells, y0: v.y0 - dy * cells, size: v.size }, n);
}

/** The cell (row, col) under plot-relative pixel (px, py), or null outside the map. */
export function cellAt(v: View, px: number, py: number, plotPx: number, n: number): [number, number] | null {
  if (px < 0 || py < 0 || px >= plotPx || py >= plotPx) return null;
  const col = Math.floor(v.x0 + (px / plotPx) * v.size);
  const row = Math.floor(v.y0 + (py / plotPx) * v.size);
  if (row < 0 || col < 0 || row >= n || col >= n) return null;
  return [row, col];
}

/**
 * A view on whole cells where cells are at least `minPx` CSS px wide on a plot `plotPx` wide:
 * its size and origin rounded to whole cells, so the cells at its edges are drawn whole,
 * never cut in half by the plot's border (rounded towards `toward`: a wheel zoom in gets
 * smaller, out larger). Finer views (many cells a pixel) are kept as they are.
 */
export function snapView(v: View, n: number, plotPx: number, toward: "in" | "out" | "near" = "near", minPx = 2): View {
  if (plotPx / v.size < minPx) return clampView(v, n);
  // a zoom keeps its direction: small wheel steps round towards it, never back
  const whole = toward === "in" ? Math.floor(v.size + 1e-9) : toward === "out" ? Math.ceil(v.size - 1e-9) : Math.round(v.size);
  const size = Math.max(Math.min(MIN_CELLS, n), Math.min(n, whole));
  const cx = v.x0 + v.size / 2;
  const cy = v.y0 + v.size / 2;
  return clampView({ x0: Math.round(cx - size / 2), y0: Math.round(cy - size / 2), size }, n);
}

/**
 * The height of a view's rows and the width of its columns, [rowPx, colPx], for a map of
 * `rows` × `cols` cells in a view of `size` cells a side on a plot `plotPx` wide. Cells are
 * square (plotPx / size) unless the map is a rectangle whose shorter side's lines (a wide
 * map's rows, a tall map's columns) would be thinner than min(plotPx / lines,
 * max(minPx, plotPx / (2 lines))): then they are that, so all of them fill at least half the
 * plot (all of it where minPx each would not fit), until zoomed in to cells as large.
 */
export function lineSides(plotPx: number, size: number, rows: number, cols: number, minPx: number): [number, number] {
  const cell = plotPx / size;
  if (rows === cols) return [cell, cell];
  const fit = plotPx / Math.min(rows, cols);
  const line = Math.max(cell, Math.min(fit, Math.max(minPx, fit / 2)));
  return rows < cols ? [line, cell] : [cell, line];
}
