// ImageAttention: the image a vision transformer read, with one query's row of an overlay
// (a head's attention, the mean of a layer's heads, rollout, gradient rollout, a measure)
// drawn over its patches, a colour bar, and the special tokens' values beside it.
// The image arrives as uint8 RGB bytes and the overlay as a float16 [n, n] matrix
// (attnkit/widgets/image.py): choosing a query (click, arrows, Home) redraws here without
// the kernel; another layer, head or overlay is computed by the kernel.

import { bitmap, FONT_SMALL, localPoint, sizeCanvas } from "./lib/canvas";
import { readArray, readFloats, WireArray } from "./lib/codec";
import { lut, seqIndex } from "./lib/colors";
import { headPicker, stepper } from "./lib/controls";
import { formatValue } from "./lib/labels";
import { colorBarV } from "./lib/legend";
import { cellOf, patchAt, PatchGrid, patchValues, stepQuery } from "./lib/patches";
import { h, mount, noKernel, RenderProps, View } from "./lib/view";

const BAR = 96; // the colour bar and its numbers, right of the image
const MAX_SIDE = 560; // the image's longer side at most, in CSS px

interface Data {
  grid: PatchGrid;
  image: HTMLCanvasElement;
  imageW: number;
  imageH: number;
  matrix: Float32Array;
  rowsOfMatrix: number;
  n: number;
  tokens: string[];
  cmap: string;
  label: string;
}

class ImageView extends View<"image"> {
  private d!: Data;
  private canvas = h("canvas", "attnkit-canvas");
  private specials = h("div", "attnkit-legend-text");
  private box = { left: 0, top: 0, w: 0, h: 0 };
  private overlaySel = h("select", "");
  private headPick = headPicker(this, "head", "mean", "one head, or the mean of the layer's heads");
  private layerStep = stepper(this, "Layer", "layer", "n_layers");
  private offline = noKernel();

