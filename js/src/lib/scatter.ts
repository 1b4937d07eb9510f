// Scatter-plot maths of ClusterView: equal-aspect fit and nearest-point lookup.

export interface Fit {
  scale: number; // CSS px per data unit (same on both axes)
  ox: number; // screen x of data x = 0
  oy: number; // screen y of data y = 0 (y grows upwards in data, downwards on screen)
}

/**
 * Fit points (xs, ys) into a box [x, x + w] × [y, y + h] with `pad` px padding, keeping one
 * unit the same length on both axes and centring the data.
 */
export function fitEqual(xs: ArrayLike<number>, ys: ArrayLike<number>, x: number, y: number, w: number, h: number, pad: number): Fit {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (let i = 0; i < xs.length; i++) {
    if (!Number.isFinite(xs[i]) || !Number.isFinite(ys[i])) continue;
    x0 = Math.min(x0, xs[i]); x1 = Math.max(x1, xs[i]);
    y0 = Math.min(y0, ys[i]); y1 = Math.max(y1, ys[i]);
  }
  if (!(x0 <= x1)) { x0 = -1; x1 = 1; y0 = -1; y1 = 1; }
  const dx = Math.max(x1 - x0, 1e-9);
  const dy = Math.max(y1 - y0, 1e-9);
  const iw = Math.max(1, w - 2 * pad);
  const ih = Math.max(1, h - 2 * pad);
  const scale = x1 - x0 === 0 && y1 - y0 === 0 ? 1 : Math.min(iw / dx, ih / dy);
  const cx = (x0 + x1) / 2;
  const cy = (y0 + y1) / 2;
  return { scale, ox: x + w / 2 - cx * scale, oy: y + h / 2 + cy * scale };
}

export function toScreen(f: Fit, px: number, py: number): [number, number] {
  return [f.ox + px * f.scale, f.oy - py * f.scale];
}

/** Index of the screen point nearest to (x, y) within `maxDist` px, or -1. */
export function nearest(sx: ArrayLike<number>, sy: ArrayLike<number>, x: number, y: number, maxDist: number): number {
  let best = -1;
  let bestD = maxDist * maxDist;
  for (let i = 0; i < sx.length; i++) {
    const d = (sx[i] - x) ** 2 + (sy[i] - y) ** 2;
    if (d <= bestD) {
      bestD = d;
      best = i;
    }
  }
  return best;
}

/** Zoom a fit by `factor` about screen point (px, py), between 1/4 and 64 times `baseScale`. */
export function zoomFit(f: Fit, factor: number, px: number, py: number, baseScale: number): Fit {
  const scale = Math.min(64 * baseScale, Math.max(baseScale / 4, f.scale * factor));
  const k = scale / f.scale;
  return { scale, ox: px - (px - f.ox) * k, oy: py - (py - f.oy) * k };
}

/** Move a fit by (dx, dy) screen pixels. */
export function panFit(f: Fit, dx: number, dy: number): Fit {
  return { scale: f.scale, ox: f.ox + dx, oy: f.oy + dy };
}
