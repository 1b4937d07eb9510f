// HeadGrid: every layer × head attention map as a thumbnail ("L-H", 1-indexed), an optional
// per-head metric drawn as a coloured bar under each thumbnail, click to select a head.

import { paintThumb, resampleRanges } from "./lib/atlas";
import { FONT_SMALL, INK, localPoint, MUTED, sizeCanvas } from "./lib/canvas";
import { lut, lutColor, METRIC_DEFAULT, SEQUENTIAL_DEFAULT, seqIndex } from "./lib/colors";
import { decodeF32, decodeU8 } from "./lib/decode";
import { formatValue, headLabel } from "./lib/labels";
import { cellOrigin, finiteRange, GridLayout, gridLayout } from "./lib/layout";
import { colorBarH } from "./lib/legend";
import { availableWidth, coalesce, h, markDrawn, onChange, RenderProps, scheduler, selectedPair, watchWidth } from "./lib/model";
import { bindGridPointer } from "./lib/gridpointer";
import { Tooltip } from "./lib/tooltip";

interface Data {
  layers: number;
  heads: number;
  t: number;
  codes: Uint8Array;
  lut32: Uint32Array;
  headMax: Float32Array;
  metric: Float32Array | null;
  metricName: string;
  metricRange: [number, number];
  metricCmap: string;
  nTokens: number;
  scale: string;
}

function readData(model: RenderProps["model"]): Data {
  const layers = model.get("n_layers") as number;
  const heads = model.get("n_heads") as number;
  const t = model.get("size") as number;
  const cmap = (model.get("cmap") as string) || SEQUENTIAL_DEFAULT;
  const table = lut(cmap);
  const codes = decodeU8(model.get("thumbs"));
  if (codes.length !== layers * heads * t * t) {
    throw new Error(`head grid: expected ${layers * heads * t * t} thumbnail bytes, got ${codes.length}`);
  }
  const m = decodeF32(model.get("metric"));
  const metric = m.length === layers * heads ? m : null;
  return {
    layers, heads, t, codes,
    lut32: new Uint32Array(table.buffer, table.byteOffset, 256),
    headMax: decodeF32(model.get("head_max")),
    metric,
    metricName: (model.get("metric_name") as string) || "metric",
    metricRange: metric ? finiteRange(metric) : [NaN, NaN],
    metricCmap: (model.get("metric_cmap") as string) || METRIC_DEFAULT,
    nTokens: model.get("n_tokens") as number,
    scale: (model.get("scale") as string) || "head",
  };
}

