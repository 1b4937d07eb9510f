// The one reader of arrays sent by the kernel (writer: attnkit/widgets/_codec.py).
//
// Every array crosses as a self-describing object {dtype, shape, buffer[, scale]}:
//   dtype  "uint8" | "uint16" | "uint32" | "int32" | "float16" | "float32" (little-endian)
//   shape  the array's shape, C order
//   buffer its bytes: in widget state a DataView (Jupyter restores nested buffers in place),
//          in a custom message the index of the message's buffer that holds them
//   scale  optional power of two the stored values are multiplied by (float16 arrays of
//          small weights are sent multiplied by 1/scale, so they stay normal numbers)
// float16 is widened to float32 on reading; every other dtype is viewed without a copy when
// the bytes are aligned.

export type Binary = DataView | ArrayBuffer | Uint8Array | ArrayBufferView;

export type DType = "uint8" | "uint16" | "uint32" | "int32" | "float16" | "float32";

export interface WireArray {
  dtype: DType;
  shape: number[];
  buffer: Binary | number;
  scale?: number;
}

export type Values = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float32Array;

export interface NDArray<T extends Values = Values> {
  dtype: DType;
  shape: number[];
  data: T;
}

const WIDTH: Record<DType, number> = { uint8: 1, uint16: 2, uint32: 4, int32: 4, float16: 2, float32: 4 };

function bytesOf(v: Binary): Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  throw new TypeError("expected a binary buffer (DataView, ArrayBuffer or Uint8Array)");
}

/** One IEEE 754 half-precision value (bit pattern `h`) as a number. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24; // subnormal (and ±0)
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Every half-precision bit pattern as a float32 (built on first use: 256 KB). */
let HALF: Float32Array | null = null;

function halfTable(): Float32Array {
  if (!HALF) {
    HALF = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) HALF[h] = halfToFloat(h);
  }
  return HALF;
}

function widenF16(b: Uint8Array, scale: number): Float32Array {
  const n = b.byteLength / 2;
  const table = halfTable();
  const src = b.byteOffset % 2 === 0 ? b : b.slice();
  const half = new Uint16Array(src.buffer, src.byteOffset, n);
  const out = new Float32Array(n);
  if (scale === 1) {
    for (let i = 0; i < n; i++) out[i] = table[half[i]];
  } else {
    for (let i = 0; i < n; i++) out[i] = table[half[i]] * scale;
  }
  return out;
}

function view(dtype: DType, b: Uint8Array): Values {
  const w = WIDTH[dtype];
  const src = b.byteOffset % w === 0 ? b : b.slice();
  const n = src.byteLength / w;
  switch (dtype) {
    case "uint8": return src;
    case "uint16": return new Uint16Array(src.buffer, src.byteOffset, n);
    case "uint32": return new Uint32Array(src.buffer, src.byteOffset, n);
    case "int32": return new Int32Array(src.buffer, src.byteOffset, n);
    default: return new Float32Array(src.buffer, src.byteOffset, n);
  }
}

/** An empty array of `dtype`, for traits that hold nothing yet. */
export function empty(dtype: DType = "float32"): NDArray {
  return { dtype, shape: [0], data: view(dtype, new Uint8Array(0)) };
}

/**
 * Read one wire array. `buffers` are a custom message's buffers (when `w.buffer` is an
 * index). A missing value reads as an empty array, so optional traits need no checks.
 */
export function readArray(w: WireArray | null | undefined, buffers: Binary[] = []): NDArray {
  if (w == null || w.dtype === undefined) return empty();
  if (!(w.dtype in WIDTH)) throw new TypeError(`unknown dtype ${String(w.dtype)}`);
  const raw = typeof w.buffer === "number" ? buffers[w.buffer] : w.buffer;
  if (raw === undefined) throw new RangeError(`array buffer ${String(w.buffer)} is missing`);
  const b = bytesOf(raw);
  const count = w.shape.reduce((a, d) => a * d, 1);
  if (b.byteLength !== count * WIDTH[w.dtype]) {
    throw new RangeError(`${w.dtype} array of shape [${w.shape.join(", ")}] needs ${count * WIDTH[w.dtype]} bytes, got ${b.byteLength}`);
  }
  const scale = w.scale ?? 1;
  if (w.dtype === "float16") return { dtype: "float32", shape: w.shape, data: widenF16(b, scale) };
  const data = view(w.dtype, b);
  if (scale !== 1) {
    const out = new Float32Array(data.length);
    for (let i = 0; i < data.length; i++) out[i] = data[i] * scale;
    return { dtype: "float32", shape: w.shape, data: out };
  }
  return { dtype: w.dtype, shape: w.shape, data };
}

/** The values of a wire array read as float32 (widening integer codes where needed). */
export function readFloats(w: WireArray | null | undefined, buffers: Binary[] = []): Float32Array {
  const a = readArray(w, buffers);
  return a.data instanceof Float32Array ? a.data : Float32Array.from(a.data);
}
