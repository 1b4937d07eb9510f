// FlowView: the radial layered view of Attention Flows (DeRose, Wang & Berger 2020).
// Source on the innermost ring, earlier layers outward, input tokens outermost; hover a
// token to trace its dependencies; head glyphs count each head's edges per layer and a
// click restricts that layer to the clicked heads (the kernel re-traces the graph).

import { FONT_SMALL, INK, localPoint, MUTED, sizeCanvas } from "./lib/canvas";
import { lut, lutColor, METRIC_DEFAULT } from "./lib/colors";
import { decodeF16, decodeF32, decodeU16, decodeU32, decodeU8 } from "./lib/decode";
import { displayToken, formatValue, headLabel, truncate } from "./lib/labels";
import { availableWidth, coalesce, h, markDrawn, onChange, RenderProps, scheduler, selectedPair, watchWidth } from "./lib/model";
import { angleOf, bandAt, EdgeList, nearestPoint, nodeXY, polar, Radial, ringRadius, spiral, traceThrough } from "./lib/radial";
import { colorBarH } from "./lib/legend";
import { Tooltip } from "./lib/tooltip";

// Same colours as attnkit.plot.flow: shared / model A only / model B only, roles.
const MODEL_COLORS = ["#8c8c8c", "#1a9e9e", "#7b3294"];
const SINGLE = "#1a6e9e";
const ROLE_COLORS: Record<string, string> = { cls: "#d95f02", sep: "#e6ab02", special: "#999999", word: "#1a6e9e" };
const HILITE = "#e07000";

interface Graph {
  mode: "single" | "compare" | "collection";
  tokens: string[];
  roles: string[];
  layers: number;
  heads: number;
  names: string[];
  nodes: Uint16Array; // [N, 3]
  edges: Uint16Array; // [E, 4]
  weight: Float32Array;
  edgeHeads: Uint8Array; // (head, who) pairs
  edgeOffsets: Uint32Array;
  infA: Float32Array;
  infB: Float32Array;
  ratA: Uint8Array;
  ratB: Uint8Array;
  countsA: Float32Array; // [L, H]
  countsB: Float32Array;
  source: number[][];
  // collection
  nInputs: number;
  headShare: Float32Array;
  categories: string[];
  catShare: Float32Array;
  catStd: Float32Array;
  topTokens: string[];
  topShare: Float32Array;
}

function readGraph(model: RenderProps["model"]): Graph {
  const g: Graph = {
    mode: model.get("mode"),
    tokens: model.get("tokens") ?? [],
    roles: model.get("roles") ?? [],
    layers: model.get("n_layers"),
    heads: model.get("n_heads"),
    names: model.get("names") ?? [],
    nodes: decodeU16(model.get("nodes")),
    edges: decodeU16(model.get("edges")),
    weight: decodeF16(model.get("edge_weight")),
    edgeHeads: decodeU8(model.get("edge_heads")),
    edgeOffsets: decodeU32(model.get("edge_head_offsets")),
    infA: decodeF32(model.get("influence_a")),
    infB: decodeF32(model.get("influence_b")),
    ratA: decodeU8(model.get("rating_a")),
    ratB: decodeU8(model.get("rating_b")),
    countsA: decodeF32(model.get("head_counts_a")),
    countsB: decodeF32(model.get("head_counts_b")),
    source: model.get("source") ?? [],
    nInputs: model.get("n_inputs") ?? 0,
    headShare: decodeF32(model.get("head_share")),
    categories: model.get("categories") ?? [],
    catShare: decodeF32(model.get("category_share")),
    catStd: decodeF32(model.get("category_std")),
    topTokens: model.get("top_tokens") ?? [],
    topShare: decodeF32(model.get("top_share")),
  };
  const nE = g.edges.length / 4;
  if (g.weight.length !== nE || (g.edgeOffsets.length !== nE + 1 && nE > 0)) {
    throw new Error(`flow view: ${nE} edges but ${g.weight.length} weights / ${g.edgeOffsets.length} offsets`);
  }
  return g;
}

function edgeList(g: Graph): EdgeList {
  return {
    count: g.edges.length / 4,
    upper: (i) => g.edges[4 * i],
    from: (i) => g.edges[4 * i + 1],
    to: (i) => g.edges[4 * i + 2],
  };
}

/** Does edge i use head `head` (of its layer)? */
function edgeHasHead(g: Graph, i: number, head: number): boolean {
  for (let k = g.edgeOffsets[i]; k < g.edgeOffsets[i + 1]; k++) if (g.edgeHeads[2 * k] === head) return true;
  return false;
}

