// The view skeleton every attnkit widget is built on. It owns
//   markup     root (.attnkit .attnkit-<kind>), header (title, controls, status), body,
//              stage (positioned, holds the tooltip), hint line;
//   resizing   the content width of the root, watched with a ResizeObserver: canvases are
//              sized to it, never wider, so no stray scrollbars;
//   coalescing trait changes in one message → one reload (microtask); draws → one per frame;
//   teardown   every listener added through it is removed when the view is removed;
//   keyboard   notebook shortcuts are kept out of the view's controls;
//   theme      colours from CSS variables, redrawn when the notebook's theme changes;
//   fallback   the static picture shown beside the view (lib/fallback.ts) hidden once it drew;
//   kernel     requests to the kernel over custom messages: a link that says what it waits
//              for (`link`), times a request out, and comes back by itself the moment the
//              kernel answers anything (a busy kernel answers late; it never gives up for good);
//              once the kernel is restarted (the widget manager cuts the widget's link) or
//              dies (the manager's kernel connection says "autorestarting" or "dead")
//              the view keeps what it has, says why nothing more comes, and asks nothing;
//   traits     read by the names traits.gen.ts lists for the view's bundle (generated from
//              the Python widget classes; tsc checks every name), every one of them reloads
//              the view but those it handles itself (quiet);
// A view subclasses View, names its bundle, and implements load/layout/draw.

import { Bundle, Trait, TRAITS } from "../traits.gen";
import { Binary } from "./codec";
import { hideStatic } from "./fallback";
import { headLabel } from "./labels";
import { readTheme, Theme, watchTheme } from "./theme";
import { Tooltip } from "./tooltip";

export interface Model {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string | null, cb?: ((...args: any[]) => void) | null): void;
  send?(content: unknown, callbacks?: unknown, buffers?: ArrayBuffer[] | ArrayBufferView[]): void;
}

export interface RenderProps {
  model: Model;
  el: HTMLElement;
}

export interface Reply {
  content: Record<string, any>;
  buffers: Binary[];
}

/** Create an element with a class and optional text (as text, never HTML). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A row that lays out `children` side by side and wraps them under each other when the
 * notebook is too narrow (the views with several canvases: InterventionView, TrainingScrubber). */
export function flexRow(cls: string, gap: number, ...children: HTMLElement[]): HTMLDivElement {
  const row = h("div", cls);
  Object.assign(row.style, { display: "flex", flexWrap: "wrap", gap: `${gap}px`, alignItems: "flex-start" });
  row.append(...children);
  return row;
}

/** The [layer, head] pair of a `selected` trait, or null. */
export function selectedPair(v: unknown): [number, number] | null {
  if (Array.isArray(v) && v.length === 2 && v.every((x) => Number.isInteger(x))) return [v[0], v[1]];
  return null;
}

/** True where no kernel can answer: an exported report says so on <html>. */
export function noKernel(): boolean {
  return typeof document !== "undefined" && document.documentElement.dataset.attnkitKernel === "none";
}

/** The state of a view's link to its kernel (see View.link). */
export type Link = "ok" | "slow" | "lost" | "none";

/** A request the kernel did not answer in time (asked again later), as against its error reply. */
export class KernelTimeout extends Error {
  readonly retry = true;
  constructor(ms: number) {
    super(`the kernel did not answer within ${Math.round(ms / 1000)} s`);
    this.name = "KernelTimeout";
  }
}

/** After this long without an answer the view says it is waiting for the kernel. */
export const SLOW_MS = 1500;

/** Keys that move or change a focused control: the notebook must not act on them. */
const CONTROL_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown", " ", "Enter", "Escape", "-", "+", "=", "0"]);

