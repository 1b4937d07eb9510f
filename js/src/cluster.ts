// ClusterView: the 2-D embedding of heads, one dot per head, coloured by layer (sequential)
// or by a behaviour label (categorical); hover names the head, click selects it. It resizes
// with the output and zooms (click the plot or hold Ctrl, then scroll; drag to pan), so two
// outlier heads cannot squeeze the rest into one small cloud.

import { FONT_SMALL, localPoint, sizeCanvas } from "./lib/canvas";
import { readFloats, WireArray } from "./lib/codec";
import { categorical, lutColor, METRIC_DEFAULT } from "./lib/colors";
import { headLabel } from "./lib/labels";
import { legendItems } from "./lib/legend";
import { Fit, fitEqual, nearest, panFit, toScreen, zoomFit } from "./lib/scatter";
import { bindPan, Pan } from "./lib/pan";
import { h, HeadPickerView, mount, RenderProps } from "./lib/view";

const LEGEND = 170;
/** Padding (px) between the outermost dots' centres and the frame: a dot, its hover ring and a margin. */
const PAD = 30;
/** Nothing is drawn within this many px of the frame: labels flip inwards before reaching it. */
const MARGIN = 16;
/**
 * The part of viridis the layers take: its yellow end vanishes on white and its dark purple
 * start on a dark background, so each theme leaves out the end that is close to it.
 */
const LAYER_RANGE = { light: [0, 0.72], dark: [0.22, 1] } as const;

/** LUT index (0..255) of layer `l` of `n` in the theme's part of viridis. */
export function layerIndex(l: number, n: number, dark: boolean): number {
  const [a, b] = dark ? LAYER_RANGE.dark : LAYER_RANGE.light;
  return (a + (n > 1 ? l / (n - 1) : 0.5) * (b - a)) * 255;
}

interface Data {
  xs: Float32Array;
  ys: Float32Array;
  layers: number[];
  heads: number[];
  codes: number[];
  categories: string[];
  nLayers: number;
  labelName: string;
}

function pointColor(d: Data, i: number, dark: boolean): string {
  if (d.categories.length === 0) return lutColor(METRIC_DEFAULT, layerIndex(d.layers[i], d.nLayers, dark));
  const c = d.codes[i];
  return c >= 0 ? categorical(c) : "#bbb";
}

class ClusterViewView extends HeadPickerView<"cluster"> {
  private d!: Data;
  private canvas = h("canvas", "attnkit-canvas");
  private legend = h("div", "attnkit-legend");
  private size = 480;
  private base!: Fit;
  private fit!: Fit;
  private sx = new Float32Array(0);
  private sy = new Float32Array(0);
  private hover = -1;
  private pan!: Pan;
  private reset = this.button("Fit", "show every head", () => { this.fit = this.base; this.project(); this.redraw(); }, "attnkit-btn attnkit-btn-text");

  constructor(props: RenderProps) {
    super(props, "cluster");
    this.body.classList.add("attnkit-row");
    this.stage.appendChild(this.canvas);
    this.body.appendChild(this.legend);
    const zoom = h("span", "attnkit-zoom");
    zoom.append(
      this.button("+", "zoom in", () => this.zoom(2, this.size / 2, this.size / 2)),
      this.button("\u2212", "zoom out", () => this.zoom(0.5, this.size / 2, this.size / 2)),
      this.reset,
    );
    this.controls.appendChild(zoom);
    this.hint.textContent = "Hover a dot to name the head \u00b7 click to select it \u00b7 click the plot (or hold Ctrl) and scroll to zoom, drag to pan";
    this.bind();
  }

