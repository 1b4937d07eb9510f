import { describe, expect, it } from "vitest";
import { Axes, axesGrid, axesSpace, drawAxes, headAxes } from "../src/lib/axes";
import { LIGHT } from "../src/lib/theme";

/** A 2-D context that measures 6 px per character and records where text lands. */
function fakeContext() {
  const drawn: { text: string; x0: number; x1: number; y: number; turned: boolean }[] = [];
  let state = { dx: 0, dy: 0, turned: false };
  const stack: (typeof state)[] = [];
  const ctx = {
    font: "", fillStyle: "", textAlign: "left", textBaseline: "alphabetic",
    measureText: (s: string) => ({ width: 6 * [...s].length, actualBoundingBoxAscent: 8, actualBoundingBoxDescent: 2 }),
    save: () => stack.push({ ...state }),
    restore: () => { state = stack.pop()!; },
    translate: (x: number, y: number) => { state.dx += x; state.dy += y; },
    rotate: () => { state.turned = true; },
    fillText(text: string, x: number, y: number) {
      const w = 6 * [...text].length;
      if (state.turned) {
        // turned a quarter: the text's height (10) lies across x, its length runs down
        drawn.push({ text, x0: state.dx - 5, x1: state.dx + 5, y: state.dy, turned: true });
        return;
      }
      const left = this.textAlign === "right" ? x - w : this.textAlign === "center" ? x - w / 2 : x;
      drawn.push({ text, x0: state.dx + left, x1: state.dx + left + w, y: state.dy + y, turned: false });
    },
  };
  return { ctx, drawn };
}

function layout(a: Axes, width: number) {
  const { ctx: fake, drawn } = fakeContext();
  const ctx = fake as unknown as CanvasRenderingContext2D;
  const space = axesSpace(ctx, a);
  const g = axesGrid(ctx, a, { width, gap: 2, below: 0, bottom: 4, minCell: 12, maxCell: 72 });
  drawAxes(ctx, LIGHT, g, a);
  return { g, drawn, space };
}

describe("grid axes", () => {
  it("leave measured room for the labels and the titles, and draw inside the box", () => {
    const a = headAxes(24, 16);
    const { g, drawn, space } = layout(a, 500);
    // widest row label "24" is 12 px; the turned title's line is 10 px; gaps 4 and 6
    expect(space.left).toBe(10 + 4 + 12 + 6 + 2);
    expect(space.top).toBe(10 + 6);
    for (const d of drawn) {
      expect(d.x0).toBeGreaterThanOrEqual(0);
      expect(d.x1).toBeLessThanOrEqual(g.width);
    }
    const rows = drawn.filter((d) => !d.turned && d.x1 === g.left - 6);
    const title = drawn.find((d) => d.turned)!;
    expect(title.text).toBe("layer");
    expect(title.x1).toBeLessThanOrEqual(Math.min(...rows.map((d) => d.x0)));
    expect(g.height).toBeGreaterThanOrEqual(g.top + 5 * 6); // the title fits under the first row
  });

  it("label every column only where the measured numbers fit, and keep the title clear", () => {
    const a: Axes = { rows: 2, cols: 40, colTitle: "head" };
    const { g, drawn } = layout(a, 420); // 40 heads on ~380 px: cells of 7 px, labels of 12 px
    const cols = drawn.filter((d) => d.y === g.top - 3 && d.text !== "head").sort((p, q) => p.x0 - q.x0);
    expect(cols.length).toBeLessThan(40);
    expect(cols[0].text).toBe("1");
    for (let i = 1; i < cols.length; i++) expect(cols[i].x0).toBeGreaterThanOrEqual(cols[i - 1].x1);
    const head = drawn.find((d) => d.text === "head")!;
    expect(head.x0).toBeGreaterThanOrEqual(0);
    expect(head.x1).toBeLessThanOrEqual(cols[0].x0);
  });

  it("use the rows' own labels", () => {
    const { drawn } = layout({ rows: 12, cols: 4, rowLabel: (l) => `L${l + 1}`, colTitle: "head" }, 300);
    expect(drawn.map((d) => d.text)).toContain("L12");
    expect(drawn.some((d) => d.turned)).toBe(false);
  });
});
