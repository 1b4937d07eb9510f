import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { chooseLevel, Entry, levelSide, poolCells, TileCache, tileEntry, TileId, tileKey, TileLoader, tileOfCell, tilesCovering } from "../src/lib/tiles";

const P = { n: 8192, top: 4, size: 256 }; // 8k tokens: overview 512 = level 4

function entry(bytes: number, pinned = false) {
  return { values: new Float32Array(bytes / 4), rows: 1, cols: bytes / 4, pinned };
}

describe("poolCells", () => {
  // 2 rows x 5 columns pooled by 2 columns: runs [0,1], [2,3], [4] (the last one short)
  const v = [1, 3, 2, NaN, 5, 0.5, 0.25, NaN, NaN, 4];
  it("takes each run's max, leaving NaN out", () => {
    expect(Array.from(poolCells(v, 2, 5, 1, 2, false))).toEqual([3, 2, 5, 0.5, NaN, 4]);
  });
  it("takes each run's mean over its cells with values", () => {
    expect(Array.from(poolCells(v, 2, 5, 1, 2, true))).toEqual([2, 2, 5, 0.375, NaN, 4]);
  });
  it("keeps a peak a coarser draw would skip", () => {
    const row = new Float32Array(1100).fill(0.001);
    row[1003] = 0.5;
    const pooled = poolCells(row, 1, 1100, 1, 4, false);
    expect(pooled.length).toBe(275);
    expect(pooled[250]).toBe(0.5); // 1003 >> 2
    expect(pooled.filter((x) => x === 0.5).length).toBe(1);
  });
  // 5 rows x 2 columns (a tall map's exact columns) pooled by 2 rows: runs [0,1], [2,3], [4]
  const t = [1, 0.5, 3, 0.25, 2, NaN, NaN, NaN, 5, 4];
  it("pools runs of rows under exact columns", () => {
    expect(Array.from(poolCells(t, 5, 2, 2, 1, false))).toEqual([3, 0.5, 2, NaN, 5, 4]);
    expect(Array.from(poolCells(t, 5, 2, 2, 1, true))).toEqual([2, 0.375, 2, NaN, 5, 4]);
  });
  it("is the transpose of pooling the transposed columns", () => {
    const rows = 7;
    const cols = 3;
    const a = Float32Array.from({ length: rows * cols }, (_, i) => ((i * 37) % 11) / 10);
    const at = new Float32Array(rows * cols);
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) at[j * rows + i] = a[i * cols + j];
    for (const mean of [false, true]) {
      const byRows = poolCells(a, rows, cols, 3, 1, mean); // 3 x 3
      const byCols = poolCells(at, cols, rows, 1, 3, mean); // 3 x 3, transposed
      for (let i = 0; i < 3; i++) for (let j = 0; j < cols; j++) expect(byRows[i * cols + j]).toBeCloseTo(byCols[j * 3 + i], 6);
    }
  });
  it("pools both axes at once as the pyramid's square bins do", () => {
    // 4 x 4 in 2 x 2 bins
    const b = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
    expect(Array.from(poolCells(b, 4, 4, 2, 2, false))).toEqual([6, 8, 14, 16]);
    expect(Array.from(poolCells(b, 4, 4, 2, 2, true))).toEqual([3.5, 5.5, 11.5, 13.5]);
  });
});

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

describe("tile decoding", () => {
  it("reads a tile's wire array from a message buffer into a cache entry", () => {
    const data = new Float32Array([1, 2, 3, 4, 5, 6]);
    const e = tileEntry({ dtype: "float32", shape: [2, 3], buffer: 0 }, [new DataView(data.buffer)]);
    expect([e.rows, e.cols, e.pinned]).toEqual([2, 3, false]);
    expect(Array.from(e.values)).toEqual([1, 2, 3, 4, 5, 6]);
    const codes = tileEntry({ dtype: "uint8", shape: [1, 2], buffer: new Uint8Array([7, 9]) }, [], true);
    expect(codes.values).toBeInstanceOf(Float32Array);
    expect([Array.from(codes.values), codes.pinned]).toEqual([[7, 9], true]);
  });
});

describe("tile loader", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function loader(opts: { offline?: boolean; fail?: Set<string> } = {}) {
    const asked: string[] = [];
    const answers = new Map<string, (ok: boolean) => void>();
    const events: string[] = [];
    const id = (t: TileId) => `${t.k}/${t.ti}/${t.tj}`;
    const l = new TileLoader({
      cacheBytes: 1 << 20, inFlight: 2, settleMs: 60,
      fetch: (t) => new Promise<Entry>((resolve, reject) => {
        asked.push(id(t));
        answers.set(id(t), (ok) => (ok ? resolve(entry(16)) : reject(new Error("no"))));
      }),
      offline: () => Boolean(opts.offline),
      loaded: (key) => events.push(`loaded ${key}`),
      failed: (key) => events.push(`failed ${key}`),
    });
    return { l, asked, answers, events };
  }
  const t = (ti: number, tj: number): TileId => ({ k: 0, ti, tj });
  const flush = () => vi.advanceTimersByTimeAsync(0);

  it("asks for nothing until the view rests, then at most inFlight at a time, in order", async () => {
    const { l, asked, answers, events } = loader();
    for (const [i, j] of [[0, 0], [0, 1], [1, 1]]) l.want(`${i}${j}`, t(i, j), "value");
    l.want("00", t(0, 0), "value"); // queued once
    l.settle("view A");
    await vi.advanceTimersByTimeAsync(30);
    l.settle("view B"); // moved on before resting: the timer starts again
    await vi.advanceTimersByTimeAsync(40);
    expect(asked).toEqual([]);
    await vi.advanceTimersByTimeAsync(30);
    expect(asked).toEqual(["0/0/0", "0/0/1"]);
    answers.get("0/0/0")!(true);
    await flush();
    expect(asked).toEqual(["0/0/0", "0/0/1", "0/1/1"]); // a slot freed: the next one goes
    expect(l.cache.has("00")).toBe(true);
    expect(events).toEqual(["loaded 00"]);
    expect(l.firstDrawn("00")).toBeGreaterThanOrEqual(0);
    expect(l.firstDrawn("00")).toBeUndefined(); // only the first draw is timed
  });

  it("remembers failures and drops the queue until reset", async () => {
    const { l, asked, answers, events } = loader();
    l.want("a", t(0, 0), "value");
    l.settle("v");
    await vi.advanceTimersByTimeAsync(60);
    l.want("b", t(0, 1), "value");
    answers.get("0/0/0")!(false);
    await flush();
    expect(events).toEqual(["failed a"]);
    l.want("a", t(0, 0), "value");
    l.settle("v");
    await flush();
    expect(asked).toEqual(["0/0/0"]); // b was dropped with the queue, a is not asked again
    expect(l.load("a", t(0, 0), "value")).toBeNull();
    l.reset();
    const p = l.load("a", t(0, 0), "value");
    expect(p).not.toBeNull();
    answers.get("0/0/0")!(true);
    expect((await p)!.values.length).toBe(4);
    expect(await l.load("a", t(0, 0), "value")).toBe(l.cache.get("a")); // cached: no request
    expect(asked).toEqual(["0/0/0", "0/0/0"]);
  });

  it("queues nothing while no kernel can answer", async () => {
    const { l, asked } = loader({ offline: true });
    l.want("a", t(0, 0), "value");
    l.settle("v");
    await vi.advanceTimersByTimeAsync(100);
    expect(asked).toEqual([]);
    expect(l.load("a", t(0, 0), "value")).toBeNull();
  });
});