  protected load(): void {
    const pts = readFloats(this.get("points") as WireArray);
    const n = pts.length / 2;
    const layers = (this.get("layers") as number[]) ?? [];
    const heads = (this.get("heads") as number[]) ?? [];
    if (layers.length !== n || heads.length !== n) throw new Error(`cluster view: ${n} points but ${layers.length} layers / ${heads.length} heads`);
    const xs = new Float32Array(n);
    const ys = new Float32Array(n);
    for (let i = 0; i < n; i++) { xs[i] = pts[2 * i]; ys[i] = pts[2 * i + 1]; }
    this.d = {
      xs, ys, layers, heads,
      codes: (this.get("codes") as number[]) ?? [],
      categories: (this.get("categories") as string[]) ?? [],
      nLayers: this.get("n_layers") as number,
      labelName: (this.get("label_name") as string) || "layer",
    };
    this.title.textContent = (this.get("title") as string) || "Heads in 2-D";
    this.root.dataset.points = String(n);
    this.hover = -1;
    this.buildLegend();
    this.showSelection();
    this.base = undefined as unknown as Fit;
  }

  protected themeChanged(): void {
    this.buildLegend(); // the layer colours depend on the theme
  }

  private buildLegend(): void {
    const d = this.d;
    const items: [string, string][] = [];
    if (d.categories.length === 0) {
      const step = Math.max(1, Math.ceil(d.nLayers / 12));
      for (let l = 0; l < d.nLayers; l += step) items.push([lutColor(METRIC_DEFAULT, layerIndex(l, d.nLayers, this.theme.dark)), `layer ${l + 1}`]);
    } else {
      d.categories.forEach((cat, i) => items.push([categorical(i), cat]));
    }
    legendItems(this.legend, d.labelName, items);
  }

  protected layout(): void {
    const narrow = this.avail(680) < 520;
    this.body.classList.toggle("attnkit-stack", narrow);
    this.size = Math.max(200, Math.min(900, this.avail(680) - (narrow ? 0 : LEGEND)));
    const old = this.base;
    this.base = fitEqual(this.d.xs, this.d.ys, 0, 0, this.size, this.size, PAD);
    // keep the zoom when only the size changed
    if (!old || !this.fit) this.fit = this.base;
    else this.fit = { scale: (this.fit.scale * this.base.scale) / old.scale, ox: (this.fit.ox * this.base.scale) / old.scale, oy: (this.fit.oy * this.base.scale) / old.scale };
    this.project();
    this.root.dataset.plotSize = String(this.size);
  }

  private project(): void {
    const d = this.d;
    this.sx = new Float32Array(d.xs.length);
    this.sy = new Float32Array(d.xs.length);
    for (let i = 0; i < d.xs.length; i++) {
      const [x, y] = toScreen(this.fit, d.xs[i], d.ys[i]);
      this.sx[i] = x;
      this.sy[i] = y;
    }
    this.root.dataset.zoom = (this.fit.scale / this.base.scale).toFixed(3);
    this.reset.disabled = this.fit === this.base;
  }

  private zoom(factor: number, px: number, py: number): void {
    this.fit = zoomFit(this.fit, factor, px, py, this.base.scale);
    this.project();
    this.redraw();
  }

  private indexOf(pair: [number, number] | null): number {
    if (!pair) return -1;
    for (let i = 0; i < this.d.layers.length; i++) if (this.d.layers[i] === pair[0] && this.d.heads[i] === pair[1]) return i;
    return -1;
  }

