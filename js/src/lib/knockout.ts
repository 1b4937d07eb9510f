// The logic of the InterventionView that needs no page: which edges a click knocks out (the
// same rule as attnkit/widgets/intervention.py's stripe_edges, to outline them before the
// kernel answers), which stripe a click's modifiers ask for, the keyboard cursor on the map,
// and the words that report a knockout's result or why there is none.

import { formatValue, headLabel } from "./labels";

export type Stripe = "edge" | "column" | "diagonal";
export const STRIPES: readonly Stripe[] = ["edge", "column", "diagonal"];

/** The edges [query, key] a click on (query, key) knocks out, and the rows left alone. */
export function stripeCells(query: number, key: number, stripe: Stripe, n: number, causal: boolean): { cells: [number, number][]; kept: number[] } {
  let pairs: [number, number][];
  if (stripe === "edge") {
    pairs = [[query, key]];
  } else if (stripe === "column") {
    pairs = [];
    for (let q = causal ? key : 0; q < n; q++) pairs.push([q, key]);
  } else {
    const off = query - key;
    pairs = [];
    for (let q = 0; q < n; q++) if (q - off >= 0 && q - off < n) pairs.push([q, q - off]);
  }
  // a row whose only key is the blocked one would be left without any: it is kept
  const kept = pairs.filter(([q, k]) => n === 1 || (causal && q === 0 && k === 0)).map(([q]) => q);
  return { cells: pairs.filter(([q]) => !kept.includes(q)), kept };
}

/** The stripe a click asks for: Shift a column, Alt a diagonal, else the chosen mode. */
export function stripeOf(ev: { shiftKey?: boolean; altKey?: boolean }, mode: Stripe): Stripe {
  if (ev.shiftKey) return "column";
  if (ev.altKey) return "diagonal";
  return mode;
}

/** The cursor [query, key] after a key on the focused map (clamped; causal maps stay on or below the diagonal). */
export function moveCursor(cur: [number, number] | null, key: string, n: number, causal: boolean): [number, number] | null {
  if (n <= 0) return null;
  const [q0, k0] = cur ?? [n - 1, 0];
  let q = q0;
  let k = k0;
  switch (key) {
    case "ArrowUp": q -= 1; break;
    case "ArrowDown": q += 1; break;
    case "ArrowLeft": k -= 1; break;
    case "ArrowRight": k += 1; break;
    case "Home": k = 0; break;
    case "End": k = causal ? q : n - 1; break;
    default: return null;
  }
  q = Math.max(0, Math.min(n - 1, q));
  k = Math.max(0, Math.min(n - 1, k));
  if (causal && k > q) k = q; // a decoder's query never reads a later key
  return [q, k];
}

/** What the kernel answered for one knockout (attnkit.widgets.InterventionView.knock_out). */
export interface Knocked {
  layer: number;
  head: number;
  query: number;
  key: number;
  stripe: Stripe;
  n_edges: number;
  kept: number[];
  metric: string;
  before: number;
  after: number;
  change: number;
  relative_change: number;
  n_items: number;
  higher_is_better: boolean;
  downstream: [number, number, number][];
}

/** True for a filled-in result (the trait is {} before any knockout). */
export function isKnocked(v: unknown): v is Knocked {
  return !!v && typeof v === "object" && typeof (v as Knocked).before === "number" && typeof (v as Knocked).after === "number";
}

/** "edge 40 → 10 of head 2-1" (positions from 0, heads from 1). */
export function describeStripe(k: Pick<Knocked, "layer" | "head" | "query" | "key" | "stripe" | "n_edges">): string {
  const where = k.stripe === "edge" ? `edge ${k.query} \u2192 ${k.key}`
    : k.stripe === "column" ? `column of key ${k.key} (${k.n_edges} edges)`
      : `diagonal key = query \u2212 ${k.query - k.key} (${k.n_edges} edges)`;
  return `${where} of head ${headLabel(k.layer, k.head)}`;
}

/** The result in words: what was knocked out and the metric before → after, with the change. */
export function resultText(k: Knocked): string {
  const sign = k.change > 0 ? "+" : k.change < 0 ? "\u2212" : "\u00b1";
  const worse = k.change === 0 ? "" : (k.change > 0) !== k.higher_is_better ? " (worse)" : " (better)";
  const over = k.n_items === 1 ? "1 input" : `mean of ${k.n_items} inputs`;
  return `knocked out ${describeStripe(k)}: ${k.metric} ${formatValue(k.before)} \u2192 ${formatValue(k.after)}, change ${sign}${formatValue(Math.abs(k.change))}${worse}, ${over}`;
}

/** Why a click cannot knock anything out now, or "" when the kernel can be asked. */
export function kernelNotice(link: string, gone: string): string {
  if (gone) return `knocking an edge out needs a running kernel (${gone})`;
  if (link === "none") return "knocking an edge out needs a running kernel (this saved page has none); the maps and the last result are from when it was saved";
  return "";
}
