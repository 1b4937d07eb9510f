import { describe, expect, it } from "vitest";
import { categorical, divIndex, luminance, lut, paint, parseColor, parseHex, seqIndex, textOn } from "../src/lib/colors";
import { STOPS } from "../src/colormaps.data";

describe("scales", () => {
  it("maps a sequential range onto 0..255 with clamping", () => {
    expect(seqIndex(0, 0, 1)).toBe(0);
    expect(seqIndex(1, 0, 1)).toBe(255);
    expect(seqIndex(0.5, 0, 1)).toBe(128);
    expect(seqIndex(0.25, 0, 0.5)).toBe(128);
    expect(seqIndex(-3, 0, 1)).toBe(0);
    expect(seqIndex(7, 0, 1)).toBe(255);
    expect(seqIndex(NaN, 0, 1)).toBe(-1);
  });

  it("centres the diverging scale on zero", () => {
    expect(divIndex(0, 0.4)).toBe(128);
    expect(divIndex(-0.4, 0.4)).toBe(0);
    expect(divIndex(0.4, 0.4)).toBe(255);
    expect(divIndex(0.2, 0.4)).toBe(191);
    expect(divIndex(-0.2, 0.4)).toBe(64);
    expect(divIndex(1, 0)).toBe(255);
  });
});

describe("lookup tables", () => {
  it("start at the background in a dark theme where the map starts light (zero is never white there)", () => {
    const bg = "#111111";
    const blues = lut("Blues", bg);
    expect(Array.from(blues.slice(0, 3))).toEqual([17, 17, 17]); // zero: the background
    expect(luminance([blues[1020], blues[1021], blues[1022]])).toBeGreaterThan(0.8); // the top: bright
    const div = lut("RdBu_r", bg);
    expect(Array.from(div.slice(127 * 4, 127 * 4 + 3)).every((v) => Math.abs(v - 17) <= 6)).toBe(true); // the centre: the background
    expect(Array.from(div.slice(0, 3))).toEqual(Array.from(lut("RdBu_r").slice(0, 3))); // the ends: unchanged
    expect(Array.from(lut("viridis", bg))).toEqual(Array.from(lut("viridis"))); // starts dark: kept
    expect(Array.from(lut("Blues", "#ffffff"))).toEqual(Array.from(lut("Blues"))); // light theme: the map itself
  });


  it("hit the matplotlib stops at both ends and are opaque", () => {
    for (const name of Object.keys(STOPS)) {
      const t = lut(name);
      const first = parseHex(STOPS[name][0]);
      const last = parseHex(STOPS[name][STOPS[name].length - 1]);
      expect(Array.from(t.slice(0, 3))).toEqual(first);
      expect(Array.from(t.slice(1020, 1023))).toEqual(last);
      for (let i = 3; i < 1024; i += 4) expect(t[i]).toBe(255);
    }
  });

  it("Blues gets darker as the value grows", () => {
    const t = lut("Blues");
    const lum = (i: number) => t[4 * i] + t[4 * i + 1] + t[4 * i + 2];
    for (let i = 1; i < 256; i++) expect(lum(i)).toBeLessThanOrEqual(lum(i - 1));
  });

  it("RdBu_r is blue below zero, near white at zero, red above", () => {
    const t = lut("RdBu_r");
    const at = (i: number) => Array.from(t.slice(4 * i, 4 * i + 3));
    const [r0, , b0] = at(0);
    const [r1, , b1] = at(255);
    const mid = at(128);
    expect(b0).toBeGreaterThan(r0);
    expect(r1).toBeGreaterThan(b1);
    expect(Math.min(...mid)).toBeGreaterThan(225);
  });

  it("falls back to Blues for an unknown name", () => {
    expect(lut("no-such-map")).toBe(lut("Blues"));
  });

  it("picks legible text colours", () => {
    expect(textOn("Blues", 0)).toBe("#111");
    expect(textOn("Blues", 255)).toBe("#fff");
    expect(categorical(0)).toBe(categorical(10));
  });
});

describe("painting", () => {
  it("paints values through a table, with a colour for missing values", () => {
    const t = lut("viridis");
    const out = paint([0, 1, NaN], t, (v) => seqIndex(v, 0, 1), undefined, [1, 2, 3, 4]);
    expect(Array.from(out.slice(0, 4))).toEqual(Array.from(t.slice(0, 4)));
    expect(Array.from(out.slice(4, 8))).toEqual(Array.from(t.slice(1020, 1024)));
    expect(Array.from(out.slice(8, 12))).toEqual([1, 2, 3, 4]);
  });
});

describe("colour parsing", () => {
  it("reads #rgb, #rrggbb and rgb()/rgba(), and nothing else", () => {
    expect(parseColor("#f0f0f0")).toEqual([240, 240, 240]);
    expect(parseColor(" #FA0 ")).toEqual([255, 170, 0]);
    expect(parseColor("rgb(1, 2, 3)")).toEqual([1, 2, 3]);
    expect(parseColor("rgba(255,255,255,0.9)")).toEqual([255, 255, 255]);
    expect(parseColor("rgb(10 20 30)")).toEqual([10, 20, 30]);
    expect(parseColor("white")).toBeNull();
    expect(parseColor("#12345")).toBeNull();
    expect(() => parseHex("var(--x)")).toThrow();
  });

  it("ranks luminance from black to white", () => {
    expect(luminance([0, 0, 0])).toBe(0);
    expect(luminance([255, 255, 255])).toBeCloseTo(1);
    expect(luminance(parseColor("#111")!)).toBeLessThan(0.2);
  });
});
