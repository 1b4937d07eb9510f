// ClusterView: the 2-D embedding of heads, one dot per head, coloured by layer (sequential)
// or by a behaviour label (categorical); hover names the head, click selects it.

import { FONT_SMALL, INK, localPoint, MUTED, sizeCanvas } from "./lib/canvas";
import { categorical, lutColor, METRIC_DEFAULT } from "./lib/colors";
import { decodeF32 } from "./lib/decode";
import { headLabel } from "./lib/labels";
import { availableWidth, coalesce, h, markDrawn, onChange, RenderProps, scheduler, selectedPair, watchWidth } from "./lib/model";
import { fitEqual, nearest, toScreen } from "./lib/scatter";
import { Tooltip } from "./lib/tooltip";

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

function readData(model: RenderProps["model"]): Data {
  const pts = decodeF32(model.get("points"));
  const n = pts.length / 2;
  const layers = (model.get("layers") as number[]) ?? [];
  const heads = (model.get("heads") as number[]) ?? [];
  if (layers.length !== n || heads.length !== n) throw new Error(`cluster view: ${n} points but ${layers.length} layers / ${heads.length} heads`);
  const xs = new Float32Array(n);
  const ys = new Float32Array(n);
  for (let i = 0; i < n; i++) { xs[i] = pts[2 * i]; ys[i] = pts[2 * i + 1]; }
  return {
    xs, ys, layers, heads,
    codes: (model.get("codes") as number[]) ?? [],
    categories: (model.get("categories") as string[]) ?? [],
    nLayers: model.get("n_layers") as number,
    labelName: (model.get("label_name") as string) || "layer",
  };
}

function pointColor(d: Data, i: number): string {
  if (d.categories.length === 0) {
    const k = d.nLayers > 1 ? (d.layers[i] / (d.nLayers - 1)) * 255 : 128;
    return lutColor(METRIC_DEFAULT, k);
  }
  const c = d.codes[i];
  return c >= 0 ? categorical(c) : "#bbb";
}

