/**
 * Bounds on an Arrow IPC file's metadata, checked before Arrow JS parses it. Arrow JS loops over every
 * count the metadata claims (field nodes, buffers, record batches, fields) without comparing it with the
 * bytes that hold them: a count of 10^8 in a 2 KB header makes it loop until it runs out of memory
 * (docs/ENGINE_FACTS.md, "Arrow JS"). This walk reads the same structures with bounds-checked reads
 * (lib/arrow/flatbuf.ts) and refuses any count or position that does not fit, so the parse that follows
 * does work linear in the file size.
 *
 * What it checks: the footer fits the file; every vector (schema fields at any depth, metadata entries,
 * dictionary and record-batch blocks, field nodes, buffers, variadic counts) fits the metadata that
 * holds it; every block points at a message of the right type inside the file, whose metadata and body
 * fit before the footer; every buffer lies inside its message's body. The values inside the buffers are
 * checked after the parse, column by column (lib/arrow/validate.ts).
 *
 * Slot numbers are the fields' positions in Arrow's `File.fbs`, `Schema.fbs` and `Message.fbs`.
 *
 * @module
 */

import { FlatTable, OutOfBounds } from "./flatbuf.ts";

export { OutOfBounds };

/** Byte sizes of the structs and offsets that the vectors hold. */
const BLOCK = 24;
const FIELD_NODE = 16;
const BUFFER = 16;
const OFFSET = 4;
const INT64 = 8;

/** MessageHeader union tags. */
const DICTIONARY_BATCH = 2;
const RECORD_BATCH = 3;

/** Deeper schemas than this are refused (stage files nest at most three levels). */
const MAX_FIELD_DEPTH = 64;

/** Throws OutOfBounds naming the first count or position in `bytes` that does not fit. */
export function checkIpcBounds(bytes: Uint8Array): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const footerEnd = bytes.length - 10; // then int32 footer length and "ARROW1"
  const footerLength = view.getInt32(footerEnd, true);
  if (footerLength <= 0 || footerLength > footerEnd - 8) {
    throw new OutOfBounds(`the footer length ${footerLength} does not fit the ${bytes.length}-byte file`);
  }
  const messagesEnd = footerEnd - footerLength;
  const footer = FlatTable.root(bytes.subarray(messagesEnd, footerEnd));
  const schema = footer.table(1);
  if (!schema) throw new OutOfBounds("the footer holds no schema");
  const columns = checkFields(schema, 1, 0, { left: Math.floor(footer.size / OFFSET) });
  fittingVector(schema, 2, OFFSET, "the schema", "metadata entries");
  fittingVector(footer, 4, OFFSET, "the footer", "metadata entries");
  const kinds = [[2, DICTIONARY_BATCH, "dictionary batch"], [3, RECORD_BATCH, "record batch"]] as const;
  for (const [slot, type, what] of kinds) {
    const blocks = fittingVector(footer, slot, BLOCK, "the footer", `${what} blocks`);
    for (let i = 0; i < blocks.length; i++) {
      const offset = footer.int64At(blocks.start + BLOCK * i);
      checkMessage(bytes, messagesEnd, offset, type, `${what} ${i}`, columns);
    }
  }
}

/** The vector in `slot` of `table` after checking its elements fit the buffer (empty when absent). */
function fittingVector(
  table: FlatTable,
  slot: number,
  elementSize: number,
  owner: string,
  what: string,
): { start: number; length: number } {
  const v = table.vector(slot);
  if (!v) return { start: 0, length: 0 };
  if (v.start + v.length * elementSize > table.size) {
    const room = Math.max(0, Math.floor((table.size - v.start) / elementSize));
    throw new OutOfBounds(
      `${owner} declares ${v.length} ${what} but its ${table.size}-byte metadata holds at most ${room}`,
    );
  }
  return v;
}

/** A top-level column: its name and how many field nodes its array takes (one per nested field). */
interface ColumnNodes {
  name: string;
  nodes: number;
}

/**
 * Fields (slot `slot` of a Schema or Field table) at any depth, each field's name and node count;
 * `budget` bounds the total visited (a cycle of offsets cannot loop).
 */
