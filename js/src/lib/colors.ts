// Colour scales: 256-entry RGBA lookup tables interpolated from matplotlib's colour maps
// (see colormaps.data.ts), so widgets and static figures agree.

import { CATEGORICAL, STOPS } from "../colormaps.data";

export const SEQUENTIAL_DEFAULT = "Blues";
export const DIVERGING_DEFAULT = "RdBu_r";
export const METRIC_DEFAULT = "viridis";

export type RGB = [number, number, number];

/**
 * The red, green and blue (0..255) of a CSS colour written #rgb, #rrggbb or rgb(a)(...), or
 * null for any other form (named colours, color-mix(), ...). The one colour parser of the
 * front end: colour-map stops, theme colours and painted backgrounds all go through it.
 */
export function parseColor(css: string): RGB | null {
  const s = css.trim();
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(s);
  if (hex) {
    const v = hex[1].length === 3 ? hex[1].split("").map((c) => c + c).join("") : hex[1];
    return [parseInt(v.slice(0, 2), 16), parseInt(v.slice(2, 4), 16), parseInt(v.slice(4, 6), 16)];
  }
  const fn = /^rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)/i.exec(s);
  return fn ? [Number(fn[1]), Number(fn[2]), Number(fn[3])] : null;
}

/** "#rrggbb" (or any form parseColor reads) → [r, g, b]; throws on anything else. */
export function parseHex(hex: string): RGB {
  const c = parseColor(hex);
  if (!c) throw new Error(`not a #rrggbb colour: ${hex}`);
  return c;
}

/** Relative luminance (0..1) of an sRGB colour (approximate gamma 2.2). */
export function luminance([r, g, b]: RGB): number {
  const lin = (c: number) => (c / 255) ** 2.2;
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

const lutCache = new Map<string, Uint8ClampedArray>();

/**
 * The stops of colour map `name` as drawn on a background `bg` (null: as matplotlib has them).
 * On a dark background a map whose low end is light (Blues; the light centre of RdBu_r) would
 * paint zero cells white: there the map runs from the background instead, so zero is the
 * background and more is brighter (sequential maps reversed after it; a diverging map's centre
 * blended into it). Maps that start dark (viridis, magma) are kept: zero is their start.
 */
function stopsOn(name: string, bg: RGB | null): RGB[] {
  const stops = STOPS[name].map(parseHex);
  if (!bg || luminance(bg) >= 0.2) return stops;
  const last = stops.length - 1;
  const lum = stops.map(luminance);
  const mid = lum[Math.round(last / 2)];
  if (mid > lum[0] + 0.3 && mid > lum[last] + 0.3) {
    // diverging: the light centre becomes the background, the ends keep their colour
    return stops.map((c, i) => {
      const w = (1 - Math.abs((2 * i) / last - 1)) ** 2;
      return c.map((v, j) => Math.round(v * (1 - w) + bg[j] * w)) as RGB;
    });
  }
  if (lum[0] - luminance(bg) < 0.3) return stops;
  return [bg, ...stops.slice().reverse()];
}

/**
 * RGBA lookup table of 256 entries (1024 bytes) for a named colour map, on background `bg`
 * (a CSS colour: a dark one gives the dark-theme table of stopsOn; default: the map itself).
 */
export function lut(name: string, bg?: string | null): Uint8ClampedArray {
  const key = STOPS[name] ? name : SEQUENTIAL_DEFAULT;
  const back = bg ? parseColor(bg) : null;
  const cacheKey = back && luminance(back) < 0.2 ? `${key}|${back.join(",")}` : key;
  const hit = lutCache.get(cacheKey);
  if (hit) return hit;
  const stops = stopsOn(key, back);
  const out = new Uint8ClampedArray(256 * 4);
  const last = stops.length - 1;
  for (let i = 0; i < 256; i++) {
    const pos = (i / 255) * last;
    const k = Math.min(Math.floor(pos), last - 1);
    const f = pos - k;
    for (let c = 0; c < 3; c++) {
      out[4 * i + c] = Math.round(stops[k][c] * (1 - f) + stops[k + 1][c] * f);
    }
    out[4 * i + 3] = 255;
  }
  lutCache.set(cacheKey, out);
  return out;
}

/** Index 0..255 of `v` on a linear sequential scale [vmin, vmax] (clamped; NaN → -1). */
export function seqIndex(v: number, vmin: number, vmax: number): number {
  if (!Number.isFinite(v)) return -1;
  const span = vmax - vmin;
  if (!(span > 0)) return v > vmin ? 255 : 0;
  const t = (v - vmin) / span;
  return t <= 0 ? 0 : t >= 1 ? 255 : Math.round(t * 255);
}

/** Index 0..255 of `v` on a diverging scale symmetric about 0: -vabs → 0, 0 → 127.5, +vabs → 255. */
export function divIndex(v: number, vabs: number): number {
  if (!Number.isFinite(v)) return -1;
  if (!(vabs > 0)) return v > 0 ? 255 : v < 0 ? 0 : 128;
  const t = (v / vabs + 1) / 2;
  return t <= 0 ? 0 : t >= 1 ? 255 : Math.round(t * 255);
}

/** CSS colour of entry `i` of a colour map. */
export function lutColor(name: string, i: number, bg?: string | null): string {
  const t = lut(name, bg);
  const k = Math.max(0, Math.min(255, Math.round(i))) * 4;
  return `rgb(${t[k]}, ${t[k + 1]}, ${t[k + 2]})`;
}

/** Colour of category `i` (tab10, repeating). */
export function categorical(i: number): string {
  return CATEGORICAL[((i % CATEGORICAL.length) + CATEGORICAL.length) % CATEGORICAL.length];
}

/** Black or white, whichever reads better on the colour of LUT entry `i`. */
export function textOn(name: string, i: number, bg?: string | null): string {
  const t = lut(name, bg);
  const k = Math.max(0, Math.min(255, Math.round(i))) * 4;
  return luminance([t[k], t[k + 1], t[k + 2]]) > 0.22 ? "#111" : "#fff";
}

/**
 * Paint `values` into an RGBA pixel buffer through a LUT.
 * `index(v)` maps a value to 0..255, or -1 for "no value" (painted `empty`).
 */
export function paint(
  values: ArrayLike<number>,
  table: Uint8ClampedArray,
  index: (v: number) => number,
  out: Uint8ClampedArray = new Uint8ClampedArray(values.length * 4),
  empty: [number, number, number, number] = [0, 0, 0, 0],
): Uint8ClampedArray {
  for (let i = 0; i < values.length; i++) {
    const k = index(values[i]);
    const o = 4 * i;
    if (k < 0) {
      out[o] = empty[0]; out[o + 1] = empty[1]; out[o + 2] = empty[2]; out[o + 3] = empty[3];
    } else {
      const s = 4 * k;
      out[o] = table[s]; out[o + 1] = table[s + 1]; out[o + 2] = table[s + 2]; out[o + 3] = 255;
    }
  }
  return out;
}
