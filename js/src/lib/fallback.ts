// The static picture beside a live view. IPython shows an attnkit widget as two outputs: its
// picture (<img class="attnkit-static attnkit-static-KEY">, attnkit/widgets/_base.py
// display_beside) and then its view. A front end that cannot draw the view (no anywidget
// where the Jupyter server runs, a model gone with its kernel) keeps the picture; a view that
// has drawn hides the pictures of its key, so a live notebook shows each figure once.

export const STATIC_CLASS = "attnkit-static";
/** The output containers of JupyterLab, Notebook 7, Voila and nbconvert (one output each), classic's. */
const OUTPUT = ".jp-OutputArea-child, .output_area";
const KEY = /^[0-9a-f]{8,64}$/;

/**
 * Hide the static pictures of `key` (their whole output where there is one, the <img>
 * elsewhere); returns how many there are, hidden now or before. A key that is not one
 * (an older widget without it) finds none.
 */
export function hideStatic(key: unknown, root: ParentNode = document): number {
  if (typeof key !== "string" || !KEY.test(key)) return 0;
  const found = root.querySelectorAll<HTMLElement>(`img.${STATIC_CLASS}-${key}`);
  for (const img of found) {
    const box = img.closest<HTMLElement>(OUTPUT) ?? img;
    box.style.display = "none";
    box.dataset.attnkitStatic = "hidden";
  }
  return found.length;
}
