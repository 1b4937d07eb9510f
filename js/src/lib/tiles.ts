// The tile pyramid of a long attention map, as the kernel serves it (attnkit/widgets/_pyramid.py).
//
// Level k pools bins of 2^k × 2^k cells (max or mean), so it is ceil(n / 2^k) bins on a
// side; level 0 holds the exact weights. The coarsest level, `top`, is the overview sent
// with the widget. A tile is `size` × `size` bins of one level: tile (ti, tj) of level k
// covers bins [ti·size, (ti+1)·size) × [tj·size, (tj+1)·size), clipped at the level's side.
//
// Everything between "this view needs tile t" and "tile t is in memory" lives here: the
// geometry, the decoding of a tile's wire array, the LRU cache, and TileLoader's request
// pipeline (a queue nearest the view first, a few requests in flight, no requests until the
// view rests; a tile the kernel refused is not asked again, one it did not answer in time is,
// after a back-off that doubles up to MAX_BACKOFF_MS, one request at a time until the kernel
// answers again). The heatmap only says which tiles it needs and draws.

import { Binary, readArray, WireArray } from "./codec";

export interface Pyramid {
  n: number; // cells per side (tokens)
  top: number; // level of the overview
  size: number; // bins per tile side
}

/** Bins per side of level `k`. */
export function levelSide(n: number, k: number): number {
  return Math.ceil(n / 2 ** k);
}

/**
 * The level to draw a view of `viewCells` cells across `plotDevPx` device pixels: the
 * coarsest level whose bins are at most `maxPx` device pixels wide (finer levels would
 * show nothing more), clamped to [0, top].
 */
export function chooseLevel(viewCells: number, plotDevPx: number, top: number, maxPx = 3): number {
  if (!(viewCells > 0) || !(plotDevPx > 0)) return top;
  const pxPerCell = plotDevPx / viewCells;
  const k = Math.floor(Math.log2(maxPx / pxPerCell));
  return Math.max(0, Math.min(top, k));
}

export interface TileId {
  k: number;
  ti: number;
  tj: number;
}

/**
 * A `rows` × `cols` block pooled in runs of `rowPool` rows × `colPool` columns (the last run of
 * each axis shorter): each run's max or mean, NaN cells left out (NaN where a run has none).
 * A stretched view's exact lines under thin cells: a wide map's columns, a tall map's rows.
 */
export function poolCells(values: ArrayLike<number>, rows: number, cols: number, rowPool: number, colPool: number, mean: boolean): Float32Array {
  const outR = Math.ceil(rows / rowPool);
  const outC = Math.ceil(cols / colPool);
  const pooled = new Float32Array(outR * outC);
  for (let a = 0; a < outR; a++) {
    for (let b = 0; b < outC; b++) {
      let acc = mean ? 0 : -Infinity;
      let count = 0;
      for (let i = a * rowPool; i < Math.min(rows, (a + 1) * rowPool); i++) {
        for (let j = b * colPool; j < Math.min(cols, (b + 1) * colPool); j++) {
          const v = values[i * cols + j];
          if (Number.isNaN(v)) continue;
          acc = mean ? acc + v : Math.max(acc, v);
          count++;
        }
      }
      pooled[a * outC + b] = count === 0 ? NaN : mean ? acc / count : acc;
    }
  }
  return pooled;
}

/** Tiles of level `k` that intersect cells [r0, r1) × [c0, c1). */
export function tilesCovering(p: Pyramid, k: number, r0: number, r1: number, c0: number, c1: number): TileId[] {
  const span = p.size * 2 ** k; // cells per tile side
  const last = Math.ceil(levelSide(p.n, k) / p.size) - 1;
  const out: TileId[] = [];
  const ti0 = Math.max(0, Math.floor(r0 / span));
  const ti1 = Math.min(last, Math.floor((Math.max(r0, r1 - 1e-9)) / span));
  const tj0 = Math.max(0, Math.floor(c0 / span));
  const tj1 = Math.min(last, Math.floor((Math.max(c0, c1 - 1e-9)) / span));
  for (let ti = ti0; ti <= ti1; ti++) for (let tj = tj0; tj <= tj1; tj++) out.push({ k, ti, tj });
  return out;
}

/** The tile of level `k` holding cell (row, col), and the bin's place in it. */
export function tileOfCell(p: Pyramid, k: number, row: number, col: number): TileId & { i: number; j: number } {
  const bi = Math.floor(row / 2 ** k);
  const bj = Math.floor(col / 2 ** k);
  return { k, ti: Math.floor(bi / p.size), tj: Math.floor(bj / p.size), i: bi % p.size, j: bj % p.size };
}

