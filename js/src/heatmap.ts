// Heatmap: one head's map (rows = from/query, columns = to/key) at any length. The kernel
// sends a pooled overview up front; zooming in requests exact tiles (custom messages with
// binary buffers), cached here (LRU) and drawn as they arrive. Hovering a cell shows its
// exact weight at any zoom. Offline copies draw the levels embedded in the saved state.
// A rectangular map (cross-attention: target rows over source columns, `n_cols` set) is
// drawn in the square view of its longer side: the cells past its rows or columns are
// blank, the rows labelled with the target tokens, the columns with the source tokens.
// A wide one (few target rows over many source columns) has taller rows than its columns
// are wide while all its rows fit the plot, a tall one (many target rows over few source
// columns) wider columns than its rows are tall (see `sides`): the shorter side's lines
// stay readable and hoverable, drawn exact with the other side's cells pooled; zoomed in
// until cells are as large as those lines, cells are square again.

import { bitmap, FONT, FONT_SMALL, localPoint, sizeCanvas } from "./lib/canvas";
import { Binary, WireArray } from "./lib/codec";
import { Progress } from "./lib/progress";
import { DIVERGING_DEFAULT, lut, paint, parseColor, SEQUENTIAL_DEFAULT } from "./lib/colors";
import { checkbox, select, stepper } from "./lib/controls";
import { displayToken, fitText, formatValue, labelStride, truncate } from "./lib/labels";
import { colorBarV } from "./lib/legend";
import { describeScale, rankRows, Scale, ScaleKind, scaleIndex, scaleKey } from "./lib/scale";
import { chooseLevel, Entry, levelSide, poolCells, Pyramid, tileEntry, TileId, tileKey, TileLoader, tileOfCell, tilesCovering } from "./lib/tiles";
import { bindPan } from "./lib/pan";
import { h, mount, noKernel, RenderProps, View } from "./lib/view";
import { cellAt, clampView, fullView, lineSides, panBy, snapView, View as Window, zoomAt } from "./lib/zoom";

const LABEL_CHARS = 14;
const MIN_LABEL_PX = 11;
const CACHE_BYTES = 96 * 2 ** 20;
const IN_FLIGHT = 4;
const SETTLE_MS = 60;
const RIGHT = 118; // colour bar, its numbers, the minimap
/** the least height of a wide rectangle's rows (width of a tall one's columns) while all fit the plot */
const MIN_LINE_PX = 16;
/** a stretched view draws its long lines exact (level 0 or finer) when this few tiles cover it */
const MAX_EXACT_TILES = 16;

interface Data {
  /** cells per side of the (square) view: the rows, or the longer side of a rectangle */
  n: number;
  rows: number;
  cols: number;
  /** a rectangle's columns have their own tokens (cross-attention: the source) */
  rect: boolean;
  tokens: string[];
  shown: string[];
  colTokens: string[];
  colShown: string[];
  causal: boolean;
  sinks: Set<number>;
  sinkNames: string;
  pyramid: Pyramid;
  layer: number;
  head: number;
  top: number;
  topNoSink: number;
  vmax: number | null;
  diverging: boolean;
  cmap: string;
  valueLabel: string;
  embedNote: string;
  /** levels that are whole in the cache without a kernel (the overview, embedded ones) */
  local: Set<string>;
  /** the overview filling in (a worker thread in the kernel): "running", "done", "stopped: …" */
  computing: string;
  /** rows of overview bins read so far */
  rowsReady: number;
}

class HeatmapView extends View<"heatmap"> {
  private d!: Data;
  private canvas = h("canvas", "attnkit-canvas");
  private legend = h("div", "attnkit-legend-text");
  private tiles = new TileLoader({
    cacheBytes: CACHE_BYTES, inFlight: IN_FLIGHT, settleMs: SETTLE_MS,
    fetch: (t, what) => this.request({
      type: "tile", layer: this.d.layer, head: this.d.head, k: t.k, ti: t.ti, tj: t.tj, reduce: this.reduce(),
      what: what.startsWith("rank") ? "rank" : "value", exclude: what.endsWith("-x"),
    }).then(({ content, buffers }) => tileEntry(content.array as WireArray, buffers)),
    offline: () => this.link === "none",
    loaded: () => {
      this.root.dataset.tiles = String(Number(this.root.dataset.tiles ?? "0") + 1);
      this.redraw();
    },
    failed: () => this.redraw(),
    retry: () => {
      this.redraw();
      this.refreshTip();
    },
  });
  private cache = this.tiles.cache;
  private win: Window = fullView(1);
  private geom = { left: 0, top: 0, plot: 0, width: 0, height: 0, mini: 0, miniX: 0, miniY: 0 };
  private hover: [number, number] | null = null;
  private hoverAt: [number, number] | null = null; // stage coordinates of the pointer
  /** where the pointer is over the canvas (plot and stage coordinates), null once it left */
  private pointer: { plot: [number, number]; stage: [number, number] } | null = null;
  private exactTimer: ReturnType<typeof setTimeout> | null = null;
  private layerStep = stepper(this, "Layer", "layer", "n_layers");
  private headStep = stepper(this, "Head", "head", "n_heads");
  private scaleSel = select(this, "scale", "scale", [["linear", "linear"], ["log", "log"], ["rank", "row rank"]],
    "colour scale: linear, log, or each cell's rank within its row");
  private sinkBox = checkbox(this, "exclude_sinks", "leave attention sinks out of the colour scale");
  private reduceSel = select(this, "pool", "reduce", [["max", "max"], ["mean", "mean"]],
    "how zoomed-out cells pool the cells they cover");
  private zoomIn = this.button("+", "zoom in", () => this.zoomBy(2));
  private zoomOut = this.button("\u2212", "zoom out", () => this.zoomBy(0.5));
  private fit = this.button("Fit", "show the whole map", () => this.setWindow(fullView(this.d.n)), "attnkit-btn attnkit-btn-text");