  constructor(props: RenderProps) {
    super(props, "image");
    this.stage.appendChild(this.canvas);
    this.body.appendChild(this.specials);
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    const overlayBox = h("label", "attnkit-select");
    overlayBox.append(h("span", "attnkit-stepper-label", "overlay"), this.overlaySel);
    this.overlaySel.setAttribute("aria-label", "overlay");
    this.overlaySel.title = "what is drawn over the image";
    this.controls.append(overlayBox, this.layerStep.box, this.headPick.box);
    this.listen(this.overlaySel, "change", () => this.save({ overlay: this.overlaySel.value }));
    if (this.offline) {
      const why = "another layer, head or overlay needs a running kernel";
      const heads = this.headPick.box.querySelector("select") as HTMLSelectElement;
      this.overlaySel.disabled = heads.disabled = true;
      this.overlaySel.title = heads.title = why;
      this.layerStep.setEnabled(false, why);
    }
    this.hint.textContent = "Click a patch (or use the arrow keys) to choose the query \u00b7 Home: the class token";
    this.onModel("change:query", () => this.redraw());
    this.onModel("change:opacity", () => this.redraw());
    this.hoverable(this.canvas, (e) => this.hover(e));
    this.listen(this.canvas, "click", (e) => {
      const [x, y] = localPoint(this.canvas, e as MouseEvent);
      const p = this.patchAt(x, y);
      if (p >= 0) this.choose(p);
    });
    this.listen(this.canvas, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      const next = stepQuery(this.d.grid, this.get("query") as number, ev.key);
      if (next === null) return;
      ev.preventDefault();
      this.choose(next);
    });
  }

  protected quiet(): ("query" | "opacity")[] {
    return ["query", "opacity"];
  }

  protected load(): void {
    const [rows, cols] = (this.get("grid") as number[]) ?? [1, 1];
    const grid = { rows, cols, first: this.get("first_patch") as number };
    const img = readArray(this.get("image") as WireArray);
    const [ih, iw] = img.shape;
    const rgb = img.data as Uint8Array;
    const rgba = new Uint8ClampedArray(ih * iw * 4);
    for (let i = 0, j = 0; i < ih * iw; i++, j += 3) {
      rgba[4 * i] = rgb[j];
      rgba[4 * i + 1] = rgb[j + 1];
      rgba[4 * i + 2] = rgb[j + 2];
      rgba[4 * i + 3] = 255;
    }
    const m = this.get("matrix") as WireArray;
    const matrix = readFloats(m);
    const tokens = (this.get("tokens") as string[]) ?? [];
    this.d = {
      grid, image: bitmap(rgba, iw, ih), imageW: iw, imageH: ih, matrix,
      rowsOfMatrix: m?.shape?.[0] ?? 1, n: tokens.length, tokens,
      cmap: (this.get("cmap") as string) || "magma",
      label: (this.get("value_label") as string) || "attention",
    };
    this.title.textContent = (this.get("title") as string) || "image attention";
    const names = (this.get("overlays") as string[]) ?? [];
    this.overlaySel.replaceChildren(...names.map((name) => {
      const o = h("option", "", name);
      o.value = name;
      return o;
    }));
    this.overlaySel.value = this.get("overlay") as string;
    const layered = Boolean(this.get("layered"));
    const heads = this.get("n_heads") as number;
    this.headPick.update(heads);
    this.headPick.box.style.display = layered ? "" : "none";
    this.layerStep.update();
    this.layerStep.box.style.display = layered && (this.get("n_layers") as number) > 1 ? "" : "none";
  }

  protected layout(): void {
    const d = this.d;
    const avail = Math.max(160, this.avail(640) - BAR - 8);
    const s = Math.min(MAX_SIDE, avail) / Math.max(d.imageW, d.imageH);
    this.box = { left: 4, top: 18, w: Math.round(d.imageW * s), h: Math.round(d.imageH * s) };
    const ds = this.root.dataset;
    ds.imgLeft = String(this.box.left);
    ds.imgTop = String(this.box.top);
    ds.imgWidth = String(this.box.w);
    ds.imgHeight = String(this.box.h);
  }

  protected draw(): void {
    const d = this.d;
    const b = this.box;
    const query = this.get("query") as number;
    const opacity = Math.max(0, Math.min(1, Number(this.get("opacity"))));
    const ctx = sizeCanvas(this.canvas, b.left + b.w + BAR, b.top + b.h + 6);
    ctx.fillStyle = this.theme.bg;
    ctx.fillRect(0, 0, b.left + b.w + BAR, b.top + b.h + 6);
    // smoothing only to shrink: an enlarged small image (32 × 32) keeps crisp pixels, so no
    // square bleeds into the next patch
    ctx.imageSmoothingEnabled = b.w < d.imageW;
    ctx.drawImage(d.image, b.left, b.top, b.w, b.h);
    const row = this.row(query);
    const { values, top } = patchValues(row, d.grid);
    const table = lut(d.cmap);
    const rgba = new Uint8ClampedArray(values.length * 4);
    const a = Math.round(opacity * 255);
    for (let i = 0; i < values.length; i++) {
      const k = seqIndex(values[i], 0, top) * 4;
      rgba[4 * i] = table[k];
      rgba[4 * i + 1] = table[k + 1];
      rgba[4 * i + 2] = table[k + 2];
      rgba[4 * i + 3] = a;
    }
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(bitmap(rgba, d.grid.cols, d.grid.rows), b.left, b.top, b.w, b.h);
    const cell = cellOf(d.grid, query);
    const pw = b.w / d.grid.cols;
    const ph = b.h / d.grid.rows;
    if (cell) {
      ctx.strokeStyle = this.theme.accent;
      ctx.lineWidth = 2;
      ctx.strokeRect(b.left + cell[1] * pw + 1, b.top + cell[0] * ph + 1, pw - 2, ph - 2);
    }
    colorBarV(ctx, this.theme, d.cmap, b.left + b.w + 12, b.top + 14, 12, Math.max(40, b.h - 28), 0, top, undefined, d.label);
    ctx.fillStyle = this.theme.muted;
    ctx.font = FONT_SMALL;
    ctx.textAlign = "left";
    ctx.textBaseline = "bottom";
    const who = d.tokens[query] ?? "";
    ctx.fillText(cell ? `query: patch ${who}` : `query: ${who}`, b.left, b.top - 4);
    // the special tokens have no patch: their values are listed as text
    const parts: string[] = [];
    for (let p = 0; p < d.grid.first; p++) parts.push(`${d.tokens[p]} ${formatValue(row[p])}`);
    this.specials.textContent = parts.length ? `${d.label} to ${parts.join(", ")}` : "";
    this.canvas.setAttribute("aria-label", `${d.label} of ${cell ? `patch ${who}` : who} over a ${d.grid.rows} by ${d.grid.cols} patch grid`);
    this.status.textContent = this.offline ? "query only (no kernel)" : "";
    this.root.dataset.query = String(query);
    this.root.dataset.top = String(top);
  }

  private row(query: number): Float32Array {
    const d = this.d;
    const r = d.rowsOfMatrix === 1 ? 0 : query;
    return d.matrix.subarray(r * d.n, (r + 1) * d.n);
  }

  private patchAt(x: number, y: number): number {
    const b = this.box;
    return patchAt(this.d.grid, x, y, b.left, b.top, b.w, b.h);
  }

  private choose(position: number): void {
    this.save({ query: position });
    this.redraw();
  }

  private hover(ev: PointerEvent): void {
    const [x, y] = localPoint(this.canvas, ev);
    const p = this.patchAt(x, y);
    if (p < 0) {
      this.tip.hide();
      return;
    }
    const at = localPoint(this.stage, ev);
    const v = this.row(this.get("query") as number)[p];
    this.tip.show(at[0], at[1], `patch ${this.d.tokens[p] ?? ""}`, [
      [this.d.label, formatValue(v)],
      ["position", `#${p}`],
    ]);
  }
}

export default mount((props) => new ImageView(props));