function render({ model, el }: RenderProps) {
  const t0 = performance.now();
  const noKernel = () => document.documentElement.dataset.attnkitKernel === "none";
  const root = h("div", "attnkit attnkit-flow");
  const header = h("div", "attnkit-header");
  const title = h("div", "attnkit-title");
  const controls = h("div", "attnkit-controls");
  const thrBox = h("label", "attnkit-slider");
  const thrLabel = h("span", "attnkit-stepper-label", "threshold");
  const thr = h("input", "");
  thr.type = "range";
  thr.min = "0.01";
  thr.max = "0.95";
  thr.step = "0.01";
  const thrValue = h("span", "attnkit-stepper-value");
  thrBox.append(thrLabel, thr, thrValue);
  const allHeads = h("button", "attnkit-btn attnkit-btn-text", "All heads");
  allHeads.title = "remove the head restriction";
  const status = h("span", "attnkit-status");
  controls.append(thrBox, allHeads, status);
  header.append(title, controls);

  const body = h("div", "attnkit-row");
  const stage = h("div", "attnkit-stage");
  const canvas = h("canvas", "attnkit-canvas");
  stage.appendChild(canvas);
  const side = h("div", "attnkit-side");
  const glyphs = h("canvas", "attnkit-canvas attnkit-glyphs");
  const legend = h("div", "attnkit-legend");
  side.append(glyphs, legend);
  body.append(stage, side);
  const tip = new Tooltip(root);
  root.style.position = "relative";
  const hint = h("div", "attnkit-hint");
  root.append(header, body, hint);
  el.appendChild(root);

  let g: Graph;
  let geo: Radial = { cx: 0, cy: 0, rIn: 0, rOut: 0, layers: 0, n: 0 };
  let size = 600;
  let paths: Float32Array[] = [];
  let strongest: number[] = []; // edge indices, strongest first
  let nodeXYs = new Float32Array(0);
  let glyph = { left: 34, top: 22, cell: 18, pitch: 20, width: 280, height: 300 };
  let hoverNode = -1;
  let trace: Set<number> | null = null;
  let hoverHead: [number, number] | null = null; // [layer 0-indexed, head]
  let pending = false;

  const countsMax = () => {
    let m = 0;
    for (const v of g.countsA) m = Math.max(m, v);
    for (const v of g.countsB) m = Math.max(m, v);
    return m;
  };

  const buildLegend = () => {
    legend.replaceChildren();
    const item = (color: string, text: string, line = true) => {
      const it = h("div", "attnkit-legend-item");
      const sw = h("span", line ? "attnkit-swatch-line" : "attnkit-swatch");
      sw.style.background = color;
      it.append(sw, h("span", "", text));
      legend.appendChild(it);
    };
    if (g.mode === "compare") {
      const [a, b] = g.names;
      legend.appendChild(h("div", "attnkit-legend-title", "edges and tokens"));
      item(MODEL_COLORS[0], "in both models");
      item(MODEL_COLORS[1], `only in ${a}`);
      item(MODEL_COLORS[2], `only in ${b}`);
      legend.appendChild(h("div", "attnkit-legend-note", `head glyphs: left half ${a}, right half ${b}`));
    } else if (g.mode === "single") {
      legend.appendChild(h("div", "attnkit-legend-title", "tokens"));
      item(ROLE_COLORS.cls, "[CLS] / start", false);
      item(ROLE_COLORS.sep, "[SEP] / end", false);
      item(ROLE_COLORS.word, "word piece", false);
      legend.appendChild(h("div", "attnkit-legend-note", "line width and opacity: attention weight; bars outside the ring: influence on the source"));
    }
  };

  const load = () => {
    g = readGraph(model);
    pending = false;
    title.textContent = (model.get("title") as string) || "Attention flow";
    const t = Number(model.get("threshold"));
    thr.value = String(t);
    thrValue.textContent = t.toFixed(2);
    const collection = g.mode === "collection";
    thrBox.style.display = collection ? "none" : "";
    allHeads.style.display = collection ? "none" : "";
    thr.disabled = noKernel();
    thrBox.title = noKernel() ? "changing the threshold needs a running kernel" : "edges need attention above this";
    root.dataset.nodes = String(g.nodes.length / 3);
    root.dataset.edges = String(g.edges.length / 4);
    hint.textContent = collection
      ? `Rings from the centre: layer ${g.layers} … layer 1; one wedge per head, coloured by graph edges per input \u00b7 hover for numbers \u00b7 click to select a head`
      : "Centre: the source after the last layer; each ring outward one layer earlier; outermost: the input tokens \u00b7 hover a token to trace it \u00b7 click a head glyph to restrict its layer to it";
    buildLegend();
    updateStatus();
  };

  const updateStatus = () => {
    const restrict = (model.get("restrict") as number[][]) ?? [];
    allHeads.disabled = restrict.length === 0 || noKernel();
    const parts: string[] = [];
    if (g.mode === "collection") parts.push(`${g.nInputs} inputs`);
    else parts.push(`${g.nodes.length / 3} nodes, ${g.edges.length / 4} edges`);
    if (g.mode !== "collection" && g.edges.length / 4 > MAX_DRAWN) parts.push(`drawing the ${MAX_DRAWN} strongest: raise the threshold to see them all`);
    if (restrict.length) parts.push(`restricted to ${restrict.map(([l, hd]) => headLabel(l, hd)).join(", ")}`);
    if (pending) parts.push("recomputing\u2026");
    status.textContent = parts.join(" \u00b7 ");
  };

  const layout = () => {
    const width = Math.max(480, Math.min(1300, availableWidth(el, 960)));
    const H = Math.max(1, g.heads);
    const cell = Math.max(10, Math.min(22, Math.floor(260 / H) - 2));
    const pitch = cell + 2;
    glyph = { left: 34, top: 22, cell, pitch, width: 34 + H * pitch + 8, height: 22 + Math.max(1, g.layers) * pitch + 8 };
    size = Math.max(340, Math.min(760, width - Math.max(glyph.width, 200) - 24));
    const labelSpace = g.mode === "collection" ? 30 : 104;
    const rOut = size / 2 - labelSpace;
    geo = { cx: size / 2, cy: size / 2, rIn: Math.max(14, rOut * 0.1), rOut, layers: g.layers, n: Math.max(1, g.tokens.length) };
    paths = [];
    const E = g.edges.length / 4;
    strongest = Array.from({ length: E }, (_, i) => i).sort((a, b) => g.weight[b] - g.weight[a]);
    for (let i = 0; i < E; i++) paths.push(spiral(geo, g.edges[4 * i], g.edges[4 * i + 1], g.edges[4 * i + 2]));
    const N = g.nodes.length / 3;
    nodeXYs = new Float32Array(2 * N);
    for (let i = 0; i < N; i++) {
      const [x, y] = nodeXY(geo, g.nodes[3 * i], g.nodes[3 * i + 1]);
      nodeXYs[2 * i] = x;
      nodeXYs[2 * i + 1] = y;
    }
    Object.assign(root.dataset, {
      cx: String(geo.cx), cy: String(geo.cy), rIn: String(geo.rIn), rOut: String(geo.rOut),
      glyphLeft: String(glyph.left), glyphTop: String(glyph.top), glyphCell: String(glyph.cell), glyphPitch: String(glyph.pitch),
    });
  };

  // ---------------------------------------------------------------- radial view
  // Edges are stroked in batches: one path per (colour, weight bucket), since thousands of
  // separate strokes are what makes large graphs slow to draw.
  const BUCKETS = 8;
  const CHUNK = 64;
  const MAX_DRAWN = 5000;
  const bucketOf = (w: number) => Math.min(BUCKETS - 1, Math.max(0, Math.floor(w * BUCKETS)));
  const strokeBatch = (ctx: CanvasRenderingContext2D, ids: Iterable<number>, color: (i: number) => string,
    alpha: (b: number) => number, width: (b: number) => number) => {
    const groups = new Map<string, number[]>();
    for (const i of ids) {
      const key = `${color(i)}|${bucketOf(g.weight[i])}`;
      let list = groups.get(key);
      if (!list) groups.set(key, (list = []));
      list.push(i);
    }
    for (const [key, list] of groups) {
      const [c, bs] = key.split("|");
      const b = Number(bs);
      ctx.globalAlpha = alpha(b);
      ctx.strokeStyle = c;
      ctx.lineWidth = width(b);
      // ...but in chunks: Skia strokes one huge many-subpath path far slower than several
      // small ones.
      for (let start = 0; start < list.length; start += CHUNK) {
        ctx.beginPath();
        for (let j = start; j < Math.min(list.length, start + CHUNK); j++) {
          const p = paths[list[j]];
          ctx.moveTo(p[0], p[1]);
          for (let k = 2; k < p.length; k += 2) ctx.lineTo(p[k], p[k + 1]);
        }
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
  };
  const mid = (b: number) => (b + 0.5) / BUCKETS;

  const drawEdges = (ctx: CanvasRenderingContext2D) => {
    const E = g.edges.length / 4;
    const focus: Set<number> | null = trace ?? (hoverHead ? new Set<number>() : null);
    if (hoverHead) {
      for (let i = 0; i < E; i++) if (g.edges[4 * i] === hoverHead[0] + 1 && edgeHasHead(g, i, hoverHead[1])) focus!.add(i);
    }
    const color = (i: number) => (g.mode === "compare" ? MODEL_COLORS[g.edges[4 * i + 3]] : SINGLE);
    // At most MAX_DRAWN edges, the strongest: more is an unreadable tangle and slow to paint.
    const rest: number[] = [];
    const lit: number[] = [];
    for (const i of strongest) {
      if (focus && focus.has(i)) lit.push(i);
      else if (rest.length + lit.length < MAX_DRAWN) rest.push(i);
    }
    if (focus) {
      strokeBatch(ctx, rest, () => "#999", () => 0.07, (b) => 0.4 + 1.8 * mid(b));
      strokeBatch(ctx, lit.slice(0, MAX_DRAWN), g.mode === "compare" ? color : () => HILITE, () => 0.95, (b) => 0.4 + 1.8 * mid(b));
    } else {
      strokeBatch(ctx, rest, color, (b) => 0.3 + 0.6 * mid(b), (b) => 0.4 + 1.8 * mid(b));
    }
    return focus;
  };

  const drawRadial = () => {
    const ctx = sizeCanvas(canvas, size, size);
    ctx.clearRect(0, 0, size, size);
    if (g.mode === "collection") {
      drawCollectionRings(ctx);
      return;
    }
    const n = geo.n;
    // rings and their level labels
    ctx.lineWidth = 0.6;
    ctx.strokeStyle = "#e2e2e2";
    for (let lv = 0; lv <= g.layers; lv++) {
      ctx.beginPath();
      ctx.arc(geo.cx, geo.cy, ringRadius(geo, lv), 0, 2 * Math.PI);
      ctx.stroke();
    }
    const focus = drawEdges(ctx);
    // nodes
    const N = g.nodes.length / 3;
    const touched = new Set<number>();
    if (focus) {
      for (const i of focus) {
        touched.add(g.edges[4 * i] * 65536 + g.edges[4 * i + 1]);
        touched.add((g.edges[4 * i] - 1) * 65536 + g.edges[4 * i + 2]);
      }
    }
    const src = new Set(g.source.map(([lv, p]) => lv * 65536 + p));
    for (let i = 0; i < N; i++) {
      const lv = g.nodes[3 * i];
      const p = g.nodes[3 * i + 1];
      const key = lv * 65536 + p;
      const faded = focus !== null && !touched.has(key) && i !== hoverNode;
      const isSrc = src.has(key);
      ctx.globalAlpha = faded ? 0.25 : 1;
      ctx.beginPath();
      ctx.arc(nodeXYs[2 * i], nodeXYs[2 * i + 1], isSrc ? 5.5 : i === hoverNode ? 5 : 3.2, 0, 2 * Math.PI);
      ctx.fillStyle = g.mode === "compare" ? MODEL_COLORS[g.nodes[3 * i + 2]] : ROLE_COLORS[g.roles[p]] ?? SINGLE;
      ctx.fill();
      ctx.lineWidth = isSrc || i === hoverNode ? 1.8 : 0.8;
      ctx.strokeStyle = i === hoverNode ? HILITE : isSrc ? "#222" : "#fff";
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    // ring labels on top, with a white halo
    ctx.font = FONT_SMALL;
    ctx.fillStyle = "#aaa";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const labelStep = Math.max(1, Math.ceil(g.layers / 6));
    for (let lv = 0; lv <= g.layers; lv++) {
      if (lv !== 0 && lv !== g.layers && lv % labelStep !== 0) continue;
      const [x, y] = polar(geo, ringRadius(geo, lv), -Math.PI / n);
      const text = lv === 0 ? "input" : `L${lv}`;
      ctx.lineWidth = 3;
      ctx.strokeStyle = "rgba(255,255,255,0.9)";
      ctx.strokeText(text, x - 3, y);
      ctx.fillStyle = "#888";
      ctx.fillText(text, x - 3, y);
    }
    // influence bars and token labels around the outside
    const two = g.mode === "compare";
    let maxInf = 0;
    for (const v of g.infA) maxInf = Math.max(maxInf, v);
    for (const v of g.infB) maxInf = Math.max(maxInf, v);
    const step = (2 * Math.PI) / n;
    const barR = geo.rOut + 8;
    for (let p = 0; p < g.tokens.length; p++) {
      const a = angleOf(p, n);
      const bars: [number, string][] = two
        ? [[g.infA[p] ?? 0, MODEL_COLORS[1]], [g.infB[p] ?? 0, MODEL_COLORS[2]]]
        : [[g.infA[p] ?? 0, "#555"]];
      bars.forEach(([v, color], k) => {
        if (!(maxInf > 0) || !(v > 0)) return;
        const off = two ? (k === 0 ? -0.22 : 0.22) * Math.min(step, 0.1) : 0;
        const [x0, y0] = polar(geo, barR, a + off);
        const [x1, y1] = polar(geo, barR + 16 * (v / maxInf), a + off);
        ctx.strokeStyle = color;
        ctx.lineWidth = two ? 2 : 3;
        ctx.beginPath();
        ctx.moveTo(x0, y0);
        ctx.lineTo(x1, y1);
        ctx.stroke();
      });
    }
    const labelR = geo.rOut + 30;
    const arc = (2 * Math.PI * labelR) / n;
    const stride = arc >= 11 ? 1 : Math.ceil(11 / arc);
    const hoverPos = hoverNode >= 0 ? g.nodes[3 * hoverNode + 1] : -1;
    const tracedInputs = new Set<number>();
    if (focus) for (const i of focus) if (g.edges[4 * i] === 1) tracedInputs.add(g.edges[4 * i + 2]);
    for (let p = 0; p < g.tokens.length; p++) {
      const strong = p === hoverPos || tracedInputs.has(p);
      if (p % stride !== 0 && p !== hoverPos) continue;
      const a = angleOf(p, n);
      const [x, y] = polar(geo, labelR, a);
      ctx.save();
      ctx.translate(x, y);
      // text runs outward along the radius; on the left half it is turned to read left-to-right
      const flip = a > Math.PI;
      ctx.rotate(a - Math.PI / 2 + (flip ? Math.PI : 0));
      ctx.textAlign = flip ? "right" : "left";
      ctx.textBaseline = "middle";
      ctx.font = strong ? `bold ${FONT_SMALL}` : FONT_SMALL;
      ctx.fillStyle = p === hoverPos ? "#b35a00" : strong ? INK : focus ? "#999" : INK;
      ctx.fillText(truncate(displayToken(g.tokens[p]), 16), 0, 0);
      ctx.restore();
    }
  };

  const drawCollectionRings = (ctx: CanvasRenderingContext2D) => {
    const L = g.layers;
    const H = g.heads;
    let max = 0;
    for (const v of g.countsA) max = Math.max(max, v);
    const sel = selectedPair(model.get("selected"));
    for (let l = 1; l <= L; l++) {
      const r0 = ringRadius(geo, l);
      const r1 = ringRadius(geo, l - 1);
      for (let hd = 0; hd < H; hd++) {
        const a0 = (2 * Math.PI * hd) / H;
        const a1 = (2 * Math.PI * (hd + 1)) / H;
        const v = g.countsA[(l - 1) * H + hd];
        ctx.beginPath();
        ctx.arc(geo.cx, geo.cy, r1 - 1, a0 - Math.PI / 2 + 0.01, a1 - Math.PI / 2 - 0.01);
        ctx.arc(geo.cx, geo.cy, r0 + 1, a1 - Math.PI / 2 - 0.01, a0 - Math.PI / 2 + 0.01, true);
        ctx.closePath();
        ctx.fillStyle = max > 0 ? lutColor(METRIC_DEFAULT, (v / max) * 255) : "#eee";
        ctx.fill();
        const isHover = hoverHead && hoverHead[0] === l - 1 && hoverHead[1] === hd;
        const isSel = sel && sel[0] === l - 1 && sel[1] === hd;
        if (isHover || isSel) {
          ctx.lineWidth = isSel ? 2.5 : 1.5;
          ctx.strokeStyle = isSel ? HILITE : "#222";
          ctx.stroke();
        }
      }
    }
    ctx.font = FONT_SMALL;
    ctx.fillStyle = MUTED;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(`${g.nInputs} inputs`, geo.cx, geo.cy);
    for (let hd = 0; hd < H; hd++) {
      const [x, y] = polar(geo, geo.rOut + 12, (2 * Math.PI * (hd + 0.5)) / H);
      ctx.fillText(`h${hd + 1}`, x, y);
    }
  };

  // ---------------------------------------------------------------- side panel
  const drawGlyphs = () => {
    if (g.mode === "collection") {
      drawCollectionBars();
      return;
    }
    const { left, top, cell, pitch, width, height } = glyph;
    const ctx = sizeCanvas(glyphs, width, height);
    ctx.clearRect(0, 0, width, height);
    const H = g.heads;
    const max = countsMax();
    const restrict = new Set(((model.get("restrict") as number[][]) ?? []).map(([l, hd]) => l * 1000 + hd));
    ctx.font = FONT_SMALL;
    ctx.fillStyle = MUTED;
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    for (let hd = 0; hd < H; hd++) if (H <= 16 || hd % 2 === 0) ctx.fillText(String(hd + 1), left + hd * pitch + cell / 2, top - 3);
    ctx.textAlign = "right";
    ctx.fillText("head", left - 4, top - 3);
    const blues = lut("Blues");
    const shade = (v: number, color: string | null) => {
      if (!(v > 0) || !(max > 0)) return "#f3f3f3";
      if (color) return color;
      const k = Math.round(60 + 195 * (v / max)) * 4;
      return `rgb(${blues[k]},${blues[k + 1]},${blues[k + 2]})`;
    };
    for (let l = 0; l < g.layers; l++) {
      const y = top + l * pitch;
      ctx.fillStyle = MUTED;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(`L${l + 1}`, left - 4, y + cell / 2);
      for (let hd = 0; hd < H; hd++) {
        const x = left + hd * pitch;
        const a = g.countsA[l * H + hd] ?? 0;
        if (g.mode === "compare") {
          const b = g.countsB[l * H + hd] ?? 0;
          ctx.fillStyle = "#f3f3f3";
          ctx.fillRect(x, y, cell, cell);
          // each half filled from the bottom in proportion to the head's edges
          ctx.fillStyle = MODEL_COLORS[1];
          if (a > 0) ctx.fillRect(x, y + cell * (1 - a / max), cell / 2, (cell * a) / max);
          ctx.fillStyle = MODEL_COLORS[2];
          if (b > 0) ctx.fillRect(x + cell / 2, y + cell * (1 - b / max), cell / 2, (cell * b) / max);
        } else {
          ctx.fillStyle = shade(a, null);
          ctx.fillRect(x, y, cell, cell);
          if (a > 0 && cell >= 16) {
            ctx.fillStyle = a / max > 0.55 ? "#fff" : INK;
            ctx.textAlign = "center";
            ctx.font = FONT_SMALL;
            ctx.fillText(String(Math.round(a)), x + cell / 2, y + cell / 2 + 0.5);
          }
        }
        const isHover = hoverHead && hoverHead[0] === l && hoverHead[1] === hd;
        if (restrict.has(l * 1000 + hd) || isHover) {
          ctx.strokeStyle = restrict.has(l * 1000 + hd) ? HILITE : "#333";
          ctx.lineWidth = restrict.has(l * 1000 + hd) ? 2.2 : 1.2;
          ctx.strokeRect(x - 1, y - 1, cell + 2, cell + 2);
        }
      }
    }
  };

  const drawCollectionBars = () => {
    const width = 300;
    const rows = g.categories.length + g.topTokens.length;
    const height = 40 + rows * 16 + 60;
    const ctx = sizeCanvas(glyphs, width, height);
    ctx.clearRect(0, 0, width, height);
    let y = 4;
    const section = (label: string, names: string[], values: Float32Array, std: Float32Array | null, color: string) => {
      ctx.font = `bold ${FONT_SMALL}`;
      ctx.fillStyle = INK;
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      ctx.fillText(label, 0, y);
      y += 16;
      let max = 0;
      values.forEach((v, i) => {
        if (Number.isFinite(v)) max = Math.max(max, v + (std && Number.isFinite(std[i]) ? std[i] : 0));
      });
      names.forEach((name, i) => {
        const v = values[i];
        ctx.font = FONT_SMALL;
        ctx.fillStyle = INK;
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        ctx.fillText(truncate(displayToken(name), 14), 86, y + 6);
        if (!Number.isFinite(v)) {
          ctx.fillStyle = MUTED;
          ctx.textAlign = "left";
          ctx.fillText("none in these inputs", 92, y + 6);
        } else if (max > 0) {
          const w = (170 * v) / max;
          ctx.fillStyle = color;
          ctx.fillRect(92, y + 1, w, 10);
          if (std && Number.isFinite(std[i])) {
            ctx.strokeStyle = "#333";
            ctx.lineWidth = 1;
            ctx.beginPath();
            ctx.moveTo(92 + (170 * Math.max(0, v - std[i])) / max, y + 6);
            ctx.lineTo(92 + (170 * (v + std[i])) / max, y + 6);
            ctx.stroke();
          }
          ctx.fillStyle = MUTED;
          ctx.textAlign = "left";
          ctx.fillText(formatValue(v), 92 + w + 4, y + 6);
        }
        y += 16;
      });
      y += 8;
    };
    section("influence share by token kind", g.categories, g.catShare, g.catStd, SINGLE);
    section("influence share per occurrence (top tokens)", g.topTokens, g.topShare, null, MODEL_COLORS[2]);
    let max = 0;
    for (const v of g.countsA) if (Number.isFinite(v)) max = Math.max(max, v);
    ctx.font = `bold ${FONT_SMALL}`;
    ctx.fillStyle = INK;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText("wedge colour: graph edges per input", 0, y);
    colorBarH(ctx, METRIC_DEFAULT, 24, y + 20, 180, 9, 0, max);
  };

  const draw = () => {
    drawRadial();
    drawGlyphs();
    markDrawn(root, t0);
  };
  const redraw = scheduler(draw);

  // ---------------------------------------------------------------- interaction
  const glyphAt = (x: number, y: number): [number, number] | null => {
    if (g.mode === "collection") return null;
    const hd = Math.floor((x - glyph.left) / glyph.pitch);
    const l = Math.floor((y - glyph.top) / glyph.pitch);
    if (hd < 0 || l < 0 || hd >= g.heads || l >= g.layers) return null;
    if (x - glyph.left - hd * glyph.pitch > glyph.cell || y - glyph.top - l * glyph.pitch > glyph.cell) return null;
    return [l, hd];
  };
  const wedgeAt = (x: number, y: number): [number, number] | null => {
    const dx = x - geo.cx;
    const dy = y - geo.cy;
    const band = bandAt(geo, Math.hypot(dx, dy));
    if (band === 0) return null;
    let a = Math.atan2(dx, -dy);
    if (a < 0) a += 2 * Math.PI;
    return [band - 1, Math.min(g.heads - 1, Math.floor((a / (2 * Math.PI)) * g.heads))];
  };

  const headTip = (ev: MouseEvent, l: number, hd: number) => {
    const [sx, sy] = localPoint(root, ev);
    const H = g.heads;
    const rows: [string, string][] = [];
    if (g.mode === "collection") {
      rows.push(["edges per input", formatValue(g.countsA[l * H + hd])]);
      rows.push(["inputs with an edge", `${Math.round(100 * (g.headShare[l * H + hd] ?? 0))}%`]);
    } else if (g.mode === "compare") {
      rows.push([`edges, ${g.names[0]}`, String(Math.round(g.countsA[l * H + hd]))]);
      rows.push([`edges, ${g.names[1]}`, String(Math.round(g.countsB[l * H + hd]))]);
    } else {
      rows.push(["edges", String(Math.round(g.countsA[l * H + hd]))]);
    }
    if (g.mode !== "collection") {
      const restricted = ((model.get("restrict") as number[][]) ?? []).some(([a, b]) => a === l && b === hd);
      rows.push(["click", noKernel() ? "needs a running kernel" : restricted ? "release this head" : `trace layer ${l + 1} through this head only`]);
    }
    tip.show(sx, sy, `Head ${headLabel(l, hd)}`, rows);
  };

  canvas.addEventListener("pointermove", (ev) => {
    const [x, y] = localPoint(canvas, ev);
    if (g.mode === "collection") {
      const w = wedgeAt(x, y);
      if (w) headTip(ev, w[0], w[1]);
      else tip.hide();
      if (JSON.stringify(w) !== JSON.stringify(hoverHead)) {
        hoverHead = w;
        redraw();
      }
      return;
    }
    const i = nearestPoint(nodeXYs, x, y, 9);
    if (i >= 0) {
      const lv = g.nodes[3 * i];
      const p = g.nodes[3 * i + 1];
      const rows: [string, string][] = [
        ["level", lv === 0 ? "input" : `output of layer ${lv}`],
        ["position", `#${p + 1}`],
      ];
      if (g.mode === "compare") rows.push(["in", ["both models", `only ${g.names[0]}`, `only ${g.names[1]}`][g.nodes[3 * i + 2]]]);
      if (lv === 0) {
        if (g.mode === "compare") {
          rows.push([`influence, ${g.names[0]}`, `${formatValue(g.infA[p])} (${g.ratA[p]}/5)`]);
          rows.push([`influence, ${g.names[1]}`, `${formatValue(g.infB[p])} (${g.ratB[p]}/5)`]);
        } else {
          rows.push(["influence", `${formatValue(g.infA[p])} (${g.ratA[p]}/5)`]);
        }
      }
      const [sx, sy] = localPoint(root, ev);
      tip.show(sx, sy, displayToken(g.tokens[p] ?? ""), rows);
    } else {
      tip.hide();
    }
    if (i !== hoverNode) {
      hoverNode = i;
      trace = i >= 0 ? traceThrough(edgeList(g), g.nodes[3 * i], g.nodes[3 * i + 1]) : null;
      root.dataset.trace = trace ? String(trace.size) : "";
      canvas.style.cursor = i >= 0 ? "crosshair" : "";
      redraw();
    }
  });
  canvas.addEventListener("pointerleave", () => {
    tip.hide();
    if (hoverNode >= 0 || hoverHead) {
      hoverNode = -1;
      trace = null;
      hoverHead = null;
      redraw();
    }
  });
  canvas.addEventListener("click", (ev) => {
    if (g.mode !== "collection") return;
    const [x, y] = localPoint(canvas, ev);
    const w = wedgeAt(x, y);
    if (!w) return;
    model.set("selected", w);
    model.save_changes();
    redraw();
  });

  glyphs.addEventListener("pointermove", (ev) => {
    const [x, y] = localPoint(glyphs, ev);
    const hit = glyphAt(x, y);
    if (hit) headTip(ev, hit[0], hit[1]);
    else tip.hide();
    glyphs.style.cursor = hit ? "pointer" : "";
    if (JSON.stringify(hit) !== JSON.stringify(hoverHead)) {
      hoverHead = hit;
      trace = null;
      hoverNode = -1;
      redraw();
    }
  });
  glyphs.addEventListener("pointerleave", () => {
    tip.hide();
    if (hoverHead) {
      hoverHead = null;
      redraw();
    }
  });
  glyphs.addEventListener("click", (ev) => {
    const [x, y] = localPoint(glyphs, ev);
    const hit = glyphAt(x, y);
    if (!hit) return;
    model.set("selected", hit);
    if (!noKernel()) {
      const cur = ((model.get("restrict") as number[][]) ?? []).map((p) => [p[0], p[1]]);
      const k = cur.findIndex(([l, hd]) => l === hit[0] && hd === hit[1]);
      if (k >= 0) cur.splice(k, 1);
      else cur.push(hit);
      model.set("restrict", cur);
      pending = true;
    }
    model.save_changes();
    updateStatus();
    redraw();
  });
  thr.addEventListener("input", () => {
    thrValue.textContent = Number(thr.value).toFixed(2);
  });
  thr.addEventListener("change", () => {
    model.set("threshold", Number(thr.value));
    model.save_changes();
    pending = true;
    updateStatus();
  });
  allHeads.addEventListener("click", () => {
    model.set("restrict", []);
    model.save_changes();
    pending = true;
    updateStatus();
    redraw();
  });

  const reload = coalesce(() => {
    load();
    layout();
    hoverNode = -1;
    trace = null;
    redraw();
  });
  const offData = onChange(model, ["nodes", "edges", "edge_weight", "edge_heads", "edge_head_offsets", "influence_a", "influence_b",
    "head_counts_a", "head_counts_b", "tokens", "title", "mode", "top_share", "category_share", "revision"], reload);
  // A new graph arrives with new edges; these alone only change what is marked.
  const onSel = () => {
    updateStatus();
    redraw();
  };
  model.on("change:selected", onSel);
  model.on("change:restrict", onSel);
  const offWidth = watchWidth(el, () => { layout(); redraw(); });

  load();
  layout();
  draw();
  return () => {
    offData();
    model.off("change:selected", onSel);
    model.off("change:restrict", onSel);
    offWidth();
  };
}

export default { render };