// ---------------------------------------------------------------------------- the cache
export interface Entry {
  values: Float32Array;
  rows: number;
  cols: number;
  /** kept whatever the budget (the overview, tiles embedded in an offline report) */
  pinned: boolean;
  /** painted pixels for the colour scale `paintedFor` */
  bitmap?: CanvasImageSource;
  paintedFor?: string;
}

/** Least-recently-used store of tiles, bounded in bytes of values (pinned entries excepted). */
export class TileCache {
  private map = new Map<string, Entry>();
  private used = 0;
  constructor(readonly maxBytes: number) {}

  get size(): number {
    return this.map.size;
  }

  get bytes(): number {
    return this.used;
  }

  has(key: string): boolean {
    return this.map.has(key);
  }

  /** The entry, marked most recently used. */
  get(key: string): Entry | undefined {
    const e = this.map.get(key);
    if (e) {
      this.map.delete(key);
      this.map.set(key, e);
    }
    return e;
  }

  set(key: string, e: Entry): void {
    const old = this.map.get(key);
    if (old) {
      this.map.delete(key);
      if (!old.pinned) this.used -= old.values.byteLength;
    }
    this.map.set(key, e);
    if (!e.pinned) this.used += e.values.byteLength;
    this.evict();
  }

  /** Drop every entry whose key starts with `prefix` (e.g. another head's tiles). */
  dropPrefix(prefix: string): void {
    for (const [k, e] of [...this.map]) {
      if (k.startsWith(prefix)) {
        this.map.delete(k);
        if (!e.pinned) this.used -= e.values.byteLength;
      }
    }
  }

  /** Forget painted bitmaps (the colour scale or theme changed). */
  unpaint(): void {
    for (const e of this.map.values()) {
      e.bitmap = undefined;
      e.paintedFor = undefined;
    }
  }

  keys(): string[] {
    return [...this.map.keys()];
  }

  private evict(): void {
    if (this.used <= this.maxBytes) return;
    for (const [k, e] of this.map) {
      if (this.used <= this.maxBytes) break;
      if (e.pinned) continue;
      this.map.delete(k);
      this.used -= e.values.byteLength;
    }
  }
}

/** The cache key of a tile: which head, which values, which reduction, which tile. */
export function tileKey(layer: number, head: number, what: string, reduce: string, t: TileId): string {
  return `${layer}/${head}/${what}/${t.k === 0 ? "exact" : reduce}/${t.k}/${t.ti}/${t.tj}`;
}

/** A cache entry from a tile's wire array (a custom message's `buffers` where it has any). */
export function tileEntry(w: WireArray, buffers: Binary[] = [], pinned = false): Entry {
  const a = readArray(w, buffers);
  const values = a.data instanceof Float32Array ? a.data : Float32Array.from(a.data);
  return { values, rows: a.shape[0] ?? 0, cols: a.shape[1] ?? 0, pinned };
}

// ------------------------------------------------------------------------- the loader
export interface LoaderOptions {
  cacheBytes: number;
  /** requests in flight at once */
  inFlight: number;
  /** how long the view must rest before queued tiles are asked for */
  settleMs: number;
  /** ask for tile `t` holding `what`; resolves with its entry (rejects when it cannot) */
  fetch: (t: TileId, what: string) => Promise<Entry>;
  /** true while no kernel can answer: nothing is queued then */
  offline: () => boolean;
  /** a tile arrived (and is cached) */
  loaded: (key: string, e: Entry) => void;
  /** a request failed: the queue is dropped */
  failed: (key: string) => void;
  /** the back-off is over: the view asks again for what it lacks (redraws) */
  retry?: () => void;
}

/** First wait before asking again after a request timed out; it doubles up to MAX_BACKOFF_MS. */
export const FIRST_BACKOFF_MS = 1000;
export const MAX_BACKOFF_MS = 16000;

/** True for a failure worth asking again (the kernel did not answer), not an error reply. */
export function transient(err: unknown): boolean {
  return Boolean(err && typeof err === "object" && (err as { retry?: boolean }).retry);
}

interface Wanted {
  key: string;
  t: TileId;
  what: string;
}

/**
 * The request pipeline of a tiled view: `want` queues a missing tile, `settle` sends the queue
 * once the view has rested (zooming through levels in a row does not queue the levels passed
 * on the way in the kernel), at most `inFlight` at a time in the order wanted (the caller
 * wants the nearest first), and arrivals go into `cache`. Tiles the kernel refused are not asked
 * for again until `reset`; after a request that timed out, nothing is asked for during a
 * back-off, then one tile at a time (a probe) until one arrives or `resume` is called.
 */
