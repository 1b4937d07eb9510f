import { describe, expect, it } from "vitest";
import { asBytes, decodeF16, decodeF32, decodeU16, decodeU32, decodeU8, halfToFloat } from "../src/lib/decode";

// Reference float16 bit patterns (IEEE 754 binary16).
const CASES: [number, number][] = [
  [0x0000, 0],
  [0x3c00, 1],
  [0xc000, -2],
  [0x3800, 0.5],
  [0x3555, 0.333251953125],
  [0x7bff, 65504],
  [0x0001, 2 ** -24], // smallest subnormal
  [0x0400, 2 ** -14], // smallest normal
  [0x7c00, Infinity],
  [0xfc00, -Infinity],
];

describe("float16", () => {
  it("decodes single values exactly", () => {
    for (const [bits, want] of CASES) expect(halfToFloat(bits)).toBe(want);
    expect(halfToFloat(0x7e00)).toBeNaN();
  });

  it("decodes a little-endian buffer at an odd byte offset", () => {
    const raw = new Uint8Array(1 + CASES.length * 2);
    CASES.forEach(([bits], i) => {
      raw[1 + 2 * i] = bits & 0xff;
      raw[2 + 2 * i] = bits >> 8;
    });
    const view = new DataView(raw.buffer, 1, CASES.length * 2);
    const got = decodeF16(view);
    expect(Array.from(got)).toEqual(CASES.map(([, v]) => Math.fround(v)));
  });

  it("rejects a buffer of odd length", () => {
    expect(() => decodeF16(new Uint8Array(3))).toThrow(/float16/);
  });
});

describe("float32 and uint8", () => {
  it("decodes float32 from an unaligned DataView (copying)", () => {
    const src = new Float32Array([1.5, -2.25, NaN]);
    const raw = new Uint8Array(13);
    raw.set(new Uint8Array(src.buffer), 1);
    const got = decodeF32(new DataView(raw.buffer, 1, 12));
    expect(got[0]).toBe(1.5);
    expect(got[1]).toBe(-2.25);
    expect(got[2]).toBeNaN();
  });

  it("views uint8 without copying and treats null as empty", () => {
    const buf = new Uint8Array([0, 7, 255]).buffer;
    const v = decodeU8(new DataView(buf, 1, 2));
    expect(Array.from(v)).toEqual([7, 255]);
    expect(v.buffer).toBe(buf);
    expect(asBytes(null).length).toBe(0);
  });

  it("refuses non-binary values", () => {
    expect(() => asBytes([1, 2, 3] as unknown as ArrayBuffer)).toThrow(TypeError);
  });
});

describe("unsigned integers", () => {
  it("decodes little-endian uint16 and uint32 at odd offsets", () => {
    const raw = new Uint8Array([0xff, 0x01, 0x02, 0x03, 0x04, 0xff]);
    expect(Array.from(decodeU16(new DataView(raw.buffer, 1, 4)))).toEqual([0x0201, 0x0403]);
    expect(Array.from(decodeU32(new DataView(raw.buffer, 1, 4)))).toEqual([0x04030201]);
    expect(() => decodeU16(new Uint8Array(3))).toThrow(RangeError);
  });
});