export abstract class View<B extends Bundle = Bundle> {
  readonly model: Model;
  /** the bundle (and the class attnkit-<kind>) */
  readonly kind: B;
  readonly el: HTMLElement;
  readonly root: HTMLDivElement;
  readonly header: HTMLDivElement;
  readonly title: HTMLDivElement;
  readonly controls: HTMLDivElement;
  readonly status: HTMLDivElement;
  readonly body: HTMLDivElement;
  readonly stage: HTMLDivElement;
  readonly hint: HTMLDivElement;
  readonly tip: Tooltip;
  /** Content width available to the view (CSS px), floor of the root's inner width. */
  width = 0;
  theme: Theme;
  /**
   * The kernel link: "ok" (answering, or nothing asked yet), "slow" (a request has waited
   * over SLOW_MS: the kernel is busy or gone), "lost" (a request timed out: asked again with
   * back-off until the kernel answers), "none" (no kernel can ever answer: an exported page).
   */
  link: Link = noKernel() ? "none" : "ok";
  /** Why this view's kernel will never answer again ("the kernel was restarted", "the kernel died"), or "". */
  kernelGone = "";
  /** performance.now() of the oldest unanswered request since the kernel last answered */
  private silentSince: number | null = null;

  private disposers: (() => void)[] = [];
  private t0 = performance.now();
  private drawQueued = false;
  private reloadQueued = false;
  private disposed = false;
  private nextId = 1;
  private waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout>[] }>();

  constructor({ model, el }: RenderProps, kind: B) {
    this.model = model;
    this.kind = kind;
    this.el = el;
    this.root = h("div", `attnkit attnkit-${kind}`);
    // JupyterLab (Lumino) ignores its shortcuts for key events from inside this element.
    this.root.setAttribute("data-lm-suppress-shortcuts", "true");
    this.header = h("div", "attnkit-header");
    this.title = h("div", "attnkit-title");
    this.controls = h("div", "attnkit-controls");
    this.status = h("div", "attnkit-status");
    this.header.append(this.title, this.controls, this.status);
    this.body = h("div", "attnkit-body");
    this.stage = h("div", "attnkit-stage");
    this.body.appendChild(this.stage);
    this.tip = new Tooltip(this.stage);
    this.hint = h("div", "attnkit-hint");
    this.root.append(this.header, this.body, this.hint);
    el.appendChild(this.root);
    this.root.dataset.link = this.link;
    this.theme = readTheme(this.root);
    // Notebook 7 processes its shortcuts in the capture phase on `document`, before any
    // listener here runs, and Lumino stops looking for a binding only at an element marked
    // data-lm-suppress-shortcuts on the way up from the target; a binding whose selector
    // matches the focused element itself (command mode's "… :focus") is found before the
    // root is reached. So the mark goes on whatever takes the focus inside the view.
    this.listen(this.root, "focusin", (ev) => {
      const t = ev.target as HTMLElement | null;
      if (t && t !== this.root && typeof t.setAttribute === "function") t.setAttribute("data-lm-suppress-shortcuts", "true");
    });
    // Other front ends (classic, VS Code) listen on ancestors: stop control keys here.
    this.listen(this.root, "keydown", (ev) => {
      const e = ev as KeyboardEvent;
      const t = e.target as HTMLElement | null;
      if (t && t !== this.root && (CONTROL_KEYS.has(e.key) || t.tagName === "INPUT")) e.stopPropagation();
    });
  }

  // ----------------------------------------------------------------- the view's part
  /**
   * Traits whose change reloads the data (load, layout, draw): every synced trait of the
   * view's widget but the quiet ones.
   */
  protected traits(): Trait<B>[] {
    const quiet = new Set<string>(this.quiet());
    return (TRAITS[this.kind] as readonly Trait<B>[]).filter((t) => !quiet.has(t));
  }

  /** Traits the view follows itself (a change of them must not reload it). */
  protected quiet(): Trait<B>[] {
    return [];
  }

  /** Read the model's traits into the view's data. */
  protected abstract load(): void;
  /** Compute geometry for `this.width`. */
  protected abstract layout(): void;
  /** Paint everything (called at most once per frame). */
  protected abstract draw(): void;

  // ----------------------------------------------------------------------- lifecycle
  /** Build and draw the first time; returns the teardown anywidget calls on removal. */
  start(): () => void {
    this.measure();
    this.load();
    this.layout();
    this.paint();
    const reload = () => this.reload();
    for (const n of this.traits()) this.onModel(`change:${n}`, reload);
    this.onModel("msg:custom", (content: Record<string, any>, buffers: Binary[]) => this.receive(content, buffers ?? []));
    this.onModel("comm_live_update", () => this.commCut());
    this.watchKernel();
    if (typeof ResizeObserver !== "undefined") {
      // also the moment the view is put on the page: a container (an ipywidgets Box) renders
      // its children detached, where no theme variable can be read yet
      const ro = new ResizeObserver(() => {
        const themed = this.rereadTheme();
        if (this.measure()) {
          this.layout();
          this.redraw();
        } else if (themed) this.redraw();
      });
      ro.observe(this.el);
      this.disposers.push(() => ro.disconnect());
    }
    this.disposers.push(watchTheme(() => {
      this.theme = readTheme(this.root);
      this.themeChanged();
      this.redraw();
    }));
    return () => this.dispose();
  }

  /** Rebuild from the traits once, however many of them changed in this task. */
  reload(): void {
    if (this.reloadQueued) return;
    this.reloadQueued = true;
    queueMicrotask(() => {
      this.reloadQueued = false;
      if (this.disposed) return;
      this.load();
      this.layout();
      this.redraw();
    });
  }

  /** Draw once on the next animation frame. */
  redraw(): void {
    if (this.drawQueued || this.disposed) return;
    this.drawQueued = true;
    requestAnimationFrame(() => {
      this.drawQueued = false;
      if (!this.disposed) this.paint();
    });
  }

  /** Read the theme again; true (after themeChanged) when it differs from the one in use. */
  private rereadTheme(): boolean {
    if (!this.root.isConnected) return false;
    const theme = readTheme(this.root);
    if (JSON.stringify(theme) === JSON.stringify(this.theme)) return false;
    this.theme = theme;
    this.themeChanged();
    return true;
  }

  /** Called after the theme changed, before the redraw (views drop cached bitmaps here). */
  protected themeChanged(): void {}

  private paint(): void {
    this.draw();
    // a tooltip describes what is under the pointer now, not before a click, a key or new data
    if (this.hovered && this.tip.el.style.display !== "none") this.hovered.fn(this.hovered.ev);
    const n = Number(this.root.dataset.drawn ?? "0") + 1;
    this.root.dataset.drawn = String(n);
    if (n === 1) this.root.dataset.firstDrawMs = (performance.now() - this.t0).toFixed(2);
    // until found (its output may be attached a little after the view's first draw), and
    // not past the first draws: a view shown without a picture (marimo, a container) stops looking
    if (!this.staticHidden && n <= 20 && typeof document !== "undefined") this.staticHidden = hideStatic(this.model.get("_static_key")) > 0;
  }

  private staticHidden = false;

  /** Update `width`; true when it changed. */
  private measure(): boolean {
    const cs = typeof getComputedStyle !== "undefined" ? getComputedStyle(this.root) : null;
    const pad = cs ? parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight) : 0;
    const inner = this.root.clientWidth - (Number.isFinite(pad) ? pad : 0);
    const w = inner > 0 ? Math.floor(inner) : 0;
    if (w === this.width) return false;
    this.width = w;
    return true;
  }

  /** Width to lay out for: the content width, or `fallback` before the page is laid out. */
  avail(fallback: number): number {
    return this.width > 0 ? this.width : fallback;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const d of this.disposers.splice(0)) d();
    for (const w of this.waiting.values()) for (const t of w.timer) clearTimeout(t);
    this.waiting.clear();
  }

  // ---------------------------------------------------------------------- listeners
  /** addEventListener, removed on teardown. */
  listen(target: EventTarget, type: string, fn: (ev: Event) => void, opts?: AddEventListenerOptions): void {
    target.addEventListener(type, fn, opts);
    this.disposers.push(() => target.removeEventListener(type, fn, opts));
  }

  /**
   * Hover on `target` through `fn` (it shows or hides the tooltip). The last pointer event is
   * kept and `fn` runs again after every draw while the tooltip shows, so a click, a key, a
   * toggle or the kernel's new data never leaves it describing what was drawn before.
   */
  hoverable(target: HTMLElement, fn: (ev: PointerEvent) => void): void {
    this.listen(target, "pointermove", (e) => {
      this.hovered = { ev: e as PointerEvent, fn };
      fn(e as PointerEvent);
    });
    this.listen(target, "pointerleave", () => {
      this.hovered = null;
      this.tip.hide();
    });
  }

  /** Forget the pointer and hide the tooltip (the keyboard moved the view's focus elsewhere). */
  unhover(): void {
    this.hovered = null;
    this.tip.hide();
  }

  private hovered: { ev: PointerEvent; fn: (ev: PointerEvent) => void } | null = null;

  /** model.on, removed on teardown. */
  onModel(event: string, cb: (...args: any[]) => void): void {
    this.model.on(event, cb);
    this.disposers.push(() => this.model.off(event, cb));
  }

  /** The value of trait `name` of the view's widget. */
  get(name: Trait<B>): any {
    return this.model.get(name);
  }

  /** Set traits and send them to the kernel. */
  save(changes: Partial<Record<Trait<B>, unknown>>): void {
    for (const [k, v] of Object.entries(changes)) this.model.set(k, v);
    this.model.save_changes();
  }

  /**
   * Wheel zoom on `target` as map widgets do it: only with Ctrl/⌘ held (trackpad pinches
   * send that too) or after a click inside it, until the pointer leaves the view or Escape;
   * otherwise the page scrolls on and the hint line flashes to say how to zoom.
   */
  wheelZoom(target: HTMLElement, inside: (ev: MouseEvent) => boolean, zoom: (factor: number, ev: WheelEvent) => void): void {
    const setActive = (on: boolean) => {
      this.zoomActive = on;
      this.root.dataset.wheel = on ? "zoom" : "";
    };
    this.listen(target, "pointerdown", (e) => {
      const ev = e as PointerEvent;
      if (ev.button === 0 && inside(ev)) setActive(true);
    });
    this.listen(this.root, "pointerleave", () => setActive(false));
    this.listen(target, "keydown", (e) => {
      if ((e as KeyboardEvent).key === "Escape") setActive(false);
    });
    this.listen(target, "wheel", (e) => {
      const ev = e as WheelEvent;
      if (!inside(ev)) return;
      if (!(this.zoomActive || ev.ctrlKey || ev.metaKey)) {
        this.hint.classList.add("attnkit-hint-flash");
        if (this.hintTimer) clearTimeout(this.hintTimer);
        this.hintTimer = setTimeout(() => this.hint.classList.remove("attnkit-hint-flash"), 1200);
        return; // the notebook scrolls on
      }
      ev.preventDefault();
      zoom(Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.002)), ev);
    }, { passive: false });
  }

  /**
   * For a `target` that zooms on the wheel by itself (a plotting library's canvas): the same
   * rule as wheelZoom. Until a click inside it (or with Ctrl/⌘), wheel events are stopped on
   * their way down (capture, on its parent) so the page scrolls on and the hint flashes.
   */
  wheelGate(target: HTMLElement): void {
    const parent = target.parentElement ?? this.root;
    const setActive = (on: boolean) => {
      this.zoomActive = on;
      this.root.dataset.wheel = on ? "zoom" : "";
    };
    this.listen(target, "pointerdown", (e) => {
      if ((e as PointerEvent).button === 0) setActive(true);
    });
    this.listen(this.root, "pointerleave", () => setActive(false));
    this.listen(target, "keydown", (e) => {
      if ((e as KeyboardEvent).key === "Escape") setActive(false);
    });
    this.listen(parent, "wheel", (e) => {
      const ev = e as WheelEvent;
      if (ev.target !== target || this.zoomActive || ev.ctrlKey || ev.metaKey) return;
      ev.stopPropagation(); // the target never sees it; nothing prevents the page's scroll
      this.hint.classList.add("attnkit-hint-flash");
      if (this.hintTimer) clearTimeout(this.hintTimer);
      this.hintTimer = setTimeout(() => this.hint.classList.remove("attnkit-hint-flash"), 1200);
    }, { capture: true });
  }

  /**
   * Keep Shift + press on `target` from the notebook: JupyterLab and Notebook 7 take it as
   * the start of a cell-range selection and then swallow every mouse move and the release
   * (capture, on `document`), so a lasso drawn there never sees the pointer.
   */
  keepShiftDrag(target: HTMLElement): void {
    for (const type of ["mousedown", "pointerdown"]) {
      this.listen(target, type, (e) => {
        if ((e as MouseEvent).shiftKey) e.stopPropagation();
      });
    }
  }

  private zoomActive = false;
  private hintTimer: ReturnType<typeof setTimeout> | null = null;

  /** A button in the header's controls. */
  button(text: string, tip: string, onClick: () => void, cls = "attnkit-btn"): HTMLButtonElement {
    const b = h("button", cls, text);
    b.type = "button";
    b.title = tip;
    if ([...text].length <= 2) b.setAttribute("aria-label", tip); // symbols (‹ › + −) get a name
    this.listen(b, "click", onClick);
    return b;
  }

  // ------------------------------------------------------------------------- kernel
  /** True while no kernel answers (timed out, or none can: an exported page). */
  get kernelMissing(): boolean {
    return this.link === "lost" || this.link === "none";
  }

  /** Seconds the kernel has not answered a request (0 when it is answering). */
  silentSeconds(): number {
    return this.silentSince === null ? 0 : (performance.now() - this.silentSince) / 1000;
  }

  /** The link changed (views redraw their status here). */
  protected linkChanged(): void {
    this.redraw();
  }

  /** The kernel answered after a silence: views ask again for what they lacked. */
  protected kernelBack(): void {}

  /**
   * The widget's link to its kernel was cut. ipywidgets' managers (JupyterLab, Notebook 7,
   * Voila) set a model's `comm_live` (whose change is this event) true only while creating it,
   * before any view, and false when its kernel restarts: the old kernel's models are gone for
   * good (the new kernel knows none of them). Unanswered requests fail, nothing more is asked
   * or taken in, and the views say why (link "none").
   */
  private commCut(why = "the kernel was restarted"): void {
    if (this.kernelGone) return;
    this.kernelGone = why;
    this.root.dataset.kernel = "gone";
    for (const w of this.waiting.values()) {
      for (const t of w.timer) clearTimeout(t);
      w.reject(new Error(this.kernelGone));
    }
    this.waiting.clear();
    this.silentSince = null;
    this.setLink("none");
  }

  /**
   * A kernel that dies (its process killed, out of memory) is not restarted by the user, so
   * the widget manager cuts no link: its views would learn it only when requests time out.
   * The manager's kernel connection (JupyterLab, Notebook 7, Voila: anywidget hands the
   * manager on as `model.widget_manager`) says so the moment the server notices (its restarter
   * polls every few seconds): "autorestarting" (a fresh kernel that knows none of this view's
   * widgets) or "dead". Either cuts the link as a restart does.
   */
  private watchKernel(): void {
    const signal = kernelStatus(this.model);
    if (!signal) return;
    const onStatus = (_kernel: unknown, status: unknown) => {
      if (status === "autorestarting" || status === "dead") this.commCut("the kernel died");
    };
    try {
      signal.connect(onStatus, this);
      this.disposers.push(() => signal.disconnect(onStatus, this));
    } catch {
      /* another manager's signal: requests still time out */
    }
  }

  private setLink(link: Link): void {
    if (link === this.link) return;
    const was = this.link;
    this.link = link;
    this.root.dataset.link = link;
    if (link === "ok") this.silentSince = null;
    if (link === "ok" && (was === "lost" || was === "slow")) this.kernelBack();
    this.linkChanged();
  }

  /**
   * Ask the kernel (custom message `content`); resolves with its reply, rejects with a
   * KernelTimeout after `timeoutMs` (ask again later: a busy kernel answers once its cell
   * ends) or at once where no kernel can ever answer (an exported page).
   */
  request(content: Record<string, unknown>, timeoutMs = 8000): Promise<Reply> {
    if (this.link === "none" || !this.model.send) {
      this.setLink("none");
      return Promise.reject(new Error("no kernel"));
    }
    const id = this.nextId++;
    if (this.silentSince === null) this.silentSince = performance.now();
    return new Promise<Reply>((resolve, reject) => {
      const slow = setTimeout(() => {
        if (this.waiting.has(id) && this.link === "ok") this.setLink("slow");
      }, Math.min(SLOW_MS, timeoutMs));
      const timer = setTimeout(() => {
        clearTimeout(slow);
        this.waiting.delete(id);
        this.setLink("lost");
        reject(new KernelTimeout(timeoutMs));
      }, timeoutMs);
      this.waiting.set(id, { resolve, reject, timer: [timer, slow] });
      try {
        this.model.send!({ ...content, id });
      } catch (err) {
        clearTimeout(timer);
        clearTimeout(slow);
        this.waiting.delete(id);
        this.setLink("lost");
        reject(new KernelTimeout(0));
      }
    });
  }

  private receive(content: Record<string, any>, buffers: Binary[]): void {
    if (this.kernelGone) return; // the view stays as it was when its kernel went
    if (content?.type === "push") {
      this.pushed(content, buffers);
      return;
    }
    // Any reply, even to a request that timed out long ago, says the kernel answers again.
    const w = this.waiting.get(content?.id);
    if (w) {
      for (const t of w.timer) clearTimeout(t);
      this.waiting.delete(content.id);
    }
    if (this.waiting.size === 0) this.silentSince = null;
    this.setLink("ok");
    if (!w) return;
    if (content.error) w.reject(new Error(String(content.error)));
    else w.resolve({ content, buffers });
  }

  /** A message the kernel sent unasked (`{type: "push", ...}`: progress of a computation). */
  protected pushed(_content: Record<string, any>, _buffers: Binary[]): void {}
}

