import { describe, expect, it } from "vitest";
import { cellOf, patchAt, patchValues, stepQuery } from "../src/lib/patches";

const g = { rows: 2, cols: 3, first: 2 }; // [CLS] [DIST] then 2 x 3 patches

describe("patch grid", () => {
  it("reads the patches of a row and their top", () => {
    const row = [0.5, 0.1, 0, 0.2, 0.05, 0.1, 0.03, 0.02];
    const { values, top } = patchValues(row, g);
    expect(Array.from(values)).toEqual(Array.from(Float32Array.from(row.slice(2))));
    expect(top).toBeCloseTo(0.2);
  });

  it("finds the patch under a point", () => {
    expect(patchAt(g, 10, 10, 0, 0, 90, 60)).toBe(2);
    expect(patchAt(g, 89, 59, 0, 0, 90, 60)).toBe(7);
    expect(patchAt(g, 45, 35, 0, 0, 90, 60)).toBe(2 + 3 + 1);
    expect(patchAt(g, -1, 10, 0, 0, 90, 60)).toBe(-1);
    expect(patchAt(g, 10, 61, 0, 0, 90, 60)).toBe(-1);
  });

  it("steps with the keyboard and stays on the grid", () => {
    expect(cellOf(g, 0)).toBeNull();
    expect(cellOf(g, 6)).toEqual([1, 1]);
    expect(stepQuery(g, 0, "ArrowRight")).toBe(2); // from [CLS] to the first patch
    expect(stepQuery(g, 2, "ArrowDown")).toBe(5);
    expect(stepQuery(g, 5, "ArrowDown")).toBe(5);
    expect(stepQuery(g, 4, "ArrowRight")).toBe(4);
    expect(stepQuery(g, 7, "Home")).toBe(0);
    expect(stepQuery(g, 0, "End")).toBe(7);
    expect(stepQuery(g, 3, "x")).toBeNull();
  });
});
