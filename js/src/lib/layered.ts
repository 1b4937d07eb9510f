// Layered graphs (CircuitView, RoutesView): where nodes and edges go and how edges look.
// Pure functions, tested in js/tests/layered.test.ts; js/src/lib/layeredview.ts draws them.
//
// Rows run bottom (0) to top. A node's x is either its rank among the row's nodes spread
// over the width (a circuit: the heads of a layer in a row), or its rank among every
// distinct `order` of the graph (routes: one column per token, shared by all rows).
// An edge enters a head at one of three ports: q left, k middle, v right.

export const PORTS = ["", "q", "k", "v", "in", "out"] as const;
/** Dash of an edge by port: q solid, k dashed, v dotted (the others solid). */
export const DASH: Record<string, number[]> = { q: [], k: [6, 3], v: [1.5, 3] };
/** Sign colours (blue positive, red negative) and group colours (both / first / second). */
export const SIGN_COLORS = ["#2166ac", "#b2182b"] as const;
export const GROUP_COLORS = ["#8c8c8c", "#1a9e9e", "#7b3294"] as const;
/** Routes: heads, residual, both. */
export const ROUTE_COLORS = ["#1a6e9e", "#9a9a9a", "#1a9e9e"] as const;

export interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

export interface Placed {
  x: Float64Array;
  y: Float64Array;
  /** pixels between two ports of a node */
  port: number;
}

/**
 * Node positions inside `box`: `rows` (0 = bottom of `nRows`), `order` within a row. With
 * `slots > 0` a node's x is its `order` as a slot of `slots` equal columns (a circuit: head h
 * in column h, the MLP after the heads, embeddings and logits between the middle heads);
 * else `sharedX` picks columns by rank of `order` (routes) or spreads each row.
 */
export function placeNodes(rows: ArrayLike<number>, order: ArrayLike<number>, nRows: number, box: Box, sharedX: boolean, slots = 0): Placed {
  const n = rows.length;
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  const pitchY = nRows > 1 ? box.height / (nRows - 1) : 0;
  for (let i = 0; i < n; i++) y[i] = box.top + box.height - rows[i] * pitchY;
  let widest = 1;
  if (slots > 0) {
    for (let i = 0; i < n; i++) x[i] = box.left + ((order[i] + 0.5) * box.width) / slots;
    widest = slots;
  } else if (sharedX) {
    const distinct = Array.from(new Set(Array.from(order))).sort((a, b) => a - b);
    const rank = new Map(distinct.map((v, i) => [v, i]));
    const step = box.width / Math.max(1, distinct.length);
    for (let i = 0; i < n; i++) x[i] = box.left + (rank.get(order[i])! + 0.5) * step;
    widest = distinct.length;
  } else {
    const byRow = new Map<number, number[]>();
    for (let i = 0; i < n; i++) {
      const r = byRow.get(rows[i]) ?? [];
      r.push(i);
      byRow.set(rows[i], r);
    }
    for (const idx of byRow.values()) {
      idx.sort((a, b) => order[a] - order[b] || a - b);
      const step = box.width / idx.length;
      idx.forEach((i, k) => (x[i] = box.left + (k + 0.5) * step));
      widest = Math.max(widest, idx.length);
    }
  }
  const port = Math.min(10, box.width / Math.max(1, widest) / 6);
  return { x, y, port };
}

/** Where an edge ends: the target's port (q left of centre, k centre, v right). */
export function portOffset(port: number, spacing: number): number {
  const name = PORTS[port] ?? "";
  return name === "q" ? -spacing : name === "v" ? spacing : 0;
}

/** Line width of an edge of score `s` when the largest |score| is `top`: 0.75 to 6 px. */
export function edgeWidth(s: number, top: number): number {
  if (!(top > 0) || !Number.isFinite(s)) return 0.75;
  return 0.75 + 5.25 * Math.min(1, Math.abs(s) / top);
}

/** Colour of an edge: by sign (signed circuits) or by group (compared circuits, routes). */
export function edgeColor(score: number, group: number, signed: boolean, routes: boolean): string {
  if (signed) return score >= 0 ? SIGN_COLORS[0] : SIGN_COLORS[1];
  const colors = routes ? ROUTE_COLORS : GROUP_COLORS;
  return colors[group] ?? colors[0];
}

/** Squared distance from (px, py) to the segment (ax, ay)–(bx, by). */
export function segmentDistance2(px: number, py: number, ax: number, ay: number, bx: number, by: number): number {
  const dx = bx - ax;
  const dy = by - ay;
  const len2 = dx * dx + dy * dy;
  let t = len2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0;
  t = Math.max(0, Math.min(1, t));
  const cx = ax + t * dx - px;
  const cy = ay + t * dy - py;
  return cx * cx + cy * cy;
}

/**
 * The edge nearest to (px, py) within `radius` px, or -1; `ends(i)` gives [ax, ay, bx, by].
 * On a tie the first (the stronger: edges come strongest first) wins.
 */
export function hitEdge(px: number, py: number, count: number, ends: (i: number) => [number, number, number, number], radius = 6): number {
  let best = -1;
  let bestD = radius * radius;
  for (let i = 0; i < count; i++) {
    const [ax, ay, bx, by] = ends(i);
    const d = segmentDistance2(px, py, ax, ay, bx, by);
    if (d < bestD || (best < 0 && d <= bestD)) {
      best = i;
      bestD = d;
    }
  }
  return best;
}

/** The next edge for the keyboard: edges are sent strongest first, so steps follow |score|. */
export function stepEdge(current: number, count: number, key: string): number {
  if (count === 0) return -1;
  if (key === "Home") return 0;
  if (key === "End") return count - 1;
  const forward = key === "ArrowRight" || key === "ArrowDown";
  const back = key === "ArrowLeft" || key === "ArrowUp";
  if (!forward && !back) return current;
  if (current < 0) return forward ? 0 : count - 1;
  return (current + (forward ? 1 : count - 1)) % count;
}
