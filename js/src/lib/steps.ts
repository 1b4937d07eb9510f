// Pure helpers of the checkpoint scrubber (scrubber.ts): stepping through checkpoints with
// keys and play, the range of the curves, the heatmap's token labels. No DOM here (unit-tested in
// js/tests/steps.test.ts).

import { displayToken, labelStride } from "./labels";

/** The checkpoint index a key moves to from `index` of `n` (null: a key that does not step). */
export function keyStep(key: string, index: number, n: number): number | null {
  const last = Math.max(0, n - 1);
  const page = Math.max(1, Math.round(n / 10));
  const to = (i: number) => Math.max(0, Math.min(last, i));
  switch (key) {
    case "ArrowLeft":
    case "ArrowDown":
      return to(index - 1);
    case "ArrowRight":
    case "ArrowUp":
      return to(index + 1);
    case "PageDown":
      return to(index - page);
    case "PageUp":
      return to(index + page);
    case "Home":
      return 0;
    case "End":
      return last;
    default:
      return null;
  }
}

/** The next index while playing: one on, and from the last back to the first. */
export function playNext(index: number, n: number): number {
  return n <= 1 ? 0 : index >= n - 1 ? 0 : index + 1;
}

/** [lo, hi] over the finite values of every series (lo <= 0 <= hi, so 0 is on the axis). */
export function curveRange(...series: ArrayLike<number>[]): [number, number] {
  let lo = 0;
  let hi = 0;
  for (const s of series) {
    for (let i = 0; i < s.length; i++) {
      const v = s[i];
      if (!Number.isFinite(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (hi === lo) hi = lo + 1;
  return [lo, hi];
}

/** The selected head after an arrow key on the head map ([layer, head], clamped). */
export function moveHead(sel: [number, number] | null, key: string, layers: number, heads: number): [number, number] | null {
  const [l, h] = sel ?? [0, 0];
  const clamp = (v: number, n: number) => Math.max(0, Math.min(n - 1, v));
  if (!sel && key.startsWith("Arrow")) return [0, 0];
  switch (key) {
    case "ArrowUp":
      return [clamp(l - 1, layers), h];
    case "ArrowDown":
      return [clamp(l + 1, layers), h];
    case "ArrowLeft":
      return [l, clamp(h - 1, heads)];
    case "ArrowRight":
      return [l, clamp(h + 1, heads)];
    default:
      return null;
  }
}

/** Smallest cell, in pixels, that carries every token's label (as Heatmap labels its axes). */
export const MIN_TICK_PX = 11;

/**
 * The labelled positions of a heatmap axis of `n` tokens drawn `cellPx` apart: every token
 * where it fits, else every `stride`-th (1, 2, 5 × 10^k) with its 0-indexed position first
 * ("#10 cat"), as Heatmap's strided labels. Plain strings: the caller draws them as text.
 */
export function tokenTicks(tokens: string[], n: number, cellPx: number): [number, string][] {
  const numbered = cellPx < MIN_TICK_PX;
  const stride = labelStride(cellPx, numbered ? 14 : MIN_TICK_PX);
  const out: [number, string][] = [];
  for (let i = 0; i < n; i += stride) {
    const tok = displayToken(tokens[i] ?? String(i));
    out.push([i, numbered ? `#${i} ${tok}` : tok]);
  }
  return out;
}