  constructor(props: RenderProps) {
    super(props, "heatmap");
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("aria-label", "attention heatmap: click, then scroll or press + and − to zoom");
    this.stage.appendChild(this.canvas);
    this.body.appendChild(this.legend);
    const zoom = h("span", "attnkit-zoom");
    zoom.append(this.zoomIn, this.zoomOut, this.fit);
    this.controls.append(this.layerStep.box, this.headStep.box, this.scaleSel.box, this.sinkBox.box, this.reduceSel.box, zoom);
    this.hint.textContent = "Click the map, then scroll to zoom (or hold Ctrl) \u00b7 drag to pan \u00b7 double-click to fit \u00b7 rows attend (from) \u2192 columns (to) \u00b7 positions (#) counted from 0";
    this.bind();
  }

  // ---------------------------------------------------------------------- data
  protected load(): void {
    const rows = this.get("n") as number;
    const nCols = (this.get("n_cols") as number) || 0;
    const cols = nCols || rows;
    const n = Math.max(rows, cols);
    const tokens = (this.get("tokens") as string[]) ?? [];
    const colTokens = nCols ? ((this.get("col_tokens") as string[]) ?? []) : tokens;
    const prev = this.d;
    const shown = prev && prev.tokens === tokens ? prev.shown : tokens.map((t) => truncate(displayToken(t), LABEL_CHARS));
    const pyr = (this.get("pyramid") as { top?: number; size?: number }) ?? {};
    const diverging = Boolean(this.get("diverging"));
    const vmax = this.get("vmax");
    this.d = {
      n, rows, cols, rect: nCols > 0, tokens, shown, colTokens,
      colShown: !nCols ? shown : prev && prev.colTokens === colTokens ? prev.colShown : colTokens.map((t) => truncate(displayToken(t), LABEL_CHARS)),
      causal: Boolean(this.get("causal")),
      sinks: new Set((this.get("sinks") as number[]) ?? []),
      sinkNames: (this.get("sink_names") as string) || "",
      pyramid: { n, top: pyr.top ?? 0, size: pyr.size ?? 256 },
      layer: this.get("layer") as number,
      head: this.get("head") as number,
      top: Number(this.get("top")),
      topNoSink: Number(this.get("top_nosink")),
      vmax: typeof vmax === "number" && vmax > 0 ? vmax : null,
      diverging,
      cmap: (this.get("cmap") as string) || (diverging ? DIVERGING_DEFAULT : SEQUENTIAL_DEFAULT),
      valueLabel: (this.get("value_label") as string) || "value",
      embedNote: (this.get("embed_note") as string) || "",
      local: new Set(),
      computing: (this.get("computing") as string) || "done",
      rowsReady: Number(this.get("rows_ready")) || 0,
    };
    this.progress.stepped();
    if (!prev || prev.n !== n) this.win = fullView(n);
    this.win = clampView(this.win, n);
    if (prev && (prev.layer !== this.d.layer || prev.head !== this.d.head)) this.tiles.reset();
    // The overview: exact (level 0) or pooled by the selected reduction.
    const top = this.d.pyramid.top;
    const reduce = this.reduce();
    const ov = tileEntry((reduce === "mean" && top > 0 ? this.get("overview_mean") : this.get("overview_max")) as WireArray, [], true);
    const side = levelSide(rows, top);
    const sideC = levelSide(cols, top);
    if (ov.values.length !== side * sideC) throw new Error(`heatmap: overview of ${ov.values.length} values for ${side}\u00d7${sideC} bins`);
    this.overviewKey = this.key({ k: top, ti: 0, tj: 0 }, "value");
    this.cache.set(this.overviewKey, { ...ov, rows: side, cols: sideC });
    for (const e of (this.get("embedded") as { k: number; ti: number; tj: number; reduce: string; array: WireArray }[]) ?? []) {
      if (e.k !== 0 && e.reduce !== reduce) continue;
      this.cache.set(this.key(e, "value"), tileEntry(e.array, [], true));
      this.d.local.add(`${e.k}`);
    }
    this.d.local.add(`${top}`);
    this.cache.unpaint();
    this.title.textContent = (this.get("title") as string) || "";
    this.layerStep.update();
    this.headStep.update();
    const offline = noKernel();
    this.layerStep.setEnabled(!offline, "other heads need a running kernel");
    this.headStep.setEnabled(!offline, "other heads need a running kernel");
    this.scaleSel.update();
    this.reduceSel.update();
    this.reduceSel.box.style.display = top > 0 && !diverging ? "" : "none";
    this.scaleSel.box.style.display = diverging ? "none" : "";
    this.sinkBox.update(`leave out ${this.d.sinkNames || "sinks"}`);
    this.sinkBox.box.style.display = diverging || !this.d.sinkNames ? "none" : "";
    this.root.dataset.level = "";
    this.hover = null;
  }

  private reduce(): string {
    return (this.get("reduce") as string) === "mean" ? "mean" : "max";
  }

  private scale(): Scale {
    const d = this.d;
    const kind = ((this.get("scale") as string) || "linear") as ScaleKind;
    const exclude = Boolean(this.get("exclude_sinks"));
    const top = d.vmax ?? (exclude && !d.diverging ? d.topNoSink : d.top);
    return { kind: d.diverging ? "linear" : kind, diverging: d.diverging, top: top > 0 ? top : 1, decades: Number(this.get("decades")) || 3, excludeSinks: exclude };
  }

  /** What tiles hold for the current scale: weights, or (rank scale) row ranks. */
  private what(): string {
    const s = this.scale();
    return s.kind === "rank" && !s.diverging ? `rank${s.excludeSinks ? "-x" : ""}` : "value";
  }

  private key(t: TileId, what: string): string {
    return tileKey(this.d.layer, this.d.head, what, this.reduce(), t);
  }

  private overviewKey = "";
  private tickTimer: ReturnType<typeof setTimeout> | null = null;
  private progress = new Progress(() => this.redraw(), () => this.kernelGone);

