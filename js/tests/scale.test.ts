import { describe, expect, it } from "vitest";
import { describeScale, rankRows, scaleIndex, scaleKey } from "../src/lib/scale";
import { binsOf, codeValue } from "../src/lib/atlas";

const base = { kind: "linear" as const, diverging: false, top: 0.5, decades: 3, excludeSinks: false };

describe("colour scales", () => {
  it("linear: 0 to the top, clamped above (sinks saturate)", () => {
    const f = scaleIndex(base);
    expect([0, 0.25, 0.5, 0.9].map(f)).toEqual([0, 128, 255, 255]);
    expect(f(NaN)).toBe(-1);
  });

  it("log: `decades` decades below the top, zero at the bottom colour", () => {
    const f = scaleIndex({ ...base, kind: "log", top: 1 });
    expect(f(1)).toBe(255);
    expect(f(0.1)).toBe(170); // 2 of 3 decades
    expect(f(0.01)).toBe(85);
    expect(f(0.001)).toBe(0);
    expect(f(1e-6)).toBe(0);
    expect(f(0)).toBe(0);
  });

  it("rank: values are ranks in [0, 1]", () => {
    const f = scaleIndex({ ...base, kind: "rank" });
    expect([0, 0.5, 1].map(f)).toEqual([0, 128, 255]);
  });

  it("diverging: symmetric about 0 whatever the kind", () => {
    const f = scaleIndex({ ...base, kind: "log", diverging: true, top: 0.4 });
    expect([-0.4, 0, 0.4].map(f)).toEqual([0, 128, 255]);
  });

  it("has a key that changes with anything that changes colours", () => {
    expect(scaleKey(base)).not.toBe(scaleKey({ ...base, excludeSinks: true }));
    expect(scaleKey(base)).not.toBe(scaleKey({ ...base, top: 0.4 }));
  });

  it("says in words what the legend shows", () => {
    expect(describeScale({ ...base, kind: "log", top: 0.5, excludeSinks: true }, "[CLS] and [SEP]"))
      .toBe("log scale, 5.00e-4 to 0.500; [CLS] and [SEP] left out of the scale (drawn at its top)");
    expect(describeScale(base, "the first token")).toBe("linear, 0 to 0.500");
    expect(describeScale({ ...base, kind: "rank" }, "")).toMatch(/^rank within each row/);
  });
});

describe("row ranks (the kernel's _pyramid rank tiles use the same rule)", () => {
  it("ranks each row's valid cells, ties sharing the mean rank", () => {
    // row 0: [0.1, 0.3, 0.3, 0.3] -> 0, (1+3)/2/3, ..; row 1 causal-invalid beyond col 1
    const v = [0.1, 0.3, 0.3, 0.3, 0.5, 0.2, 0.9, 0.9];
    const r = rankRows(v, 2, 4, (i, j) => i === 0 || j <= 1, () => false);
    expect(Array.from(r.slice(0, 4))).toEqual([0, 2 / 3, 2 / 3, 2 / 3].map(Math.fround));
    expect(r[4]).toBe(1);
    expect(r[5]).toBe(0);
    expect(r[6]).toBeNaN();
    expect(r[7]).toBeNaN();
  });

  it("leaves sink columns out of the ranking and draws them at the top", () => {
    // the sink (column 0) holds most of the mass; the rest are ranked among themselves
    const r = rankRows([0.7, 0.1, 0.2], 1, 3, () => true, (j) => j === 0);
    expect(Array.from(r)).toEqual([1, 0, 1]);
  });

  it("ranks a row with one valid cell at 1", () => {
    expect(Array.from(rankRows([0.4, 0], 1, 2, (_i, j) => j === 0, () => false)).slice(0, 1)).toEqual([1]);
  });
});

describe("head grid thumbnails", () => {
  it("decodes log codes: 255 is the top, each code 6/255 decades lower, 0 is zero", () => {
    expect(codeValue(255, 0.8)).toBeCloseTo(0.8, 12);
    expect(codeValue(0, 0.8)).toBe(0);
    expect(codeValue(255 - 85, 1)).toBeCloseTo(0.01, 12); // 85 codes = 2 decades
  });

  it("finds the thumbnail bins of positions like attention.pool_edges", () => {
    // n = 10 in t = 4 bins: edges 0, 2, 5, 7, 10
    expect([...binsOf(10, 4, [0, 1, 2, 4, 5, 9])].sort()).toEqual([0, 1, 2, 3]);
    expect([...binsOf(10, 4, [4])]).toEqual([1]);
    expect([...binsOf(10, 4, [7])]).toEqual([3]);
    expect([...binsOf(5, 5, [3])]).toEqual([3]);
  });
});
