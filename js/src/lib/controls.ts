// Header controls bound to traits: a stepper (‹ value ›), a select, a checkbox. Their
// listeners go through the view, so teardown removes them; their values are text only.

import { Bundle, Trait } from "../traits.gen";
import { h, View } from "./view";

/** The change `trait` = `value`, as View.save takes it. */
function saving<B extends Bundle>(trait: Trait<B>, value: unknown): Partial<Record<Trait<B>, unknown>> {
  return { [trait]: value } as Partial<Record<Trait<B>, unknown>>;
}

export interface Stepper {
  box: HTMLSpanElement;
  update: () => void;
  setEnabled: (on: boolean, why?: string) => void;
}

/** ‹ n/N › for integer trait `trait` in [0, model[count]). */
export function stepper<B extends Bundle>(v: View<B>, label: string, trait: Trait<B>, count: Trait<B>): Stepper {
  const box = h("span", "attnkit-stepper");
  const val = h("span", "attnkit-stepper-value");
  const step = (d: number) => {
    const max = v.get(count) as number;
    const cur = v.get(trait) as number;
    const nv = Math.min(max - 1, Math.max(0, cur + d));
    if (nv !== cur) v.save(saving(trait, nv));
  };
  const prev = v.button("\u2039", `previous ${label.toLowerCase()}`, () => step(-1));
  const next = v.button("\u203a", `next ${label.toLowerCase()}`, () => step(1));
  box.append(h("span", "attnkit-stepper-label", label), prev, val, next);
  let enabled = true;
  const update = () => {
    const max = v.get(count) as number;
    const cur = v.get(trait) as number;
    box.style.display = max > 1 ? "" : "none";
    val.textContent = `${cur + 1}/${max}`;
    prev.disabled = !enabled || cur <= 0;
    next.disabled = !enabled || cur >= max - 1;
  };
  const setEnabled = (on: boolean, why = "") => {
    enabled = on;
    box.title = on ? "" : why;
    update();
  };
  return { box, update, setEnabled };
}

/** A labelled <select> of `options` ([value, text]) bound to string trait `trait`. */
export function select<B extends Bundle>(v: View<B>, label: string, trait: Trait<B>, options: [string, string][], tip: string): { box: HTMLLabelElement; update: () => void } {
  const box = h("label", "attnkit-select");
  const sel = h("select", "");
  sel.title = tip;
  sel.setAttribute("aria-label", label);
  for (const [value, text] of options) {
    const o = h("option", "", text);
    o.value = value;
    sel.appendChild(o);
  }
  box.append(h("span", "attnkit-stepper-label", label), sel);
  v.listen(sel, "change", () => v.save(saving(trait, sel.value)));
  const update = () => {
    sel.value = String(v.get(trait) ?? "");
  };
  return { box, update };
}

/** A checkbox bound to boolean trait `trait`; its label text can change. */
export function checkbox<B extends Bundle>(v: View<B>, trait: Trait<B>, tip: string): { box: HTMLLabelElement; update: (text?: string) => void } {
  const box = h("label", "attnkit-check");
  const input = h("input", "");
  input.type = "checkbox";
  input.title = tip;
  const text = h("span", "");
  box.append(input, text);
  v.listen(input, "change", () => v.save(saving(trait, input.checked)));
  const update = (t?: string) => {
    input.checked = Boolean(v.get(trait));
    if (t !== undefined) text.textContent = t;
  };
  return { box, update };
}

/**
 * A head picker for integer trait `trait` where -1 is every head (or their mean, `allText`).
 * Option values are the heads counted from 1, as labelled (0 for `allText`), so a value never
 * reads as another option's label; `update(heads)` rebuilds the options.
 */
export function headPicker<B extends Bundle>(v: View<B>, trait: Trait<B>, allText: string, tip: string): { box: HTMLLabelElement; update: (heads: number) => void } {
  const box = h("label", "attnkit-select");
  const sel = h("select", "");
  sel.title = tip;
  sel.setAttribute("aria-label", "head");
  box.append(h("span", "attnkit-stepper-label", "head"), sel);
  v.listen(sel, "change", () => v.save(saving(trait, Number(sel.value) - 1)));
  const update = (heads: number) => {
    const opts = [["0", allText], ...Array.from({ length: heads }, (_, i) => [String(i + 1), String(i + 1)])];
    sel.replaceChildren(...opts.map(([value, text]) => {
      const o = h("option", "", text);
      o.value = value;
      return o;
    }));
    sel.value = String((v.get(trait) as number) + 1);
  };
  return { box, update };
}
