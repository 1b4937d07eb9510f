// CheckpointScrubber: heads across training. A step slider (with ◀ ▶, Play, and the keys of
// a range input) over a run's checkpoints; the loss curve and the in-context score with the
// chosen step marked; a layer × head map of one score at that step (click or arrow keys pick
// a head); the picked head's attention on the first input at that step, where the maps came
// with the widget, its rows and columns labelled with the tokens (as Heatmap's; drawn as text,
// never HTML). Everything is in the widget's state: the view asks the kernel for nothing.

import { FONT, FONT_SMALL, localPoint, sizeCanvas } from "./lib/canvas";
import { readArray, readFloats, WireArray } from "./lib/codec";
import { lutColor, METRIC_DEFAULT, SEQUENTIAL_DEFAULT, seqIndex, textOn } from "./lib/colors";
import { displayToken, fitText, formatValue, headLabel } from "./lib/labels";
import { curveRange, keyStep, moveHead, playNext, tokenTicks } from "./lib/steps";
import { flexRow, h, HeadPickerView, mount, RenderProps } from "./lib/view";

const PLAY_MS = 350;
const CURVE_H = 150;
const PAD = { left: 44, right: 10, top: 10, bottom: 28 };
const LABEL_MAX = 90; // widest token label, px: longer ones end in an ellipsis

interface Data {
  steps: number[];
  layers: number;
  heads: number;
  values: Float32Array; // [step, layer, head]
  vmax: number;
  name: string;
  loss: Float32Array;
  lossName: string;
  icl: Float32Array;
  maps: Float32Array | null; // [step, layer, head, n, n]
  n: number;
  tokens: string[];
}

class ScrubberView extends HeadPickerView<"scrubber"> {
  private d!: Data;
  private slider = h("input", "attnkit-scrubber-slider");
  private stepText = h("span", "attnkit-scrubber-step");
  private playBtn: HTMLButtonElement;
  private curve = h("canvas", "attnkit-canvas");
  private map = h("canvas", "attnkit-canvas");
  private heat = h("canvas", "attnkit-canvas");
  private timer: ReturnType<typeof setInterval> | null = null;
  private cell = 40;
  private curveW = 320;
  private heatSize = 0;