/**
 * A view where a click picks a head: `selected` is [layer, head] (0-indexed) or []. The status
 * line says which head is selected; a change of `selected` (from Python or a linked view) redraws.
 * HeadMap, HeadGrid, ClusterView and every mode of FlowView pick heads through it.
 */
/** A Lumino signal as JupyterLab's kernel connection offers it (`statusChanged`). */
interface StatusSignal {
  connect(slot: (sender: unknown, status: unknown) => void, thisArg?: unknown): unknown;
  disconnect(slot: (sender: unknown, status: unknown) => void, thisArg?: unknown): unknown;
}

/** The `statusChanged` signal of the kernel behind a widget model, or null where the front
 * end offers none (a report, marimo, the test page's stand-in model). */
export function kernelStatus(model: Model): StatusSignal | null {
  try {
    const signal = (model as { widget_manager?: { kernel?: { statusChanged?: unknown } | null } }).widget_manager?.kernel?.statusChanged as StatusSignal | undefined;
    return signal && typeof signal.connect === "function" && typeof signal.disconnect === "function" ? signal : null;
  } catch {
    return null;
  }
}

/** The bundles whose widget has a `selected` head. */
export type PickerBundle = { [B in Bundle]: "selected" extends Trait<B> ? B : never }[Bundle];

