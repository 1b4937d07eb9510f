// Layout and graph maths of the radial attention-flow view.
//
// Levels: with L layers there are L + 1 rings. Level L (the source's, e.g. [CLS] after
// the last layer) is the innermost ring, level 0 (the input tokens) the outermost. Token
// position p sits at angle 2π p / n clockwise from the top on every ring.

export interface Radial {
  cx: number;
  cy: number;
  rIn: number; // radius of level L
  rOut: number; // radius of level 0
  layers: number;
  n: number;
}

export function ringRadius(g: Radial, level: number): number {
  if (g.layers <= 0) return g.rOut;
  return g.rIn + ((g.rOut - g.rIn) * (g.layers - level)) / g.layers;
}

/**
 * CSS px from (x, y) to the edge of a `size` × `size` canvas, going outward at angle `a`
 * (clockwise from the top): the room a label written outward from there has.
 */
export function roomOutward(size: number, x: number, y: number, a: number): number {
  const dx = Math.sin(a);
  const dy = -Math.cos(a);
  const along = (p: number, d: number) => (d > 1e-9 ? (size - p) / d : d < -1e-9 ? p / -d : Infinity);
  return Math.max(0, Math.min(along(x, dx), along(y, dy)));
}

/** Angle of position `pos` in radians, clockwise from the top. */
export function angleOf(pos: number, n: number): number {
  return (2 * Math.PI * pos) / Math.max(1, n);
}

export function polar(g: Radial, r: number, a: number): [number, number] {
  return [g.cx + r * Math.sin(a), g.cy - r * Math.cos(a)];
}

export function nodeXY(g: Radial, level: number, pos: number): [number, number] {
  return polar(g, ringRadius(g, level), angleOf(pos, g.n));
}

/**
 * Points of an edge from (level, p) to (level - 1, q) as a spiral between the two rings:
 * radius and angle interpolated together, the angle the shorter way round, so the edge
 * stays in the band between its rings. Returns [x0, y0, x1, y1, ...] with `steps` points
 * (0: enough for the arc's angle).
 */
export function spiral(g: Radial, level: number, p: number, q: number, steps = 0): Float32Array {
  const r1 = ringRadius(g, level);
  const r2 = ringRadius(g, level - 1);
  const a1 = angleOf(p, g.n);
  let da = angleOf(q, g.n) - a1;
  da = ((((da + Math.PI) % (2 * Math.PI)) + 2 * Math.PI) % (2 * Math.PI)) - Math.PI;
  // steps = 0: as many as the arc needs (a point per ~0.15 rad, 2 to 16)
  if (steps <= 0) steps = Math.max(2, Math.min(16, Math.ceil(Math.abs(da) / 0.15) + 1));
  const out = new Float32Array(2 * steps);
  for (let i = 0; i < steps; i++) {
    const t = steps === 1 ? 1 : i / (steps - 1);
    const [x, y] = polar(g, r1 + t * (r2 - r1), a1 + t * da);
    out[2 * i] = x;
    out[2 * i + 1] = y;
  }
  return out;
}

/** Index of the point nearest (x, y) within `maxDist`, or -1. `xy` = [x0, y0, x1, y1, ...]. */
export function nearestPoint(xy: ArrayLike<number>, x: number, y: number, maxDist: number): number {
  let best = -1;
  let bestD = maxDist * maxDist;
  for (let i = 0; i < xy.length / 2; i++) {
    const d = (xy[2 * i] - x) ** 2 + (xy[2 * i + 1] - y) ** 2;
    if (d <= bestD) {
      bestD = d;
      best = i;
    }
  }
  return best;
}

/** Edges as (upper level, upper position, lower position) triples; the lower level is upper − 1. */
export interface EdgeList {
  count: number;
  upper: (i: number) => number; // level of the upper node
  from: (i: number) => number; // position of the upper node
  to: (i: number) => number; // position of the lower node
}

export const nodeKey = (level: number, pos: number): number => level * 65536 + pos;

/**
 * The brushing of DeRose et al.: indices of the edges on some path through node
 * (level, pos) — edges joining two of its ancestors (towards the source, itself included)
 * and edges joining two of its descendants (towards the inputs, itself included).
 */
export function traceThrough(e: EdgeList, level: number, pos: number): Set<number> {
  const down = new Map<number, number[]>();
  const up = new Map<number, number[]>();
  for (let i = 0; i < e.count; i++) {
    const a = nodeKey(e.upper(i), e.from(i));
    const b = nodeKey(e.upper(i) - 1, e.to(i));
    if (!down.has(a)) down.set(a, []);
    down.get(a)!.push(b);
    if (!up.has(b)) up.set(b, []);
    up.get(b)!.push(a);
  }
  const reach = (start: number, adj: Map<number, number[]>) => {
    const seen = new Set<number>([start]);
    const stack = [start];
    while (stack.length) {
      const v = stack.pop()!;
      for (const w of adj.get(v) ?? []) {
        if (!seen.has(w)) {
          seen.add(w);
          stack.push(w);
        }
      }
    }
    return seen;
  };
  const v = nodeKey(level, pos);
  const anc = reach(v, up);
  const desc = reach(v, down);
  const out = new Set<number>();
  for (let i = 0; i < e.count; i++) {
    const a = nodeKey(e.upper(i), e.from(i));
    const b = nodeKey(e.upper(i) - 1, e.to(i));
    if ((anc.has(a) && anc.has(b)) || (desc.has(a) && desc.has(b))) out.add(i);
  }
  return out;
}

/** Which ring band (layer 1..L, the band between level l and l − 1) a radius falls in, or 0. */
export function bandAt(g: Radial, r: number): number {
  for (let l = 1; l <= g.layers; l++) {
    const a = ringRadius(g, l);
    const b = ringRadius(g, l - 1);
    if (r >= Math.min(a, b) && r < Math.max(a, b)) return l;
  }
  return 0;
}
