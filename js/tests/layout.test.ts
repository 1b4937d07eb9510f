import { describe, expect, it } from "vitest";
import { paintThumb, resampleRanges } from "../src/lib/atlas";
import { displayToken, formatValue, headLabel, labelStride, truncate } from "../src/lib/labels";
import { cellOrigin, finiteRange, gridHit, gridLayout } from "../src/lib/layout";
import { fitEqual, nearest, toScreen } from "../src/lib/scatter";
import { cellAt, clampView, fullView, lineSides, panBy, snapView, zoomAt } from "../src/lib/zoom";

describe("labels", () => {
  it("names heads 1-indexed", () => {
    expect(headLabel(0, 0)).toBe("1-1");
    expect(headLabel(7, 9)).toBe("8-10");
  });

  it("shows tokens literally, with space markers and blanks made visible", () => {
    expect(displayToken("<img src=x onerror=alert(1)>")).toBe("<img src=x onerror=alert(1)>");
    expect(displayToken("\u0120the")).toBe("\u00b7the");
    expect(displayToken("\u2581the")).toBe("\u00b7the");
    expect(displayToken("")).toBe("\u2205");
    expect(displayToken("  ")).toBe("\u2423\u2423");
    expect(displayToken("a\nb")).toBe("a\\nb");
    expect(displayToken("\u0007")).toBe("\\x07");
  });

  it("truncates by code point", () => {
    expect(truncate("abcdef", 4)).toBe("abc\u2026");
    expect(truncate("abc", 4)).toBe("abc");
    expect(truncate("\u{1F600}\u{1F600}\u{1F600}", 2)).toBe("\u{1F600}\u2026");
  });

  it("strides labels by 1, 2, 5, 10 ...", () => {
    expect(labelStride(12, 11)).toBe(1);
    expect(labelStride(6, 11)).toBe(2);
    expect(labelStride(3, 11)).toBe(5);
    expect(labelStride(1.1, 11)).toBe(10);
    expect(labelStride(0.5, 11)).toBe(50);
  });

  it("formats values to three significant digits", () => {
    expect(formatValue(0.625)).toBe("0.625");
    expect(formatValue(0.1234)).toBe("0.123");
    expect(formatValue(12.345)).toBe("12.3");
    expect(formatValue(0)).toBe("0");
    expect(formatValue(NaN)).toBe("n/a");
    expect(formatValue(-0.5)).toBe("-0.500");
    expect(formatValue(1e-5)).toBe("1.00e-5");
  });
});

describe("grid layout", () => {
  const g = gridLayout({ rows: 12, cols: 12, width: 900, left: 30, top: 34, gap: 8, below: 14, bottom: 4, minCell: 28, maxCell: 110 });

  it("fits the columns into the width", () => {
    expect(g.cell).toBe(Math.floor((900 - 34) / 12 - 8));
    expect(g.left + 12 * g.pitchX).toBeLessThanOrEqual(900);
    expect(g.height).toBe(34 + 12 * g.pitchY + 4);
  });

  it("hits the cell under a point and nothing in the gaps", () => {
    const [x, y] = cellOrigin(g, 3, 5);
    expect(gridHit(g, x + 1, y + 1)).toEqual([3, 5]);
    expect(gridHit(g, x + g.cell - 1, y + g.cell + 10)).toEqual([3, 5]); // on its label
    expect(gridHit(g, x + g.cell + 2, y + 1)).toBeNull(); // gap between columns
    expect(gridHit(g, 5, y)).toBeNull(); // row labels
    expect(gridHit(g, x, g.top + 12 * g.pitchY + 1)).toBeNull();
  });

  it("never goes below the minimum cell", () => {
    const tiny = gridLayout({ rows: 24, cols: 16, width: 200, left: 30, top: 34, gap: 8, below: 14, bottom: 4, minCell: 28, maxCell: 110 });
    expect(tiny.cell).toBe(28);
  });

  it("finds the finite range", () => {
    expect(finiteRange([NaN, 2, -1, Infinity])).toEqual([-1, 2]);
    const [a, b] = finiteRange([NaN]);
    expect(a).toBeNaN();
    expect(b).toBeNaN();
  });
});