export abstract class HeadPickerView<B extends PickerBundle = PickerBundle> extends View<B> {
  constructor(props: RenderProps, kind: B) {
    super(props, kind);
    this.onModel("change:selected", () => {
      this.showSelection();
      this.redraw();
    });
  }

  protected quiet(): Trait<B>[] {
    return ["selected" as Trait<B>];
  }

  /** The selected head, or null. */
  selection(): [number, number] | null {
    return selectedPair(this.get("selected" as Trait<B>));
  }

  /** Select head (layer, head) and tell the kernel, with any `also` changes in the same message. */
  pick(layer: number, head: number, also: Record<string, unknown> = {}): void {
    this.save({ selected: [layer, head], ...also } as Partial<Record<Trait<B>, unknown>>);
    this.showSelection();
    this.redraw();
  }

  /** Say which head is selected in the status line (views with more to say there override it). */
  showSelection(): void {
    this.status.textContent = this.selectionText() || "no head selected";
  }

  /** "selected L-H", or "" when no head is selected. */
  protected selectionText(): string {
    const sel = this.selection();
    return sel ? `selected ${headLabel(sel[0], sel[1])}` : "";
  }
}

/** The anywidget module of a view class. */
export function mount<B extends Bundle>(make: (props: RenderProps) => View<B>): { render: (props: RenderProps) => () => void } {
  return { render: (props) => make(props).start() };
}
