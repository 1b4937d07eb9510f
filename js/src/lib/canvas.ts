// Hi-DPI canvas helpers.

/** Resize `canvas` to `w`×`h` CSS pixels at the device pixel ratio; return a context in CSS units. */
export function sizeCanvas(canvas: HTMLCanvasElement, w: number, h: number, dpr = window.devicePixelRatio || 1): CanvasRenderingContext2D {
  const ratio = Math.max(1, Math.min(dpr, 3));
  const pw = Math.max(1, Math.round(w * ratio));
  const ph = Math.max(1, Math.round(h * ratio));
  if (canvas.width !== pw) canvas.width = pw;
  if (canvas.height !== ph) canvas.height = ph;
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error("canvas 2d context unavailable");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}

/** An offscreen canvas holding RGBA pixels `rgba` of size w×h (one pixel per cell). */
export function bitmap(rgba: Uint8ClampedArray, w: number, h: number): HTMLCanvasElement {
  const c = document.createElement("canvas");
  c.width = Math.max(1, w);
  c.height = Math.max(1, h);
  const ctx = c.getContext("2d");
  if (!ctx) throw new Error("canvas 2d context unavailable");
  if (w > 0 && h > 0) {
    const img = new ImageData(new Uint8ClampedArray(rgba.buffer as ArrayBuffer, rgba.byteOffset, w * h * 4), w, h);
    ctx.putImageData(img, 0, 0);
  }
  return c;
}

/** Pointer position in CSS pixels relative to the element's top-left corner. */
export function localPoint(el: Element, ev: MouseEvent): [number, number] {
  const r = el.getBoundingClientRect();
  return [ev.clientX - r.left, ev.clientY - r.top];
}

export const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
export const FONT_SMALL = '10px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