describe("thumbnail resampling", () => {
  it("splits source cells evenly over output pixels", () => {
    const { start, end } = resampleRanges(4, 2);
    expect(Array.from(start)).toEqual([0, 2]);
    expect(Array.from(end)).toEqual([2, 4]);
    const up = resampleRanges(2, 4);
    expect(Array.from(up.start)).toEqual([0, 0, 1, 1]);
  });

  // An identity table makes the painted pixels equal to the codes.
  const identity = new Uint32Array(256).map((_, i) => i);
  const paint = (codes: Uint8Array, offset: number, t: number, s: number) => {
    const out = new Uint32Array(s * s);
    paintThumb(codes, offset, t, s, identity, out, resampleRanges(t, s));
    return Array.from(out);
  };

  it("keeps a thin off-diagonal line when shrinking (block maximum)", () => {
    // 8×8 previous-token pattern: (i, i-1) = 255. Nearest sampling at 4×4 would lose it.
    const t = 8, s = 4;
    const codes = new Uint8Array(t * t);
    for (let i = 1; i < t; i++) codes[i * t + i - 1] = 255;
    const out = paint(codes, 0, t, s);
    for (let i = 0; i < s; i++) expect(out[i * s + i]).toBe(255);
    expect(out[0 * s + 3]).toBe(0);
    expect(out.filter((v) => v === 255).length).toBe(7); // 4 blocks on the diagonal, 3 just below it
  });

  it("repeats cells when enlarging, reading from the thumbnail's offset", () => {
    const codes = new Uint8Array([9, 1, 2, 3, 4]); // offset 1: a 2×2 map [1 2; 3 4]
    expect(paint(codes, 1, 2, 4)).toEqual([1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
  });

  it("paints a rectangle (cross-attention, 2 rows x 3 columns) into the square", () => {
    const out = new Uint32Array(36);
    // enlarging: rows repeat 3 times, columns twice
    paintThumb(new Uint8Array([1, 2, 3, 4, 5, 6]), 0, 2, 6, identity, out, resampleRanges(2, 6), 3, resampleRanges(3, 6));
    expect(Array.from(out.slice(0, 6))).toEqual([1, 1, 2, 2, 3, 3]);
    expect(Array.from(out.slice(30, 36))).toEqual([4, 4, 5, 5, 6, 6]);
    // shrinking the columns (4 -> 2, block maximum) while enlarging the rows (1 -> 2)
    const small = new Uint32Array(4);
    paintThumb(new Uint8Array([7, 1, 0, 9]), 0, 1, 2, identity, small, resampleRanges(1, 2), 4, resampleRanges(4, 2));
    expect(Array.from(small)).toEqual([7, 9, 7, 9]);
  });

  it("looks colours up in the 32-bit table", () => {
    const lut32 = new Uint32Array(256).map((_, i) => i + 1000);
    const out = new Uint32Array(4);
    paintThumb(new Uint8Array([0, 5, 255, 7]), 0, 2, 2, lut32, out, resampleRanges(2, 2));
    expect(Array.from(out)).toEqual([1000, 1005, 1255, 1007]);
  });
});

describe("zoom", () => {
  it("zooms about the pointer and keeps the cell under it", () => {
    const v = zoomAt(fullView(512), 4, 0.25, 0.75, 512);
    expect(v.size).toBe(128);
    expect(v.x0 + 0.25 * v.size).toBeCloseTo(128);
    expect(v.y0 + 0.75 * v.size).toBeCloseTo(384);
  });

  it("stays inside the map and above the minimum size", () => {
    expect(zoomAt(fullView(10), 100, 1, 1, 10)).toEqual({ x0: 6, y0: 6, size: 4 });
    expect(zoomAt(fullView(10), 0.1, 0.5, 0.5, 10)).toEqual(fullView(10));
    expect(clampView({ x0: -5, y0: 99, size: 20 }, 50)).toEqual({ x0: 0, y0: 30, size: 20 });
    expect(fullView(3).size).toBe(3);
    expect(zoomAt(fullView(3), 8, 0.5, 0.5, 3).size).toBe(3);
  });

  it("snaps views of visible cells onto whole cells, in the zoom's direction", () => {
    // 40 cells zoomed three times about the centre: 5 cells from 17.5 would cut both edge columns
    expect(snapView({ x0: 17.5, y0: 17.5, size: 5 }, 40, 500)).toEqual({ x0: 18, y0: 18, size: 5 });
    expect(snapView({ x0: 10.2, y0: 3.7, size: 9.6 }, 40, 500, "in")).toEqual({ x0: 11, y0: 4, size: 9 });
    expect(snapView({ x0: 10.2, y0: 3.7, size: 9.6 }, 40, 500, "out")).toEqual({ x0: 10, y0: 4, size: 10 });
    expect(snapView({ x0: 0, y0: 0, size: 4.2 }, 40, 500, "out").size).toBe(5); // a small wheel step still zooms out
    expect(snapView({ x0: 38.6, y0: 0, size: 4 }, 40, 500)).toEqual({ x0: 36, y0: 0, size: 4 }); // inside the map
    // cells thinner than 2 px: left as they are
    expect(snapView({ x0: 100.3, y0: 7.5, size: 3000.5 }, 8192, 500)).toEqual({ x0: 100.3, y0: 7.5, size: 3000.5 });
  });

  it("pans by dragged pixels", () => {
    const v = panBy({ x0: 100, y0: 100, size: 50 }, 100, -50, 500, 512);
    expect(v.x0).toBeCloseTo(90);
    expect(v.y0).toBeCloseTo(105);
  });

  it("maps pixels to cells", () => {
    const v = { x0: 10, y0: 20, size: 8 };
    expect(cellAt(v, 0, 0, 400, 512)).toEqual([20, 10]);
    expect(cellAt(v, 399, 51, 400, 512)).toEqual([21, 17]);
    expect(cellAt(v, -1, 5, 400, 512)).toBeNull();
    expect(cellAt(fullView(4), 399, 399, 400, 4)).toEqual([3, 3]);
  });
});

describe("line sides of a rectangle", () => {
  it("keeps a square map's cells square", () => {
    expect(lineSides(700, 350, 1000, 1000, 16)).toEqual([2, 2]);
  });
  it("stretches a tall map's columns, its rows the cells' height", () => {
    // 200 x 40 on 720 px: 18 px would fill the plot, 16 px do, at least half of it
    expect(lineSides(720, 200, 200, 40, 16)).toEqual([3.6, 16]);
    // 1,100 x 60: 16 px a column would not fit: the plot shared out
    expect(lineSides(720, 1100, 1100, 60, 16)).toEqual([720 / 1100, 12]);
    // 3,000 x 10: half the plot is more than 16 px a column
    expect(lineSides(720, 3000, 3000, 10, 16)).toEqual([0.24, 36]);
  });
  it("mirrors a wide map: rows stretched, columns the cells' width", () => {
    expect(lineSides(720, 200, 40, 200, 16)).toEqual([16, 3.6]);
    expect(lineSides(720, 1100, 60, 1100, 16)).toEqual([12, 720 / 1100]);
  });
  it("makes the cells square once zoomed in to cells as large", () => {
    expect(lineSides(720, 45, 200, 40, 16)).toEqual([16, 16]);
    expect(lineSides(720, 20, 200, 40, 16)).toEqual([36, 36]);
    expect(lineSides(720, 20, 40, 200, 16)).toEqual([36, 36]);
  });
});

describe("scatter", () => {
  it("fits with equal units and y pointing up", () => {
    const f = fitEqual([0, 2], [0, 1], 0, 0, 220, 220, 10);
    expect(f.scale).toBe(100);
    expect(toScreen(f, 1, 0.5)).toEqual([110, 110]);
    const [, yTop] = toScreen(f, 0, 1);
    const [, yBottom] = toScreen(f, 0, 0);
    expect(yTop).toBeLessThan(yBottom);
  });

  it("finds the nearest point within reach", () => {
    expect(nearest([0, 10, 20], [0, 0, 0], 11, 1, 5)).toBe(1);
    expect(nearest([0, 10, 20], [0, 0, 0], 15, 9, 5)).toBe(-1);
  });
});
