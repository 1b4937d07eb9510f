import { describe, expect, it } from "vitest";
import { describeStripe, isKnocked, kernelNotice, Knocked, moveCursor, resultText, stripeCells, stripeOf } from "../src/lib/knockout";

describe("which edges a click knocks out (the rule of attnkit/widgets/intervention.py)", () => {
  it("an edge, a decoder's column, an encoder's column and a diagonal", () => {
    expect(stripeCells(4, 2, "edge", 6, true)).toEqual({ cells: [[4, 2]], kept: [] });
    // a decoder's column of key 2 starts at query 2; key 0's column keeps row 0 (its only key)
    expect(stripeCells(4, 2, "column", 5, true).cells).toEqual([[2, 2], [3, 2], [4, 2]]);
    expect(stripeCells(3, 0, "column", 3, true)).toEqual({ cells: [[1, 0], [2, 0]], kept: [0] });
    expect(stripeCells(0, 1, "column", 3, false).cells).toEqual([[0, 1], [1, 1], [2, 1]]);
    // the diagonal key = query - 2 through (3, 1)
    expect(stripeCells(3, 1, "diagonal", 5, true).cells).toEqual([[2, 0], [3, 1], [4, 2]]);
    // the main diagonal of a decoder: row 0 kept; a lone decoder edge (0, 0) leaves nothing
    expect(stripeCells(2, 2, "diagonal", 3, true)).toEqual({ cells: [[1, 1], [2, 2]], kept: [0] });
    expect(stripeCells(0, 0, "edge", 3, true)).toEqual({ cells: [], kept: [0] });
    // an encoder's diagonal above the main one
    expect(stripeCells(0, 2, "diagonal", 4, false).cells).toEqual([[0, 2], [1, 3]]);
  });

  it("modifiers pick the stripe: Shift a column, Alt a diagonal, else the mode", () => {
    expect(stripeOf({ shiftKey: true }, "edge")).toBe("column");
    expect(stripeOf({ altKey: true }, "column")).toBe("diagonal");
    expect(stripeOf({}, "diagonal")).toBe("diagonal");
  });
});

describe("the keyboard cursor on the map", () => {
  it("starts at the last query's first key, moves and clamps, and stays under a decoder's diagonal", () => {
    expect(moveCursor(null, "ArrowUp", 5, true)).toEqual([3, 0]);
    expect(moveCursor([2, 2], "ArrowRight", 5, true)).toEqual([2, 2]);
    expect(moveCursor([2, 2], "ArrowRight", 5, false)).toEqual([2, 3]);
    expect(moveCursor([2, 2], "ArrowUp", 5, true)).toEqual([1, 1]);
    expect(moveCursor([4, 1], "ArrowDown", 5, true)).toEqual([4, 1]);
    expect(moveCursor([3, 1], "End", 5, true)).toEqual([3, 3]);
    expect(moveCursor([3, 1], "End", 5, false)).toEqual([3, 4]);
    expect(moveCursor([3, 3], "Home", 5, true)).toEqual([3, 0]);
    expect(moveCursor([3, 3], "x", 5, true)).toBeNull();
    expect(moveCursor(null, "ArrowUp", 0, true)).toBeNull();
  });
});

describe("what the view says", () => {
  const k: Knocked = {
    layer: 1, head: 0, query: 50, key: 19, stripe: "diagonal", n_edges: 34, kept: [], metric: "loss[34:65]",
    before: 0.0331, after: 0.818, change: 0.7849, relative_change: 23.7, n_items: 4, higher_is_better: false, downstream: [],
  };

  it("the result: what was knocked out, before → after and the change, heads from 1", () => {
    expect(isKnocked({})).toBe(false);
    expect(isKnocked(k)).toBe(true);
    expect(describeStripe(k)).toBe("diagonal key = query \u2212 31 (34 edges) of head 2-1");
    expect(resultText(k)).toBe("knocked out diagonal key = query \u2212 31 (34 edges) of head 2-1: loss[34:65] 0.0331 \u2192 0.818, change +0.785 (worse), mean of 4 inputs");
    expect(resultText({ ...k, stripe: "edge", n_edges: 1, after: 0.03, change: -0.0031, n_items: 1 })).toBe(
      "knocked out edge 50 \u2192 19 of head 2-1: loss[34:65] 0.0331 \u2192 0.0300, change \u22120.0031 (better), 1 input");
  });

  it("says a knockout needs a running kernel where none can answer", () => {
    expect(kernelNotice("ok", "")).toBe("");
    expect(kernelNotice("slow", "")).toBe("");
    expect(kernelNotice("none", "")).toMatch(/needs a running kernel \(this saved page has none\)/);
    expect(kernelNotice("none", "the kernel was restarted")).toBe("knocking an edge out needs a running kernel (the kernel was restarted)");
  });
});
