// FlowView of two models on one input: grey = in both graphs, turquoise = only model A,
// purple = only model B; head glyphs split in two halves, two influence bars per token.

import { legendItems } from "../lib/legend";
import { h } from "../lib/view";
import { edge, MODEL_COLORS, node } from "./data";
import { TracedView } from "./traced";
import { MODEL } from "./wire.gen";

export class CompareView extends TracedView {
  protected edgeColor(i: number): string {
    return MODEL_COLORS[edge(this.g, i, "model")];
  }

  protected litColor(i: number): string {
    return this.edgeColor(i);
  }

  protected nodeColor(i: number): string {
    return MODEL_COLORS[node(this.g, i, "model")];
  }

  protected buildLegend(): void {
    const [a, b] = this.g.names;
    legendItems(this.legend, "edges and tokens",
      [[MODEL_COLORS[MODEL.both], "in both models"], [MODEL_COLORS[MODEL.a], `only in ${a}`], [MODEL_COLORS[MODEL.b], `only in ${b}`]], "line");
    this.legend.appendChild(h("div", "attnkit-legend-note", `head glyphs: left half ${a}, right half ${b}; bars outside the ring: influence ratings (0-5)`));
  }

  protected bars(p: number): [number, string][] {
    return [[this.barOf(this.g.infA[p]), MODEL_COLORS[MODEL.a]], [this.barOf(this.g.infB[p]), MODEL_COLORS[MODEL.b]]];
  }

  protected influenceRows(p: number): [string, string][] {
    const g = this.g;
    return [
      [`influence, ${g.names[0]}`, `${this.fmt(g.infA[p])} (rating ${g.ratA[p]}/5)`],
      [`influence, ${g.names[1]}`, `${this.fmt(g.infB[p])} (rating ${g.ratB[p]}/5)`],
    ];
  }

  protected nodeRows(i: number, rows: [string, string][]): [string, string][] {
    const g = this.g;
    const where: Record<number, string> = { [MODEL.both]: "both models", [MODEL.a]: `only ${g.names[0]}`, [MODEL.b]: `only ${g.names[1]}` };
    rows.splice(2, 0, ["in", where[node(g, i, "model")]]);
    return rows;
  }

  protected headRows(l: number, hd: number): [string, string][] {
    const g = this.g;
    return [
      [`edges, ${g.names[0]}`, String(Math.round(g.countsA[l * g.heads + hd]))],
      [`edges, ${g.names[1]}`, String(Math.round(g.countsB[l * g.heads + hd]))],
    ];
  }

  protected paintGlyph(ctx: CanvasRenderingContext2D, l: number, hd: number, x: number, y: number, max: number): void {
    const { cell } = this.glyph;
    const a = this.g.countsA[l * this.g.heads + hd] ?? 0;
    const b = this.g.countsB[l * this.g.heads + hd] ?? 0;
    ctx.fillStyle = this.theme.empty;
    ctx.fillRect(x, y, cell, cell);
    // each half filled from the bottom in proportion to the head's edges
    ctx.fillStyle = MODEL_COLORS[MODEL.a];
    if (a > 0) ctx.fillRect(x, y + cell * (1 - a / max), cell / 2, (cell * a) / max);
    ctx.fillStyle = MODEL_COLORS[MODEL.b];
    if (b > 0) ctx.fillRect(x + cell / 2, y + cell * (1 - b / max), cell / 2, (cell * b) / max);
  }
}
