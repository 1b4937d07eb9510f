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

/** The matrix's panel size and the top-left corner of its grid in data coordinates: the
 * grid is centred in [-1, 1]² (a 6 × 12 grid sits in the middle band, not the top half). */
function frame(heads: number[][]): { g: ReturnType<typeof panelGrid>; size: number; left: number; top: number } {
  const g = panelGrid(heads);
  const size = 2 / Math.max(g.cols, g.rows);
  return { g, size, left: -(g.cols * size) / 2, top: (g.rows * size) / 2 };
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
  const k = (frame(heads).size / 2) * (1 - gap);
  let i = 0;
  for (let p = 0; p < counts.length; p++) {
    const { x: cx, y: cy } = panelBox(p, heads); // first layer on top
    for (const end = i + counts[p]; i < end; i++) {
      x[i] = cx + pts[2 * i] * k;
      y[i] = cy + pts[2 * i + 1] * k;
    }
  }
  return { x, y };
}

/** The panel under data coordinates (dx, dy) of the matrix, or -1. */
export function panelAt(dx: number, dy: number, heads: number[][]): number {
  const { g, size, left, top } = frame(heads);
  const c = Math.floor((dx - left) / size);
  const r = Math.floor((top - dy) / size);
  for (let p = 0; p < heads.length; p++) {
    const [pc, pr] = g.cell(p);
    if (pc === c && pr === r) return p;
  }
  return -1;
}

/** The panel whose centre is nearest to data coordinates (dx, dy) (the first of a tie), or
 * -1 without panels: the one Enter opens, marked on the matrix. */
export function nearestPanel(dx: number, dy: number, heads: number[][]): number {
  let best = -1;
  let bestD = Infinity;
  for (let p = 0; p < heads.length; p++) {
    const b = panelBox(p, heads);
    const d = (b.x - dx) ** 2 + (b.y - dy) ** 2;
    if (d < bestD - 1e-12) {
      bestD = d;
      best = p;
    }
  }
  return best;
}

/** The centre and half-size of panel `p` (for zooming onto one head). */
export function panelBox(p: number, heads: number[][]): { x: number; y: number; half: number } {
  const { g, size, left, top } = frame(heads);
  const [c, r] = g.cell(p);
  return { x: left + size * (c + 0.5), y: top - size * (r + 0.5), half: size / 2 };
}
