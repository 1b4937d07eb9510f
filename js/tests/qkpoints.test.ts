import { describe, expect, it } from "vitest";
import { gridShape, layoutPoints, nearestPanel, panelAt, panelBox, panelGrid } from "../src/lib/qkpoints";

describe("qk scatter points", () => {
  it("keeps single-head points where they are", () => {
    const { x, y } = layoutPoints(new Float32Array([0.5, -0.5, 1, 1]), null, [[0, 0]]);
    expect(Array.from(x)).toEqual([0.5, 1]);
    expect(Array.from(y)).toEqual([-0.5, 1]);
  });

  it("lays a full layer x head set out as the matrix, first layer on top", () => {
    const heads = [[0, 0], [0, 1], [1, 0], [1, 1]];
    const g = panelGrid(heads);
    expect([g.cols, g.rows]).toEqual([2, 2]);
    // the points come panel by panel: none in panel 0, one in panel 1, one in panel 2
    const { x, y } = layoutPoints(new Float32Array([0, 0, 0, 0]), new Uint32Array([0, 1, 1, 0]), heads, 0);
    expect([x[0], y[0]]).toEqual([0.5, 0.5]); // layer 0 head 1: top right
    expect([x[1], y[1]]).toEqual([-0.5, -0.5]); // layer 1 head 0: bottom left
    expect(panelAt(0.4, 0.6, heads)).toBe(1);
    expect(panelAt(-0.4, -0.6, heads)).toBe(2);
    expect(panelBox(3, heads)).toEqual({ x: 0.5, y: -0.5, half: 0.5 });
  });

  it("scales points into their panel and refuses counts that do not add up", () => {
    const heads = [[0, 0], [0, 1], [1, 0], [1, 1]];
    const { x, y } = layoutPoints(new Float32Array([1, 1, -1, -1, 0.5, 0]), new Uint32Array([2, 0, 0, 1]), heads, 0.5);
    // panel 0 (top left, centre (-0.5, 0.5), half-size 0.5 shrunk by half: 0.25)
    expect(Array.from(x)).toEqual([-0.25, -0.75, 0.625]);
    expect(Array.from(y)).toEqual([0.75, 0.25, -0.5]);
    expect(() => layoutPoints(new Float32Array(4), new Uint32Array([1, 0, 0, 0]), heads)).toThrow(RangeError);
  });

  it("uses a square grid for any other set of heads", () => {
    expect(gridShape(144)).toEqual({ cols: 12, rows: 12 });
    expect(gridShape(5)).toEqual({ cols: 3, rows: 2 });
    const g = panelGrid([[0, 3], [2, 1], [5, 0]]);
    expect([g.cols, g.rows]).toEqual([2, 2]);
  });

  it("centres a wide matrix (6 layers x 12 heads) in the plot (issue 28, item 6)", () => {
    const heads: number[][] = [];
    for (let l = 0; l < 6; l++) for (let h = 0; h < 12; h++) heads.push([l, h]);
    // panels 2/12 wide: the 6 rows span y in [-0.5, 0.5] (before: [0, 1], the top half)
    expect(panelBox(0, heads)).toEqual({ x: -1 + 1 / 12, y: 0.5 - 1 / 12, half: 1 / 12 });
    expect(panelBox(71, heads).y).toBeCloseTo(-0.5 + 1 / 12, 12);
    expect(panelAt(0.01, 0.01, heads)).toBe(2 * 12 + 6); // just right of and above the centre: 3-7
    expect(panelAt(0, 0.9, heads)).toBe(-1); // above the grid: no panel
    // Enter opens the panel nearest the view's centre, never nothing
    expect(nearestPanel(0, 0, heads)).toBeGreaterThanOrEqual(0);
    expect(nearestPanel(0.55, -0.2, heads)).toBe(panelAt(0.55, -0.2, heads));
    expect(nearestPanel(-0.9, 0.9, [[0, 0], [0, 1], [1, 0], [1, 1]])).toBe(0);
  });
});
