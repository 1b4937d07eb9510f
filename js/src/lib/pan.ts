// Drag to pan, as the zoomable views (Heatmap, ClusterView) do it: a press with the main
// button starts a drag where the view says one may start; moves past DRAG_PX pan (the cursor
// turns to a grabbing hand) and otherwise count as hovering; the click that ends a drag
// selects nothing. Listeners go through the view, so teardown removes them.

import { View } from "./view";

/** How far (|dx| + |dy|, CSS px) the pointer must move before a press becomes a drag. */
export const DRAG_PX = 3;

export interface PanOptions<S> {
  /** A press at `ev`: the state a drag starts from (the view's window), or null for no drag. */
  start: (ev: PointerEvent) => S | null;
  /**
   * The pointer is (dx, dy) CSS px from where the drag started; `moved` once it went past
   * DRAG_PX. True when the view handled it as a drag (it is then no hover).
   */
  move: (start: S, dx: number, dy: number, moved: boolean, ev: PointerEvent) => boolean;
  /** A pointer move that is not a drag. */
  hover: (ev: PointerEvent) => void;
  /** A drag that moved has ended (optional). */
  end?: (start: S) => void;
}

export interface Pan {
  /** True while a press is held. */
  active: () => boolean;
  /** True when the last press moved (the click that ends it should select nothing). */
  dragged: () => boolean;
}

export function bindPan<S>(v: View, el: HTMLElement, o: PanOptions<S>): Pan {
  let drag: { x: number; y: number; start: S; moved: boolean } | null = null;
  let dragged = false;
  v.listen(el, "pointerdown", (e) => {
    const ev = e as PointerEvent;
    if (ev.button !== 0) return;
    const start = o.start(ev);
    if (start === null) return;
    drag = { x: ev.clientX, y: ev.clientY, start, moved: false };
    el.setPointerCapture?.(ev.pointerId);
  });
  v.listen(el, "pointermove", (e) => {
    const ev = e as PointerEvent;
    if (drag) {
      const dx = ev.clientX - drag.x;
      const dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > DRAG_PX) drag.moved = true;
      if (o.move(drag.start, dx, dy, drag.moved, ev)) {
        if (drag.moved) el.style.cursor = "grabbing";
        return;
      }
    }
    o.hover(ev);
  });
  const end = () => {
    dragged = Boolean(drag?.moved);
    const was = drag;
    drag = null;
    if (was?.moved) o.end?.(was.start);
    el.style.cursor = "";
  };
  v.listen(el, "pointerup", end);
  v.listen(el, "pointercancel", end);
  return { active: () => drag !== null, dragged: () => dragged };
}
