// Pointer handling shared by the layer × head grids (HeadGrid, HeadMap): hover read-out in a
// tooltip, a hovered cell to ring, click to select.

import { localPoint } from "./canvas";
import { gridHit, GridLayout } from "./layout";
import { Row, Tooltip } from "./tooltip";
import { View } from "./view";

export interface GridPointerOptions {
  canvas: HTMLCanvasElement;
  /** the positioned element the tooltip lives in */
  stage: HTMLElement;
  tip: Tooltip;
  /** the current layout (it changes with the data and the width) */
  layout: () => GridLayout;
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

export function bindGridPointer(v: View, o: GridPointerOptions): GridPointer {
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
    const hit = gridHit(o.layout(), x, y);
    if (hit) {
      const [title, rows] = o.describe(hit[0], hit[1]);
      const [sx, sy] = localPoint(o.stage, ev);
      o.tip.show(sx, sy, title, rows);
    } else {
      o.tip.hide();
    }
    setHover(hit);
  });
  v.listen(o.canvas, "pointerleave", () => {
    o.tip.hide();
    setHover(null);
  });
  v.listen(o.canvas, "click", (e) => {
    const ev = e as MouseEvent;
    const [x, y] = localPoint(o.canvas, ev);
    const hit = gridHit(o.layout(), x, y);
    if (hit) o.select(hit[0], hit[1]);
  });
  return { hovered: () => hover, reset: () => { hover = null; } };
}