export class TileLoader {
  readonly cache: TileCache;
  private pending = new Set<string>();
  private queue: Wanted[] = [];
  private failures = new Set<string>();
  private requestedAt = new Map<string, number>();
  private settledView = "";
  private settleTimer: ReturnType<typeof setTimeout> | null = null;
  private backoff = FIRST_BACKOFF_MS;
  private pausedUntil = 0;
  private probing = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private o: LoaderOptions) {
    this.cache = new TileCache(o.cacheBytes);
  }

  /** Queue tile `t` (cache key `key`) unless it is cached, on its way or failed before. */
  want(key: string, t: TileId, what: string): void {
    if (this.cache.has(key) || this.pending.has(key) || this.failures.has(key) || this.o.offline()) return;
    if (this.queue.some((q) => q.key === key)) return;
    this.queue.push({ key, t, what });
  }

  /** Ask for the queued tiles once the view `view` (any key of it) has rested for settleMs. */
  settle(view: string): void {
    if (view === this.settledView) {
      this.pump();
      return;
    }
    this.settledView = view;
    if (this.settleTimer) clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => {
      this.settleTimer = null;
      if (this.settledView === view) this.pump();
    }, this.o.settleMs);
  }

  /** Ask for tile `t` now, if it is not cached, on its way or failed before; else null. */
  load(key: string, t: TileId, what: string): Promise<Entry | null> | null {
    const e = this.cache.get(key);
    if (e) return Promise.resolve(e);
    if (this.pending.has(key) || this.failures.has(key) || this.o.offline() || this.paused()) return null;
    if (this.probing && this.pending.size > 0) return null;
    return this.send(key, t, what);
  }

  /** Milliseconds until tiles are asked for again after a timeout (0: not waiting). */
  retryIn(): number {
    return Math.max(0, this.pausedUntil - performance.now());
  }

  /** True while the loader waits for the kernel (a back-off, or a probe on its way). */
  waitingForKernel(): boolean {
    return this.paused() || this.probing;
  }

  /** The kernel answers again: ask at once, at full speed. */
  resume(): void {
    const was = this.waitingForKernel();
    this.pausedUntil = 0;
    this.probing = false;
    this.backoff = FIRST_BACKOFF_MS;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (was) this.o.retry?.();
    this.pump();
  }

  private paused(): boolean {
    return this.pausedUntil > performance.now();
  }

  /** Forget the queue (the view moved on). */
  clearQueue(): void {
    this.queue = [];
  }

  /** Forget the queue and past failures (another head: its tiles may well load). */
  reset(): void {
    this.queue = [];
    this.failures.clear();
  }

  /** Milliseconds from the request of tile `key` to now, the first time it is asked; else undefined. */
  firstDrawn(key: string): number | undefined {
    const t0 = this.requestedAt.get(key);
    if (t0 === undefined) return undefined;
    this.requestedAt.delete(key);
    return performance.now() - t0;
  }

  dispose(): void {
    if (this.settleTimer) clearTimeout(this.settleTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.settleTimer = null;
    this.retryTimer = null;
    this.queue = [];
  }

  private pump(): void {
    if (this.paused()) return;
    const limit = this.probing ? 1 : this.o.inFlight;
    while (this.pending.size < limit && this.queue.length) {
      const { key, t, what } = this.queue.shift()!;
      if (this.cache.has(key) || this.pending.has(key)) continue;
      void this.send(key, t, what);
    }
  }

  private send(key: string, t: TileId, what: string): Promise<Entry | null> {
    this.pending.add(key);
    this.requestedAt.set(key, performance.now());
    return this.o.fetch(t, what).then((e) => {
      this.pending.delete(key);
      if (this.probing) this.resume();
      this.cache.set(key, e);
      this.o.loaded(key, e);
      this.pump();
      return e;
    }, (err) => {
      this.pending.delete(key);
      this.requestedAt.delete(key);
      if (transient(err)) this.pause();
      else this.failures.add(key);
      this.queue = [];
      this.o.failed(key);
      return null;
    });
  }

  /** A request timed out: wait, then probe with one request; the wait doubles each time. */
  private pause(): void {
    if (this.paused()) return; // the other requests of the same silence
    this.pausedUntil = performance.now() + this.backoff;
    this.probing = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.o.retry?.();
    }, this.backoff + 1);
    this.backoff = Math.min(MAX_BACKOFF_MS, this.backoff * 2);
  }
}
