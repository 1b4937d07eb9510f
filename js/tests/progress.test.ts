import { afterEach, describe, expect, it, vi } from "vitest";
import { Progress, QUIET_S } from "../src/lib/progress";

describe("progress of a view that fills in", () => {
  afterEach(() => vi.useRealTimers());

  it("counts what is done, says what stopped it, and notes a silent kernel", () => {
    vi.useFakeTimers();
    let refreshed = 0;
    const p = new Progress(() => refreshed++);
    expect(p.text("thumbnails", 12, 64, "heads", "running")).toBe("computing thumbnails: 12 of 64 heads");
    expect(p.text("thumbnails", 12, 64, "heads", "stopped: cancelled")).toBe("12 of 64 heads computed; stopped: cancelled");
    expect(p.text("thumbnails", 64, 64, "heads", "done")).toBe("");
    vi.advanceTimersByTime(5000);
    expect(refreshed).toBe(1); // asked to refresh while it runs
    vi.setSystemTime(Date.now() + (QUIET_S + 1) * 1000);
    vi.advanceTimersByTime((QUIET_S + 1) * 1000);
    expect(p.text("the overview", 3, 8, "rows", "running")).toMatch(/nothing new for \d+ s: the kernel may have stopped/);
    p.stepped();
    expect(p.text("the overview", 4, 8, "rows", "running")).toBe("computing the overview: 4 of 8 rows");
    p.dispose();
  });

  it("says the computation stopped once the kernel is gone, and stops asking to refresh", () => {
    vi.useFakeTimers();
    let refreshed = 0;
    let gone = "";
    const p = new Progress(() => refreshed++, () => gone);
    expect(p.state("running")).toBe("running");
    expect(p.text("thumbnails", 3, 16, "heads", "running")).toBe("computing thumbnails: 3 of 16 heads");
    gone = "the kernel was restarted";
    expect(p.state("running")).toBe("stopped: the kernel was restarted");
    expect(p.state("done")).toBe("done");
    expect(p.state("stopped: cancelled")).toBe("stopped: cancelled");
    vi.advanceTimersByTime(5000);
    expect(refreshed).toBe(1); // the refresh asked while it ran
    expect(p.text("thumbnails", 3, 16, "heads", "running")).toBe("3 of 16 heads computed; stopped: the kernel was restarted");
    expect(p.text("thumbnails", 16, 16, "heads", "done")).toBe("");
    vi.advanceTimersByTime(60_000);
    expect(refreshed).toBe(1); // nothing more to refresh
    p.dispose();
  });
});
