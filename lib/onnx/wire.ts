/**
 * A minimal protobuf wire-format writer: just enough to encode ONNX messages.
 *
 * Nested messages are written as separate `ProtoWriter`s and appended by reference, so a large
 * `raw_data` buffer is copied once, by `finish()`, however deep it sits.
 */

/** Protobuf wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

const TEXT = new TextEncoder();

/** Accumulates encoded fields; `finish()` returns the message bytes. */
export class ProtoWriter {
  /** Finished pieces, in order: scratch flushes and appended buffers. */
  private chunks: Uint8Array[] = [];
  private scratch = new Uint8Array(256);
  private pos = 0;
  private flushed = 0;

  /** Total encoded length so far, in bytes. */
  get length(): number {
    return this.flushed + this.pos;
  }

  /** A varint field (int32, int64, enum, bool); negative values take 10 bytes as protobuf requires. */
  varint(field: number, value: number | bigint): this {
    this.tag(field, VARINT);
    this.rawVarint(value);
    return this;
  }

  /** A 32-bit float field (wire type 5). */
  float(field: number, value: number): this {
    this.tag(field, FIXED32);
    this.ensure(4);
    new DataView(this.scratch.buffer).setFloat32(this.pos, value, true);
    this.pos += 4;
    return this;
  }

  /** A 64-bit fixed field (double, fixed64, sfixed64). */
  fixed64(field: number, value: bigint): this {
    this.tag(field, FIXED64);
    this.ensure(8);
    new DataView(this.scratch.buffer).setBigUint64(this.pos, BigInt.asUintN(64, value), true);
    this.pos += 8;
    return this;
  }

  /** A 32-bit fixed field (fixed32, sfixed32). */
  fixed32(field: number, value: number): this {
    this.tag(field, FIXED32);
    this.ensure(4);
    new DataView(this.scratch.buffer).setUint32(this.pos, value >>> 0, true);
    this.pos += 4;
    return this;
  }

  /** A length-delimited bytes field; the buffer is kept by reference until `finish()`. */
  bytes(field: number, data: Uint8Array): this {
    this.tag(field, LEN);
    this.rawVarint(data.length);
    this.append(data);
    return this;
  }

  /** A UTF-8 string field. */
  string(field: number, text: string): this {
    return this.bytes(field, TEXT.encode(text));
  }

  /** An embedded message field. */
  message(field: number, inner: ProtoWriter): this {
    this.tag(field, LEN);
    this.rawVarint(inner.length);
    inner.flush();
    for (const chunk of inner.chunks) this.append(chunk);
    return this;
  }

  /** A packed repeated varint field (repeated int64 / int32). Nothing is written for an empty list. */
  packedVarints(field: number, values: readonly (number | bigint)[]): this {
    if (values.length === 0) return this;
    const body = new ProtoWriter();
    for (const v of values) body.rawVarint(v);
    return this.message(field, body);
  }

  /** A packed repeated float field. Nothing is written for an empty list. */
  packedFloats(field: number, values: readonly number[]): this {
    if (values.length === 0) return this;
    const data = new Uint8Array(new Float32Array(values).buffer);
    return this.bytes(field, data);
  }

  /** The encoded message as one buffer. */
  finish(): Uint8Array {
    this.flush();
    if (this.chunks.length === 1) return this.chunks[0];
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const chunk of this.chunks) {
      out.set(chunk, at);
      at += chunk.length;
    }
    return out;
  }

  private tag(field: number, wireType: number): void {
    this.rawVarint(field * 8 + wireType);
  }

  private rawVarint(value: number | bigint): void {
    this.ensure(10);
    if (typeof value === "number" && value >= 0 && value <= 0x7fffffff) {
      let v = value;
      while (v > 0x7f) {
        this.scratch[this.pos++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      this.scratch[this.pos++] = v;
      return;
    }
    if (typeof value === "number" && !Number.isInteger(value)) {
      throw new Error(`protobuf varint: ${value} is not an integer`);
    }
    // Two's complement over 64 bits: a negative int64 is a 10-byte varint.
    let v = BigInt.asUintN(64, BigInt(value));
    while (v > 0x7fn) {
      this.scratch[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.scratch[this.pos++] = Number(v);
  }

  private append(data: Uint8Array): void {
    // Small buffers are copied into the scratch; large ones are kept by reference.
    if (data.length <= 64) {
      this.ensure(data.length);
      this.scratch.set(data, this.pos);
      this.pos += data.length;
      return;
    }
    this.flush();
    this.chunks.push(data);
    this.flushed += data.length;
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.scratch.length) return;
    this.flush();
    if (n > this.scratch.length) this.scratch = new Uint8Array(n);
  }

  private flush(): void {
    if (this.pos === 0) return;
    this.chunks.push(this.scratch.slice(0, this.pos));
    this.flushed += this.pos;
    this.pos = 0;
  }
}
