// anywidget's npm build registers its widget factory with AMD (`define([...], factory)`),
// the way JupyterLab loads it. This module runs before it (ES modules evaluate in import
// order) and lends it a one-shot `define` that captures the factory, then removes itself
// so no later library mistakes the page for an AMD loader.

type Factory = (base: { DOMWidgetModel: unknown; DOMWidgetView: unknown }) => Record<string, unknown>;

let captured: Factory | undefined;
const g = globalThis as unknown as { define?: unknown };
const previous = g.define;

g.define = (_deps: unknown, factory: Factory) => {
  captured = factory;
  if (previous === undefined) delete g.define;
  else g.define = previous;
};

/** The anywidget factory captured from `define`, or an error saying the shim missed it. */
export function anywidgetFactory(): Factory {
  if (!captured) {
    throw new Error("attnkit report: anywidget's front end did not register (define() was never called).");
  }
  return captured;
}