  /** Rows of the overview, read by the kernel's worker thread as it goes (band by band). */
  protected pushed(content: Record<string, any>, buffers: Binary[]): void {
    const d = this.d;
    if (content.what !== "band" || content.layer !== d.layer || content.head !== d.head) return;
    const ov = this.cache.get(this.overviewKey);
    const r0 = Number(content.row0);
    const r1 = Number(content.row1);
    const wire = (this.reduce() === "mean" && d.pyramid.top > 0 ? content.mean : content.max) as WireArray;
    if (!ov || !wire) return;
    const rows = tileEntry(wire, buffers);
    if (rows.cols !== ov.cols || r0 < 0 || r1 > ov.rows || rows.rows !== r1 - r0) return;
    ov.values.set(rows.values, r0 * ov.cols);
    ov.bitmap = undefined; // painted again with the new rows
    ov.paintedFor = undefined;
    if (Number(content.top) > 0) d.top = Number(content.top);
    if (Number(content.top_nosink) > 0) d.topNoSink = Number(content.top_nosink);
    d.rowsReady = Math.max(d.rowsReady, r1);
    if (d.rowsReady >= ov.rows && d.computing === "running") d.computing = "done";
    this.progress.stepped();
    this.redraw();
  }

  protected kernelBack(): void {
    this.tiles.resume();
    this.redraw();
    this.refreshTip();
  }

  protected linkChanged(): void {
    this.redraw();
    this.refreshTip();
  }

  /** What the view waits for while the kernel is silent, e.g. "waiting for the kernel (busy? 12 s without an answer); asking again in 4 s". */
  private waitText(): string {
    const silent = Math.round(this.silentSeconds());
    const again = this.tiles.retryIn();
    const when = again > 0 ? `asking again in ${Math.ceil(again / 1000)} s` : "asking again";
    return `waiting for the kernel (busy? ${silent} s without an answer); ${when}`;
  }

  dispose(): void {
    if (this.tickTimer) clearTimeout(this.tickTimer);
    this.progress.dispose();
    this.tiles.dispose();
    super.dispose();
  }

  // -------------------------------------------------------------------- layout
  protected layout(): void {
    const width = Math.max(320, Math.min(1100, this.avail(760)));
    const ctx = this.canvas.getContext("2d")!;
    ctx.font = `bold ${FONT}`;
    // The widest label (bold, as when hovered), measured on the longest few.
    const longest = [...this.d.shown, ...(this.d.rect ? this.d.colShown : [])].sort((a, b) => b.length - a.length).slice(0, 40);
    // long maps show strided labels with their position first ("#4036 token")
    if (this.d.n > 64) longest.push(...longest.slice(0, 5).map((t) => `#${this.d.n - 1} ${t}`));
    let widest = 0;
    for (const s of longest) widest = Math.max(widest, ctx.measureText(s).width);
    const label = Math.ceil(Math.min(150, Math.max(34, widest + 14)));
    const plot = Math.max(120, Math.min(900, width - label - RIGHT - 4));
    const mini = Math.min(96, RIGHT - 16);
    this.geom = {
      left: label, top: label, plot, width: label + plot + RIGHT, height: label + plot + 8,
      mini, miniX: label + plot + 12, miniY: label + Math.min(plot, 220) + 60,
    };
    if (this.geom.miniY + mini > this.geom.height) this.geom.miniY = Math.max(label, this.geom.height - mini - 4);
    Object.assign(this.root.dataset, {
      plotLeft: String(this.geom.left), plotTop: String(this.geom.top), plotSize: String(this.geom.plot),
      miniLeft: String(this.geom.miniX), miniTop: String(this.geom.miniY), miniSize: String(mini),
      miniWidth: String(this.miniBox()[0]), miniHeight: String(this.miniBox()[1]),
    });
    this.win = this.fitLines(this.win); // a new plot size may stretch the lines (or not)
  }

  // ---------------------------------------------------------------------- draw
  protected themeChanged(): void {
    this.cache.unpaint();
  }

  private paintEntry(e: Entry, t: TileId, what: string, rowPool = 1, colPool = 1): CanvasImageSource {
    const s = this.scale();
    const key = `${scaleKey(s)}|${this.theme.empty}|${this.theme.bg}|${what}|${rowPool}x${colPool}`;
    if (e.bitmap && e.paintedFor === key) return e.bitmap;
    const d = this.d;
    const b0 = t.ti * d.pyramid.size;
    const c0 = t.tj * d.pyramid.size;
    const valid = (i: number, j: number) => !d.causal || c0 + j <= b0 + i;
    let values: ArrayLike<number> = e.values;
    if (s.kind === "rank" && !s.diverging && what === "value") {
      // only the overview is painted this way: it holds whole rows of its level
      const sinkBin = new Set([...d.sinks].map((p) => p >> t.k));
      values = rankRows(e.values, e.rows, e.cols, valid, (j) => s.excludeSinks && sinkBin.has(c0 + j));
    }
    if (d.causal && c0 + e.cols > b0) {
      // cells above the diagonal hold no value: NaN paints them in the empty colour
      const masked = Float32Array.from(values);
      for (let i = 0; i < e.rows; i++) for (let j = Math.max(0, b0 + i - c0 + 1); j < e.cols; j++) masked[i * e.cols + j] = NaN;
      values = masked;
    }
    // a stretched view's exact lines across cells too thin to draw (a wide map's rows over
    // its columns, a tall map's columns over its rows): each run of the thin side pooled
    // (max or mean), as the coarser level would, so no peak is dropped
    if (rowPool > 1 || colPool > 1) values = poolCells(values, e.rows, e.cols, rowPool, colPool, this.reduce() === "mean");
    const [er, eg, eb] = parseColor(this.theme.empty) ?? [240, 240, 240];
    const rgba = paint(values, lut(d.cmap, this.theme.bg), scaleIndex(s), undefined, [er, eg, eb, 255]);
    e.bitmap = bitmap(rgba, Math.ceil(e.cols / colPool), Math.ceil(e.rows / rowPool));
    e.paintedFor = key;
    return e.bitmap;
  }

