// Thumbnails painted straight into device pixels. HeadGrid's thumbnails arrive as uint8
// log codes (attnkit/widgets/headgrid.py): code c > 0 stands for top · 10^(DECADES (c/255 − 1)).
// The uint8 codes of L×H maps of side t
// ([L, H, t, t] order) are resampled to each thumbnail's size s (device pixels) and
// looked up in a 32-bit RGBA table in one pass. Enlarging repeats cells (crisp token
// cells); shrinking keeps each block's largest code, i.e. its strongest attention, so thin
// patterns such as a diagonal survive.

/** Decades the log codes span (headgrid.py DECADES). */
export const DECADES = 6;

/** Value of log code `c` for a head whose top is `top`. */
export function codeValue(c: number, top: number): number {
  return c === 0 ? 0 : top * 10 ** (DECADES * (c / 255 - 1));
}

/** Bins of a `t`-bin thumbnail of `n` positions holding positions `pos` (attention.pool_edges). */
export function binsOf(n: number, t: number, pos: Iterable<number>): Set<number> {
  const out = new Set<number>();
  for (const p of pos) {
    // bin i covers [floor(i n / t), floor((i + 1) n / t))
    let i = Math.min(t - 1, Math.floor(((p + 1) * t - 1) / n));
    while (i > 0 && Math.floor((i * n) / t) > p) i--;
    while (i < t - 1 && Math.floor(((i + 1) * n) / t) <= p) i++;
    out.add(i);
  }
  return out;
}

export interface Ranges {
  start: Int32Array;
  end: Int32Array;
}

/** For each of `dst` output pixels, the source range [start[i], end[i]) of `src` cells. */
export function resampleRanges(src: number, dst: number): Ranges {
  const start = new Int32Array(dst);
  const end = new Int32Array(dst);
  for (let i = 0; i < dst; i++) {
    const a = Math.floor((i * src) / dst);
    const b = Math.max(a + 1, Math.floor(((i + 1) * src) / dst));
    start[i] = a;
    end[i] = Math.min(src, b);
  }
  return { start, end };
}

/**
 * Paint the t×t map of `codes` starting at `offset` into `out` (s×s RGBA pixels as
 * Uint32) through `lut32`. `r` = resampleRanges(t, s), shared by every thumbnail. A
 * rectangular map (cross-attention) has `tc` columns, resampled by `rc` = resampleRanges(tc, s)
 * into the same s×s square.
 */
export function paintThumb(codes: Uint8Array, offset: number, t: number, s: number, lut32: Uint32Array, out: Uint32Array, r: Ranges, tc = t, rc = r): void {
  const { start, end } = r;
  const { start: startC, end: endC } = rc;
  if (s >= t && s >= tc) {
    for (let y = 0; y < s; y++) {
      const row = offset + start[y] * tc;
      const o = y * s;
      for (let x = 0; x < s; x++) out[o + x] = lut32[codes[row + startC[x]]];
    }
    return;
  }
  const rowMax = new Uint8Array(tc);
  for (let y = 0; y < s; y++) {
    rowMax.fill(0);
    for (let sy = start[y]; sy < end[y]; sy++) {
      const row = offset + sy * tc;
      for (let x = 0; x < tc; x++) if (codes[row + x] > rowMax[x]) rowMax[x] = codes[row + x];
    }
    const o = y * s;
    for (let x = 0; x < s; x++) {
      let m = 0;
      for (let sx = startC[x]; sx < endC[x]; sx++) if (rowMax[sx] > m) m = rowMax[sx];
      out[o + x] = lut32[m];
    }
  }
}
