// Smooth pan and zoom of a WebGL scatter however many points it holds: while the camera moves,
// each frame is the last exact frame moved and scaled to the new view (one bitmap draw), and
// once the camera rests for `settleMs` the points are drawn again, exactly. Used by QKScatter
// around regl-scatterplot's renderer: where a full frame is quick (a GPU) every frame is full.
// The transform is pure (tested in js/tests/motion.test.ts).

/** A 2-D camera: clip = p · (s · m + t) per axis (regl-scatterplot's view matrix, no rotation),
 * where m is the point in model space and p the projection's scale. */
export interface Cam {
  sx: number;
  sy: number;
  tx: number;
  ty: number;
}

/** The camera of a column-major 4 × 4 view matrix, or null when it rotates. */
export function camOf(view: ArrayLike<number> | null | undefined): Cam | null {
  if (!view || view.length < 16 || view[1] !== 0 || view[4] !== 0) return null;
  return { sx: view[0], sy: view[5], tx: view[12], ty: view[13] };
}

export function sameCam(a: Cam | null, b: Cam | null): boolean {
  return !!a && !!b && a.sx === b.sx && a.sy === b.sy && a.tx === b.tx && a.ty === b.ty;
}

/**
 * The canvas transform `[a, d, e, f]` (`setTransform(a, 0, 0, d, e, f)`) that puts the pixels
 * of a `w` × `h` frame drawn at camera `from` where they lie at camera `to`; `px`, `py` are the
 * projection's scales of the clip space (x right, y up; pixels y down).
 */
export function frameTransform(from: Cam, to: Cam, w: number, h: number, px = 1, py = 1): [number, number, number, number] {
  const kx = to.sx / from.sx;
  const ky = to.sy / from.sy;
  // clip_to = k · clip_from + p · (t_to − k · t_from); pixel x = (clip + 1) w / 2, y = (1 − clip) h / 2
  const e = ((1 - kx) * w) / 2 + (px * (to.tx - kx * from.tx) * w) / 2;
  const f = ((1 - ky) * h) / 2 - (py * (to.ty - ky * from.ty) * h) / 2;
  return [kx, ky, e, f];
}

/** What the renderer of a scatter needs to offer (regl-scatterplot's createRenderer). */
export interface Renderer {
  render: (draw: () => void, target: HTMLCanvasElement) => void;
}

export interface MotionOptions {
  /** the camera now (called from inside the renderer's frame) */
  camera: () => Cam | null;
  /** projection scales (x, y) of the clip space */
  projection: () => [number, number];
  /** asks the scatter for one more frame (regl-scatterplot's redraw) */
  redraw: () => void;
  /** a full frame slower than this (ms) makes moving frames reuse it */
  slowMs?: number;
  /** ms without camera motion after which the exact frame is drawn */
  settleMs?: number;
}

/** Counters a test or benchmark reads (also written to the view's dataset). */
export interface MotionStats {
  full: number;
  moved: number;
  lastFullMs: number;
}

/**
 * Wrap `renderer.render`: a frame whose camera differs from the previous frame's is drawn
 * from the last exact frame (when exact frames are slow), a frame at rest is drawn in full.
 */
export class MotionFrames {
  readonly stats: MotionStats = { full: 0, moved: 0, lastFullMs: 0 };
  private snap: HTMLCanvasElement | null = null;
  private snapCam: Cam | null = null;
  private lastCam: Cam | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly slowMs: number;
  private readonly settleMs: number;

  constructor(renderer: Renderer, private readonly opts: MotionOptions) {
    this.slowMs = opts.slowMs ?? 12;
    this.settleMs = opts.settleMs ?? 120;
    const full = renderer.render.bind(renderer);
    renderer.render = (draw, target) => {
      const cam = opts.camera();
      const moving = !!cam && !!this.lastCam && !sameCam(cam, this.lastCam);
      this.lastCam = cam;
      if (moving && cam && this.snap && this.snapCam) {
        this.moved(target, cam);
        return;
      }
      const t0 = performance.now();
      full(draw, target);
      this.stats.lastFullMs = performance.now() - t0;
      this.stats.full++;
      // keep the frame only where frames are slow (software WebGL, a million points)
      if (cam && this.stats.lastFullMs > this.slowMs) this.keep(target, cam);
      else this.snapCam = null;
    };
  }

  /** Forget the kept frame (new points, colours or size: the next frame is drawn in full). */
  invalidate(): void {
    this.snapCam = null;
  }

  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.snap = null;
  }

  private keep(target: HTMLCanvasElement, cam: Cam): void {
    const snap = this.snap ?? (this.snap = document.createElement("canvas"));
    if (snap.width !== target.width || snap.height !== target.height) {
      snap.width = target.width;
      snap.height = target.height;
    }
    const ctx = snap.getContext("2d");
    if (!ctx) return;
    ctx.clearRect(0, 0, snap.width, snap.height);
    ctx.drawImage(target, 0, 0);
    this.snapCam = cam;
  }

  private moved(target: HTMLCanvasElement, cam: Cam): void {
    const ctx = target.getContext("2d");
    if (!ctx || !this.snap || !this.snapCam) return;
    const [px, py] = this.opts.projection();
    const [a, d, e, f] = frameTransform(this.snapCam, cam, target.width, target.height, px, py);
    // transparent where the kept frame has no pixels, as regl-scatterplot's frames are
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, target.width, target.height);
    ctx.setTransform(a, 0, 0, d, e, f);
    ctx.imageSmoothingEnabled = a < 1;
    ctx.drawImage(this.snap, 0, 0);
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    this.stats.moved++;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.opts.redraw();
    }, this.settleMs);
  }
}

/** What a plot's camera offers (dom-2d-camera, regl-scatterplot's): `tick` runs once a frame,
 * pans by the pointer's way since the previous tick while the main button is held, and says
 * whether the view changed. */
export interface TickingCamera {
  tick: () => boolean;
}

/**
 * A press must not pan. dom-2d-camera reads the pointer's travel from one frame's tick to the
 * next, and pans by it while the button is held; where the pointer arrives and presses within
 * one frame (a quick move and click, frames slowed by software WebGL or a large matrix), the
 * first tick after the press counts the whole way the pointer came (from the Fit button, say)
 * as a drag and throws the points out of view. `settleOnPress(camera)` returns a function to
 * call as the press arrives, before the camera sees it: it ticks the camera at once (the way
 * so far then pans nothing, the button not being down yet), and a change that tick reports is
 * handed on to the next frame's own tick, so no redraw is lost.
 */
export function settleOnPress(camera: TickingCamera): () => void {
  const tick = camera.tick.bind(camera);
  let owed = false;
  camera.tick = () => {
    const changed = tick() || owed;
    owed = false;
    return changed;
  };
  return () => {
    owed = tick() || owed;
  };
}