function render({ model, el }: RenderProps) {
  const t0 = performance.now();
  const root = h("div", "attnkit attnkit-cluster");
  const header = h("div", "attnkit-header");
  const title = h("div", "attnkit-title");
  const status = h("div", "attnkit-status");
  header.append(title, status);
  const body = h("div", "attnkit-row");
  const stage = h("div", "attnkit-stage");
  const canvas = h("canvas", "attnkit-canvas");
  stage.appendChild(canvas);
  const legend = h("div", "attnkit-legend");
  body.append(stage, legend);
  const tip = new Tooltip(stage);
  const hint = h("div", "attnkit-hint", "Hover a dot to name the head \u00b7 click to select it");
  root.append(header, body, hint);
  el.appendChild(root);

  let data: Data;
  let size = 480;
  let sx = new Float32Array(0);
  let sy = new Float32Array(0);
  let hover = -1;

  const buildLegend = () => {
    legend.replaceChildren();
    legend.appendChild(h("div", "attnkit-legend-title", data.labelName));
    if (data.categories.length === 0) {
      const n = data.nLayers;
      const step = Math.max(1, Math.ceil(n / 12));
      for (let l = 0; l < n; l += step) {
        const item = h("div", "attnkit-legend-item");
        const sw = h("span", "attnkit-swatch");
        sw.style.background = pointColor({ ...data, categories: [], layers: [l] } as Data, 0);
        item.append(sw, h("span", "", `layer ${l + 1}`));
        legend.appendChild(item);
      }
    } else {
      data.categories.forEach((cat, i) => {
        const item = h("div", "attnkit-legend-item");
        const sw = h("span", "attnkit-swatch");
        sw.style.background = categorical(i);
        item.append(sw, h("span", "", cat));
        legend.appendChild(item);
      });
    }
  };

  const load = () => {
    data = readData(model);
    title.textContent = (model.get("title") as string) || "Heads in 2-D";
    root.dataset.points = String(data.xs.length);
    buildLegend();
  };
  const layout = () => {
    size = Math.max(240, Math.min(560, availableWidth(el, 680) - 170));
    const f = fitEqual(data.xs, data.ys, 0, 0, size, size, 18);
    sx = new Float32Array(data.xs.length);
    sy = new Float32Array(data.xs.length);
    for (let i = 0; i < data.xs.length; i++) {
      const [x, y] = toScreen(f, data.xs[i], data.ys[i]);
      sx[i] = x;
      sy[i] = y;
    }
  };
  const updateStatus = () => {
    const sel = selectedPair(model.get("selected"));
    status.textContent = sel ? `selected ${headLabel(sel[0], sel[1])}` : "no head selected";
  };
  const indexOf = (pair: [number, number] | null) => {
    if (!pair) return -1;
    for (let i = 0; i < data.layers.length; i++) if (data.layers[i] === pair[0] && data.heads[i] === pair[1]) return i;
    return -1;
  };

  const draw = () => {
    const ctx = sizeCanvas(canvas, size, size);
    ctx.clearRect(0, 0, size, size);
    ctx.strokeStyle = "#e3e3e3";
    ctx.lineWidth = 1;
    ctx.strokeRect(0.5, 0.5, size - 1, size - 1);
    const n = sx.length;
    const r = n > 400 ? 3 : n > 150 ? 4 : 5;
    for (let i = 0; i < n; i++) {
      ctx.beginPath();
      ctx.arc(sx[i], sy[i], r, 0, 2 * Math.PI);
      ctx.fillStyle = pointColor(data, i);
      ctx.globalAlpha = 0.9;
      ctx.fill();
      ctx.globalAlpha = 1;
      ctx.strokeStyle = "rgba(0,0,0,0.35)";
      ctx.lineWidth = 0.6;
      ctx.stroke();
    }
    if (n <= 48) {
      ctx.font = FONT_SMALL;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "left";
      ctx.textBaseline = "middle";
      for (let i = 0; i < n; i++) ctx.fillText(headLabel(data.layers[i], data.heads[i]), sx[i] + r + 2, sy[i]);
    }
    const ring = (i: number, color: string, w: number, label: boolean) => {
      if (i < 0) return;
      ctx.beginPath();
      ctx.arc(sx[i], sy[i], r + 3, 0, 2 * Math.PI);
      ctx.strokeStyle = color;
      ctx.lineWidth = w;
      ctx.stroke();
      if (label) {
        ctx.font = `bold ${FONT_SMALL}`;
        ctx.fillStyle = INK;
        ctx.textAlign = "left";
        ctx.textBaseline = "bottom";
        ctx.fillText(headLabel(data.layers[i], data.heads[i]), sx[i] + r + 4, sy[i] - r - 2);
      }
    };
    ring(hover, "#333", 1.5, true);
    ring(indexOf(selectedPair(model.get("selected"))), "#e07000", 2.5, true);
    canvas.style.cursor = hover >= 0 ? "pointer" : "";
    markDrawn(root, t0);
  };
  const redraw = scheduler(draw);

  canvas.addEventListener("pointermove", (ev) => {
    const [x, y] = localPoint(canvas, ev);
    const i = nearest(sx, sy, x, y, 10);
    if (i >= 0) {
      const rows: [string, string][] = [["layer, head", `${data.layers[i] + 1}, ${data.heads[i] + 1}`]];
      if (data.categories.length > 0) {
        const c = data.codes[i];
        rows.push([data.labelName, c >= 0 ? data.categories[c] : "(none)"]);
      }
      const [hx, hy] = localPoint(stage, ev);
      tip.show(hx, hy, `Head ${headLabel(data.layers[i], data.heads[i])}`, rows);
    } else {
      tip.hide();
    }
    if (i !== hover) {
      hover = i;
      redraw();
    }
  });
  canvas.addEventListener("pointerleave", () => {
    tip.hide();
    if (hover >= 0) {
      hover = -1;
      redraw();
    }
  });
  canvas.addEventListener("click", (ev) => {
    const [x, y] = localPoint(canvas, ev);
    const i = nearest(sx, sy, x, y, 10);
    if (i < 0) return;
    model.set("selected", [data.layers[i], data.heads[i]]);
    model.save_changes();
    updateStatus();
    redraw();
  });

  const reload = coalesce(() => {
    load();
    layout();
    hover = -1;
    redraw();
  });
  const offData = onChange(model, ["points", "layers", "heads", "codes", "categories", "n_layers", "label_name", "title"], reload);
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
