// Geometry of an image cut into a grid of patches (ImageAttention): the positions of a vision
// transformer are `first` special tokens ([CLS], DeiT's [DIST]) then rows × cols patches, row
// by row (attnkit/runtime/vision.py).

export interface PatchGrid {
  rows: number;
  cols: number;
  /** position of the first patch (the special tokens come before it) */
  first: number;
}

/** The patches' values of one query row and their largest value (0 when none is positive). */
export function patchValues(row: ArrayLike<number>, g: PatchGrid): { values: Float32Array; top: number } {
  const count = g.rows * g.cols;
  const values = new Float32Array(count);
  let top = 0;
  for (let i = 0; i < count; i++) {
    const v = row[g.first + i];
    values[i] = Number.isFinite(v) ? v : 0;
    if (values[i] > top) top = values[i];
  }
  return { values, top };
}

/** The position of the patch under (x, y) of an image drawn at (left, top) with size w × h, or -1. */
export function patchAt(g: PatchGrid, x: number, y: number, left: number, top: number, w: number, h: number): number {
  const c = Math.floor(((x - left) / w) * g.cols);
  const r = Math.floor(((y - top) / h) * g.rows);
  if (!(x >= left && y >= top && r >= 0 && c >= 0 && r < g.rows && c < g.cols)) return -1;
  return g.first + r * g.cols + c;
}

/** (row, column) of a patch position, or null for a special token. */
export function cellOf(g: PatchGrid, position: number): [number, number] | null {
  const p = position - g.first;
  if (p < 0 || p >= g.rows * g.cols) return null;
  return [Math.floor(p / g.cols), p % g.cols];
}

/**
 * The query after a key: arrows move between patches (from a special token, to the first
 * patch), Home goes to position 0 (the class token), End to the last patch; null for other keys.
 */
export function stepQuery(g: PatchGrid, query: number, key: string): number | null {
  if (key === "Home") return 0;
  if (key === "End") return g.first + g.rows * g.cols - 1;
  const moves: Record<string, [number, number]> = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  const m = moves[key];
  if (!m) return null;
  const at = cellOf(g, query);
  if (!at) return g.first;
  const r = Math.min(g.rows - 1, Math.max(0, at[0] + m[0]));
  const c = Math.min(g.cols - 1, Math.max(0, at[1] + m[1]));
  return g.first + r * g.cols + c;
}
