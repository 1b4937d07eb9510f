// Decoding of the binary buffers the Python side sends (traitlets Bytes).
//
// Jupyter delivers a Bytes trait as a DataView over the message buffer; the stand-in test
// models pass ArrayBuffers or Uint8Arrays. Views may start at any byte offset, so typed
// arrays wider than a byte are built from a copy when the offset is not aligned.

export type Binary = DataView | ArrayBuffer | Uint8Array | ArrayBufferView | null | undefined;

/** The bytes of a binary trait value (no copy when possible). Empty for null/undefined. */
export function asBytes(v: Binary): Uint8Array {
  if (v == null) return new Uint8Array(0);
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  throw new TypeError("expected a binary buffer (DataView, ArrayBuffer or Uint8Array)");
}

function aligned(bytes: Uint8Array, width: number): ArrayBuffer {
  if (bytes.byteLength % width !== 0) {
    throw new RangeError(`buffer of ${bytes.byteLength} bytes is not a whole number of ${width}-byte values`);
  }
  if (bytes.byteOffset % width === 0) return bytes.buffer as ArrayBuffer;
  return bytes.slice().buffer as ArrayBuffer;
}

/** uint8 values, e.g. quantised attention (0 → 0, 255 → the map's maximum). */
export function decodeU8(v: Binary): Uint8Array {
  return asBytes(v);
}

/** Little-endian float32 values. */
export function decodeF32(v: Binary): Float32Array {
  const b = asBytes(v);
  const buf = aligned(b, 4);
  const off = b.byteOffset % 4 === 0 ? b.byteOffset : 0;
  return new Float32Array(buf, off, b.byteLength / 4);
}

/** Little-endian int32 values. */
export function decodeI32(v: Binary): Int32Array {
  const b = asBytes(v);
  const buf = aligned(b, 4);
  const off = b.byteOffset % 4 === 0 ? b.byteOffset : 0;
  return new Int32Array(buf, off, b.byteLength / 4);
}

// Lookup table: float32 value of every one of the 65536 half-precision bit patterns would
// cost 256 KiB; decoding arithmetically is fast enough (a 512×512 map in ~2 ms).
/** One IEEE 754 half-precision value (bit pattern `h`) as a number. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24; // subnormal (and ±0)
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Little-endian float16 values, widened to float32. */
export function decodeF16(v: Binary): Float32Array {
  const b = asBytes(v);
  if (b.byteLength % 2 !== 0) {
    throw new RangeError(`buffer of ${b.byteLength} bytes is not a whole number of float16 values`);
  }
  const n = b.byteLength / 2;
  const out = new Float32Array(n);
  const pow = new Float32Array(31);
  for (let e = 1; e < 31; e++) pow[e] = 2 ** (e - 15);
  for (let i = 0; i < n; i++) {
    const h = b[2 * i] | (b[2 * i + 1] << 8);
    const exp = (h >> 10) & 0x1f;
    if (exp === 0 || exp === 0x1f) {
      out[i] = halfToFloat(h);
    } else {
      const val = (1 + (h & 0x3ff) / 1024) * pow[exp];
      out[i] = h & 0x8000 ? -val : val;
    }
  }
  return out;
}

/** Little-endian uint16 values. */
export function decodeU16(v: Binary): Uint16Array {
  const b = asBytes(v);
  const buf = aligned(b, 2);
  const off = b.byteOffset % 2 === 0 ? b.byteOffset : 0;
  return new Uint16Array(buf, off, b.byteLength / 2);
}

/** Little-endian uint32 values. */
export function decodeU32(v: Binary): Uint32Array {
  const b = asBytes(v);
  const buf = aligned(b, 4);
  const off = b.byteOffset % 4 === 0 ? b.byteOffset : 0;
  return new Uint32Array(buf, off, b.byteLength / 4);
}
