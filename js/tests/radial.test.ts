import { describe, expect, it } from "vitest";
import { angleOf, bandAt, EdgeList, nearestPoint, nodeXY, Radial, ringRadius, roomOutward, spiral, traceThrough } from "../src/lib/radial";
import { fitText } from "../src/lib/labels";

const g: Radial = { cx: 100, cy: 100, rIn: 10, rOut: 70, layers: 2, n: 4 };

// The attention graph of tests/flow_cases.py (att_a, threshold 0.3) as attnkit.widgets.flow
// encodes it: (upper level, upper position, lower position), sorted.
const EDGES = [[2, 0, 1], [2, 0, 2], [1, 1, 0], [1, 1, 1], [1, 1, 2], [1, 2, 1], [1, 2, 3]];
const list: EdgeList = { count: EDGES.length, upper: (i) => EDGES[i][0], from: (i) => EDGES[i][1], to: (i) => EDGES[i][2] };

describe("radial layout", () => {
  it("puts the source level innermost and the inputs outermost", () => {
    expect(ringRadius(g, 2)).toBe(10);
    expect(ringRadius(g, 1)).toBe(40);
    expect(ringRadius(g, 0)).toBe(70);
  });

  it("places positions clockwise from the top", () => {
    expect(angleOf(0, 4)).toBe(0);
    expect(angleOf(1, 4)).toBeCloseTo(Math.PI / 2);
    const [x0, y0] = nodeXY(g, 0, 0);
    expect(x0).toBeCloseTo(100);
    expect(y0).toBeCloseTo(30); // top
    const [x1, y1] = nodeXY(g, 0, 1);
    expect(x1).toBeCloseTo(170); // right: clockwise
    expect(y1).toBeCloseTo(100);
  });

  it("draws an edge as a spiral from the upper node to the lower one, the short way round", () => {
    const p = spiral(g, 1, 3, 0, 5); // position 3 (left) to position 0 (top): through the top-left
    const [xa, ya] = nodeXY(g, 1, 3);
    const [xb, yb] = nodeXY(g, 0, 0);
    expect(p[0]).toBeCloseTo(xa);
    expect(p[1]).toBeCloseTo(ya);
    expect(p[8]).toBeCloseTo(xb);
    expect(p[9]).toBeCloseTo(yb);
    // the midpoint lies in the top-left quadrant, between the two rings
    expect(p[4]).toBeLessThan(100);
    expect(p[5]).toBeLessThan(100);
    const r = Math.hypot(p[4] - 100, p[5] - 100);
    expect(r).toBeGreaterThan(40);
    expect(r).toBeLessThan(70);
  });

  it("finds the band of a radius and the nearest node", () => {
    expect(bandAt(g, 25)).toBe(2); // between level 2 (r 10) and level 1 (r 40)
    expect(bandAt(g, 55)).toBe(1);
    expect(bandAt(g, 80)).toBe(0);
    expect(bandAt(g, 5)).toBe(0);
    expect(nearestPoint([0, 0, 10, 10, 20, 20], 11, 9, 3)).toBe(1);
    expect(nearestPoint([0, 0], 11, 9, 3)).toBe(-1);
  });
});

describe("tracing a node (brushing)", () => {
  // Expected sets are attnkit.subgraph_through(g, node) of the same graph.
  it("keeps the paths from the source down to b at level 1 and from it to the inputs", () => {
    expect([...traceThrough(list, 1, 2)].sort()).toEqual([1, 5, 6]);
  });

  it("keeps every path reaching input a", () => {
    expect([...traceThrough(list, 0, 1)].sort()).toEqual([0, 1, 3, 5]);
  });

  it("keeps the whole graph for the source", () => {
    expect(traceThrough(list, 2, 0).size).toBe(EDGES.length);
  });
});

describe("radial labels", () => {
  it("measure the room outward to the canvas edge", () => {
    expect(roomOutward(200, 100, 30, 0)).toBeCloseTo(30); // straight up
    expect(roomOutward(200, 170, 100, Math.PI / 2)).toBeCloseTo(30); // right
    expect(roomOutward(200, 20, 100, (3 * Math.PI) / 2)).toBeCloseTo(20); // left
    expect(roomOutward(200, 150, 50, Math.PI / 4)).toBeCloseTo(50 * Math.SQRT2); // up-right corner
  });

  it("shorten text to the measured room with an ellipsis", () => {
    const ctx = { measureText: (s: string) => ({ width: 6 * [...s].length }) as TextMetrics };
    expect(fitText(ctx, "attention", 60)).toBe("attention");
    expect(fitText(ctx, "attention", 30)).toBe("atte\u2026");
    expect(fitText(ctx, "\u{1F600}\u{1F600}\u{1F600}", 12)).toBe("\u{1F600}\u2026"); // whole code points
  });
});
