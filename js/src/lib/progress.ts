// The progress of a view that fills in (attnkit/widgets/_progressive.py: a worker thread in the
// kernel pushes each step as it is done). One wording for every such view: "computing
// thumbnails: 12 of 64 heads", what stopped it ("12 of 64 heads computed; stopped: the kernel
// was restarted" as soon as the view's kernel link says so), and a note when nothing came for a
// while (the kernel may have stopped unseen: what is blank is missing). While it runs, the view
// is asked to refresh its text every few seconds so the note can appear.

/** Seconds without a step after which the text says the kernel may have stopped. */
export const QUIET_S = 20;
const REFRESH_MS = 5000;

export class Progress {
  private last = performance.now();
  private timer: ReturnType<typeof setTimeout> | null = null;

  /**
   * `refresh` redraws the view's progress text; `gone` says why no kernel will send any more
   * steps ("" while one may: View.kernelGone).
   */
  constructor(private readonly refresh: () => void, private readonly gone: () => string = () => "") {}

  /** A step arrived (or the whole state). */
  stepped(): void {
    this.last = performance.now();
  }

  /** `computing` as it stands: "running" is "stopped: <why>" once the kernel is gone. */
  state(computing: string): string {
    const why = computing === "running" ? this.gone() : "";
    return why ? `stopped: ${why}` : computing;
  }

  /**
   * "computing <what>: <done> of <total> <units><extra>", "<done> of <total> <units>
   * computed; stopped: …", or "" when there is nothing to say (`computing` "done").
   */
  text(what: string, done: number, total: number, units: string, computing: string, extra = ""): string {
    const now = done < total ? this.state(computing) : computing;
    if (now.startsWith("stopped")) return `${done} of ${total} ${units} computed; ${now}`;
    if (now !== "running" || done >= total) return "";
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