  protected draw(): void {
    const d = this.d;
    const th = this.theme;
    const size = this.size;
    const ctx = sizeCanvas(this.canvas, size, size);
    ctx.clearRect(0, 0, size, size);
    ctx.strokeStyle = th.line;
    ctx.lineWidth = 1;
    ctx.strokeRect(0.5, 0.5, size - 1, size - 1);
    const n = this.sx.length;
    const r = n > 400 ? 3 : n > 150 ? 4 : 5;
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, 0, size, size);
    ctx.clip();
    for (let i = 0; i < n; i++) {
      ctx.beginPath();
      ctx.arc(this.sx[i], this.sy[i], r, 0, 2 * Math.PI);
      ctx.fillStyle = pointColor(d, i, th.dark);
      ctx.globalAlpha = 0.9;
      ctx.fill();
      ctx.globalAlpha = 1;
      // an outline in the text colour: every dot stands out from the background
      ctx.strokeStyle = th.dark ? "rgba(255,255,255,0.6)" : "rgba(0,0,0,0.6)";
      ctx.lineWidth = 1;
      ctx.stroke();
    }
    ctx.font = FONT_SMALL;
    const visible = [...Array(n).keys()].filter((i) => this.sx[i] >= 0 && this.sx[i] <= size && this.sy[i] >= 0 && this.sy[i] <= size);
    if (visible.length <= 48) {
      ctx.fillStyle = th.muted;
      for (const i of visible) this.label(ctx, i, r, false);
    }
    const ring = (i: number, color: string, w: number) => {
      if (i < 0) return;
      ctx.beginPath();
      ctx.arc(this.sx[i], this.sy[i], r + 3, 0, 2 * Math.PI);
      ctx.strokeStyle = color;
      ctx.lineWidth = w;
      ctx.stroke();
      ctx.font = `bold ${FONT_SMALL}`;
      ctx.fillStyle = th.ink;
      this.label(ctx, i, r + 2, true);
    };
    ring(this.hover, th.ink, 1.5);
    ring(this.indexOf(this.selection()), th.accent, 2.5);
    ctx.restore();
    if (!this.pan?.active()) this.canvas.style.cursor = this.hover >= 0 ? "pointer" : "";
  }

  /** The "L-H" label of point i beside it, flipped inwards near the plot's edges so it is never cut. */
  private label(ctx: CanvasRenderingContext2D, i: number, r: number, above: boolean): void {
    const text = headLabel(this.d.layers[i], this.d.heads[i]);
    const w = ctx.measureText(text).width;
    const x = this.sx[i];
    const y = this.sy[i];
    const right = x + r + 2 + w <= this.size - MARGIN;
    ctx.textAlign = right ? "left" : "right";
    ctx.textBaseline = above ? (y - r - 12 < 0 ? "top" : "bottom") : "middle";
    const ty = above ? (y - r - 12 < 0 ? y + r : y - r) : y;
    ctx.fillText(text, right ? x + r + 2 : x - r - 2, ty);
  }

  /** Name the head under the pointer and ring it. */
  private hoverAt(ev: PointerEvent): void {
    const c = this.canvas;
    const [x, y] = localPoint(c, ev);
    const i = nearest(this.sx, this.sy, x, y, 10);
    const d = this.d;
    if (i >= 0) {
      const rows: [string, string][] = [["layer, head", `${d.layers[i] + 1}, ${d.heads[i] + 1}`]];
      if (d.categories.length > 0) rows.push([d.labelName, d.codes[i] >= 0 ? d.categories[d.codes[i]] : "(none)"]);
      const [hx, hy] = localPoint(this.stage, ev);
      this.tip.show(hx, hy, `Head ${headLabel(d.layers[i], d.heads[i])}`, rows);
    } else {
      this.tip.hide();
    }
    if (i !== this.hover) {
      this.hover = i;
      this.redraw();
    }
  }

  private bind(): void {
    const c = this.canvas;
    const inside = () => true;
    this.wheelZoom(c, inside, (factor, ev) => {
      const [x, y] = localPoint(c, ev);
      this.zoom(factor, x, y);
    });
    this.listen(c, "dblclick", () => { this.fit = this.base; this.project(); this.redraw(); });
    this.pan = bindPan(this, c, {
      start: () => this.fit,
      move: (fit, dx, dy, moved) => {
        if (!moved) return false;
        this.fit = panFit(fit, dx, dy);
        this.project();
        this.tip.hide();
        this.redraw();
        return true;
      },
      hover: (ev) => this.hoverAt(ev),
    });
    this.listen(c, "pointerleave", () => {
      this.tip.hide();
      if (this.hover >= 0) {
        this.hover = -1;
        this.redraw();
      }
    });
    this.listen(c, "click", (e) => {
      if (this.pan.dragged()) return; // the click that ends a drag selects nothing
      const [x, y] = localPoint(c, e as MouseEvent);
      const i = nearest(this.sx, this.sy, x, y, 10);
      if (i < 0) return;
      this.pick(this.d.layers[i], this.d.heads[i]);
    });
  }
}

export default mount((props) => new ClusterViewView(props));
