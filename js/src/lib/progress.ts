// The progress of a view that fills in (attnkit/widgets/_progressive.py: a worker thread in the
// kernel pushes each step as it is done). One wording for every such view: "computing
// thumbnails: 12 of 64 heads", what stopped it, and a note when nothing came for a while (the
// kernel may have been restarted: what is blank is missing). While it runs, the view is asked
// to refresh its text every few seconds so the note can appear.

/** Seconds without a step after which the text says the kernel may have stopped. */
export const QUIET_S = 20;
const REFRESH_MS = 5000;

export class Progress {
  private last = performance.now();
  private timer: ReturnType<typeof setTimeout> | null = null;

  /** `refresh` redraws the view's progress text. */
  constructor(private readonly refresh: () => void) {}

  /** A step arrived (or the whole state). */
  stepped(): void {
    this.last = performance.now();
  }

  /**
   * "computing <what>: <done> of <total> <units><extra>", "<done> of <total> <units>
   * computed; stopped: …", or "" when there is nothing to say (`computing` "done").
   */
  text(what: string, done: number, total: number, units: string, computing: string, extra = ""): string {
    if (computing.startsWith("stopped")) return `${done} of ${total} ${units} computed; ${computing}`;
    if (computing !== "running" || done >= total) return "";
    const quiet = (performance.now() - this.last) / 1000;
    const note = quiet > QUIET_S ? `; nothing new for ${Math.round(quiet)} s: the kernel may have stopped (blank ${units} are missing)` : "";
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.refresh();
      }, REFRESH_MS);
    }
    return `computing ${what}: ${done} of ${total} ${units}${extra}${note}`;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}