  constructor(props: RenderProps) {
    super(props, "scrubber");
    this.slider.type = "range";
    this.slider.min = "0";
    this.slider.step = "1";
    this.slider.setAttribute("aria-label", "training step");
    const prev = this.button("\u25c0", "previous checkpoint", () => this.go(this.index() - 1));
    const next = this.button("\u25b6", "next checkpoint", () => this.go(this.index() + 1));
    this.playBtn = this.button("Play", "play through the checkpoints", () => this.save({ playing: !this.get("playing") }));
    this.controls.append(this.playBtn, prev, this.slider, next, this.stepText);
    this.listen(this.slider, "input", () => this.go(Number(this.slider.value)));
    this.map.tabIndex = 0;
    this.map.setAttribute("role", "grid");
    this.map.setAttribute("aria-label", "head map: arrow keys pick a head");
    this.curve.setAttribute("role", "img");
    this.heat.setAttribute("role", "img");
    const row = flexRow("attnkit-scrubber-row", 12, this.curve, this.map, this.heat);
    this.stage.appendChild(row);
    this.hint.textContent = "Drag the slider or use its arrow keys, Home and End to move through training \u00b7 click a head (or focus the map and use the arrow keys) \u00b7 layers and heads counted from 1";
    this.listen(this.map, "click", (e) => {
      const hit = this.mapHit(...localPoint(this.map, e as MouseEvent));
      if (hit) this.pick(hit[0], hit[1]);
    });
    this.listen(this.map, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      const to = moveHead(this.selection(), ev.key, this.d.layers, this.d.heads);
      if (to) {
        ev.preventDefault();
        this.pick(to[0], to[1]);
      }
    });
    this.listen(this.curve, "click", (e) => {
      const [x] = localPoint(this.curve, e as MouseEvent);
      this.go(this.nearestIndex(x));
    });
    this.listen(this.root, "keydown", (e) => {
      const ev = e as KeyboardEvent;
      if (ev.target === this.slider || ev.target === this.map) return; // the range input steps by itself
      if (ev.target !== this.root && ev.target !== this.curve) return;
      const to = keyStep(ev.key, this.index(), this.d.steps.length);
      if (to !== null) {
        ev.preventDefault();
        this.go(to);
      }
    });
    this.curve.tabIndex = 0;
    this.curve.setAttribute("aria-label", "loss curve: arrow keys move through training");
    this.onModel("change:index", () => this.showStep());
    this.onModel("change:playing", () => this.syncPlaying());
  }

  protected quiet(): ("index" | "playing" | "selected")[] {
    return ["index", "playing", "selected"];
  }

  private index(): number {
    return Math.max(0, Math.min(this.d.steps.length - 1, Number(this.get("index")) || 0));
  }

  private go(i: number): void {
    const to = Math.max(0, Math.min(this.d.steps.length - 1, Math.round(i)));
    if (to !== this.index()) this.save({ index: to });
    this.showStep();
  }

  private showStep(): void {
    const i = this.index();
    this.slider.value = String(i);
    const steps = this.d.steps;
    this.stepText.textContent = `step ${steps[i]} (${i + 1} of ${steps.length})`;
    this.slider.setAttribute("aria-valuetext", `step ${steps[i]}`);
    this.root.dataset.step = String(steps[i]);
    this.showSelection();
    this.redraw();
  }

  private syncPlaying(): void {
    const on = Boolean(this.get("playing"));
    this.playBtn.textContent = on ? "Pause" : "Play";
    this.playBtn.setAttribute("aria-pressed", String(on));
    this.root.dataset.playing = String(on);
    if (on && !this.timer) {
      this.timer = setInterval(() => this.go(playNext(this.index(), this.d.steps.length)), PLAY_MS);
    } else if (!on && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    super.dispose();
  }

  protected load(): void {
    const steps = (this.get("steps") as number[]) ?? [];
    const layers = Number(this.get("n_layers"));
    const heads = Number(this.get("n_heads"));
    const values = readFloats(this.get("values") as WireArray);
    if (values.length !== steps.length * layers * heads) {
      throw new Error(`scrubber: expected ${steps.length * layers * heads} values, got ${values.length}`);
    }
    const mapsWire = this.get("maps") as WireArray | null;
    let maps: Float32Array | null = null;
    let n = 0;
    if (mapsWire && mapsWire.shape) {
      const a = readArray(mapsWire); // float16 widened, its scale applied
      n = a.shape[a.shape.length - 1];
      maps = a.data instanceof Float32Array ? a.data : Float32Array.from(a.data);
    }
    this.d = {
      steps, layers, heads, values, maps, n,
      vmax: Number(this.get("vmax")) || 1,
      name: (this.get("value_name") as string) || "score",
      loss: readFloats(this.get("loss") as WireArray),
      lossName: (this.get("loss_name") as string) || "loss",
      icl: readFloats(this.get("icl") as WireArray),
      tokens: (this.get("tokens") as string[]) ?? [],
    };
    this.title.textContent = (this.get("title") as string) || `${this.d.name} across training`;
    this.slider.max = String(Math.max(0, steps.length - 1));
    this.root.dataset.checkpoints = String(steps.length);
    this.heat.style.display = maps ? "" : "none";
    this.syncPlaying();
    this.showStep();
  }

  protected selectionText(): string {
    const sel = this.selection();
    if (!sel || !this.d) return "";
    const v = this.d.values[(this.index() * this.d.layers + sel[0]) * this.d.heads + sel[1]];
    return `head ${headLabel(sel[0], sel[1])}: ${this.d.name} ${formatValue(v)}`;
  }

  protected layout(): void {
    const width = Math.max(300, Math.min(1400, this.avail(900)));
    this.curveW = Math.max(260, Math.min(480, Math.floor(width * 0.4)));
    this.cell = Math.max(14, Math.min(48, Math.floor(220 / Math.max(this.d.layers, this.d.heads))));
    this.heatSize = this.d.maps ? Math.max(160, Math.min(320, width - this.curveW - this.mapWidth() - 40 - LABEL_MAX)) : 0;
    this.root.dataset.cell = String(this.cell);
  }

  private mapWidth(): number {
    return 40 + this.d.heads * this.cell + 8;
  }

  private mapHit(x: number, y: number): [number, number] | null {
    const c = Math.floor((x - 40) / this.cell);
    const r = Math.floor((y - 28) / this.cell);
    if (c < 0 || r < 0 || c >= this.d.heads || r >= this.d.layers) return null;
    return [r, c];
  }

  private nearestIndex(x: number): number {
    const steps = this.d.steps;
    if (steps.length < 2) return 0;
    const first = steps[0];
    const last = steps[steps.length - 1];
    const w = this.curveW - PAD.left - PAD.right;
    const s = first + ((x - PAD.left) / w) * (last - first);
    let best = 0;
    for (let i = 1; i < steps.length; i++) if (Math.abs(steps[i] - s) < Math.abs(steps[best] - s)) best = i;
    return best;
  }

  protected draw(): void {
    this.drawCurve();
    this.drawMap();
    if (this.d.maps) this.drawHeat();
  }

  private drawCurve(): void {
    const d = this.d;
    const th = this.theme;
    const W = this.curveW;
    const ctx = sizeCanvas(this.curve, W, CURVE_H);
    ctx.clearRect(0, 0, W, CURVE_H);
    const [lo, hi] = curveRange(d.loss, d.icl);
    const first = d.steps[0] ?? 0;
    const last = d.steps[d.steps.length - 1] ?? 1;
    const span = last - first || 1;
    const w = W - PAD.left - PAD.right;
    const hgt = CURVE_H - PAD.top - PAD.bottom;
    const X = (s: number) => PAD.left + ((s - first) / span) * w;
    const Y = (v: number) => PAD.top + (1 - (v - lo) / (hi - lo)) * hgt;
    ctx.strokeStyle = th.line;
    ctx.lineWidth = 1;
    ctx.strokeRect(PAD.left, PAD.top, w, hgt);
    ctx.beginPath();
    ctx.moveTo(PAD.left, Y(0));
    ctx.lineTo(PAD.left + w, Y(0));
    ctx.stroke();
    ctx.fillStyle = th.muted;
    ctx.font = FONT_SMALL;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const v of [lo, 0, hi]) ctx.fillText(formatValue(v), PAD.left - 4, Y(v));
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillText(String(first), X(first), PAD.top + hgt + 4);
    ctx.fillText(String(last), X(last), PAD.top + hgt + 4);
    ctx.fillText("training step", PAD.left + w / 2, PAD.top + hgt + 14);
    const line = (ys: Float32Array, color: string, dash: number[]) => {
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(dash);
      ctx.beginPath();
      let on = false;
      for (let i = 0; i < d.steps.length; i++) {
        const v = ys[i];
        if (!Number.isFinite(v)) {
          on = false;
          continue;
        }
        if (on) ctx.lineTo(X(d.steps[i]), Y(v));
        else ctx.moveTo(X(d.steps[i]), Y(v));
        on = true;
      }
      ctx.stroke();
      ctx.setLineDash([]);
    };
    line(d.loss, th.ink, []);
    line(d.icl, th.muted, [4, 3]);
    const i = this.index();
    ctx.strokeStyle = th.accent;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(X(d.steps[i]), PAD.top);
    ctx.lineTo(X(d.steps[i]), PAD.top + hgt);
    ctx.stroke();
    ctx.font = FONT_SMALL;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillStyle = th.ink;
    const loss = d.loss[i];
    const icl = d.icl[i];
    ctx.fillText(`\u2014 ${d.lossName}${Number.isFinite(loss) ? " " + formatValue(loss) : ""}`, PAD.left + 4, PAD.top + 2);
    ctx.fillStyle = th.muted;
    ctx.fillText(`- - in-context score${Number.isFinite(icl) ? " " + formatValue(icl) : ""}`, PAD.left + 4, PAD.top + 14);
    this.curve.setAttribute("aria-label", `loss curve; step ${d.steps[i]}: ${d.lossName} ${formatValue(loss)}, in-context score ${formatValue(icl)}`);
  }

  private drawMap(): void {
    const d = this.d;
    const th = this.theme;
    const c = this.cell;
    const W = this.mapWidth();
    const H = 28 + d.layers * c + 8;
    const ctx = sizeCanvas(this.map, W, H);
    ctx.clearRect(0, 0, W, H);
    const i = this.index();
    ctx.font = FONT;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(`${d.name} at step ${d.steps[i]}`, 0, 0);
    ctx.font = FONT_SMALL;
    ctx.fillStyle = th.muted;
    ctx.textAlign = "center";
    for (let hd = 0; hd < d.heads; hd++) ctx.fillText(String(hd + 1), 40 + hd * c + c / 2, 16);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let l = 0; l < d.layers; l++) ctx.fillText(`layer ${l + 1}`, 36, 28 + l * c + c / 2);
    for (let l = 0; l < d.layers; l++) {
      for (let hd = 0; hd < d.heads; hd++) {
        const v = d.values[(i * d.layers + l) * d.heads + hd];
        const k = seqIndex(v, 0, d.vmax);
        const x = 40 + hd * c;
        const y = 28 + l * c;
        ctx.fillStyle = k < 0 ? th.empty : lutColor(METRIC_DEFAULT, k, th.bg);
        ctx.fillRect(x + 1, y + 1, c - 2, c - 2);
        if (c >= 30 && k >= 0) {
          ctx.fillStyle = textOn(METRIC_DEFAULT, k, th.bg);
          ctx.textAlign = "center";
          ctx.fillText(formatValue(v), x + c / 2, y + c / 2);
        }
      }
    }
    const sel = this.selection();
    if (sel) {
      ctx.strokeStyle = th.accent;
      ctx.lineWidth = 3;
      ctx.strokeRect(40 + sel[1] * c, 28 + sel[0] * c, c, c);
    }
  }

  private drawHeat(): void {
    const d = this.d;
    const th = this.theme;
    const S = this.heatSize;
    const top = 16;
    const sel = this.selection();
    const n = d.n;
    const px = n ? S / n : S;
    const ticks = tokenTicks(d.tokens, n, px);
    const fontPx = Math.max(8, Math.min(12, px * 0.9));
    const font = `${fontPx.toFixed(1)}px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif`;
    const measure = this.heat.getContext("2d");
    let lab = 0; // the label margin: left of the rows, above the columns
    if (measure) {
      measure.font = font;
      for (const [, t] of ticks) lab = Math.max(lab, measure.measureText(t).width);
    }
    lab = Math.ceil(Math.min(LABEL_MAX, Math.max(24, lab + 8)));
    const ctx = sizeCanvas(this.heat, lab + S, top + lab + S);
    ctx.clearRect(0, 0, lab + S, top + lab + S);
    ctx.font = FONT;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    this.heat.dataset.labels = "0";
    if (!sel || !d.maps) {
      ctx.fillStyle = th.muted;
      ctx.fillText("pick a head to see its attention", 0, 0);
      this.heat.setAttribute("aria-label", "no head picked");
      return;
    }
    const [l, hd] = sel;
    const i = this.index();
    ctx.fillText(`head ${headLabel(l, hd)} at step ${d.steps[i]}`, 0, 0);
    const x0 = lab;
    const y0 = top + lab;
    const off = (((i * d.layers + l) * d.heads + hd) * n) * n;
    for (let r = 0; r < n; r++) {
      for (let col = 0; col < n; col++) {
        const v = d.maps[off + r * n + col];
        if (!(v > 0)) continue;
        ctx.fillStyle = lutColor(SEQUENTIAL_DEFAULT, seqIndex(v, 0, 1), th.bg);
        ctx.fillRect(x0 + col * px, y0 + r * px, Math.max(px, 1), Math.max(px, 1));
      }
    }
    ctx.strokeStyle = th.line;
    ctx.strokeRect(x0, y0, S, S);
    // the tokens: rows (from) on the left, columns (to) above, as Heatmap labels them
    ctx.font = font;
    ctx.fillStyle = th.ink;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const [k, t] of ticks) ctx.fillText(fitText(ctx, t, lab - 6), x0 - 4, y0 + (k + 0.5) * px);
    ctx.textAlign = "left";
    for (const [k, t] of ticks) {
      ctx.save();
      ctx.translate(x0 + (k + 0.5) * px, y0 - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.fillText(fitText(ctx, t, lab - 6), 0, 0);
      ctx.restore();
    }
    this.heat.dataset.labels = String(ticks.length);
    this.heat.dataset.margin = String(lab);
    const first = d.tokens.length ? displayToken(d.tokens[0]) : "";
    this.heat.setAttribute("aria-label", `attention of head ${headLabel(l, hd)} at step ${d.steps[i]} on the first input (${n} tokens from ${first}); rows are from, columns to`);
  }
}

export default mount((props) => new ScrubberView(props));
