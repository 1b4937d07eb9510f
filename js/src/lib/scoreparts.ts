// ScoreView's pure logic: component names, each key's segments (grouped by layer on request,
// "rest" last), how the segments stack into a bar, the score axis, keyboard moves and which
// head a segment leads to. Plain numbers and strings only (no DOM), so vitest checks them.

/** A head's component name "2-3" (1-indexed, attnkit.core.labels) -> [1, 2] (0-indexed), else null. */
export function headOf(name: string): [number, number] | null {
  const m = /^(\d+)-(\d+)$/.exec(name);
  return m ? [Number(m[1]) - 1, Number(m[2]) - 1] : null;
}

/** The layer group of a component: "2-3" -> "2-attn", others unchanged. */
export function groupOf(name: string): string {
  const m = /^(\d+)-\d+$/.exec(name);
  return m ? `${m[1]}-attn` : name;
}

export interface Segment { q: string; k: string; v: number }

/**
 * Key `row`'s segments from the wire's `n` slots a key (component ids `sq`, `sk` into `names`,
 * values `sv`; id -1 marks an empty slot): grouped by layer when asked, largest |v| first,
 * everything named "rest" summed into one last segment.
 */
export function segmentsOf(names: string[], sq: ArrayLike<number>, sk: ArrayLike<number>, sv: ArrayLike<number>, row: number, n: number, grouped: boolean): Segment[] {
  const out = new Map<string, Segment>();
  let rest = 0;
  for (let s = 0; s < n; s++) {
    const i = row * n + s;
    if (sq[i] < 0 || sk[i] < 0) continue;
    const q = names[sq[i]] ?? "?";
    const k = names[sk[i]] ?? "?";
    if (q === "rest" || k === "rest") { rest += sv[i]; continue; }
    const gq = grouped ? groupOf(q) : q;
    const gk = grouped ? groupOf(k) : k;
    const key = `${gq}\u0000${gk}`;
    const seg = out.get(key);
    if (seg) seg.v += sv[i];
    else out.set(key, { q: gq, k: gk, v: sv[i] });
  }
  const segs = [...out.values()].sort((a, b) => Math.abs(b.v) - Math.abs(a.v));
  segs.push({ q: "rest", k: "rest", v: rest });
  return segs;
}

/** Where each segment starts on the value axis: positive ones stack right from 0, negative
 * ones left from 0, in order; a segment covers [start, start + |v|]. */
export function stackStarts(segs: Segment[]): number[] {
  let pos = 0;
  let neg = 0;
  return segs.map((s) => {
    if (s.v >= 0) {
      const a = pos;
      pos += s.v;
      return a;
    }
    neg += s.v;
    return neg;
  });
}

/** The value axis of all bars: from the most negative stack (or score) to the most positive,
 * always including 0. */
export function valueRange(all: Segment[][], scores: ArrayLike<number>): [number, number] {
  let lo = 0;
  let hi = 1e-12;
  all.forEach((segs, r) => {
    let pos = 0;
    let neg = 0;
    for (const s of segs) (s.v >= 0 ? (pos += s.v) : (neg += s.v));
    const sc = Number.isFinite(scores[r]) ? scores[r] : 0;
    lo = Math.min(lo, neg, sc);
    hi = Math.max(hi, pos, sc);
  });
  return [lo, hi];
}

/** The (key row, segment) cursor after key `key`, or null for a key the view ignores;
 * `segs` is how many segments the current row has. Moving to another key keeps the
 * segment where that row has one. */
export function moveCursor(key: string, row: number, seg: number, rows: number, segs: number): { row: number; seg: number } | null {
  if (key === "ArrowDown") return { row: Math.min(Math.max(0, rows - 1), row + 1), seg };
  if (key === "ArrowUp") return { row: Math.max(0, row - 1), seg };
  if (key === "ArrowRight") return { row, seg: Math.min(Math.max(0, segs - 1), seg + 1) };
  if (key === "ArrowLeft") return { row, seg: Math.max(0, seg - 1) };
  if (key === "Home") return { row: 0, seg };
  if (key === "End") return { row: Math.max(0, rows - 1), seg };
  return null;
}

/** The head a segment leads to: its key component's head, else its query component's. */
export function headToFollow(seg: Segment | null | undefined): [number, number] | null {
  if (!seg) return null;
  return headOf(seg.k) ?? headOf(seg.q);
}
