// HeadMap: a layer × head grid of one per-head metric (entropy, relation accuracy, ...),
// with hover read-out and click-to-select.

import { FONT_SMALL, INK, localPoint, MUTED, sizeCanvas } from "./lib/canvas";
import { divIndex, DIVERGING_DEFAULT, lutColor, METRIC_DEFAULT, seqIndex, textOn } from "./lib/colors";
import { decodeF32 } from "./lib/decode";
import { formatValue, headLabel } from "./lib/labels";
import { cellOrigin, finiteRange, GridLayout, gridLayout } from "./lib/layout";
import { colorBarV } from "./lib/legend";
import { availableWidth, coalesce, h, markDrawn, onChange, RenderProps, scheduler, selectedPair, watchWidth } from "./lib/model";
import { bindGridPointer } from "./lib/gridpointer";
import { Tooltip } from "./lib/tooltip";

interface Data {
  layers: number;
  heads: number;
  values: Float32Array;
  name: string;
  diverging: boolean;
  cmap: string;
  lo: number;
  hi: number;
}

function readData(model: RenderProps["model"]): Data {
  const layers = model.get("n_layers") as number;
  const heads = model.get("n_heads") as number;
  const values = decodeF32(model.get("values"));
  if (values.length !== layers * heads) throw new Error(`head map: expected ${layers * heads} values, got ${values.length}`);
  const diverging = Boolean(model.get("diverging"));
  const [lo0, hi0] = finiteRange(values);
  let lo = lo0;
  let hi = hi0;
  const vmin = model.get("vmin");
  const vmax = model.get("vmax");
  if (typeof vmin === "number" && Number.isFinite(vmin)) lo = vmin;
  if (typeof vmax === "number" && Number.isFinite(vmax)) hi = vmax;
  if (diverging) {
    const a = Math.max(Math.abs(lo), Math.abs(hi));
    lo = -a;
    hi = a;
  }
  return {
    layers, heads, values, diverging, lo, hi,
    name: (model.get("value_name") as string) || "value",
    cmap: (model.get("cmap") as string) || (diverging ? DIVERGING_DEFAULT : METRIC_DEFAULT),
  };
}

function colorIndex(d: Data, v: number): number {
  return d.diverging ? divIndex(v, d.hi) : seqIndex(v, d.lo, d.hi);
}

function render({ model, el }: RenderProps) {
  const t0 = performance.now();
  const root = h("div", "attnkit attnkit-headmap");
  const header = h("div", "attnkit-header");
  const title = h("div", "attnkit-title");
  const status = h("div", "attnkit-status");
  header.append(title, status);
  const stage = h("div", "attnkit-stage");
  const canvas = h("canvas", "attnkit-canvas");
  stage.appendChild(canvas);
  const tip = new Tooltip(stage);
  const hint = h("div", "attnkit-hint", "Click a cell to select that head \u00b7 layers and heads counted from 1");
  root.append(header, stage, hint);
  el.appendChild(root);

  let data: Data;
  let grid: GridLayout;

  const load = () => {
    data = readData(model);
    title.textContent = (model.get("title") as string) || `${data.name} per head`;
    root.dataset.cells = String(data.layers * data.heads);
  };
  const layout = () => {
    const width = Math.max(300, Math.min(900, availableWidth(el, 640)));
    grid = gridLayout({
      rows: data.layers, cols: data.heads, width: width - 80,
      left: 40, top: 24, gap: 2, below: 0, bottom: 4, minCell: 14, maxCell: 52,
    });
    grid.width += 80; // colour bar
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

  const draw = () => {
    const g = grid;
    const ctx = sizeCanvas(canvas, g.width, g.height);
    ctx.clearRect(0, 0, g.width, g.height);
    const sel = selectedPair(model.get("selected"));
    ctx.font = FONT_SMALL;
    ctx.fillStyle = MUTED;
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    for (let c = 0; c < data.heads; c++) {
      const [x] = cellOrigin(g, 0, c);
      ctx.fillText(String(c + 1), x + g.cell / 2, g.top - 3);
    }
    ctx.textAlign = "right";
    ctx.fillText("head", g.left - 4, g.top - 3);
    ctx.textBaseline = "middle";
    for (let r = 0; r < data.layers; r++) {
      const [, y] = cellOrigin(g, r, 0);
      ctx.fillText(String(r + 1), g.left - 6, y + g.cell / 2);
    }
    ctx.save();
    ctx.translate(10, g.top + 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "right";
    ctx.fillText("layer", 0, 0);
    ctx.restore();

    const showText = g.cell >= 30;
    for (let r = 0; r < data.layers; r++) {
      for (let c = 0; c < data.heads; c++) {
        const [x, y] = cellOrigin(g, r, c);
        const v = data.values[r * data.heads + c];
        const k = colorIndex(data, v);
        ctx.fillStyle = k < 0 ? "#f2f2f2" : lutColor(data.cmap, k);
        ctx.fillRect(x, y, g.cell, g.cell);
        if (k < 0) {
          ctx.strokeStyle = "#ccc";
          ctx.lineWidth = 1;
          ctx.beginPath();
          ctx.moveTo(x + 3, y + g.cell - 3);
          ctx.lineTo(x + g.cell - 3, y + 3);
          ctx.stroke();
        } else if (showText) {
          ctx.fillStyle = textOn(data.cmap, k);
          ctx.textAlign = "center";
          ctx.textBaseline = "middle";
          ctx.font = FONT_SMALL;
          ctx.fillText(formatValue(v), x + g.cell / 2, y + g.cell / 2);
        }
      }
    }
    const mark = (p: [number, number] | null, color: string, w: number) => {
      if (!p) return;
      const [x, y] = cellOrigin(g, p[0], p[1]);
      ctx.strokeStyle = color;
      ctx.lineWidth = w;
      ctx.strokeRect(x - w / 2, y - w / 2, g.cell + w, g.cell + w);
    };
    mark(pointer.hovered(), "#444", 1.5);
    mark(sel, "#e07000", 3);

    const bx = g.left + data.heads * g.pitchX + 12;
    const bh = Math.min(200, Math.max(60, data.layers * g.pitchY - 20));
    ctx.fillStyle = INK;
    colorBarV(ctx, data.cmap, bx, g.top + 16, 12, bh, data.lo, data.hi, data.diverging ? 0 : undefined, data.name);
    canvas.style.cursor = pointer.hovered() ? "pointer" : "";
    markDrawn(root, t0);
  };
  const redraw = scheduler(draw);

  const pointer = bindGridPointer({
    canvas,
    stage,
    tip,
    layout: () => grid,
    describe: (r, c) => [`Head ${headLabel(r, c)}`, [[data.name, formatValue(data.values[r * data.heads + c])]]],
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
    pointer.reset();
    redraw();
  });
  const offData = onChange(model, ["values", "n_layers", "n_heads", "value_name", "cmap", "diverging", "vmin", "vmax", "title"], reload);
  const onSel = () => { updateStatus(); redraw(); };
  model.on("change:selected", onSel);
  const offWidth = watchWidth(el, () => { layout(); redraw(); });

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
