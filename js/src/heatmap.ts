// Heatmap: one attention matrix (rows = from/query, columns = to/key) with token labels on
// both axes, hover read-out, and zoom/pan so 512-token maps stay readable.

import { bitmap, FONT, FONT_SMALL, INK, localPoint, MUTED, sizeCanvas } from "./lib/canvas";
import { divIndex, DIVERGING_DEFAULT, lut, paint, SEQUENTIAL_DEFAULT, seqIndex } from "./lib/colors";
import { decodeF16 } from "./lib/decode";
import { displayToken, formatValue, labelStride, truncate } from "./lib/labels";
import { colorBarV } from "./lib/legend";
import { availableWidth, h, markDrawn, onChange, RenderProps, scheduler, watchWidth } from "./lib/model";
import { Tooltip } from "./lib/tooltip";
import { cellAt, clampView, fullView, panBy, View, zoomAt } from "./lib/zoom";

const LABEL_CHARS = 14;
const MIN_LABEL_PX = 11;

interface Data {
  n: number;
  values: Float32Array;
  tokens: string[];
  shown: string[]; // display form of the tokens, truncated for the axes
  diverging: boolean;
  vmax: number;
  cmap: string;
  image: HTMLCanvasElement;
}

function readData(model: RenderProps["model"]): Data {
  const n = model.get("n") as number;
  const values = decodeF16(model.get("values"));
  if (values.length !== n * n) throw new Error(`heatmap: expected ${n * n} values, got ${values.length}`);
  const tokens = (model.get("tokens") as string[]) ?? [];
  const diverging = Boolean(model.get("diverging"));
  const cmap = (model.get("cmap") as string) || (diverging ? DIVERGING_DEFAULT : SEQUENTIAL_DEFAULT);
  let vmax = Number(model.get("vmax"));
  if (!(vmax > 0)) vmax = 1;
  const index = diverging ? (v: number) => divIndex(v, vmax) : (v: number) => seqIndex(v, 0, vmax);
  const rgba = paint(values, lut(cmap), index, undefined, [235, 235, 235, 255]);
  return {
    n, values, tokens, diverging, vmax, cmap,
    shown: tokens.map((t) => truncate(displayToken(t), LABEL_CHARS)),
    image: bitmap(rgba, n, n),
  };
}

