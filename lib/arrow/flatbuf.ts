/**
 * A small FlatBuffers table reader whose every read is checked against the buffer: enough to walk the
 * Arrow IPC metadata (footer, schema, message headers) and bound it before Arrow JS decodes it
 * (lib/arrow/ipc_bounds.ts). Arrow JS's own generated readers trust vector lengths and offsets; a read
 * outside the buffer here throws {@link OutOfBounds} instead.
 *
 * Fields are addressed by slot (the field's position in the `.fbs` table, from 0), as in the FlatBuffers
 * binary format: a table starts with an int32 pointing back to its vtable, whose uint16 entries from
 * byte 4 give each slot's offset inside the table (0 = absent).
 *
 * @module
 */

/** A read outside the buffer: the metadata is corrupted. */
export class OutOfBounds extends Error {}

/** One FlatBuffers table inside `view`. */
export class FlatTable {
  private constructor(private readonly view: DataView, readonly pos: number) {}

  /** The root table of a buffer (its first uint32 is the root's offset). */
  static root(bytes: Uint8Array): FlatTable {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return new FlatTable(view, checked(view, 0, 4).getUint32(0, true));
  }

  /** Size of the whole buffer in bytes. */
  get size(): number {
    return this.view.byteLength;
  }

  /** Absolute position of slot `slot`'s value, or 0 when the field is absent. */
  private field(slot: number): number {
    const vtable = this.pos - checked(this.view, this.pos, 4).getInt32(this.pos, true);
    const vtableSize = checked(this.view, vtable, 2).getUint16(vtable, true);
    const entry = 4 + 2 * slot;
    if (entry + 2 > vtableSize) return 0;
    const offset = checked(this.view, vtable + entry, 2).getUint16(vtable + entry, true);
    return offset === 0 ? 0 : this.pos + offset;
  }

  /** The table in slot `slot`, or null when absent. */
  table(slot: number): FlatTable | null {
    const at = this.field(slot);
    return at === 0 ? null : this.follow(at);
  }

  /** The vector in slot `slot`: where its elements start and how many it claims (not yet checked). */
  vector(slot: number): { start: number; length: number } | null {
    const at = this.field(slot);
    if (at === 0) return null;
    const start = at + checked(this.view, at, 4).getUint32(at, true);
    return { start: start + 4, length: checked(this.view, start, 4).getUint32(start, true) };
  }

  /** A string field, decoded leniently (null when absent). */
  string(slot: number): string | null {
    const at = this.field(slot);
    if (at === 0) return null;
    const start = at + checked(this.view, at, 4).getUint32(at, true);
    const length = checked(this.view, start, 4).getUint32(start, true);
    checked(this.view, start + 4, length);
    return new TextDecoder().decode(
      new Uint8Array(this.view.buffer, this.view.byteOffset + start + 4, length),
    );
  }

  /** Element `i` of a vector of tables that starts at `start`. */
  tableAt(start: number, i: number): FlatTable {
    return this.follow(start + 4 * i);
  }

  /** A uint8 field (0 when absent). */
  uint8(slot: number): number {
    const at = this.field(slot);
    return at === 0 ? 0 : checked(this.view, at, 1).getUint8(at);
  }

  /** An int64 field as a number (0 when absent; beyond 2^53 it is not exact, which only makes it larger). */
  int64(slot: number): number {
    const at = this.field(slot);
    return at === 0 ? 0 : this.int64At(at);
  }

  /** The int64 at absolute position `at` (inside a struct). */
  int64At(at: number): number {
    return Number(checked(this.view, at, 8).getBigInt64(at, true));
  }

  /** The int32 at absolute position `at` (inside a struct, or a message prefix). */
  int32At(at: number): number {
    return checked(this.view, at, 4).getInt32(at, true);
  }

  private follow(at: number): FlatTable {
    return new FlatTable(this.view, at + checked(this.view, at, 4).getUint32(at, true));
  }
}

/** `view` itself when `[at, at + n)` lies inside it, else OutOfBounds. */
function checked(view: DataView, at: number, n: number): DataView {
  if (!(at >= 0 && at + n <= view.byteLength)) {
    throw new OutOfBounds(`a read at byte ${at} is outside the ${view.byteLength}-byte metadata`);
  }
  return view;
}