  /** Draw tile `t` (already cached under `key`) into the plot, clipped to the map. */
  private drawTile(ctx: CanvasRenderingContext2D, t: TileId, e: Entry, what: string, rowPool = 1, colPool = 1): void {
    const { left, top } = this.geom;
    const w = this.win;
    const [rowPx, colPx] = this.sides();
    const bin = 2 ** t.k;
    const r0 = t.ti * this.d.pyramid.size * bin;
    const c0 = t.tj * this.d.pyramid.size * bin;
    const img = this.paintEntry(e, t, what, rowPool, colPool);
    const cols = Math.ceil(e.cols / colPool);
    const rows = Math.ceil(e.rows / rowPool);
    ctx.drawImage(img, 0, 0, cols, rows,
      left + (c0 - w.x0) * colPx, top + (r0 - w.y0) * rowPx, cols * colPool * bin * colPx, rows * rowPool * bin * rowPx);
  }

  /**
   * The height of a row and the width of a column, [rowPx, colPx], in a view of `size`
   * cells: the cells' side, or, for a rectangle whose shorter side's lines all fit the plot
   * (a wide map's rows, a tall map's columns), those lines larger (lib/zoom.ts `lineSides`:
   * at least MIN_LINE_PX, filling at least half the plot). A square map's cells are square.
   */
  private sides(size = this.win.size): [number, number] {
    return lineSides(this.geom.plot, size, this.d.rows, this.d.cols, MIN_LINE_PX);
  }

  private rowPx(size = this.win.size): number {
    return this.sides(size)[0];
  }

  private colPx(size = this.win.size): number {
    return this.sides(size)[1];
  }

  /** Rows or columns are larger than cells in a view of `size` cells (then all of them show). */
  private stretched(size = this.win.size): boolean {
    const [rowPx, colPx] = this.sides(size);
    return Math.max(rowPx, colPx) > this.geom.plot / size;
  }

  /** A stretched view shows every row (a wide map) or column (a tall one): from the first. */
  private fitLines(w: Window): Window {
    const [rowPx, colPx] = this.sides(w.size);
    const cell = this.geom.plot / w.size;
    return rowPx > cell ? { ...w, y0: 0 } : colPx > cell ? { ...w, x0: 0 } : w;
  }

  /** The cell (row, col) under plot point (px, py), or null. */
  private cellUnder(px: number, py: number): [number, number] | null {
    const d = this.d;
    const { plot } = this.geom;
    if (!this.stretched()) return cellAt(this.win, px, py, plot, d.n);
    if (px < 0 || py < 0 || px >= plot || py >= plot) return null;
    const row = this.rowUnder(py);
    const col = this.colUnder(px);
    return row < 0 || col < 0 || row >= d.n || col >= d.n ? null : [row, col];
  }

  /** The row under plot height py (a row label's place). */
  private rowUnder(py: number): number {
    const w = this.win;
    return Math.floor(this.stretched() ? w.y0 + py / this.rowPx() : w.y0 + (py / this.geom.plot) * w.size);
  }

  /** The column under plot width px (a column label's place). */
  private colUnder(px: number): number {
    const w = this.win;
    return Math.floor(this.stretched() ? w.x0 + px / this.colPx() : w.x0 + (px / this.geom.plot) * w.size);
  }

  protected draw(): void {
    const d = this.d;
    const th = this.theme;
    const { left, top, plot, width, height } = this.geom;
    const ctx = sizeCanvas(this.canvas, width, height);
    const dpr = this.canvas.width / width;
    ctx.clearRect(0, 0, width, height);
    const n = d.n;
    const w = this.win;
    const cellPx = plot / w.size;
    const [rowPx, colPx] = this.sides();
    const rowsShown = plot / rowPx; // rows in view: w.size unless stretched
    const colsShown = plot / colPx;
    const pyr = d.pyramid;
    const what = this.what();
    // A stretched view's long lines (a wide map's rows, a tall map's columns) are drawn exact
    // where few tiles cover the view, each tile's other side pooled down to the level the
    // cells alone would use.
    const cellLevel = chooseLevel(w.size, plot * dpr, pyr.top);
    let level = cellLevel;
    if (rowPx > cellPx || colPx > cellPx) {
      for (let k = chooseLevel(Math.min(rowsShown, colsShown), plot * dpr, pyr.top); k < cellLevel; k++) {
        if (tilesCovering(pyr, k, w.y0, w.y0 + rowsShown, w.x0, w.x0 + colsShown).length <= MAX_EXACT_TILES) {
          level = k;
          break;
        }
      }
    }
    const pool = 2 ** (cellLevel - level);
    const rowPool = colPx > cellPx ? pool : 1;
    const colPool = rowPx > cellPx ? pool : 1;
    this.root.dataset.level = String(level);
    this.root.dataset.view = `${w.x0},${w.y0},${w.size}`;
    this.root.dataset.rowPx = String(rowPx);
    this.root.dataset.colPx = String(colPx);

    // Cells: the overview first (always there), then the tiles of the chosen level on top.
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, Math.min(plot, (d.cols - w.x0) * colPx), Math.min(plot, (d.rows - w.y0) * rowPx));
    ctx.clip();
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = th.empty;
    ctx.fillRect(left, top, plot, plot);
    // The overview holds whole rows of its level, so a rank scale is computed from it here.
    const ovKey = this.key({ k: pyr.top, ti: 0, tj: 0 }, "value");
    const ov = this.cache.get(ovKey);
    if (ov) this.drawTile(ctx, { k: pyr.top, ti: 0, tj: 0 }, ov, "value");
    let missing = 0;
    if (level < pyr.top) {
      const tiles = tilesCovering(pyr, level, w.y0, w.y0 + rowsShown, w.x0, w.x0 + colsShown);
      const cy = w.y0 + rowsShown / 2;
      const cx = w.x0 + colsShown / 2;
      const span = pyr.size * 2 ** level;
      const dist = (t: TileId) => Math.hypot((t.ti + 0.5) * span - cy, (t.tj + 0.5) * span - cx);
      tiles.sort((a, b) => dist(a) - dist(b));
      for (const t of tiles) {
        if (d.causal && t.tj > t.ti) continue; // above the diagonal: nothing to fetch
        if (t.ti * span >= d.rows || t.tj * span >= d.cols) continue; // past a rectangle's edge
        const key = this.key(t, what);
        const e = this.cache.get(key);
        if (e) {
          this.drawTile(ctx, t, e, what, rowPool, colPool);
          this.noteDrawn(key);
        } else {
          missing++;
          this.tiles.want(key, t, what);
        }
      }
    }
    ctx.restore();
    this.tiles.settle(`${w.x0},${w.y0},${w.size}`);

