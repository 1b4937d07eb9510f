import { describe, expect, it } from "vitest";
import { curveRange, keyStep, moveHead, playNext, tokenTicks } from "../src/lib/steps";

describe("keyStep", () => {
  it("moves one checkpoint with the arrows and clamps at the ends", () => {
    expect(keyStep("ArrowRight", 3, 10)).toBe(4);
    expect(keyStep("ArrowLeft", 0, 10)).toBe(0);
    expect(keyStep("ArrowUp", 9, 10)).toBe(9);
  });
  it("jumps a tenth of the series with the page keys, to the ends with Home and End", () => {
    expect(keyStep("PageUp", 0, 81)).toBe(8);
    expect(keyStep("PageDown", 5, 81)).toBe(0);
    expect(keyStep("Home", 40, 81)).toBe(0);
    expect(keyStep("End", 0, 81)).toBe(80);
  });
  it("ignores other keys", () => {
    expect(keyStep("a", 3, 10)).toBeNull();
  });
});

describe("playNext", () => {
  it("steps on and wraps from the last checkpoint to the first", () => {
    expect(playNext(0, 3)).toBe(1);
    expect(playNext(2, 3)).toBe(0);
    expect(playNext(0, 1)).toBe(0);
  });
});

describe("curveRange", () => {
  it("spans every finite value of every series and keeps 0 on the axis", () => {
    expect(curveRange([6.2, NaN, 0.1], [-9.5, 0.2])).toEqual([-9.5, 6.2]);
    expect(curveRange([2, 3])).toEqual([0, 3]);
    expect(curveRange([NaN])).toEqual([0, 1]);
  });
});

describe("moveHead", () => {
  it("moves the selected head by layer (up/down) and head (left/right), clamped", () => {
    expect(moveHead([0, 0], "ArrowDown", 2, 2)).toEqual([1, 0]);
    expect(moveHead([1, 1], "ArrowRight", 2, 2)).toEqual([1, 1]);
    expect(moveHead([1, 1], "ArrowUp", 2, 2)).toEqual([0, 1]);
    expect(moveHead(null, "ArrowLeft", 2, 2)).toEqual([0, 0]);
    expect(moveHead([1, 0], "Enter", 2, 2)).toBeNull();
  });
});

describe("tokenTicks", () => {
  const toks = ["<bos>", "\u0120dat", "<img src=x onerror=alert(1)>", "", "dif"];
  it("labels every token where the cells are tall enough, shown as Heatmap shows them", () => {
    expect(tokenTicks(toks, 5, 20)).toEqual([
      [0, "<bos>"], [1, "\u00b7dat"], [2, "<img src=x onerror=alert(1)>"], [3, "\u2205"], [4, "dif"],
    ]);
  });
  it("labels every stride-th token with its 0-indexed position on small cells", () => {
    const many = Array.from({ length: 100 }, (_, i) => `t${i}`);
    const ticks = tokenTicks(many, 100, 3); // 14 px apart: every 5th
    expect(ticks.slice(0, 3)).toEqual([[0, "#0 t0"], [5, "#5 t5"], [10, "#10 t10"]]);
    expect(ticks.length).toBe(20);
  });
  it("labels nothing without tokens' cells", () => {
    expect(tokenTicks([], 0, 10)).toEqual([]);
  });
});
