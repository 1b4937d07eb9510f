// Legends: colour bars drawn on a canvas (text via fillText: never HTML) and the HTML legend
// beside a view (text via textContent).

import { lut } from "./colors";
import { FONT_SMALL } from "./canvas";
import { fitText, formatValue } from "./labels";
import { Theme } from "./theme";
import { h } from "./view";

/**
 * An HTML legend: a title, then one swatch (a dot, or a line for edges) and its text per
 * `[colour, text]` item, replacing what `box` held. Texts are set as text, never HTML.
 */
export function legendItems(box: HTMLElement, title: string, items: [string, string][], swatch: "dot" | "line" = "dot"): void {
  box.replaceChildren(h("div", "attnkit-legend-title", title));
  for (const [color, text] of items) {
    const it = h("div", "attnkit-legend-item");
    const sw = h("span", swatch === "line" ? "attnkit-swatch-line" : "attnkit-swatch");
    sw.style.background = color;
    it.append(sw, h("span", "", text));
    box.appendChild(it);
  }
}

/** A vertical colour bar at (x, y) of size w×h: top = `hi`, bottom = `lo`; `mid` optional tick. */
export function colorBarV(
  ctx: CanvasRenderingContext2D, theme: Theme, cmap: string, x: number, y: number, w: number, h: number,
  lo: number, hi: number, mid?: number, title?: string,
): void {
  const t = lut(cmap, theme.bg);
  for (let i = 0; i < h; i++) {
    const k = Math.round((1 - i / Math.max(1, h - 1)) * 255) * 4;
    ctx.fillStyle = `rgb(${t[k]},${t[k + 1]},${t[k + 2]})`;
    ctx.fillRect(x, y + i, w, 1.5);
  }
  ctx.strokeStyle = theme.faint;
  ctx.lineWidth = 0.5;
  ctx.strokeRect(x, y, w, h);
  ctx.fillStyle = theme.muted;
  ctx.font = FONT_SMALL;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  ctx.fillText(formatValue(hi), x + w + 4, y + 4);
  ctx.fillText(formatValue(lo), x + w + 4, y + h - 4);
  if (mid !== undefined && Number.isFinite(mid) && hi > lo) {
    const my = y + ((hi - mid) / (hi - lo)) * h;
    ctx.fillText(formatValue(mid), x + w + 4, my);
  }
  if (title) {
    // Short titles sit above the bar; long ones run down its right side.
    if (ctx.measureText(title).width <= 56) {
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      ctx.fillText(title, x, y - 4);
    } else {
      ctx.save();
      ctx.translate(x + w + 50, y);
      ctx.rotate(Math.PI / 2);
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      ctx.fillText(title, 0, 0);
      ctx.restore();
    }
  }
}

/**
 * A horizontal colour bar at (x, y) of size w×h: left = `lo`, right = `hi`, then the title.
 * With `right` (the canvas edge), the bar moves left and narrows (down to 40 px) so that the
 * title ends before it, and only a title that still does not fit is shortened (with "…").
 */
export function colorBarH(
  ctx: CanvasRenderingContext2D, theme: Theme, cmap: string, x: number, y: number, w: number, h: number,
  lo: number, hi: number, title?: string, right?: number,
): void {
  ctx.font = FONT_SMALL;
  let text = title ? `${formatValue(hi)}  ${title}` : formatValue(hi);
  if (right !== undefined) {
    const loRoom = ctx.measureText(formatValue(lo)).width + 6;
    const over = x + w + 4 + ctx.measureText(text).width - right;
    if (over > 0) {
      const shift = Math.min(over, Math.max(0, x - loRoom));
      x -= shift;
      w = Math.max(40, w - (over - shift));
      text = fitText(ctx, text, right - (x + w + 4));
    }
  }
  const t = lut(cmap, theme.bg);
  for (let i = 0; i < w; i++) {
    const k = Math.round((i / Math.max(1, w - 1)) * 255) * 4;
    ctx.fillStyle = `rgb(${t[k]},${t[k + 1]},${t[k + 2]})`;
    ctx.fillRect(x + i, y, 1.5, h);
  }
  ctx.strokeStyle = theme.faint;
  ctx.lineWidth = 0.5;
  ctx.strokeRect(x, y, w, h);
  ctx.fillStyle = theme.muted;
  ctx.font = FONT_SMALL;
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  ctx.fillText(formatValue(lo), x - 4, y + h / 2);
  ctx.textAlign = "left";
  ctx.fillText(text, x + w + 4, y + h / 2);
}
