// Colours of everything drawn on canvas, read from CSS custom properties so the views follow
// the notebook's theme (JupyterLab's --jp-* variables, in Lab, Notebook 7 and Voila; elsewhere
// light defaults, or dark ones on a page that says it is dark: marimo's dark theme). The CSS
// side is in styles.css (.attnkit { --attnkit-ink: var(--jp-ui-font-color1, #222); ... }).

import { luminance, parseColor } from "./colors";

export interface Theme {
  ink: string; // text
  muted: string; // secondary text, axis numbers
  faint: string; // tertiary text, disabled
  bg: string; // the view's background
  line: string; // frames, rings, grid lines
  empty: string; // cells that hold no value (causal upper triangle, missing heads)
  accent: string; // selection and highlights
  accentInk: string; // text drawn in the accent colour
  halo: string; // outline behind labels drawn over data
  dark: boolean;
}

export const LIGHT: Theme = {
  ink: "#222", muted: "#666", faint: "#999", bg: "#fff", line: "#d0d0d0", empty: "#f0f0f0",
  accent: "#e07000", accentInk: "#b35a00", halo: "rgba(255,255,255,0.9)", dark: false,
};

const VARS: Record<keyof Omit<Theme, "dark">, string> = {
  ink: "--attnkit-ink", muted: "--attnkit-muted", faint: "--attnkit-faint", bg: "--attnkit-bg",
  line: "--attnkit-line", empty: "--attnkit-empty", accent: "--attnkit-accent",
  accentInk: "--attnkit-accent-ink", halo: "--attnkit-halo",
};

/**
 * Whether a page that has no JupyterLab theme variables is dark: its `color-scheme` (CSS,
 * inherited into a view in a shadow root too) is dark alone, or light-or-dark with the
 * reader's preference dark.
 */
export function darkScheme(scheme: string, prefersDark: boolean): boolean {
  const words = scheme.trim().split(/\s+/);
  if (!words.includes("dark")) return false;
  return !words.includes("light") || prefersDark;
}

/** The CSS class of a view on a dark page without JupyterLab's variables (styles.css). */
export const PAGE_DARK = "attnkit-page-dark";

/**
 * The theme in effect for element `el` (its computed custom properties). On a page without
 * JupyterLab's variables, `el` is first marked PAGE_DARK when the page is dark.
 */
export function readTheme(el: Element): Theme {
  if (typeof getComputedStyle === "undefined") return LIGHT;
  let cs = getComputedStyle(el);
  if (!cs.getPropertyValue("--jp-layout-color0").trim()) {
    const prefers = typeof matchMedia !== "undefined" && matchMedia("(prefers-color-scheme: dark)").matches;
    const parent = el.parentElement ?? (el.getRootNode() as ShadowRoot).host ?? el;
    const dark = darkScheme(getComputedStyle(parent).colorScheme ?? "", prefers);
    if (dark !== el.classList.contains(PAGE_DARK)) {
      el.classList.toggle(PAGE_DARK, dark);
      cs = getComputedStyle(el);
    }
  }
  const out = { ...LIGHT };
  for (const [k, v] of Object.entries(VARS) as [keyof typeof VARS, string][]) {
    const value = cs.getPropertyValue(v).trim();
    if (value) out[k] = value;
  }
  out.dark = luminance(parseColor(out.bg) ?? [255, 255, 255]) < 0.2;
  return out;
}

/** Call `cb` when the page's theme may have changed (JupyterLab sets data-jp-theme-* on body). */
export function watchTheme(cb: () => void): () => void {
  if (typeof MutationObserver === "undefined" || !document.body) return () => {};
  const mo = new MutationObserver(cb);
  mo.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name", "class"] });
  return () => mo.disconnect();
}
