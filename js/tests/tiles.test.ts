import { describe, expect, it } from "vitest";
import { chooseLevel, levelSide, TileCache, tileKey, tileOfCell, tilesCovering } from "../src/lib/tiles";

const P = { n: 8192, top: 4, size: 256 }; // 8k tokens: overview 512 = level 4

function entry(bytes: number, pinned = false) {
  return { values: new Float32Array(bytes / 4), rows: 1, cols: bytes / 4, pinned };
}

describe("pyramid geometry", () => {
  it("halves the side per level, rounding up", () => {
    expect([0, 1, 2, 4].map((k) => levelSide(8192, k))).toEqual([8192, 4096, 2048, 512]);
    expect(levelSide(1000, 3)).toBe(125);
    expect(levelSide(1001, 3)).toBe(126); // the last bin holds one cell
  });

  it("chooses the coarsest level whose bins stay within 3 device pixels", () => {
    // whole 8k map on 1200 device pixels: 0.146 px per cell -> bins of 16 cells = 2.3 px: the overview
    expect(chooseLevel(8192, 1200, 4)).toBe(4);
    // zoomed 4x: 2048 cells on 1200 px -> bins of 4 cells (2.3 px)
    expect(chooseLevel(2048, 1200, 4)).toBe(2);
    // cells wider than 3 px: exact level
    expect(chooseLevel(100, 1200, 4)).toBe(0);
    // 32k on 1200 px: the overview (level 6) is as fine as the screen
    expect(chooseLevel(32768, 1200, 6)).toBe(6);
    expect(chooseLevel(0, 1200, 6)).toBe(6);
  });

  it("lists the tiles of a level that cover a view, clipped to the map", () => {
    // level 0: tiles of 256 cells; rows 1000..1300 and columns 0..100
    expect(tilesCovering(P, 0, 1000, 1300, 0, 100)).toEqual([{ k: 0, ti: 3, tj: 0 }, { k: 0, ti: 4, tj: 0 }, { k: 0, ti: 5, tj: 0 }]);
    // level 2: a tile covers 1024 cells; the whole map is 8 × 8 tiles
    expect(tilesCovering(P, 2, 0, 8192, 0, 8192).length).toBe(8 * 8);
    // a view ending exactly on a tile edge does not ask for the next tile
    expect(tilesCovering(P, 0, 0, 256, 0, 256)).toEqual([{ k: 0, ti: 0, tj: 0 }]);
    // views past the end stay inside
    expect(tilesCovering(P, 0, 8100, 9000, 8100, 9000)).toEqual([{ k: 0, ti: 31, tj: 31 }]);
  });

  it("finds the tile and bin of a cell", () => {
    expect(tileOfCell(P, 0, 1000, 3)).toEqual({ k: 0, ti: 3, tj: 0, i: 1000 - 768, j: 3 });
    expect(tileOfCell(P, 3, 1000, 3)).toEqual({ k: 3, ti: 0, tj: 0, i: 125, j: 0 });
  });

  it("keys tiles by head, what, reduction (pooled levels only) and place", () => {
    expect(tileKey(1, 2, "value", "max", { k: 0, ti: 3, tj: 4 })).toBe(tileKey(1, 2, "value", "mean", { k: 0, ti: 3, tj: 4 }));
    expect(tileKey(1, 2, "value", "max", { k: 1, ti: 3, tj: 4 })).not.toBe(tileKey(1, 2, "value", "mean", { k: 1, ti: 3, tj: 4 }));
    expect(tileKey(1, 2, "rank", "max", { k: 1, ti: 3, tj: 4 })).not.toBe(tileKey(1, 2, "value", "max", { k: 1, ti: 3, tj: 4 }));
  });
});

describe("tile cache", () => {
  it("evicts the least recently used tiles past its byte budget", () => {
    const c = new TileCache(1000);
    c.set("a", entry(400));
    c.set("b", entry(400));
    c.get("a"); // a is now more recent than b
    c.set("c", entry(400));
    expect(c.keys()).toEqual(["a", "c"]);
    expect(c.bytes).toBe(800);
  });

  it("never evicts pinned tiles and does not count them", () => {
    const c = new TileCache(500);
    c.set("overview", entry(4000, true));
    c.set("a", entry(400));
    c.set("b", entry(400));
    expect(c.has("overview")).toBe(true);
    expect(c.keys()).toEqual(["overview", "b"]);
    expect(c.bytes).toBe(400);
  });

  it("replaces an entry under the same key and drops a head's tiles", () => {
    const c = new TileCache(10_000);
    c.set("0/1/x", entry(400));
    c.set("0/1/x", entry(800));
    c.set("0/2/x", entry(400));
    expect(c.bytes).toBe(1200);
    c.dropPrefix("0/1/");
    expect(c.keys()).toEqual(["0/2/x"]);
    expect(c.bytes).toBe(400);
  });

  it("forgets painted bitmaps when the scale changes", () => {
    const c = new TileCache(10_000);
    const e = { ...entry(4), bitmap: {} as CanvasImageSource, paintedFor: "linear" };
    c.set("a", e);
    c.unpaint();
    expect(c.get("a")!.bitmap).toBeUndefined();
  });
});
