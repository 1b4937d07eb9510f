// FlowView of one model: nodes coloured by token role, one influence bar per token.

import { h } from "../lib/view";
import { lut } from "../lib/colors";
import { legendItems } from "../lib/legend";
import { node, ROLE_COLORS, SINGLE } from "./data";
import { TracedView } from "./traced";

export class SingleView extends TracedView {
  protected edgeColor(): string {
    return SINGLE;
  }

  protected litColor(): string {
    return this.theme.accent;
  }

  protected nodeColor(i: number): string {
    return ROLE_COLORS[this.g.roles[node(this.g, i, "position")]] ?? SINGLE;
  }

  protected buildLegend(): void {
    legendItems(this.legend, "tokens", [[ROLE_COLORS.cls, "[CLS] / start"], [ROLE_COLORS.sep, "[SEP] / end"], [ROLE_COLORS.word, "word piece"]]);
    this.legend.appendChild(h("div", "attnkit-legend-note", "line width and opacity: attention weight; bars outside the ring: the token's influence rating (0-5) on the source"));
  }

  protected bars(p: number): [number, string][] {
    return [[this.barOf(this.g.infA[p]), this.theme.dark ? "#bbb" : "#555"]];
  }

  protected influenceRows(p: number): [string, string][] {
    return [["influence", `${this.fmt(this.g.infA[p])} (rating ${this.g.ratA[p]}/5)`]];
  }

  protected headRows(l: number, hd: number): [string, string][] {
    return [["edges", String(Math.round(this.g.countsA[l * this.g.heads + hd]))]];
  }

  protected paintGlyph(ctx: CanvasRenderingContext2D, l: number, hd: number, x: number, y: number, max: number): void {
    const { cell } = this.glyph;
    const a = this.g.countsA[l * this.g.heads + hd] ?? 0;
    const blues = lut("Blues");
    if (!(a > 0) || !(max > 0)) {
      ctx.fillStyle = this.theme.empty;
    } else {
      const k = Math.round(60 + 195 * (a / max)) * 4;
      ctx.fillStyle = `rgb(${blues[k]},${blues[k + 1]},${blues[k + 2]})`;
    }
    ctx.fillRect(x, y, cell, cell);
    if (a > 0 && cell >= 16) {
      ctx.fillStyle = a / max > 0.55 ? "#fff" : "#222";
      ctx.textAlign = "center";
      ctx.fillText(String(Math.round(a)), x + cell / 2, y + cell / 2 + 0.5);
    }
  }
}