    if (colPx >= 10 || rowPx >= 10) {
      ctx.strokeStyle = th.dark ? "rgba(0,0,0,0.45)" : "rgba(255,255,255,0.6)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      const gridW = Math.min(plot, (d.cols - w.x0) * colPx);
      const gridH = Math.min(plot, (d.rows - w.y0) * rowPx);
      for (let i = Math.ceil(w.x0); colPx >= 10 && i <= Math.min(d.cols, w.x0 + colsShown); i++) {
        const x = left + (i - w.x0) * colPx;
        ctx.moveTo(x, top); ctx.lineTo(x, top + gridH);
      }
      for (let i = Math.ceil(w.y0); rowPx >= 10 && i <= Math.min(d.rows, w.y0 + rowsShown); i++) {
        const y = top + (i - w.y0) * rowPx;
        ctx.moveTo(left, y); ctx.lineTo(left + gridW, y);
      }
      ctx.stroke();
    }
    ctx.strokeStyle = th.faint;
    ctx.lineWidth = 1;
    ctx.strokeRect(left - 0.5, top - 0.5, plot + 1, plot + 1);

    if (this.hover) {
      const [r, c] = this.hover;
      const ry = top + (r - w.y0) * rowPx;
      const cx = left + (c - w.x0) * colPx;
      ctx.save();
      ctx.beginPath();
      ctx.rect(left, top, Math.min(plot, (d.cols - w.x0) * colPx), Math.min(plot, (d.rows - w.y0) * rowPx));
      ctx.clip();
      ctx.fillStyle = "rgba(255, 170, 0, 0.16)";
      ctx.fillRect(left, ry, plot, Math.max(rowPx, 1));
      ctx.fillRect(cx, top, Math.max(colPx, 1), plot);
      ctx.strokeStyle = th.accent;
      ctx.lineWidth = 2;
      ctx.strokeRect(cx - (colPx < 4 ? 2 : 0), ry - (rowPx < 4 ? 2 : 0), Math.max(colPx, 4), Math.max(rowPx, 4));
      ctx.restore();
    }
    this.drawLabels(ctx, colPx, rowPx);

    ctx.font = FONT_SMALL;
    ctx.fillStyle = th.muted;
    ctx.textAlign = "right";
    ctx.textBaseline = "bottom";
    ctx.fillText(d.rect ? "source \u2192" : "to \u2192", left - 4, top - 4);
    ctx.fillText(d.rect ? "target \u2193" : "from \u2193", left - 4, top - 18);

