// QKScatter: the queries and keys of one head (or every head as small multiples) in one
// picture, drawn with WebGL by regl-scatterplot, so a million points pan and zoom smoothly.
// Points arrive as binary traits (float16 positions in [-1, 1], uint8 colour codes; in the
// matrix view the points come panel by panel and `panels` counts them). While the camera
// moves, frames that are slow to draw in full (software WebGL, a million points) are the last
// exact frame moved and scaled (lib/motion.ts); the points are drawn again once it rests.
// Hover asks the kernel for the token in its sentence (offline, the tooltip says what the
// colour means); Shift + drag lassoes points (synced to Python as
// `selection`); a click sets `clicked` (the kernel opens the head in the matrix view, or
// shows the sentence's map in a linked Heatmap). Keyboard: + / − zoom, arrows pan, 0 fits,
// M toggles the matrix, Enter opens the marked head (nearest the centre), Escape clears the selection.

import createScatterplot, { createRenderer } from "regl-scatterplot";
import { readArray, readFloats, WireArray } from "./lib/codec";
import { headLabel } from "./lib/labels";
import { legendItems } from "./lib/legend";
import { camOf, MotionFrames, settleOnPress } from "./lib/motion";
import { layoutPoints, nearestPanel, panelBox } from "./lib/qkpoints";
import { h, mount, RenderProps, View } from "./lib/view";

type Scatter = ReturnType<typeof createScatterplot>;
type Renderer = ReturnType<typeof createRenderer>;

/** Marks and measures of the first draw's parts (the last of each name kept). */
function mark(name: string): void {
  if (typeof performance.mark !== "function") return;
  performance.clearMarks(name);
  performance.mark(name);
}

/** performance.measure of `name` from mark `from` to now. */
function measure(name: string, from: string): number {
  if (typeof performance.measure !== "function") return 0;
  try {
    performance.clearMeasures(name);
    return performance.measure(name, from).duration;
  } catch {
    return 0;
  }
}

class QKScatterView extends View<"qkscatter"> {
  private canvas = h("canvas", "attnkit-canvas attnkit-qk-canvas");
  private legend = h("div", "attnkit-legend");
  private labels = h("div", "attnkit-qk-labels");
  private colorSelect = h("select", "attnkit-select");
  private modeBtn = this.button("matrix", "show every head as small multiples (M)", () => this.toggleMode(), "attnkit-btn attnkit-btn-text");
  private sp: Scatter | null = null;
  private renderer: Renderer | null = null;
  private perfMode = false;
  private lookKey = "";
  private queue: Promise<unknown> = Promise.resolve();
  private motion: MotionFrames | null = null;
  /** ticks the plot's camera as a press arrives (lib/motion.ts: a click must not pan) */
  private settlePress: (() => void) | null = null;
  private size = 0;
  private n = 0;
  private heads: number[][] = [];
  private matrix = false;
  private hoverToken = 0;
  private selfSelect = false;

  constructor(props: RenderProps) {
    super(props, "qkscatter");
    this.body.classList.add("attnkit-row");
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    this.stage.append(this.canvas, this.labels);
    this.body.appendChild(this.legend);
    const zoom = h("span", "attnkit-zoom");
    zoom.append(
      this.button("+", "zoom in (+)", () => this.zoomBy(0.5)),
      this.button("\u2212", "zoom out (\u2212)", () => this.zoomBy(2)),
      this.button("Fit", "show every point (0)", () => this.sp?.zoomToOrigin(), "attnkit-btn attnkit-btn-text"),
    );
    this.colorSelect.title = "colour points by";
    this.colorSelect.setAttribute("aria-label", "colour points by");
    this.listen(this.colorSelect, "change", () => this.save({ color_by: this.colorSelect.value }));
    this.controls.append(this.colorSelect, this.modeBtn, zoom);
    this.hint.textContent = "Click, then scroll to zoom (or Ctrl + scroll) \u00b7 drag to pan \u00b7 hover a point for its token in its sentence \u00b7 Shift + drag to lasso \u00b7 click a query to see its sentence's map (matrix: click a head to open it) \u00b7 keys: + \u2212 arrows 0 M, Enter opens the marked head \u00b7 heads counted from 1, positions from 0";
    this.listen(this.canvas, "keydown", (e) => this.key(e as KeyboardEvent));
    this.wheelGate(this.canvas);
    // before the camera's own mousedown listener (on the canvas): the pointer's way so far is no drag
    this.listen(this.stage, "mousedown", (e) => {
      if (e.target === this.canvas) this.settlePress?.();
    }, { capture: true });
    this.keepShiftDrag(this.canvas);
    this.onModel("change:selection", () => this.followSelection());
  }

  protected quiet(): ("selection" | "clicked")[] {
    return ["selection", "clicked"];
  }

