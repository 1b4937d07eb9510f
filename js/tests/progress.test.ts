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
});
