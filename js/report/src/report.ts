// The script inlined into every attnkit HTML report. It draws the widgets of an executed
// notebook from the widget state saved in the page, with no kernel and no network:
//   <script type="application/vnd.jupyter.widget-state+json">  all models (+ base64 buffers)
//   <div class="attnkit-slot"> <div class="attnkit-fallback">PNG</div>
//                              <script type="application/vnd.jupyter.widget-view+json"> </div>
// Each slot shows its static fallback until the live view has drawn something; then the
// fallback is hidden. Without JavaScript the fallback simply stays.
// Contract with widgets: <html data-attnkit-kernel="none"> while this renderer runs the page.
import "./define-shim";
import "anywidget";
import { anywidgetFactory } from "./define-shim";

import * as base from "@jupyter-widgets/base";
import { HTMLManager } from "@jupyter-widgets/html-manager/lib/htmlmanager";

import "@lumino/widgets/style/index.css";
import "@fortawesome/fontawesome-free/css/fontawesome.min.css";
import "@fortawesome/fontawesome-free/css/v4-shims.min.css";
import "./fonts.css";
import "./report.css";

const STATE_TYPE = "application/vnd.jupyter.widget-state+json";
const VIEW_TYPE = "application/vnd.jupyter.widget-view+json";

type SlotState = "static" | "loading" | "live" | "missing" | "error";

export interface Summary {
  models: number;
  slots: number;
  missing: number;
  failed: number;
}

const anywidget = anywidgetFactory()({
  DOMWidgetModel: base.DOMWidgetModel,
  DOMWidgetView: base.DOMWidgetView,
});

async function loader(name: string, version: string): Promise<unknown> {
  if (name === "anywidget") return anywidget;
  throw new Error(
    `attnkit report: the widget module ${name}@${version} is not bundled in this report ` +
      "(only @jupyter-widgets/base, controls, output and anywidget are).",
  );
}

function setState(slot: HTMLElement, state: SlotState): void {
  slot.dataset.attnkitState = state;
}

/** Keep the fallback and say, as text, why the live view is not there. */
function showFailure(slot: HTMLElement, why: string): void {
  setState(slot, "error");
  const note = document.createElement("div");
  note.className = "attnkit-report-note";
  note.textContent = `Live view unavailable (${why}); showing the static image.`;
  slot.appendChild(note);
}

/** Hide the fallback as soon as the live view takes up space (unless it drew an error). */
function swapWhenDrawn(slot: HTMLElement, host: HTMLElement): void {
  const fallback = slot.querySelector<HTMLElement>(":scope > .attnkit-fallback");
  const observer = new ResizeObserver(() => {
    if (host.getBoundingClientRect().height > 0) {
      observer.disconnect();
      if (host.querySelector(".jupyter-widgets-error-widget")) {
        host.remove(); // a nested model failed to load: the widget manager already logged why
        showFailure(slot, "a widget inside it could not be loaded");
        return;
      }
      if (fallback) fallback.hidden = true;
      setState(slot, "live");
    }
  });
  observer.observe(host);
}

function isErrorModel(model: unknown): boolean {
  return (model as { get(k: string): unknown }).get("_view_name") === "ErrorWidgetView";
}

async function renderSlot(manager: HTMLManager, models: Map<string, unknown>, slot: HTMLElement): Promise<SlotState> {
  const tag = slot.querySelector<HTMLScriptElement>(`:scope > script[type="${VIEW_TYPE}"]`);
  const modelId: string | undefined = tag ? JSON.parse(tag.textContent || "{}").model_id : undefined;
  const model = modelId ? models.get(modelId) : undefined;
  if (!model) {
    setState(slot, "missing"); // the notebook was not executed with widget state: keep the fallback
    return "missing";
  }
  if (isErrorModel(model)) {
    showFailure(slot, "its widget model could not be loaded");
    return "error";
  }
  setState(slot, "loading");
  const host = document.createElement("div");
  host.className = "widget-subarea attnkit-live";
  slot.insertBefore(host, tag);
  try {
    const view = await manager.create_view(model as never, {});
    await manager.display_view(view, host);
    swapWhenDrawn(slot, host);
    return "loading";
  } catch (err) {
    console.error(`attnkit report: could not draw widget ${modelId}`, err);
    host.remove();
    showFailure(slot, "it could not be drawn");
    return "error";
  }
}

async function renderReport(): Promise<Summary> {
  const slots = Array.from(document.querySelectorAll<HTMLElement>(".attnkit-slot"));
  const stateTag = document.querySelector<HTMLScriptElement>(`script[type="${STATE_TYPE}"]`);
  if (!stateTag) {
    slots.forEach((s) => setState(s, "missing"));
    return { models: 0, slots: slots.length, missing: slots.length, failed: 0 };
  }
  const manager = new HTMLManager({ loader });
  const created = await manager.set_state(JSON.parse(stateTag.textContent || "{}"));
  const models = new Map<string, unknown>(created.map((m: { model_id: string }) => [m.model_id, m]));
  const results = await Promise.all(slots.map((s) => renderSlot(manager, models, s)));
  return {
    models: models.size,
    slots: slots.length,
    missing: results.filter((r) => r === "missing").length,
    failed: results.filter((r) => r === "error").length,
  };
}

function start(): void {
  // Tells widgets there is no kernel behind this page: controls that only work by asking
  // Python for new data (e.g. stepping to another head) can hide or explain themselves.
  document.documentElement.dataset.attnkitKernel = "none";
  (window as unknown as { attnkitReport: { ready: Promise<Summary> } }).attnkitReport = {
    ready: renderReport().catch((err) => {
      console.error("attnkit report: the widgets could not be drawn", err);
      throw err;
    }),
  };
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