  protected load(): void {
    this.title.textContent = (this.get("title") as string) || "Queries and keys";
    mark("qk:load");
    const pts = readFloats(this.get("points") as WireArray);
    const codes = readArray(this.get("codes") as WireArray).data as Uint8Array;
    const panelsWire = this.get("panels") as WireArray;
    this.matrix = this.get("mode") === "matrix";
    this.heads = (this.get("panel_heads") as number[][]) ?? [];
    const counts = this.matrix && panelsWire && panelsWire.dtype ? (readArray(panelsWire).data as Uint32Array) : null;
    measure("qk decode", "qk:load");
    mark("qk:layout");
    const { x, y } = layoutPoints(pts, counts, this.heads);
    measure("qk layout", "qk:layout");
    this.n = x.length;
    const cats = (this.get("categories") as string[]) ?? [];
    const colors = (this.get("colors") as string[]) ?? [];
    const colorBy = this.get("color_by") as string;
    // the colour menu: every column of the table (names as text)
    const cols = (this.get("columns") as string[]) ?? [];
    this.colorSelect.replaceChildren(...cols.map((c) => { const o = h("option", "", c); o.value = c; return o; }));
    this.colorSelect.value = colorBy;
    legendItems(this.legend, colorBy, cats.map((c, i) => [colors[i] ?? "#999", c] as [string, string]));
    this.modeBtn.textContent = this.matrix ? "one head" : "matrix";
    this.modeBtn.setAttribute("aria-pressed", String(this.matrix));
    const total = this.get("n_total") as number;
    const head = headLabel(this.get("layer") as number, this.get("head") as number);
    this.status.textContent = (this.matrix ? `${this.heads.length} heads` : `head ${head}`) +
      ` \u00b7 ${this.n.toLocaleString()} points` + (total > this.n ? ` (a sample of ${total.toLocaleString()}: byte budget)` : "");
    this.canvas.setAttribute("aria-label", this.matrix
      ? `Queries and keys of ${this.heads.length} heads as small multiples, ${this.n} points`
      : `Queries and keys of head ${head}, ${this.n} points, coloured by ${colorBy}`);
    this.root.dataset.points = String(this.n);
    this.root.dataset.mode = this.matrix ? "matrix" : "head";
    this.pending = { x, y, z: codes.length === this.n ? codes : new Uint8Array(this.n), colors };
  }

  private pending: { x: Float32Array; y: Float32Array; z: Uint8Array; colors: string[] } | null = null;

  protected layout(): void {
    const narrow = this.avail(720) < 560;
    this.body.classList.toggle("attnkit-stack", narrow);
    const size = Math.max(240, Math.min(900, this.avail(720) - (narrow ? 0 : 180)));
    if (size !== this.size) {
      this.size = size;
      this.canvas.style.width = `${size}px`;
      this.canvas.style.height = `${size}px`;
      this.motion?.invalidate();
      this.renderer?.resize(size, size);
      this.sp?.set({ width: size, height: size });
    }
    this.placeLabels();
  }

  /** What the points look like (set again only when it changes: each set costs a frame). */
  private look(colors: string[]): Record<string, unknown> {
    return {
      colorBy: "valueA",
      pointColor: colors.length ? colors : ["#999"],
      pointSize: this.pointSize(),
      opacity: this.n > 100_000 ? 0.6 : 0.85,
      backgroundColor: this.theme.bg,
    };
  }

  private make(look: Record<string, unknown>, performanceMode: boolean): Scatter {
    // Our own renderer, its canvas the size of the view (regl-scatterplot's default is the
    // window's size: more pixels to clear, blend and copy every frame).
    const renderer = createRenderer({ canvas: document.createElement("canvas") });
    renderer.resize(this.size, this.size);
    this.renderer = renderer;
    const sp = createScatterplot({
      canvas: this.canvas,
      renderer,
      spatialIndexUseWorker: false,
      width: this.size,
      height: this.size,
      // squares, no blending: meant for large point clouds (fixed when the plot is made)
      performanceMode,
      ...look,
      lassoColor: this.theme.accent,
      pointColorActive: this.theme.accent,
      pointColorHover: this.theme.ink,
      keyMap: { shift: "lasso" } as never,
    } as never);
    this.settlePress = settleOnPress(sp.get("camera") as never);
    sp.subscribe("pointOver", (i: number) => this.hover(i));
    sp.subscribe("pointOut", () => { this.hoverToken++; this.tip.hide(); });
    sp.subscribe("select", ({ points }: { points: number[] }) => { this.ringed(points); this.selected(points); });
    sp.subscribe("deselect", () => { this.ringed([]); this.selected([]); });
    sp.subscribe("view", () => {
      this.placeLabels();
      const cam = sp.get("cameraView") as unknown as Float32Array;
      if (cam) this.root.dataset.camera = [cam[0], cam[12], cam[13]].map((v) => v.toFixed(5)).join(",");
    });
    this.queue = new Promise((resolve) => sp.subscribe("init", () => resolve(undefined), 1));
    sp.subscribe("draw", () => {
      const st = this.motion?.stats;
      if (!st) return;
      this.root.dataset.fullFrames = String(st.full);
      this.root.dataset.movedFrames = String(st.moved);
      this.root.dataset.fullMs = st.lastFullMs.toFixed(1);
    });
    this.motion = new MotionFrames(renderer, {
      camera: () => camOf(sp.get("cameraView") as unknown as Float32Array),
      projection: () => [1, 1], // a square canvas, renderer and view the same size
      redraw: () => sp.redraw(),
    });
    return sp;
  }

