// Points of the query–key scatter (QKScatter): decoding the binary traits into the columns
// regl-scatterplot draws, and the matrix layout of small multiples (one panel per head).
// Pure functions: tested in js/tests/qkpoints.test.ts.

/** Columns for regl-scatterplot: x, y in [-1, 1] and the colour category per point. */
export interface Columns {
  x: Float32Array;
  y: Float32Array;
  z: Uint8Array | Float32Array;
}

/** The grid of `panels` small multiples: columns and rows as close to square as fit. */
export function gridShape(panels: number, aspect = 1): { cols: number; rows: number } {
  if (panels <= 1) return { cols: 1, rows: 1 };
  const cols = Math.max(1, Math.ceil(Math.sqrt(panels * aspect)));
  return { cols, rows: Math.ceil(panels / cols) };
}

/** The panel of each head when heads are `[layer, head]` pairs: one row per layer when the
 * heads form a full layer × head grid (AttentionViz's matrix), else a square grid. */
export function panelGrid(heads: number[][]): { cols: number; rows: number; cell: (i: number) => [number, number] } {
  const layers = [...new Set(heads.map((p) => p[0]))].sort((a, b) => a - b);
  const perLayer = Math.max(...heads.map((p) => p[1])) + 1;
  if (layers.length * perLayer === heads.length && layers.length > 1 && perLayer > 1) {
    const rowOf = new Map(layers.map((l, i) => [l, i]));
    return { cols: perLayer, rows: layers.length, cell: (i) => [heads[i][1], rowOf.get(heads[i][0])!] };
  }
  const { cols, rows } = gridShape(heads.length);
  return { cols, rows, cell: (i) => [i % cols, Math.floor(i / cols)] };
}

/** Positions `pts` ([n, 2] interleaved, each panel in [-1, 1]) placed in their panel of the
 * grid, each panel shrunk by `gap` on every side. The points come panel by panel: `counts[p]`
 * of them in panel p. Without counts the points stay as they are. */
export function layoutPoints(pts: Float32Array, counts: ArrayLike<number> | null, heads: number[][], gap = 0.06): { x: Float32Array; y: Float32Array } {
  const n = pts.length / 2;
  const x = new Float32Array(n);
  const y = new Float32Array(n);
  if (!counts || heads.length <= 1) {
    for (let i = 0; i < n; i++) { x[i] = pts[2 * i]; y[i] = pts[2 * i + 1]; }
    return { x, y };
  }
  let total = 0;
  for (let p = 0; p < counts.length; p++) total += counts[p];
  if (total !== n || counts.length > heads.length) {
    throw new RangeError(`panel counts add up to ${total} points of ${counts.length} panels; the view has ${n} points of ${heads.length} heads`);
  }
  const g = panelGrid(heads);
  const size = 2 / Math.max(g.cols, g.rows);
  const k = (size / 2) * (1 - gap);
  let i = 0;
  for (let p = 0; p < counts.length; p++) {
    const [c, r] = g.cell(p);
    const cx = -1 + size * (c + 0.5);
    const cy = 1 - size * (r + 0.5); // first layer on top
    for (const end = i + counts[p]; i < end; i++) {
      x[i] = cx + pts[2 * i] * k;
      y[i] = cy + pts[2 * i + 1] * k;
    }
  }
  return { x, y };
}

/** The panel under data coordinates (dx, dy) of the matrix, or -1. */
export function panelAt(dx: number, dy: number, heads: number[][]): number {
  const g = panelGrid(heads);
  const side = Math.max(g.cols, g.rows);
  const size = 2 / side;
  const c = Math.floor((dx + 1) / size);
  const r = Math.floor((1 - dy) / size);
  for (let p = 0; p < heads.length; p++) {
    const [pc, pr] = g.cell(p);
    if (pc === c && pr === r) return p;
  }
  return -1;
}

/** The centre and half-size of panel `p` (for zooming onto one head). */
export function panelBox(p: number, heads: number[][]): { x: number; y: number; half: number } {
  const g = panelGrid(heads);
  const size = 2 / Math.max(g.cols, g.rows);
  const [c, r] = g.cell(p);
  return { x: -1 + size * (c + 0.5), y: 1 - size * (r + 0.5), half: size / 2 };
}
