// Colour scales of attention maps that survive attention sinks.
//
//   linear  0 → top (the head's largest weight, sinks excluded when asked)
//   log     top·10^-decades → top on a log axis (smaller weights get the lowest colour)
//   rank    each cell's rank among the cells of its row (0 = smallest, 1 = largest), so
//           every row uses the whole colour range however its mass is spread
//   diverging (differences) −top → 0 → +top
// "Excluding sinks" (the first token, [CLS], [SEP]) keeps those columns out of `top` and out
// of the row ranks: they are drawn at the top colour instead of washing out the rest.
// The kernel computes rank tiles with the same definition (attnkit/widgets/_pyramid.py).

import { divIndex, seqIndex } from "./colors";
import { formatValue } from "./labels";

export type ScaleKind = "linear" | "log" | "rank";

export interface Scale {
  kind: ScaleKind;
  diverging: boolean;
  top: number;
  decades: number;
  excludeSinks: boolean;
}

/** Value → colour index 0..255 (−1: no value, painted as empty). Rank scales take ranks. */
export function scaleIndex(s: Scale): (v: number) => number {
  if (s.diverging) return (v) => divIndex(v, s.top);
  if (s.kind === "rank") return (v) => (Number.isFinite(v) ? Math.max(0, Math.min(255, Math.round(v * 255))) : -1);
  if (s.kind === "log") {
    const hi = Math.log10(s.top > 0 ? s.top : 1);
    const lo = hi - Math.max(0.5, s.decades);
    return (v) => {
      if (!Number.isFinite(v)) return -1;
      if (!(v > 0)) return 0;
      const t = (Math.log10(v) - lo) / (hi - lo);
      return t <= 0 ? 0 : t >= 1 ? 255 : Math.round(t * 255);
    };
  }
  return (v) => seqIndex(v, 0, s.top);
}

/** A stable key of the scale: bitmaps painted for another key are stale. */
export function scaleKey(s: Scale): string {
  return `${s.kind}|${s.diverging}|${s.top}|${s.decades}|${s.excludeSinks}`;
}

/**
 * Rank of each cell among the valid cells of its row: (#smaller + (#equal − 1) / 2) /
 * (count − 1), in [0, 1]. Invalid cells (`valid` false, e.g. the causal upper triangle) get
 * NaN; cells of `excluded` columns (sinks) are left out of the ranking and get 1.
 */
export function rankRows(
  values: ArrayLike<number>, rows: number, cols: number,
  valid: (i: number, j: number) => boolean, excluded: (j: number) => boolean,
): Float32Array {
  const out = new Float32Array(rows * cols);
  const idx: number[] = [];
  for (let i = 0; i < rows; i++) {
    idx.length = 0;
    for (let j = 0; j < cols; j++) {
      if (!valid(i, j)) out[i * cols + j] = NaN;
      else if (excluded(j)) out[i * cols + j] = 1;
      else idx.push(j);
    }
    idx.sort((a, b) => values[i * cols + a] - values[i * cols + b]);
    const count = idx.length;
    let a = 0;
    while (a < count) {
      let b = a + 1;
      const v = values[i * cols + idx[a]];
      while (b < count && values[i * cols + idx[b]] === v) b++;
      const r = count > 1 ? (a + (b - a - 1) / 2) / (count - 1) : 1;
      for (let m = a; m < b; m++) out[i * cols + idx[m]] = r;
      a = b;
    }
  }
  return out;
}

/** The words of the legend: what the colours mean. */
export function describeScale(s: Scale, sinkNames: string): string {
  // `top` NaN: each picture has its own top (head grid thumbnails)
  const known = Number.isFinite(s.top);
  let text: string;
  if (s.diverging) text = `diverging, \u2212${formatValue(s.top)} to ${formatValue(s.top)}`;
  else if (s.kind === "rank") text = "rank within each row (0 = smallest, 1 = largest)";
  else if (s.kind === "log") text = known ? `log scale, ${formatValue(s.top * 10 ** -s.decades)} to ${formatValue(s.top)}` : `log scale over ${s.decades} decades below the top`;
  else text = known ? `linear, 0 to ${formatValue(s.top)}` : "linear from 0 to the top";
  if (s.excludeSinks && sinkNames && !s.diverging) text += `; ${sinkNames} left out of the scale (drawn at its top)`;
  return text;
}
