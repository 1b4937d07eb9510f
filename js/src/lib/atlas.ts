// Thumbnails drawn straight into device pixels. The uint8 codes of L×H maps of side t
// ([L, H, t, t] order) are resampled to each thumbnail's size in device pixels and painted
// through a LUT into one RGBA buffer, which is put on the canvas in one call. Enlarging
// repeats cells (crisp token cells); shrinking keeps each block's largest code, i.e. its
// strongest attention, so thin patterns (a diagonal) survive.

/** For each of `dst` output pixels, the source range [start[i], end[i]) of `src` cells. */
export function resampleRanges(src: number, dst: number): { start: Int32Array; end: Int32Array } {
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

/** One t×t map of codes resampled to s×s by block maximum (or repetition when s ≥ t). */
export function resampleMax(codes: Uint8Array, offset: number, t: number, s: number, out: Uint8Array = new Uint8Array(s * s)): Uint8Array {
  const { start, end } = resampleRanges(t, s);
  if (s >= t) {
    for (let y = 0; y < s; y++) {
      const row = offset + start[y] * t;
      for (let x = 0; x < s; x++) out[y * s + x] = codes[row + start[x]];
    }
    return out;
  }
  // Shrink: max over rows first into a column buffer, then over columns.
  const rowMax = new Uint8Array(t);
  for (let y = 0; y < s; y++) {
    rowMax.fill(0);
    for (let sy = start[y]; sy < end[y]; sy++) {
      const row = offset + sy * t;
      for (let x = 0; x < t; x++) if (codes[row + x] > rowMax[x]) rowMax[x] = codes[row + x];
    }
    for (let x = 0; x < s; x++) {
      let m = 0;
      for (let sx = start[x]; sx < end[x]; sx++) if (rowMax[sx] > m) m = rowMax[sx];
      out[y * s + x] = m;
    }
  }
  return out;
}

/** Paint one resampled s×s tile of codes through a LUT into an RGBA buffer. */
export function paintTile(tile: Uint8Array, lut32: Uint32Array, out: Uint32Array): void {
  for (let i = 0; i < tile.length; i++) out[i] = lut32[tile[i]];
}
