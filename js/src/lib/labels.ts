// Token and head labels. Everything here returns plain strings; callers put them in the DOM
// with textContent or draw them with fillText, never as HTML.

/** "L-H", 1-indexed, for 0-indexed layer and head (the papers' convention). */
export function headLabel(layer: number, head: number): string {
  return `${layer + 1}-${head + 1}`;
}

/**
 * A token as it should be shown: tokenizer space markers made visible but quiet ("Ġthe" →
 * "·the", "▁the" → "·the"), control characters and raw whitespace escaped, so an empty or
 * blank token still shows something.
 */
export function displayToken(tok: string): string {
  let s = String(tok ?? "");
  s = s.replace(/^[\u0120\u2581]/, "\u00b7");
  s = s.replace(/\n/g, "\\n").replace(/\t/g, "\\t").replace(/\r/g, "\\r");
  // eslint-disable-next-line no-control-regex
  s = s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  if (s === "") return "\u2205"; // ∅
  if (/^\s+$/.test(s)) return s.replace(/ /g, "\u2423"); // ␣
  return s;
}

/** `s` cut to at most `max` characters (code points), with an ellipsis when cut. */
export function truncate(s: string, max: number): string {
  const cps = Array.from(s);
  if (cps.length <= max) return s;
  return cps.slice(0, Math.max(1, max - 1)).join("") + "\u2026";
}

/** `s` shortened with an ellipsis until it is at most `width` wide in the context's font. */
export function fitText(ctx: Pick<CanvasRenderingContext2D, "measureText">, s: string, width: number): string {
  if (ctx.measureText(s).width <= width) return s;
  const cps = Array.from(s);
  let lo = 1;
  let hi = cps.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(cps.slice(0, mid).join("") + "\u2026").width <= width) lo = mid;
    else hi = mid - 1;
  }
  return cps.slice(0, lo).join("") + "\u2026";
}

/**
 * Label every `stride`-th position so that labels `cellPx` apart are at least `minPx`
 * apart on screen. Returns 1 when every label fits.
 */
export function labelStride(cellPx: number, minPx: number): number {
  if (!(cellPx > 0)) return Number.MAX_SAFE_INTEGER;
  if (cellPx >= minPx) return 1;
  const raw = Math.ceil(minPx / cellPx);
  // Round up to 1, 2, 5 × 10^k so the labelled positions are easy to count.
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/** A number for a tooltip: 3 significant digits, no exponent for ordinary magnitudes. */
export function formatValue(v: number): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "n/a" : String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
  const digits = Math.max(0, 2 - Math.floor(Math.log10(a)));
  return v.toFixed(Math.min(digits, 4));
}