  private pointSize(): number {
    return this.n > 500_000 ? 1 : this.n > 50_000 ? 2 : this.n > 5_000 ? 3 : 5;
  }

  protected draw(): void {
    if (!this.pending || this.size === 0) return;
    const { x, y, z, colors } = this.pending;
    this.pending = null;
    const perf = this.n > 300_000;
    if (this.sp && this.perfMode !== perf) this.unmake();
    const look = this.look(colors);
    const key = JSON.stringify(look);
    if (!this.sp) {
      mark("qk:setup");
      this.sp = this.make(look, perf);
      this.perfMode = perf;
      measure("qk setup", "qk:setup");
    } else if (key !== this.lookKey) {
      this.sp.set(look as never);
    }
    this.lookKey = key;
    const sp = this.sp;
    this.motion?.invalidate();
    mark("qk:draw");
    // one draw at a time (regl-scatterplot refuses a draw while one runs), the first once
    // the plot has set itself up (its own first redraw would draw every point twice)
    this.queue = this.queue.then(() => sp.draw({ x, y, z } as never, { zDataType: "categorical" } as never)).then(() => {
      if (this.sp !== sp) return;
      this.root.dataset.drawMs = measure("qk draw", "qk:draw").toFixed(1);
      this.root.dataset.ready = "1";
      // new points: a ring left from the old ones (a click in the matrix) would mark an
      // unrelated point; show the selection Python holds for these points
      this.followSelection();
      this.placeLabels();
    }, () => { /* the plot was destroyed meanwhile */ });
  }

  protected themeChanged(): void {
    this.motion?.invalidate();
    this.lookKey = "";
    this.sp?.set({ backgroundColor: this.theme.bg, lassoColor: this.theme.accent, pointColorHover: this.theme.ink } as never);
  }

  private unmake(): void {
    this.motion?.dispose();
    this.sp?.destroy();
    this.renderer?.destroy();
    this.sp = null;
    this.renderer = null;
    this.motion = null;
    this.settlePress = null;
  }

  dispose(): void {
    this.unmake();
    super.dispose();
  }

  // ------------------------------------------------------------------ interaction
  /** Panel labels "L-H" over the matrix, placed in screen coordinates (text nodes). */
  private placeLabels(): void {
    this.labels.replaceChildren();
    if (!this.matrix || !this.sp || this.heads.length < 2) return;
    const cam = (this.sp.get("cameraView") as unknown as Float32Array) ?? null;
    if (!cam) return;
    const s = this.size / 2;
    const focus = this.focusPanel();
    this.root.dataset.focus = focus >= 0 ? headLabel(this.heads[focus][0], this.heads[focus][1]) : "";
    for (let p = 0; p < this.heads.length; p++) {
      const b = panelBox(p, this.heads);
      // clip space = view matrix · data point; screen = (clip + 1) * size / 2
      const cx = cam[0] * (b.x - b.half) + cam[12];
      const cy = cam[5] * (b.y + b.half) + cam[13];
      const lab = h("span", "attnkit-qk-label", headLabel(this.heads[p][0], this.heads[p][1]));
      lab.style.left = `${(cx + 1) * s}px`;
      lab.style.top = `${(1 - cy) * s}px`;
      if (p === focus) {
        lab.classList.add("attnkit-qk-label-focus");
        lab.title = "Enter opens this head";
      }
      this.labels.appendChild(lab);
    }
  }