function render({ model, el }: RenderProps) {
  const t0 = performance.now();
  const root = h("div", "attnkit attnkit-heatmap");
  const header = h("div", "attnkit-header");
  const title = h("div", "attnkit-title");
  const controls = h("div", "attnkit-controls");
  header.append(title, controls);

  const stepper = (label: string, trait: string, count: string) => {
    const box = h("span", "attnkit-stepper");
    const prev = h("button", "attnkit-btn", "\u2039");
    const val = h("span", "attnkit-stepper-value");
    const next = h("button", "attnkit-btn", "\u203a");
    prev.title = `previous ${label.toLowerCase()}`;
    next.title = `next ${label.toLowerCase()}`;
    box.append(h("span", "attnkit-stepper-label", label), prev, val, next);
    const step = (d: number) => {
      const max = model.get(count) as number;
      const cur = model.get(trait) as number;
      const nv = Math.min(max - 1, Math.max(0, cur + d));
      if (nv !== cur) {
        model.set(trait, nv);
        model.save_changes();
      }
    };
    prev.addEventListener("click", () => step(-1));
    next.addEventListener("click", () => step(1));
    const update = () => {
      const max = model.get(count) as number;
      const cur = model.get(trait) as number;
      box.style.display = max > 1 ? "" : "none";
      val.textContent = `${cur + 1}/${max}`;
      prev.disabled = cur <= 0;
      next.disabled = cur >= max - 1;
    };
    return { box, update };
  };
  const layerStep = stepper("Layer", "layer", "n_layers");
  const headStep = stepper("Head", "head", "n_heads");
  const zoomIn = h("button", "attnkit-btn", "+");
  const zoomOut = h("button", "attnkit-btn", "\u2212");
  const fit = h("button", "attnkit-btn attnkit-btn-text", "Fit");
  zoomIn.title = "zoom in";
  zoomOut.title = "zoom out";
  fit.title = "show the whole map";
  const zoomBox = h("span", "attnkit-zoom");
  zoomBox.append(zoomIn, zoomOut, fit);
  controls.append(layerStep.box, headStep.box, zoomBox);

  const stage = h("div", "attnkit-stage");
  const canvas = h("canvas", "attnkit-canvas");
  stage.appendChild(canvas);
  const tip = new Tooltip(stage);
  const hint = h("div", "attnkit-hint", "Scroll to zoom \u00b7 drag to pan \u00b7 double-click to fit \u00b7 rows attend (from) \u2192 columns (to)");
  root.append(header, stage, hint);
  el.appendChild(root);

  let data: Data;
  let view: View;
  let hover: [number, number] | null = null;
  let geom = { left: 0, top: 0, plot: 0, width: 0, height: 0, label: 0 };
  let drag: { x: number; y: number; view: View; moved: boolean } | null = null;

  const load = () => {
    const prevN = data?.n;
    data = readData(model);
    if (view === undefined || prevN !== data.n) view = fullView(data.n);
    title.textContent = (model.get("title") as string) || "";
    layerStep.update();
    headStep.update();
  };

  const layout = () => {
    const width = Math.max(360, Math.min(980, availableWidth(el, 760)));
    const ctx = canvas.getContext("2d")!;
    ctx.font = FONT;
    let widest = 0;
    for (const s of data.shown) widest = Math.max(widest, ctx.measureText(s).width);
    const label = Math.ceil(Math.min(130, Math.max(28, widest + 10)));
    const bar = 84;
    const plot = Math.max(160, width - label - bar - 12);
    geom = { left: label, top: label, plot, width: label + plot + bar + 12, height: label + plot + 8, label };
    root.dataset.plotLeft = String(geom.left);
    root.dataset.plotTop = String(geom.top);
    root.dataset.plotSize = String(geom.plot);
  };

  const draw = () => {
    const { left, top, plot, width, height } = geom;
    const ctx = sizeCanvas(canvas, width, height);
    ctx.clearRect(0, 0, width, height);
    const n = data.n;
    const cellPx = plot / view.size;

    // Cells: one bitmap pixel per cell, scaled without smoothing so cells stay crisp.
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(data.image, view.x0, view.y0, view.size, view.size, left, top, plot, plot);
    if (cellPx >= 10) {
      ctx.strokeStyle = "rgba(255,255,255,0.6)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      const first = Math.ceil(view.x0);
      for (let i = first; i <= view.x0 + view.size; i++) {
        const x = left + (i - view.x0) * cellPx;
        ctx.moveTo(x, top); ctx.lineTo(x, top + plot);
      }
      const firstR = Math.ceil(view.y0);
      for (let i = firstR; i <= view.y0 + view.size; i++) {
        const y = top + (i - view.y0) * cellPx;
        ctx.moveTo(left, y); ctx.lineTo(left + plot, y);
      }
      ctx.stroke();
    }
    ctx.strokeStyle = "#999";
    ctx.lineWidth = 1;
    ctx.strokeRect(left - 0.5, top - 0.5, plot + 1, plot + 1);

    // Hovered row and column bands and cell.
    if (hover) {
      const [r, c] = hover;
      const ry = top + (r - view.y0) * cellPx;
      const cx = left + (c - view.x0) * cellPx;
      ctx.save();
      ctx.beginPath();
      ctx.rect(left, top, plot, plot);
      ctx.clip();
      ctx.fillStyle = "rgba(255, 170, 0, 0.16)";
      ctx.fillRect(left, ry, plot, cellPx);
      ctx.fillRect(cx, top, cellPx, plot);
      ctx.strokeStyle = "#e07000";
      ctx.lineWidth = 2;
      ctx.strokeRect(cx, ry, Math.max(cellPx, 2), Math.max(cellPx, 2));
      ctx.restore();
    }

    // Axis labels for the visible rows/columns; a 1-2-5 stride when cells are small.
    const stride = labelStride(cellPx, MIN_LABEL_PX);
    const lo = Math.max(0, Math.floor(view.y0));
    const hi = Math.min(n - 1, Math.ceil(view.y0 + view.size) - 1);
    const loC = Math.max(0, Math.floor(view.x0));
    const hiC = Math.min(n - 1, Math.ceil(view.x0 + view.size) - 1);
    const fontPx = Math.max(8, Math.min(12, cellPx * 0.9));
    const font = `${fontPx.toFixed(1)}px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif`;
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, top, left, plot);
    ctx.clip();
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let i = lo; i <= hi; i++) {
      const isHover = hover !== null && hover[0] === i;
      if (i % stride !== 0 && !isHover) continue;
      const y = top + (i + 0.5 - view.y0) * cellPx;
      ctx.font = isHover ? `bold ${font}` : font;
      ctx.fillStyle = isHover ? "#b35a00" : INK;
      ctx.fillText(data.shown[i] ?? String(i), left - 5, y);
    }
    ctx.restore();
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, 0, plot, top);
    ctx.clip();
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    for (let j = loC; j <= hiC; j++) {
      const isHover = hover !== null && hover[1] === j;
      if (j % stride !== 0 && !isHover) continue;
      const x = left + (j + 0.5 - view.x0) * cellPx;
      ctx.save();
      ctx.translate(x, top - 5);
      ctx.rotate(-Math.PI / 2);
      ctx.font = isHover ? `bold ${font}` : font;
      ctx.fillStyle = isHover ? "#b35a00" : INK;
      ctx.fillText(data.shown[j] ?? String(j), 0, 0);
      ctx.restore();
    }
    ctx.restore();

    // Corner: direction of reading.
    ctx.font = FONT_SMALL;
    ctx.fillStyle = MUTED;
    ctx.textAlign = "right";
    ctx.textBaseline = "bottom";
    ctx.fillText("to \u2192", left - 4, top - 4);
    ctx.fillText("from \u2193", left - 4, top - 18);

    // Colour bar.
    const bx = left + plot + 10;
    const bh = Math.min(plot, 220);
    if (data.diverging) {
      colorBarV(ctx, data.cmap, bx, top + 14, 12, bh, -data.vmax, data.vmax, 0, (model.get("value_label") as string) || "");
    } else {
      colorBarV(ctx, data.cmap, bx, top + 14, 12, bh, 0, data.vmax, undefined, (model.get("value_label") as string) || "");
    }
    if (stride > 1 || view.size < n) {
      ctx.font = FONT_SMALL;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      const r0 = Math.floor(view.y0) + 1;
      const r1 = Math.min(n, Math.ceil(view.y0 + view.size));
      const c0 = Math.floor(view.x0) + 1;
      const c1 = Math.min(n, Math.ceil(view.x0 + view.size));
      ctx.fillText(`rows ${r0}\u2013${r1}`, bx, top + bh + 40);
      ctx.fillText(`cols ${c0}\u2013${c1}`, bx, top + bh + 54);
      if (stride > 1) ctx.fillText(`label every ${stride}`, bx, top + bh + 68);
    }
    zoomOut.disabled = view.size >= n;
    fit.disabled = view.size >= n;
    zoomIn.disabled = view.size <= Math.min(4, n);
    markDrawn(root, t0);
  };

  const redraw = scheduler(draw);

  const plotPoint = (ev: MouseEvent): [number, number] => {
    const [x, y] = localPoint(canvas, ev);
    return [x - geom.left, y - geom.top];
  };

  const showTip = (ev: MouseEvent) => {
    const [sx, sy] = localPoint(stage, ev);
    const [px, py] = plotPoint(ev);
    const cell = cellAt(view, px, py, geom.plot, data.n);
    if (cell) {
      const [r, c] = cell;
      const v = data.values[r * data.n + c];
      tip.show(sx, sy, `${(model.get("value_label") as string) || "value"}: ${formatValue(v)}`, [
        ["from", `${displayToken(data.tokens[r] ?? "")}  (#${r + 1})`],
        ["to", `${displayToken(data.tokens[c] ?? "")}  (#${c + 1})`],
      ]);
    } else if (px < 0 && py >= 0 && py < geom.plot) {
      const r = Math.floor(view.y0 + (py / geom.plot) * view.size);
      if (r >= 0 && r < data.n) tip.show(sx, sy, displayToken(data.tokens[r] ?? ""), [["position", `#${r + 1} (row, from)`]]);
      else tip.hide();
    } else if (py < 0 && px >= 0 && px < geom.plot) {
      const c = Math.floor(view.x0 + (px / geom.plot) * view.size);
      if (c >= 0 && c < data.n) tip.show(sx, sy, displayToken(data.tokens[c] ?? ""), [["position", `#${c + 1} (column, to)`]]);
      else tip.hide();
    } else {
      tip.hide();
    }
    const same = hover && cell && hover[0] === cell[0] && hover[1] === cell[1];
    if (!same && (hover || cell)) {
      hover = cell;
      redraw();
    }
  };

  canvas.addEventListener("pointerdown", (ev) => {
    const [px, py] = plotPoint(ev);
    if (px < 0 || py < 0 || px > geom.plot || py > geom.plot || ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, view, moved: false };
    canvas.setPointerCapture?.(ev.pointerId);
  });
  canvas.addEventListener("pointermove", (ev) => {
    if (drag) {
      const dx = ev.clientX - drag.x;
      const dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved && drag.view.size < data.n) {
        view = panBy(drag.view, dx, dy, geom.plot, data.n);
        canvas.style.cursor = "grabbing";
        tip.hide();
        redraw();
        return;
      }
    }
    showTip(ev);
  });
  const endDrag = () => {
    drag = null;
    canvas.style.cursor = "";
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);
  canvas.addEventListener("pointerleave", () => {
    tip.hide();
    if (hover) {
      hover = null;
      redraw();
    }
  });
  canvas.addEventListener("wheel", (ev) => {
    const [px, py] = plotPoint(ev);
    if (px < 0 || py < 0 || px > geom.plot || py > geom.plot) return;
    ev.preventDefault();
    const factor = Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.002));
    view = zoomAt(view, factor, px / geom.plot, py / geom.plot, data.n);
    showTip(ev);
    redraw();
  }, { passive: false });
  canvas.addEventListener("dblclick", () => {
    view = fullView(data.n);
    redraw();
  });
  zoomIn.addEventListener("click", () => { view = zoomAt(view, 2, 0.5, 0.5, data.n); redraw(); });
  zoomOut.addEventListener("click", () => { view = zoomAt(view, 0.5, 0.5, 0.5, data.n); redraw(); });
  fit.addEventListener("click", () => { view = fullView(data.n); redraw(); });

  let reloadQueued = false;
  const reload = () => {
    // Several traits change in one message; rebuild once.
    if (reloadQueued) return;
    reloadQueued = true;
    queueMicrotask(() => {
      reloadQueued = false;
      reloadNow();
    });
  };
  const reloadNow = () => {
    load();
    view = clampView(view, data.n);
    layout();
    hover = null;
    redraw();
  };
  const offData = onChange(model, ["values", "n", "tokens", "diverging", "vmax", "cmap", "title", "value_label", "layer", "head", "n_layers", "n_heads"], reload);
  const offWidth = watchWidth(el, () => { layout(); redraw(); });

  load();
  layout();
  draw();
  return () => {
    offData();
    offWidth();
  };
}

export default { render };