function checkFields(table: FlatTable, slot: number, depth: number, budget: { left: number }): ColumnNodes[] {
  if (depth > MAX_FIELD_DEPTH) {
    throw new OutOfBounds(`the schema nests fields more than ${MAX_FIELD_DEPTH} deep`);
  }
  const fields = fittingVector(table, slot, OFFSET, "the schema", "fields");
  const out: ColumnNodes[] = [];
  for (let i = 0; i < fields.length; i++) {
    if (--budget.left < 0) {
      throw new OutOfBounds("the schema refers to more fields than its metadata can hold");
    }
    const field = table.tableAt(fields.start, i);
    fittingVector(field, 6, OFFSET, "a schema field", "metadata entries");
    const children = checkFields(field, 5, depth + 1, budget);
    out.push({ name: field.string(0) ?? "", nodes: 1 + children.reduce((n, c) => n + c.nodes, 0) });
  }
  return out;
}

/** The message of a footer block: the right type, metadata and body before the footer, buffers inside. */
function checkMessage(
  bytes: Uint8Array,
  end: number,
  offset: number,
  type: number,
  what: string,
  columns: ColumnNodes[],
): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!(offset >= 8 && offset + 8 <= end)) {
    throw new OutOfBounds(`${what} starts at byte ${offset}, outside the file's ${end} bytes of messages`);
  }
  let metaStart = offset + 4;
  let metaLength = view.getInt32(offset, true);
  if (metaLength === -1) { // the continuation marker, then the length
    metaLength = view.getInt32(offset + 4, true);
    metaStart = offset + 8;
  }
  if (metaLength <= 0 || metaStart + metaLength > end) {
    throw new OutOfBounds(`${what}: its metadata length ${metaLength} runs past the file's messages`);
  }
  const message = FlatTable.root(bytes.subarray(metaStart, metaStart + metaLength));
  if (message.uint8(1) !== type) throw new OutOfBounds(`${what}: its message has another type`);
  const bodyLength = message.int64(3);
  if (bodyLength < 0 || metaStart + metaLength + bodyLength > end) {
    throw new OutOfBounds(`${what}: its body of ${bodyLength} bytes runs past the file's messages`);
  }
  fittingVector(message, 4, OFFSET, what, "metadata entries");
  const header = message.table(2);
  const batch = type === DICTIONARY_BATCH ? header?.table(1) : header;
  if (!batch) throw new OutOfBounds(`${what}: its message has no header`);
  checkRecordBatch(batch, bodyLength, what);
  if (type === RECORD_BATCH) checkColumnLengths(batch, columns, what);
}

/** A RecordBatch header: its vectors fit, its buffers lie inside the body. */
function checkRecordBatch(batch: FlatTable, bodyLength: number, what: string): void {
  fittingVector(batch, 1, FIELD_NODE, what, "field nodes");
  fittingVector(batch, 4, INT64, what, "variadic buffer counts");
  const buffers = fittingVector(batch, 2, BUFFER, what, "buffers");
  for (let i = 0; i < buffers.length; i++) {
    const offset = batch.int64At(buffers.start + BUFFER * i);
    const length = batch.int64At(buffers.start + BUFFER * i + 8);
    if (offset < 0 || length < 0 || offset + length > bodyLength) {
      throw new OutOfBounds(
        `${what}: buffer ${i} (${length} bytes at ${offset}) lies outside its ${bodyLength}-byte body`,
      );
    }
  }
}

/**
 * Each column's top field node holds the batch's row count. (Arrow JS pads a shorter column with nulls
 * and cuts a longer one, allocating a validity bitmap of the row count: the damage would be hidden.)
 */
function checkColumnLengths(batch: FlatTable, columns: ColumnNodes[], what: string): void {
  const rows = batch.int64(0);
  const nodes = batch.vector(1) ?? { start: 0, length: 0 };
  const needed = columns.reduce((n, c) => n + c.nodes, 0);
  if (nodes.length < needed) {
    throw new OutOfBounds(`${what} has ${nodes.length} field nodes but its schema needs ${needed}`);
  }
  let node = 0;
  for (const c of columns) {
    const length = batch.int64At(nodes.start + FIELD_NODE * node);
    if (length !== rows) {
      throw new OutOfBounds(`column "${c.name}": ${what} gives it ${length} values for ${rows} rows`);
    }
    node += c.nodes;
  }
}
