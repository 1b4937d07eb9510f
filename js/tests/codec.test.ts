import { describe, expect, it } from "vitest";
import { halfToFloat, readArray, readFloats } from "../src/lib/codec";

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

function halves(offset: number): DataView {
  const raw = new Uint8Array(offset + CASES.length * 2);
  CASES.forEach(([bits], i) => {
    raw[offset + 2 * i] = bits & 0xff;
    raw[offset + 2 * i + 1] = bits >> 8;
  });
  return new DataView(raw.buffer, offset, CASES.length * 2);
}

describe("float16", () => {
  it("decodes single values exactly", () => {
    for (const [bits, want] of CASES) expect(halfToFloat(bits)).toBe(want);
    expect(halfToFloat(0x7e00)).toBeNaN();
  });

  it("reads a little-endian float16 array at an odd byte offset, widened to float32", () => {
    const a = readArray({ dtype: "float16", shape: [2, 5], buffer: halves(1) });
    expect(a.dtype).toBe("float32");
    expect(a.shape).toEqual([2, 5]);
    expect(Array.from(a.data)).toEqual(CASES.map(([, v]) => Math.fround(v)));
  });

  it("multiplies by the power-of-two scale: small weights keep their digits", () => {
    // 0x3c00 = 1, 0x3800 = 0.5, stored divided by 2^-20
    const raw = new Uint8Array([0x00, 0x3c, 0x00, 0x38]);
    const a = readFloats({ dtype: "float16", shape: [2], buffer: raw, scale: 2 ** -20 });
    expect(Array.from(a)).toEqual([2 ** -20, 2 ** -21]);
  });
});

describe("integer and float32 arrays", () => {
  it("reads float32 from an unaligned DataView (copying) and keeps NaN", () => {
    const src = new Float32Array([1.5, -2.25, NaN]);
    const raw = new Uint8Array(13);
    raw.set(new Uint8Array(src.buffer), 1);
    const a = readArray({ dtype: "float32", shape: [3], buffer: new DataView(raw.buffer, 1, 12) });
    expect(a.data[0]).toBe(1.5);
    expect(a.data[1]).toBe(-2.25);
    expect(a.data[2]).toBeNaN();
  });

  it("views uint8 without copying", () => {
    const buf = new Uint8Array([0, 7, 255]).buffer;
    const a = readArray({ dtype: "uint8", shape: [2], buffer: new DataView(buf, 1, 2) });
    expect(Array.from(a.data)).toEqual([7, 255]);
    expect(a.data.buffer).toBe(buf);
  });

  it("reads little-endian uint16, uint32 and int32 at odd offsets", () => {
    const raw = new Uint8Array([0xff, 0x01, 0x02, 0x03, 0x04, 0xff]);
    expect(Array.from(readArray({ dtype: "uint16", shape: [2], buffer: new DataView(raw.buffer, 1, 4) }).data)).toEqual([0x0201, 0x0403]);
    expect(Array.from(readArray({ dtype: "uint32", shape: [1], buffer: new DataView(raw.buffer, 1, 4) }).data)).toEqual([0x04030201]);
    const neg = new Uint8Array([0xff, 0xff, 0xff, 0xff]);
    expect(Array.from(readArray({ dtype: "int32", shape: [1], buffer: neg }).data)).toEqual([-1]);
  });

  it("takes a custom message's buffer by index", () => {
    const b = new Uint8Array([9, 8]);
    expect(Array.from(readArray({ dtype: "uint8", shape: [2], buffer: 1 }, [new Uint8Array(0), b]).data)).toEqual([9, 8]);
  });

  it("checks the byte count against the shape and refuses unknown dtypes", () => {
    expect(() => readArray({ dtype: "uint16", shape: [3], buffer: new Uint8Array(4) })).toThrow(/needs 6 bytes/);
    expect(() => readArray({ dtype: "float64" as never, shape: [1], buffer: new Uint8Array(8) })).toThrow(TypeError);
    expect(() => readArray({ dtype: "uint8", shape: [1], buffer: [1] as unknown as Uint8Array })).toThrow(TypeError);
  });

  it("reads a missing trait as an empty array", () => {
    expect(readArray(undefined).data.length).toBe(0);
    expect(readFloats(null).length).toBe(0);
  });
});
