import { describe, expect, it } from "vitest";
import { hideStatic } from "../src/lib/fallback";

// Stand-ins for the DOM (vitest runs in node): a root that answers one selector, pictures
// inside an output container or not.
function fake(inBox: boolean[]) {
  const asked: string[] = [];
  const boxes: { style: { display: string }; dataset: Record<string, string> }[] = [];
  const imgs = inBox.map((boxed) => {
    const self = { style: { display: "" }, dataset: {} as Record<string, string>, closest: (_sel: string) => null as unknown };
    if (boxed) {
      const box = { style: { display: "" }, dataset: {} as Record<string, string> };
      boxes.push(box);
      self.closest = (sel: string) => (sel.includes(".jp-OutputArea-child") ? box : null);
    }
    return self;
  });
  const root = { querySelectorAll: (sel: string) => (asked.push(sel), imgs) };
  return { root: root as unknown as ParentNode, asked, imgs, boxes };
}

describe("hideStatic", () => {
  it("hides the output holding each picture of the key, or the picture itself", () => {
    const f = fake([true, false]);
    expect(hideStatic("0123456789abcdef", f.root)).toBe(2);
    expect(f.asked).toEqual(["img.attnkit-static-0123456789abcdef"]);
    expect(f.boxes[0].style.display).toBe("none");
    expect(f.boxes[0].dataset.attnkitStatic).toBe("hidden");
    expect(f.imgs[0].style.display).toBe(""); // its output is hidden, not the picture
    expect(f.imgs[1].style.display).toBe("none");
  });

  it("looks for nothing without a key (an older widget) or with one that could inject a selector", () => {
    for (const key of [undefined, "", "abc", "0123456789abcdef, img", "ZZZZZZZZZZ", 12345678]) {
      const f = fake([true]);
      expect(hideStatic(key, f.root)).toBe(0);
      expect(f.asked).toEqual([]);
    }
  });
});
