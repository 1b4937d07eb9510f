import { describe, expect, it } from "vitest";
import { darkScheme } from "../src/lib/theme";

describe("darkScheme (a page without JupyterLab's theme variables)", () => {
  it("is dark when the page's color-scheme is dark alone", () => {
    expect(darkScheme("dark", false)).toBe(true);
    expect(darkScheme(" only dark ", false)).toBe(true);
  });
  it("follows the reader's preference when the page takes either", () => {
    expect(darkScheme("light dark", true)).toBe(true);
    expect(darkScheme("light dark", false)).toBe(false);
  });
  it("is light for a light or unset scheme, whatever the preference", () => {
    for (const s of ["", "normal", "light", "only light"]) expect(darkScheme(s, true)).toBe(false);
  });
});
