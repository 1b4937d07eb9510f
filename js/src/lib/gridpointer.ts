// Pointer handling of every canvas where a head is picked (HeadGrid, HeadMap, the flow view's
// head glyphs and its collection's wedges): hover read-out in a tooltip, a hovered head to ring
// (the cursor says it can be clicked), click to select.

import { localPoint } from "./canvas";
import { Row, Tooltip } from "./tooltip";
import { View } from "./view";

export interface GridPointerOptions {
  canvas: HTMLCanvasElement;
  /** the positioned element the tooltip lives in */
  stage: HTMLElement;
  tip: Tooltip;
  /** the (row, col) under canvas point (x, y), or null (e.g. gridHit on the current layout) */
  hit: (x: number, y: number) => [number, number] | null;
  /** tooltip title and rows of cell (row, col) */
  describe: (row: number, col: number) => [string, Row[]];
  select: (row: number, col: number) => void;
  /** called when the hovered cell changes */
  redraw: () => void;
}

export interface GridPointer {
  hovered: () => [number, number] | null;
  /** forget the hovered cell (after a data change) without redrawing */
  reset: () => void;
}

export function bindGridPointer(v: View<any>, o: GridPointerOptions): GridPointer {
  let hover: [number, number] | null = null;
  const setHover = (hit: [number, number] | null) => {
    const same = hover && hit && hover[0] === hit[0] && hover[1] === hit[1];
    if (!same && (hover || hit)) {
      hover = hit;
      o.redraw();
    }
  };
  v.listen(o.canvas, "pointermove", (e) => {
    const ev = e as PointerEvent;
    const [x, y] = localPoint(o.canvas, ev);
    const hit = o.hit(x, y);
    if (hit) {
      const [title, rows] = o.describe(hit[0], hit[1]);
      const [sx, sy] = localPoint(o.stage, ev);
      o.tip.show(sx, sy, title, rows);
    } else {
      o.tip.hide();
    }
    o.canvas.style.cursor = hit ? "pointer" : "";
    setHover(hit);
  });
  v.listen(o.canvas, "pointerleave", () => {
    o.tip.hide();
    setHover(null);
  });
  v.listen(o.canvas, "click", (e) => {
    const ev = e as MouseEvent;
    const [x, y] = localPoint(o.canvas, ev);
    const hit = o.hit(x, y);
    if (hit) o.select(hit[0], hit[1]);
  });
  return { hovered: () => hover, reset: () => { hover = null; } };
}
