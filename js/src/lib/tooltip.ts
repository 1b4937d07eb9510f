// A tooltip that only ever holds text nodes.

export type Row = [label: string, value: string];

export class Tooltip {
  readonly el: HTMLDivElement;
  private host: HTMLElement;

  constructor(host: HTMLElement) {
    this.host = host;
    this.el = document.createElement("div");
    this.el.className = "attnkit-tooltip";
    this.el.setAttribute("role", "tooltip");
    this.el.style.display = "none";
    host.appendChild(this.el);
  }

  /** Show a title and label/value rows at host-relative position (x, y). */
  show(x: number, y: number, title: string, rows: Row[] = []): void {
    const el = this.el;
    el.replaceChildren();
    const t = document.createElement("div");
    t.className = "attnkit-tooltip-title";
    t.textContent = title;
    el.appendChild(t);
    for (const [label, value] of rows) {
      const r = document.createElement("div");
      r.className = "attnkit-tooltip-row";
      const k = document.createElement("span");
      k.className = "attnkit-tooltip-key";
      k.textContent = label;
      const v = document.createElement("span");
      v.className = "attnkit-tooltip-value";
      v.textContent = value;
      r.append(k, v);
      el.appendChild(r);
    }
    el.style.display = "block";
    // Keep inside the host: flip to the left/top of the pointer near the far edges.
    const hw = this.host.clientWidth || 10000;
    const hh = this.host.clientHeight || 10000;
    const w = el.offsetWidth;
    const h = el.offsetHeight;
    const left = x + 14 + w > hw ? Math.max(0, x - 14 - w) : x + 14;
    const top = y + 14 + h > hh ? Math.max(0, y - 14 - h) : y + 14;
    el.style.left = `${left}px`;
    el.style.top = `${top}px`;
  }

  /** Move the tooltip into another positioned element (coordinates are then relative to it). */
  attach(host: HTMLElement): void {
    this.host = host;
    host.appendChild(this.el);
  }

  hide(): void {
    this.el.style.display = "none";
  }

  /** The text currently shown (for tests). */
  text(): string {
    return this.el.style.display === "none" ? "" : this.el.textContent ?? "";
  }
}
