import { describe, expect, it } from "vitest";
import { camOf, Cam, frameTransform, sameCam, settleOnPress } from "../src/lib/motion";

/** Pixel of model point m under camera c on a w x h canvas (projection scales px, py). */
function pixel(c: Cam, m: [number, number], w: number, h: number, px = 1, py = 1): [number, number] {
  const cx = px * (c.sx * m[0] + c.tx);
  const cy = py * (c.sy * m[1] + c.ty);
  return [((cx + 1) * w) / 2, ((1 - cy) * h) / 2];
}

describe("moving frames", () => {
  it("reads a 2-D camera from a view matrix and refuses a rotated one", () => {
    const view = [2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0.5, -0.25, 0, 1];
    expect(camOf(view)).toEqual({ sx: 2, sy: 2, tx: 0.5, ty: -0.25 });
    expect(camOf([1, 0.1, 0, 0, -0.1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1])).toBeNull();
    expect(camOf(null)).toBeNull();
    expect(sameCam(camOf(view), { sx: 2, sy: 2, tx: 0.5, ty: -0.25 })).toBe(true);
    expect(sameCam(camOf(view), { sx: 2, sy: 2, tx: 0.5, ty: 0 })).toBe(false);
  });

  it("moves and scales a frame by known amounts", () => {
    const still: Cam = { sx: 1, sy: 1, tx: 0, ty: 0 };
    expect(frameTransform(still, still, 100, 100)).toEqual([1, 1, 0, 0]);
    // half a clip unit right and up: 25 px right, 25 px up (pixels grow downwards)
    expect(frameTransform(still, { sx: 1, sy: 1, tx: 0.5, ty: 0.5 }, 100, 100)).toEqual([1, 1, 25, -25]);
    // twice the zoom about the centre: the centre pixel stays
    const [a, d, e, f] = frameTransform(still, { sx: 2, sy: 2, tx: 0, ty: 0 }, 100, 100);
    expect([a, d, a * 50 + e, d * 50 + f]).toEqual([2, 2, 50, 50]);
  });

  it("puts every pixel where the new camera draws its point", () => {
    const from: Cam = { sx: 1.3, sy: 1.3, tx: -0.2, ty: 0.4 };
    const to: Cam = { sx: 3.1, sy: 3.1, tx: 0.7, ty: -0.9 };
    const [w, h, px, py] = [640, 480, 0.75, 1];
    const [a, d, e, f] = frameTransform(from, to, w, h, px, py);
    for (const m of [[0, 0], [0.3, -0.8], [-1, 1], [0.55, 0.05]] as [number, number][]) {
      const [x0, y0] = pixel(from, m, w, h, px, py);
      const [x1, y1] = pixel(to, m, w, h, px, py);
      expect(a * x0 + e).toBeCloseTo(x1, 9);
      expect(d * y0 + f).toBeCloseTo(y1, 9);
    }
  });
});

/** dom-2d-camera's rule (its tick): while the main button is held, pan by the pointer's way
 * since the previous tick; a programmatic change (lookAt) is reported by the next tick. */
function fakeCamera() {
  const c = { x: 0, prevX: 0, pressed: false, pan: 0, programmatic: false,
    tick(): boolean {
      let changed = this.programmatic;
      this.programmatic = false;
      if (this.pressed && this.x !== this.prevX) {
        this.pan += this.x - this.prevX;
        changed = true;
      }
      this.prevX = this.x;
      return changed;
    } };
  return c;
}

describe("a press does not pan", () => {
  it("pans by the pointer's way before the press without the settle (the defect)", () => {
    const cam = fakeCamera();
    cam.tick();
    cam.x = 300; // moved from the Fit button to a point ...
    cam.pressed = true; // ... and pressed within one frame
    expect(cam.tick()).toBe(true);
    expect(cam.pan).toBe(300);
  });

  it("ticks at the press: no pan, later drags pan by their own way, no change lost", () => {
    const cam = fakeCamera();
    const settle = settleOnPress(cam);
    cam.tick();
    cam.programmatic = true; // Fit, not yet drawn
    cam.x = 300;
    settle(); // the press arrives, before the camera sees the button down
    cam.pressed = true;
    expect(cam.tick()).toBe(true); // Fit's change is still reported to the frame
    expect(cam.pan).toBe(0);
    cam.x = 310; // a real drag pans by its own 10 px
    expect(cam.tick()).toBe(true);
    expect(cam.pan).toBe(10);
    expect(cam.tick()).toBe(false);
  });
});