    // Colour bar, view range, minimap.
    const s = this.scale();
    const bx = left + plot + 12;
    const bh = Math.min(plot, 220);
    ctx.fillStyle = th.ink;
    if (s.diverging) colorBarV(ctx, th, d.cmap, bx, top + 14, 12, bh, -s.top, s.top, 0, d.valueLabel);
    else if (s.kind === "rank") colorBarV(ctx, th, d.cmap, bx, top + 14, 12, bh, 0, 1, undefined, "row rank");
    else if (s.kind === "log") colorBarV(ctx, th, d.cmap, bx, top + 14, 12, bh, s.top * 10 ** -s.decades, s.top, undefined, `${d.valueLabel} (log)`);
    else colorBarV(ctx, th, d.cmap, bx, top + 14, 12, bh, 0, s.top, undefined, d.valueLabel);
    if (w.size < n || n > 64) this.drawMinimap(ctx);
    this.zoomOut.disabled = w.size >= n;
    this.fit.disabled = w.size >= n;
    this.zoomIn.disabled = w.size <= Math.min(4, n);
    this.updateText(level, missing, s, rowPool, colPool);
  }

  private drawLabels(ctx: CanvasRenderingContext2D, colPx: number, rowPx: number): void {
    const d = this.d;
    const th = this.theme;
    const { left, top, plot } = this.geom;
    const w = this.win;
    const room = left - 8; // labels are shortened to fit: never cut at the canvas edge
    // Each axis by its own lines' size (a stretched view's rows or columns are larger than its cells).
    const axis = (px: number) => {
      const numbered = px < MIN_LABEL_PX; // strided labels carry their position
      const stride = labelStride(px, numbered ? 14 : MIN_LABEL_PX);
      const fontPx = Math.max(8, Math.min(12, px * 0.9));
      return {
        stride, fontPx,
        font: `${fontPx.toFixed(1)}px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif`,
        text: (i: number, shown: string[]) => fitText(ctx, numbered ? `#${i} ${shown[i] ?? ""}` : shown[i] ?? String(i), room),
        first: (a: number) => Math.ceil(a / stride) * stride,
        // A label sits at its row's (column's) centre, moved inside the plot's span where the
        // row is cut by the view's edge or thinner than the text: never half-drawn at an edge.
        half: fontPx / 2 + 1,
        // Tick labels give way to the hovered one (drawn bold on a backing): no overlapping text.
        gap: fontPx + 2,
      };
    };
    const ra = axis(rowPx);
    const ca = axis(colPx);
    const inside = (p: number, a: number, half: number) => Math.max(a + half, Math.min(a + plot - half, p));
    const lo = Math.max(0, Math.floor(w.y0));
    const hi = Math.min(d.rows - 1, Math.ceil(w.y0 + plot / rowPx) - 1);
    const loC = Math.max(0, Math.floor(w.x0));
    const hiC = Math.min(d.cols - 1, Math.ceil(w.x0 + plot / colPx) - 1);
    const hoverRow = this.hover ? inside(top + (this.hover[0] + 0.5 - w.y0) * rowPx, top, ra.half) : NaN;
    const hoverCol = this.hover ? inside(left + (this.hover[1] + 0.5 - w.x0) * colPx, left, ca.half) : NaN;
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, top, left, plot);
    ctx.clip();
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const rows = new Set<number>();
    for (let i = ra.first(lo); i <= hi; i += ra.stride) rows.add(i);
    if (this.hover) rows.add(this.hover[0]);
    for (const i of rows) {
      if (i < lo || i > hi) continue;
      const isHover = this.hover !== null && this.hover[0] === i;
      const y = inside(top + (i + 0.5 - w.y0) * rowPx, top, ra.half);
      if (!isHover && Math.abs(y - hoverRow) < ra.gap) continue;
      ctx.font = isHover ? `bold ${ra.font}` : ra.font;
      const label = ra.text(i, d.shown);
      if (isHover) {
        ctx.fillStyle = th.bg;
        const tw = ctx.measureText(label).width;
        ctx.fillRect(left - 8 - tw, y - ra.half, tw + 4, 2 * ra.half);
      }
      ctx.fillStyle = isHover ? th.accentInk : th.ink;
      ctx.fillText(label, left - 6, y);
    }
    ctx.restore();
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, 0, plot, top);
    ctx.clip();
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    const cols = new Set<number>();
    for (let j = ca.first(loC); j <= hiC; j += ca.stride) cols.add(j);
    if (this.hover) cols.add(this.hover[1]);
    for (const j of cols) {
      if (j < loC || j > hiC) continue;
      const isHover = this.hover !== null && this.hover[1] === j;
      const x = inside(left + (j + 0.5 - w.x0) * colPx, left, ca.half);
      if (!isHover && Math.abs(x - hoverCol) < ca.gap) continue;
      ctx.save();
      ctx.translate(x, top - 6);
      ctx.rotate(-Math.PI / 2);
      ctx.font = isHover ? `bold ${ca.font}` : ca.font;
      const label = ca.text(j, d.colShown);
      if (isHover) {
        ctx.fillStyle = th.bg;
        ctx.fillRect(-2, -ca.half, ctx.measureText(label).width + 4, 2 * ca.half);
      }
      ctx.fillStyle = isHover ? th.accentInk : th.ink;
      ctx.fillText(label, 0, 0);
      ctx.restore();
    }
    ctx.restore();
  }

  private drawMinimap(ctx: CanvasRenderingContext2D): void {
    const d = this.d;
    const { miniX, miniY } = this.geom;
    const [mw, mh] = this.miniBox();
    const th = this.theme;
    const ov = this.cache.get(this.overviewKey);
    ctx.save();
    ctx.imageSmoothingEnabled = true;
    ctx.fillStyle = th.empty;
    ctx.fillRect(miniX, miniY, mw, mh);
    if (ov) {
      const bin = 2 ** d.pyramid.top;
      const { mini } = this.geom;
      const img = this.paintEntry(ov, { k: d.pyramid.top, ti: 0, tj: 0 }, "value");
      ctx.beginPath();
      ctx.rect(miniX, miniY, mw, mh); // the last bin may run past the map's edge
      ctx.clip();
      ctx.drawImage(img, 0, 0, ov.cols, ov.rows, miniX, miniY, (mini * ov.cols * bin) / d.n, (mini * ov.rows * bin) / d.n);
    }
    ctx.restore();
    const w = this.win;
    const f = this.geom.mini / d.n;
    ctx.strokeStyle = th.accent;
    ctx.lineWidth = 1.5;
    const [rowPx, colPx] = this.sides();
    const rowsShown = Math.min(w.size, this.geom.plot / rowPx);
    const colsShown = Math.min(w.size, this.geom.plot / colPx);
    // the part of the view that holds cells (a rectangle's view runs past its shorter side)
    const vw = Math.min(colsShown, d.cols - w.x0) * f;
    const vh = Math.min(rowsShown, d.rows - w.y0) * f;
    ctx.strokeRect(miniX + w.x0 * f, miniY + w.y0 * f, Math.max(3, vw), Math.max(3, vh));
    ctx.strokeStyle = th.faint;
    ctx.lineWidth = 0.5;
    ctx.strokeRect(miniX - 0.5, miniY - 0.5, mw + 1, mh + 1);
    ctx.font = FONT_SMALL;
    ctx.fillStyle = th.muted;
    ctx.textAlign = "left";
    ctx.textBaseline = "bottom";
    ctx.fillText("where you are", miniX, miniY - 3);
  }

  /** The minimap's width and height: the map's own shape, its longer side `mini` (a tall
   * rectangle's minimap is tall, a wide one's wide, never the square of the longer side). */
  private miniBox(): [number, number] {
    const { mini } = this.geom;
    const d = this.d;
    return [(mini * d.cols) / d.n, (mini * d.rows) / d.n];
  }

  private updateText(level: number, missing: number, s: Scale, rowPool = 1, colPool = 1): void {
    const d = this.d;
    const w = this.win;
    // positions counted from 0, as in tables, code and every other view
    const r0 = Math.floor(w.y0);
    const r1 = Math.min(d.rows, Math.ceil(w.y0 + Math.min(w.size, this.geom.plot / this.rowPx()))) - 1;
    const c0 = Math.floor(w.x0);
    const c1 = Math.min(d.cols, Math.ceil(w.x0 + Math.min(w.size, this.geom.plot / this.colPx()))) - 1;
    const parts = [d.rect
      ? `rows ${r0}\u2013${r1} of ${d.rows} target tokens, columns ${c0}\u2013${c1} of ${d.cols} source tokens`
      : `rows ${r0}\u2013${r1}, columns ${c0}\u2013${c1} of ${d.n}`];
    const bin = 2 ** level;
    parts.push(bin === 1 && rowPool === 1 && colPool === 1 ? "every cell one token pair"
      : `each cell the ${this.reduce()} of ${bin * rowPool}\u00d7${bin * colPool} token pairs`);
    const beyond = !d.local.has(String(level)) && level < d.pyramid.top;
    if (missing > 0 && this.link === "none") {
      parts.push(d.embedNote ? `${d.embedNote}: showing coarser cells here`
        : `${this.kernelGone || "no kernel in this copy"}: showing the overview only`);
    } else if (missing > 0 && (this.link !== "ok" || this.tiles.waitingForKernel())) {
      parts.push(`${missing} tile${missing > 1 ? "s" : ""} ${this.waitText()}; coarser cells meanwhile`);
    } else if (missing > 0) {
      parts.push(`loading ${missing} tile${missing > 1 ? "s" : ""}\u2026`);
    } else if (beyond && noKernel()) {
      parts.push(d.embedNote);
    }
    const side = levelSide(d.n, d.pyramid.top);
    const reading = this.progress.text("the overview", d.rowsReady, side, "rows of cells", d.computing,
      ` (tokens 1\u2013${Math.min(d.n, d.rowsReady * 2 ** d.pyramid.top)} of ${d.n} read; the kernel is free meanwhile)`);
    if (reading) parts.push(reading);
    this.root.dataset.rowsReady = String(d.rowsReady);
    this.root.dataset.computing = this.progress.state(d.computing);
    this.status.textContent = parts.join(" \u00b7 ");
    // while the kernel is silent the status counts the seconds (and the hover says so)
    if (missing > 0 && this.link !== "ok" && this.link !== "none" && !this.tickTimer) {
      this.tickTimer = setTimeout(() => {
        this.tickTimer = null;
        this.redraw();
        this.refreshTip();
      }, 1000);
    }
    this.root.dataset.missing = String(missing);
    this.legend.textContent = `Colours: ${describeScale(s, d.sinkNames)}${d.causal ? "; blank above the diagonal: a causal model cannot attend to later tokens" : ""}.`;
  }

  // ------------------------------------------------------------------- tiles
  /** Record request → drawn time of a tile drawn for the first time (data-tile-ms, last 64). */
  private noteDrawn(key: string): void {
    const ms = this.tiles.firstDrawn(key);
    if (ms === undefined) return;
    const list = (this.root.dataset.tileMs ? this.root.dataset.tileMs.split(",") : []).concat(ms.toFixed(1)).slice(-64);
    this.root.dataset.tileMs = list.join(",");
  }

  /** The exact weight of cell (r, c), if known here; else null (and a fetch may start). */
  private exact(r: number, c: number, fetch: boolean): number | null {
    const d = this.d;
    if (d.causal && c > r) return 0;
    if (d.pyramid.top === 0) {
      const ov = this.cache.get(this.overviewKey);
      if (ov) return ov.values[r * ov.cols + c];
    }
    const t = tileOfCell(d.pyramid, 0, r, c);
    const key = this.key({ k: 0, ti: t.ti, tj: t.tj }, "value");
    const e = this.cache.get(key);
    if (e) return e.values[t.i * e.cols + t.j];
    if (fetch) void this.tiles.load(key, { k: 0, ti: t.ti, tj: t.tj }, "value")?.then(() => this.refreshTip());
    return null;
  }

  /** The value of the bin holding (r, c) at the finest level in the cache. */
  private binned(r: number, c: number): [number, number] | null {
    const d = this.d;
    for (let k = 1; k <= d.pyramid.top; k++) {
      const t = tileOfCell(d.pyramid, k, r, c);
      const e = this.cache.get(this.key({ k, ti: t.ti, tj: t.tj }, "value"));
      if (e) return [e.values[t.i * e.cols + t.j], k];
    }
    return null;
  }

  // -------------------------------------------------------------------- pointer
  private plotPoint(ev: MouseEvent): [number, number] {
    const [x, y] = localPoint(this.canvas, ev);
    return [x - this.geom.left, y - this.geom.top];
  }

  private inMini(ev: MouseEvent): boolean {
    const [x, y] = localPoint(this.canvas, ev);
    const g = this.geom;
    const [mw, mh] = this.miniBox();
    return this.win.size < this.d.n && x >= g.miniX && y >= g.miniY && x <= g.miniX + mw && y <= g.miniY + mh;
  }

  private refreshTip(): void {
    if (this.hover && this.hoverAt) this.showTip(this.hover, this.hoverAt, false);
  }

  private showTip(cell: [number, number], at: [number, number], fetchNow: boolean): void {
    const d = this.d;
    const [r, c] = cell;
    const rows: [string, string][] = [
      [d.rect ? "from (target)" : "from", `${displayToken(d.tokens[r] ?? "")}  (#${r})`],
      [d.rect ? "to (source)" : "to", `${displayToken(d.colTokens[c] ?? "")}  (#${c})`],
    ];
    let titleText: string;
    if (d.causal && c > r) {
      titleText = `${d.valueLabel}: none (a later token)`;
    } else {
      const v = this.exact(r, c, fetchNow);
      if (v !== null) {
        titleText = `${d.valueLabel}: ${exactText(v)}`;
      } else {
        const b = this.binned(r, c);
        titleText = this.link === "none" ? `${d.valueLabel}: exact value needs a running kernel`
          : this.link !== "ok" || this.tiles.waitingForKernel() ? `${d.valueLabel}: exact value ${this.waitText()}`
            : `${d.valueLabel}: fetching\u2026`;
        if (b) rows.push([`${this.reduce()} of ${2 ** b[1]}\u00d7${2 ** b[1]} here`, Number.isNaN(b[0]) ? "not read yet" : formatValue(b[0])]);
      }
    }
    this.tip.show(at[0], at[1], titleText, rows);
  }

  private onMove(ev: PointerEvent): void {
    const d = this.d;
    const [px, py] = this.plotPoint(ev);
    let cell = this.cellUnder(px, py);
    if (cell && (cell[0] >= d.rows || cell[1] >= d.cols)) cell = null; // past a rectangle's edge
    const at = localPoint(this.stage, ev);
    this.pointer = { plot: [px, py], stage: at };
    if (cell) {
      this.hoverAt = at;
      if (this.exactTimer) clearTimeout(this.exactTimer);
      this.showTip(cell, at, false);
      // ask for the exact weight once the pointer rests
      this.exactTimer = setTimeout(() => {
        if (this.hover && this.hover[0] === cell[0] && this.hover[1] === cell[1]) this.showTip(cell, at, true);
      }, 60);
    } else if (px < 0 && py >= 0 && py < this.geom.plot) {
      const r = this.rowUnder(py);
      if (r >= 0 && r < d.rows) this.tip.show(at[0], at[1], displayToken(d.tokens[r] ?? ""), [["position", `#${r} (row, from${d.rect ? ", target" : ""})`]]);
      else this.tip.hide();
    } else if (py < 0 && px >= 0 && px < this.geom.plot) {
      const c = this.colUnder(px);
      if (c >= 0 && c < d.cols) this.tip.show(at[0], at[1], displayToken(d.colTokens[c] ?? ""), [["position", `#${c} (column, to${d.rect ? ", source" : ""})`]]);
      else this.tip.hide();
    } else {
      this.tip.hide();
    }
    const same = this.hover && cell && this.hover[0] === cell[0] && this.hover[1] === cell[1];
    if (!same && (this.hover || cell)) {
      this.hover = cell;
      this.redraw();
    }
    this.canvas.style.cursor = this.inMini(ev) ? "pointer" : "";
  }

  private centreOnMini(ev: MouseEvent): void {
    const [x, y] = localPoint(this.canvas, ev);
    const g = this.geom;
    const f = this.d.n / g.mini;
    const w = this.win;
    this.setWindow({ x0: (x - g.miniX) * f - w.size / 2, y0: (y - g.miniY) * f - w.size / 2, size: w.size });
  }

  /**
   * Move the view (buttons, keys, minimap) onto whole cells: the cell under the pointer
   * changed, so the tooltip names the one now there (or goes, when the pointer is elsewhere).
   */
  private setWindow(w: Window, toward: "in" | "out" | "near" = "near"): void {
    this.win = this.fitLines(snapView(w, this.d.n, this.geom.plot, toward));
    this.tiles.clearQueue();
    this.retip();
    this.redraw();
  }

  /** The tooltip and hover of the cell under the pointer after the view moved under it. */
  private retip(): void {
    const p = this.pointer;
    const cell = p ? this.cellUnder(p.plot[0], p.plot[1]) : null;
    this.hover = cell;
    if (cell && p) {
      this.hoverAt = p.stage;
      this.showTip(cell, p.stage, true);
    } else {
      this.tip.hide();
    }
  }

  private zoomBy(factor: number, fx = 0.5, fy = 0.5): void {
    this.setWindow(this.zoomed(factor, fx, fy), factor > 1 ? "in" : "out");
  }

  /**
   * Zoom by `factor` keeping the cell under (fx, fy) (fractions of the plot) in place; where
   * the view is stretched before or after, the row and column under it by their own sizes.
   */
  private zoomed(factor: number, fx: number, fy: number): Window {
    const w = zoomAt(this.win, factor, fx, fy, this.d.n);
    if (!this.stretched() && !this.stretched(w.size)) return w;
    const px = fx * this.geom.plot;
    const py = fy * this.geom.plot;
    const [rowPx, colPx] = this.sides();
    const [rowTo, colTo] = this.sides(w.size);
    const row = this.win.y0 + py / rowPx;
    const col = this.win.x0 + px / colPx;
    return clampView({ x0: col - px / colTo, y0: row - py / rowTo, size: w.size }, this.d.n);
  }

  private bind(): void {
    const c = this.canvas;
    // Drag the map to pan it; a press on the minimap centres the view there and drags it along.
    bindPan(this, c, {
      start: (ev) => {
        if (this.inMini(ev)) {
          this.centreOnMini(ev);
          return { win: this.win, mini: true };
        }
        const [px, py] = this.plotPoint(ev);
        return px < 0 || py < 0 || px > this.geom.plot || py > this.geom.plot ? null : { win: this.win, mini: false };
      },
      move: (start, dx, dy, moved, ev) => {
        if (start.mini) {
          this.centreOnMini(ev);
          return true;
        }
        if (!moved || start.win.size >= this.d.n) return false;
        this.win = this.fitLines(panBy(start.win, dx, dy, this.geom.plot, this.d.n));
        this.tip.hide();
        this.redraw();
        return true;
      },
      hover: (ev) => this.onMove(ev),
      end: () => this.setWindow(this.win), // a drag ends on whole cells
    });
    this.listen(c, "pointerleave", () => {
      this.pointer = null;
      this.tip.hide();
      if (this.hover) {
        this.hover = null;
        this.redraw();
      }
    });
    this.wheelZoom(c, (ev) => {
      const [px, py] = this.plotPoint(ev);
      return px >= 0 && py >= 0 && px <= this.geom.plot && py <= this.geom.plot;
    }, (factor, ev) => {
      const [px, py] = this.plotPoint(ev);
      this.win = this.fitLines(snapView(this.zoomed(factor, px / this.geom.plot, py / this.geom.plot),
        this.d.n, this.geom.plot, factor > 1 ? "in" : "out"));
      this.tiles.clearQueue();
      this.onMove(ev as unknown as PointerEvent);
      this.redraw();
    });
    this.listen(c, "dblclick", () => this.setWindow(fullView(this.d.n)));
    this.listen(c, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      const step = this.win.size / 8;
      const moves: Record<string, () => void> = {
        "+": () => this.zoomBy(2), "=": () => this.zoomBy(2), "-": () => this.zoomBy(0.5), "0": () => this.setWindow(fullView(this.d.n)),
        ArrowLeft: () => this.setWindow({ ...this.win, x0: this.win.x0 - step }), ArrowRight: () => this.setWindow({ ...this.win, x0: this.win.x0 + step }),
        ArrowUp: () => this.setWindow({ ...this.win, y0: this.win.y0 - step }), ArrowDown: () => this.setWindow({ ...this.win, y0: this.win.y0 + step }),
        Escape: () => c.blur(),
      };
      const f = moves[ev.key];
      if (f) {
        ev.preventDefault();
        f();
      }
    });
  }

}

/** An exact weight for the tooltip: 4 significant digits. */
function exactText(v: number): string {
  if (!Number.isFinite(v)) return formatValue(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  return a >= 1e-3 && a < 1e5 ? String(Number(v.toPrecision(4))) : v.toExponential(3);
}

export default mount((props) => new HeatmapView(props));
