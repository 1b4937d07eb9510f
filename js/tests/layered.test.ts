import { describe, expect, it } from "vitest";
import { edgeColor, edgeWidth, GROUP_COLORS, hitEdge, placeNodes, portOffset, PORTS, ROUTE_COLORS, segmentDistance2, SIGN_COLORS, stepEdge } from "../src/lib/layered";

const BOX = { left: 10, top: 20, width: 300, height: 200 };

describe("layered graph layout", () => {
  it("puts row 0 at the bottom and the last row at the top", () => {
    const p = placeNodes([0, 1, 2], [0, 0, 0], 3, BOX, false);
    expect(Array.from(p.y)).toEqual([220, 120, 20]);
  });

  it("spreads a row's nodes by their order, each row over the whole width", () => {
    // row 1 holds heads 2, 0, 1 (given out of order) and the MLP (order 2.5)
    const p = placeNodes([1, 1, 1, 1, 0], [2, 0, 1, 2.5, 0], 2, BOX, false);
    expect(Array.from(p.x)).toEqual([10 + 187.5, 10 + 37.5, 10 + 112.5, 10 + 262.5, 10 + 150]);
  });

  it("shares columns between rows by the rank of the order (routes: token positions)", () => {
    const p = placeNodes([0, 0, 1, 2], [3, 40, 40, 40], 3, BOX, true);
    // two distinct positions: 3 and 40 -> columns 0 and 1 of width 150
    expect(Array.from(p.x)).toEqual([85, 235, 235, 235]);
  });

  it("puts a circuit's nodes in slots: heads by index, the MLP after them", () => {
    // slots = 3 (2 heads + MLP): head 0, head 1, MLP, the logits between the heads (0.5)
    const p = placeNodes([1, 1, 1, 2], [0, 1, 2, 0.5], 3, BOX, false, 3);
    expect(Array.from(p.x)).toEqual([60, 160, 260, 110]);
  });

  it("enters a head's query left, key in the middle, value right", () => {
    expect(portOffset(PORTS.indexOf("q"), 8)).toBe(-8);
    expect(portOffset(PORTS.indexOf("k"), 8)).toBe(0);
    expect(portOffset(PORTS.indexOf("v"), 8)).toBe(8);
    expect(portOffset(PORTS.indexOf("out"), 8)).toBe(0);
  });
});

describe("layered graph style", () => {
  it("colours signed edges by sign and compared ones by group", () => {
    expect(edgeColor(0.5, 0, true, false)).toBe(SIGN_COLORS[0]);
    expect(edgeColor(-0.5, 0, true, false)).toBe(SIGN_COLORS[1]);
    expect(edgeColor(0.5, 2, false, false)).toBe(GROUP_COLORS[2]);
    expect(edgeColor(0.5, 1, false, true)).toBe(ROUTE_COLORS[1]);
  });

  it("scales widths by |score| relative to the largest", () => {
    expect(edgeWidth(-2, 2)).toBe(6);
    expect(edgeWidth(1, 2)).toBeCloseTo(0.75 + 5.25 / 2);
    expect(edgeWidth(0, 2)).toBe(0.75);
    expect(edgeWidth(1, 0)).toBe(0.75);
  });
});

describe("layered graph picking", () => {
  it("measures distance to a segment, clamped at its ends", () => {
    expect(segmentDistance2(5, 3, 0, 0, 10, 0)).toBe(9);
    expect(segmentDistance2(-4, 3, 0, 0, 10, 0)).toBe(25);
  });

  it("hits the nearest edge within the radius", () => {
    const edges: [number, number, number, number][] = [[0, 0, 100, 0], [0, 10, 100, 10]];
    expect(hitEdge(50, 2, 2, (i) => edges[i])).toBe(0);
    expect(hitEdge(50, 7, 2, (i) => edges[i])).toBe(1);
    expect(hitEdge(50, 40, 2, (i) => edges[i])).toBe(-1);
  });

  it("steps through edges with the arrow keys, wrapping", () => {
    expect(stepEdge(-1, 3, "ArrowRight")).toBe(0);
    expect(stepEdge(-1, 3, "ArrowLeft")).toBe(2);
    expect(stepEdge(2, 3, "ArrowDown")).toBe(0);
    expect(stepEdge(0, 3, "ArrowUp")).toBe(2);
    expect(stepEdge(1, 3, "End")).toBe(2);
    expect(stepEdge(1, 3, "x")).toBe(1);
    expect(stepEdge(0, 0, "ArrowRight")).toBe(-1);
  });
});
