// The part of anywidget's model interface the views use, and small shared view plumbing.

export interface Model {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string | null, cb?: ((...args: any[]) => void) | null): void;
}

export interface RenderProps {
  model: Model;
  el: HTMLElement;
}

/** Subscribe to `change:<name>` for each name; returns an unsubscribe function. */
export function onChange(model: Model, names: string[], cb: () => void): () => void {
  for (const n of names) model.on(`change:${n}`, cb);
  return () => {
    for (const n of names) model.off(`change:${n}`, cb);
  };
}

/** Coalesce redraw requests into one per animation frame. */
export function scheduler(draw: () => void): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      draw();
    });
  };
}

/** Width available to the view: the element's width, or a default before it is laid out. */
export function availableWidth(el: HTMLElement, fallback: number): number {
  const w = el.clientWidth;
  return w > 0 ? w : fallback;
}

/** Call `cb` when the element's width changes (after the first layout). */
export function watchWidth(el: HTMLElement, cb: () => void): () => void {
  if (typeof ResizeObserver === "undefined") return () => {};
  let last = el.clientWidth;
  const ro = new ResizeObserver(() => {
    const w = el.clientWidth;
    if (w !== last) {
      last = w;
      cb();
    }
  });
  ro.observe(el);
  return () => ro.disconnect();
}

/** Create an element with a class and optional text (as text, never HTML). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Record that a full draw finished: the count of draws and the time since `t0` (ms). */
export function markDrawn(root: HTMLElement, t0: number): void {
  const n = Number(root.dataset.drawn ?? "0") + 1;
  root.dataset.drawn = String(n);
  if (n === 1) root.dataset.firstDrawMs = (performance.now() - t0).toFixed(2);
}

/** The [layer, head] pair of a `selected` trait, or null. */
export function selectedPair(v: unknown): [number, number] | null {
  if (Array.isArray(v) && v.length === 2 && v.every((x) => Number.isInteger(x))) return [v[0], v[1]];
  return null;
}

/** Wrap `fn` so that many calls in the same task run it once (traits change together). */
export function coalesce(fn: () => void): () => void {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      fn();
    });
  };
}