  private hover(i: number): void {
    const token = ++this.hoverToken;
    const cats = (this.get("categories") as string[]) ?? [];
    const codes = readArray(this.get("codes") as WireArray).data as Uint8Array;
    const [sx, sy] = this.screenOf(i);
    const offline: [string, string][] = [[this.get("color_by") as string, cats[codes[i]] ?? ""]];
    this.tip.show(sx, sy, `point ${i}`, offline);
    this.request({ type: "point", index: i }, 4000).then(({ content }) => {
      if (token !== this.hoverToken) return;
      const tokens = (content.tokens as string[]) ?? [];
      const pos = content.position as number;
      const left = tokens.slice(Math.max(0, pos - 8), pos).join(" ");
      const right = tokens.slice(pos + 1, pos + 9).join(" ");
      this.tip.show(sx, sy, `${content.kind} \u00b7 \u201c${content.token}\u201d`, [
        ["sentence", `${pos > 8 ? "\u2026 " : ""}${left} [${content.token}] ${right}${pos + 9 < tokens.length ? " \u2026" : ""}`],
        ["item / position", `${content.item} / ${pos}`],
        ["head", headLabel(content.layer, content.head)],
        [this.get("color_by") as string, String(content.value)],
      ]);
    }).catch(() => { /* offline: the colour's meaning stays shown */ });
  }

  private screenOf(i: number): [number, number] {
    const sp = this.sp;
    if (!sp) return [0, 0];
    const pts = sp.get("points") as unknown as number[][];
    const cam = sp.get("cameraView") as unknown as Float32Array;
    const p = pts?.[i];
    if (!p || !cam) return [0, 0];
    const cx = cam[0] * p[0] + cam[12];
    const cy = cam[5] * p[1] + cam[13];
    return [((cx + 1) * this.size) / 2, ((1 - cy) * this.size) / 2];
  }

  private selected(points: number[]): void {
    if (this.selfSelect) return;
    if (points.length === 1) {
      this.save({ clicked: points[0] });
      if (this.matrix) return;
    }
    const idx = new Uint32Array(points);
    const sel = points.length ? { dtype: "uint32", shape: [points.length], buffer: new DataView(idx.buffer) } : {};
    this.save({ selection: sel });
    this.status.dataset.selected = String(points.length);
  }

  /** The points drawn selected (ringed), for tests and assistive reading: `data-ringed`. */
  private ringed(points: number[]): void {
    this.root.dataset.ringed = points.length > 20 ? `${points.length} points` : points.join(",");
  }

  /** A selection set from Python: show it. */
  private followSelection(): void {
    const w = this.get("selection") as WireArray;
    if (!this.sp) return;
    const idx = w && w.dtype ? Array.from(readArray(w).data as Uint32Array) : [];
    this.ringed(idx);
    this.selfSelect = true;
    try {
      if (idx.length) this.sp.select(idx, { preventEvent: true } as never);
      else this.sp.deselect({ preventEvent: true } as never);
    } finally {
      this.selfSelect = false;
    }
  }

  private toggleMode(): void {
    this.save({ mode: this.matrix ? "head" : "matrix" });
  }

  private zoomBy(factor: number): void {
    const sp = this.sp;
    if (!sp) return;
    const target = sp.get("cameraTarget") as unknown as [number, number];
    const dist = sp.get("cameraDistance") as unknown as number;
    void sp.zoomToLocation(target, dist * factor, { transition: true, transitionDuration: 150 } as never);
  }

  private pan(dx: number, dy: number): void {
    const sp = this.sp;
    if (!sp) return;
    const [tx, ty] = sp.get("cameraTarget") as unknown as [number, number];
    const dist = sp.get("cameraDistance") as unknown as number;
    void sp.zoomToLocation([tx + dx * dist * 0.2, ty + dy * dist * 0.2], dist);
  }

  private key(e: KeyboardEvent): void {
    const k = e.key;
    const act: Record<string, () => void> = {
      "+": () => this.zoomBy(0.5), "=": () => this.zoomBy(0.5), "-": () => this.zoomBy(2),
      "0": () => this.sp?.zoomToOrigin(), ArrowLeft: () => this.pan(-1, 0), ArrowRight: () => this.pan(1, 0),
      ArrowUp: () => this.pan(0, 1), ArrowDown: () => this.pan(0, -1), m: () => this.toggleMode(), M: () => this.toggleMode(),
      Enter: () => this.openCentre(), Escape: () => this.selected([]),
    };
    const f = act[k];
    if (!f) return;
    e.preventDefault();
    f();
  }

  /** Matrix view: the panel nearest the centre of the view (its label is marked), or -1. */
  private focusPanel(): number {
    if (!this.matrix || !this.sp) return -1;
    const [tx, ty] = this.sp.get("cameraTarget") as unknown as [number, number];
    return nearestPanel(tx, ty, this.heads);
  }

  /** Matrix view: open the marked head (the panel nearest the centre of the view). */
  private openCentre(): void {
    const p = this.focusPanel();
    if (p >= 0) this.save({ layer: this.heads[p][0], head: this.heads[p][1], mode: "head" });
  }
}

export default mount((props) => new QKScatterView(props));