function render({ model, el }: RenderProps) {
  const t0 = performance.now();
  performance.mark("attnkit:headgrid:start");
  const root = h("div", "attnkit attnkit-headgrid");
  const header = h("div", "attnkit-header");
  const title = h("div", "attnkit-title");
  const status = h("div", "attnkit-status");
  header.append(title, status);
  // The canvas holds thumbnails and labels (drawn once per data or size change); hover and
  // selection rings are positioned elements on top, so pointer moves never repaint it.
  const stage = h("div", "attnkit-stage");
  const canvas = h("canvas", "attnkit-canvas");
  const hoverRing = h("div", "attnkit-ring attnkit-ring-hover");
  const selRing = h("div", "attnkit-ring attnkit-ring-selected");
  const selLabel = h("div", "attnkit-ring-label");
  stage.append(canvas, hoverRing, selRing, selLabel);
  const tip = new Tooltip(stage);
  const hint = h("div", "attnkit-hint", "Click a head to select it \u00b7 labels are layer-head, counted from 1");
  root.append(header, stage, hint);
  el.appendChild(root);

  let data: Data;
  let grid: GridLayout;

  const load = () => {
    data = readData(model);
    performance.mark("attnkit:headgrid:decoded");
    title.textContent = (model.get("title") as string) || `Attention of ${data.layers} layers \u00d7 ${data.heads} heads`;
    root.dataset.thumbnails = String(data.layers * data.heads);
  };

  const layout = () => {
    const width = Math.max(320, Math.min(1400, availableWidth(el, 900)));
    grid = gridLayout({
      rows: data.layers, cols: data.heads, width,
      left: 30, top: data.metric ? 54 : 34, gap: 8, below: data.metric ? 20 : 14, bottom: 4,
      minCell: 28, maxCell: 110,
    });
    root.dataset.cell = String(grid.cell);
    root.dataset.gridLeft = String(grid.left);
    root.dataset.gridTop = String(grid.top);
    root.dataset.pitchX = String(grid.pitchX);
    root.dataset.pitchY = String(grid.pitchY);
  };

  const updateStatus = () => {
    const sel = selectedPair(model.get("selected"));
    status.textContent = sel ? `selected ${headLabel(sel[0], sel[1])}` : "no head selected";
  };

  const drawBase = () => {
    const g = grid;
    const ctx = sizeCanvas(canvas, g.width, g.height);
    const dpr = canvas.width / g.width;
    ctx.clearRect(0, 0, g.width, g.height);

    // Thumbnails, straight into device pixels.
    const s = Math.max(1, Math.round(g.cell * dpr));
    const img = ctx.createImageData(s, s);
    const px = new Uint32Array(img.data.buffer);
    const ranges = resampleRanges(data.t, s);
    const per = data.t * data.t;
    for (let l = 0; l < data.layers; l++) {
      for (let hd = 0; hd < data.heads; hd++) {
        paintThumb(data.codes, (l * data.heads + hd) * per, data.t, s, data.lut32, px, ranges);
        const [x, y] = cellOrigin(g, l, hd);
        ctx.putImageData(img, Math.round(x * dpr), Math.round(y * dpr));
      }
    }
    performance.mark("attnkit:headgrid:painted");

    // Column and row numbers.
    ctx.font = FONT_SMALL;
    ctx.fillStyle = MUTED;
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    for (let c = 0; c < data.heads; c++) {
      const [x] = cellOrigin(g, 0, c);
      ctx.fillText(c === 0 ? "head 1" : String(c + 1), x + g.cell / 2, g.top - 4);
    }
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let r = 0; r < data.layers; r++) {
      const [, y] = cellOrigin(g, r, 0);
      ctx.fillText(String(r + 1), g.left - 8, y + g.cell / 2);
    }
    ctx.save();
    ctx.translate(9, g.top + 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "right";
    ctx.fillText("layer", 0, 0);
    ctx.restore();

    // Legend: how thumbnails are scaled, and the metric's colour bar.
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillStyle = MUTED;
    const scaleText = data.scale === "global"
      ? "thumbnails: rows = from, cols = to; one colour scale 0\u20131 for all heads"
      : "thumbnails: rows = from, cols = to; each head scaled to its own maximum";
    ctx.fillText(scaleText, g.left, 2);
    if (data.metric) {
      const [lo, hi] = data.metricRange;
      colorBarH(ctx, data.metricCmap, g.left + 40, 20, 120, 9, lo, hi, data.metricName);
    }

    // Frames, metric bars, "L-H" labels.
    ctx.strokeStyle = "#d0d0d0";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let r = 0; r < data.layers; r++) {
      for (let c = 0; c < data.heads; c++) {
        const [x, y] = cellOrigin(g, r, c);
        ctx.rect(x - 0.5, y - 0.5, g.cell + 1, g.cell + 1);
      }
    }
    ctx.stroke();
    ctx.font = FONT_SMALL;
    ctx.fillStyle = INK;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    for (let r = 0; r < data.layers; r++) {
      for (let c = 0; c < data.heads; c++) {
        const [x, y] = cellOrigin(g, r, c);
        let ly = y + g.cell + 2;
        if (data.metric) {
          const v = data.metric[r * data.heads + c];
          const k = seqIndex(v, data.metricRange[0], data.metricRange[1]);
          ctx.fillStyle = k < 0 ? "#eee" : lutColor(data.metricCmap, k);
          ctx.fillRect(x, ly, g.cell, 5);
          ctx.fillStyle = INK;
          ly += 6;
        }
        ctx.fillText(headLabel(r, c), x, ly);
      }
    }
    baseDrawn = true;
  };

  const place = (el: HTMLElement, p: [number, number] | null, pad: number) => {
    if (!p) {
      el.style.display = "none";
      return;
    }
    const [x, y] = cellOrigin(grid, p[0], p[1]);
    el.style.display = "block";
    el.style.left = `${x - pad}px`;
    el.style.top = `${y - pad}px`;
    el.style.width = `${grid.cell + 2 * pad}px`;
    el.style.height = `${grid.cell + 2 * pad}px`;
  };
  const drawOverlay = () => {
    const sel = selectedPair(model.get("selected"));
    const hover = pointer.hovered();
    const sameAsSel = hover && sel && hover[0] === sel[0] && hover[1] === sel[1];
    place(hoverRing, sameAsSel ? null : hover, 2);
    place(selRing, sel, 4);
    if (sel) {
      const [x, y] = cellOrigin(grid, sel[0], sel[1]);
      selLabel.style.display = "block";
      selLabel.style.left = `${x}px`;
      selLabel.style.top = `${y + grid.cell + 2 + (data.metric ? 6 : 0)}px`;
      selLabel.textContent = headLabel(sel[0], sel[1]);
    } else {
      selLabel.style.display = "none";
    }
    canvas.style.cursor = hover ? "pointer" : "";
  };

  let baseDrawn = false;
  const draw = () => {
    if (!baseDrawn) drawBase();
    drawOverlay();
    markDrawn(root, t0);
    performance.mark("attnkit:headgrid:drawn");
  };
  const redraw = scheduler(draw);

  const pointer = bindGridPointer({
    canvas,
    stage,
    tip,
    layout: () => grid,
    describe: (r, c) => {
      const k = r * data.heads + c;
      const rows: [string, string][] = [
        ["layer, head", `${r + 1}, ${c + 1}`],
        ["max attention", formatValue(data.headMax[k])],
      ];
      if (data.metric) rows.push([data.metricName, formatValue(data.metric[k])]);
      return [`Head ${headLabel(r, c)}`, rows];
    },
    select: (r, c) => {
      model.set("selected", [r, c]);
      model.save_changes();
      updateStatus();
      redraw();
    },
    redraw,
  });

  const reload = coalesce(() => {
    load();
    layout();
    baseDrawn = false;
    pointer.reset();
    redraw();
  });
  const offData = onChange(model, ["thumbs", "n_layers", "n_heads", "size", "head_max", "metric", "metric_name", "metric_cmap", "cmap", "scale", "title"], reload);
  const onSel = () => { updateStatus(); redraw(); };
  model.on("change:selected", onSel);
  const offWidth = watchWidth(el, () => { layout(); baseDrawn = false; redraw(); });

  load();
  layout();
  updateStatus();
  draw();
  return () => {
    offData();
    model.off("change:selected", onSel);
    offWidth();
  };
}

export default { render };
