import { describe, expect, it } from "vitest";
import { groupOf, headOf, headToFollow, moveCursor, segmentsOf, stackStarts, valueRange } from "../src/lib/scoreparts";
import { cellName, gridAxes, gridSpacing, isHeadGrid } from "../src/lib/gridlabels";

const NAMES = ["embed", "pos_embed", "1-1", "1-2", "1-mlp", "bias", "rest"];

describe("score view components", () => {
  it("reads head names 1-indexed into 0-indexed heads", () => {
    expect(headOf("2-3")).toEqual([1, 2]);
    expect(headOf("12-10")).toEqual([11, 9]);
    expect(headOf("1-mlp")).toBeNull();
    expect(headOf("x1-1")).toBeNull();
    expect(groupOf("3-4")).toBe("3-attn");
    expect(groupOf("3-mlp")).toBe("3-mlp");
    expect(groupOf("embed")).toBe("embed");
  });

  it("follows the key component's head, else the query component's", () => {
    expect(headToFollow({ q: "1-2", k: "2-1", v: 1 })).toEqual([1, 0]);
    expect(headToFollow({ q: "1-2", k: "embed", v: 1 })).toEqual([0, 1]);
    expect(headToFollow({ q: "rest", k: "rest", v: 1 })).toBeNull();
    expect(headToFollow(null)).toBeNull();
  });
});

describe("segments of a key", () => {
  // two keys, 4 slots each: (q, k, v); the last slot of a key is its "rest"
  const sq = [2, 3, 0, 6, 0, -1, -1, 6];
  const sk = [1, 1, 0, 6, 2, -1, -1, 6];
  const sv = [0.5, -2, 1, 0.25, 3, 0, 0, -1];

  it("sorts by size, keeps rest last and adds up to the wire's values", () => {
    const segs = segmentsOf(NAMES, sq, sk, sv, 0, 4, false);
    expect(segs.map((s) => `${s.q}x${s.k}`)).toEqual(["1-2xpos_embed", "embedxembed", "1-1xpos_embed", "restxrest"]);
    expect(segs.map((s) => s.v)).toEqual([-2, 1, 0.5, 0.25]);
    const total = segs.reduce((a, s) => a + s.v, 0);
    expect(total).toBeCloseTo(sv.slice(0, 4).reduce((a, v) => a + v, 0));
  });

  it("skips empty slots (id -1) instead of naming them", () => {
    const segs = segmentsOf(NAMES, sq, sk, sv, 1, 4, false);
    expect(segs).toEqual([{ q: "embed", k: "1-1", v: 3 }, { q: "rest", k: "rest", v: -1 }]);
  });

  it("groups a layer's heads and sums what falls together", () => {
    const segs = segmentsOf(NAMES, sq, sk, sv, 0, 4, true);
    expect(segs.map((s) => `${s.q}x${s.k}`)).toEqual(["1-attnxpos_embed", "embedxembed", "restxrest"]);
    expect(segs[0].v).toBeCloseTo(-1.5);
  });

  it("stacks positive terms right of 0 and negative ones left of it", () => {
    const segs = [{ q: "a", k: "a", v: 2 }, { q: "b", k: "b", v: -1 }, { q: "c", k: "c", v: 0.5 }, { q: "d", k: "d", v: -0.25 }];
    expect(stackStarts(segs)).toEqual([0, -1, 2, -1.25]);
    expect(valueRange([segs], [1.25])).toEqual([-1.25, 2.5]);
    expect(valueRange([[{ q: "x", k: "x", v: 1 }]], [3])).toEqual([0, 3]); // the score's tick fits
    expect(valueRange([], [])[0]).toBe(0);
  });
});

describe("keyboard cursor", () => {
  it("moves within the keys and the row's segments, and ignores other keys", () => {
    expect(moveCursor("ArrowDown", 0, 1, 3, 4)).toEqual({ row: 1, seg: 1 });
    expect(moveCursor("ArrowDown", 2, 1, 3, 4)).toEqual({ row: 2, seg: 1 });
    expect(moveCursor("ArrowUp", 0, 0, 3, 4)).toEqual({ row: 0, seg: 0 });
    expect(moveCursor("ArrowRight", 0, 3, 3, 4)).toEqual({ row: 0, seg: 3 });
    expect(moveCursor("ArrowRight", 0, 0, 3, 4)).toEqual({ row: 0, seg: 1 });
    expect(moveCursor("ArrowLeft", 0, 0, 3, 4)).toEqual({ row: 0, seg: 0 });
    expect(moveCursor("End", 0, 2, 3, 4)).toEqual({ row: 2, seg: 2 });
    expect(moveCursor("Home", 2, 2, 3, 4)).toEqual({ row: 0, seg: 2 });
    expect(moveCursor("x", 0, 0, 3, 4)).toBeNull();
    expect(moveCursor("ArrowDown", 0, 0, 0, 0)).toEqual({ row: 0, seg: 0 });
  });
});

describe("head map labels", () => {
  const plain = { rows: [], cols: [], rowTitle: "layer", colTitle: "head" };
  const comp = { rows: ["1-1", "1-2"], cols: ["2-1", "2-2", "3-1"], rowTitle: "source", colTitle: "target" };

  it("names a layer x head cell as a head, a labelled cell by its labels", () => {
    expect(isHeadGrid(plain)).toBe(true);
    expect(cellName(plain, 1, 2)).toBe("Head 2-3");
    expect(cellName(undefined, 0, 0)).toBe("Head 1-1");
    expect(isHeadGrid(comp)).toBe(false);
    expect(cellName(comp, 1, 2)).toBe("source 1-2, target 3-1");
  });

  it("gives the axes the labels only when they fit the grid", () => {
    const a = gridAxes(2, 3, comp);
    expect([a.rowTitle, a.colTitle, a.rowLabel?.(1), a.colLabel?.(0)]).toEqual(["source", "target", "1-2", "2-1"]);
    const b = gridAxes(4, 3, comp);
    expect(b.rowLabel).toBeUndefined();
    expect(gridAxes(2, 2, plain).colLabel).toBeUndefined();
  });

  it("drops gaps and shrinks cells on large grids", () => {
    expect(gridSpacing(12)).toEqual({ gap: 2, minCell: 12 });
    expect(gridSpacing(992)).toEqual({ gap: 0, minCell: 2 });
    expect(gridSpacing(128).minCell).toBe(6);
  });
});
