/**
 * safetensors: round trips of every writable dtype, bf16 / f16 rounding, header-only offsets, sharded
 * checkpoints, and one-line errors for corrupt files.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { UserError } from "../../lib/errors.ts";
import {
  bf16FromF32Bits,
  decodeHalf,
  f16FromF32Bits,
  f32Bits,
  f32BitsFromBf16,
  f32BitsFromF16,
  f32FromBits,
  INDEX_FILE,
  openCheckpoint,
  planShards,
  readHeader,
  readIndex,
  readTensor,
  SINGLE_FILE,
  type TensorToWrite,
  writeCheckpoint,
  writeSafetensors,
} from "../../lib/safetensors/mod.ts";

/** Expects `body` to reject with a one-line UserError holding every fragment. */
async function expectUserError(body: () => Promise<unknown>, ...fragments: string[]): Promise<string> {
  const caught = await body().then(() => undefined, (e: unknown) => e);
  assert.ok(caught instanceof UserError, `expected a UserError, got ${caught}`);
  const msg = caught.message;
  assert.ok(!msg.includes("\n"), `message is not one line: ${msg}`);
  for (const f of fragments) assert.ok(msg.includes(f), `message lacks "${f}": ${msg}`);
  return msg;
}

const floats = new Float32Array([0, -0, 1, -2.5, 3.1415927, 1e-8, 65504, 1e30, -Infinity, NaN, 0.1]);

function sampleTensors(): TensorToWrite[] {
  return [
    { name: "f32", dtype: "F32", shape: [11], data: floats },
    { name: "f16", dtype: "F16", shape: [11], data: floats },
    { name: "bf16", dtype: "BF16", shape: [1, 11], data: () => floats },
    { name: "i64", dtype: "I64", shape: [2, 2], data: new BigInt64Array([0n, -1n, 2n ** 40n, -(2n ** 62n)]) },
    { name: "i32", dtype: "I32", shape: [3], data: new Int32Array([7, -7, 2 ** 31 - 1]) },
    { name: "u8", dtype: "U8", shape: [2, 2], data: new Uint8Array([0, 1, 254, 255]) },
    { name: "scalar", dtype: "F32", shape: [], data: new Float32Array([42]) },
    { name: "empty", dtype: "F32", shape: [0, 4], data: new Float32Array(0) },
  ];
}

Deno.test("writeSafetensors round-trips every writable dtype", async () => {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "t.safetensors");
  await writeSafetensors(path, sampleTensors(), { format: "pt" });
  const header = await readHeader(path);
  assert.deepEqual(header.metadata, { format: "pt" });
  assert.equal(header.dataStart % 8, 0, "data block is 8-byte aligned");
  assert.deepEqual((await readTensor(header, "f32")).data, floats);
  const f16 = await readTensor(header, "f16", { asFloat32: true });
  const expected16 = new Float32Array(Float16Array.from(floats)); // the platform's own f32 → f16
  assert.deepEqual(f16.data, expected16);
  const bf16 = await readTensor(path, "bf16", { asFloat32: true });
  assert.deepEqual(bf16.shape, [1, 11]);
  assert.deepEqual(Array.from(bf16.data as Float32Array).slice(0, 5), [0, -0, 1, -2.5, 3.140625]);
  assert.ok(Number.isNaN((bf16.data as Float32Array)[9]));
  assert.ok((await readTensor(header, "bf16")).data instanceof Uint16Array, "raw bits without asFloat32");
  assert.deepEqual(
    (await readTensor(header, "i64")).data,
    new BigInt64Array([0n, -1n, 2n ** 40n, -(2n ** 62n)]),
  );
  assert.deepEqual((await readTensor(header, "i32")).data, new Int32Array([7, -7, 2 ** 31 - 1]));
  assert.deepEqual((await readTensor(header, "u8")).data, new Uint8Array([0, 1, 254, 255]));
  assert.deepEqual((await readTensor(header, "scalar")).shape, []);
  assert.equal((await readTensor(header, "empty")).data.length, 0);
});

Deno.test("bf16 rounds to nearest even and keeps NaN", () => {
  const cases: Array<[number, number]> = [
    [0x3f800000, 0x3f80], // 1.0 exact
    [0x3f808000, 0x3f80], // tie, lower half even: stays
    [0x3f818000, 0x3f82], // tie, lower half odd: rounds up to even
    [0x3f808001, 0x3f81], // just above the tie: up
    [0x3f807fff, 0x3f80], // just below the tie: down
    [0xbf818000, 0xbf82], // negative tie to even
    [0x7f7fffff, 0x7f80], // largest float rounds to +inf
    [0x7f800000, 0x7f80], // +inf
    [0x80000000, 0x8000], // -0
  ];
  for (const [bits, want] of cases) {
    assert.equal(bf16FromF32Bits(bits), want, `0x${bits.toString(16)}`);
  }
  for (const nan of [0x7fc00000, 0x7f800001, 0xff800001, 0x7fa00000]) {
    const out = bf16FromF32Bits(nan);
    assert.ok(Number.isNaN(f32FromBits(f32BitsFromBf16(out))), `NaN 0x${nan.toString(16)} stays NaN`);
    assert.equal(out & 0x8000, (nan >>> 16) & 0x8000, "sign kept");
  }
});

Deno.test("f16 conversion matches the platform's Float16Array on edge values and random bits", () => {
  const values = [0, -0, 1, 65504, 65520, 65519.99, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, 1 / 3, -1e6];
  let state = 12345;
  for (let i = 0; i < 20000; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    values.push(f32FromBits(state));
  }
  for (const v of values) {
    const x = f32FromBits(f32Bits(v));
    if (Number.isNaN(x)) continue;
    const want = new Uint16Array(Float16Array.of(x).buffer)[0];
    assert.equal(f16FromF32Bits(f32Bits(x)), want, `f16(${x})`);
    assert.equal(f32FromBits(f32BitsFromF16(want)), Float16Array.of(x)[0], `widen f16 of ${x}`);
  }
  assert.ok(Number.isNaN(decodeHalf("F16", new Uint16Array([f16FromF32Bits(0x7f800001)]))[0]));
});

Deno.test("header-only read gives file offsets that point at each tensor's bytes", async () => {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "t.safetensors");
  await writeSafetensors(path, sampleTensors());
  const header = await readHeader(path);
  const bytes = await Deno.readFile(path);
  const headerLen = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal(header.headerLen, headerLen);
  for (const info of header.tensors.values()) {
    assert.equal(info.fileOffset, 8 + headerLen + info.offsets[0]);
    const direct = bytes.slice(info.fileOffset, info.fileOffset + info.byteLength);
    const t = await readTensor(header, info.name);
    assert.deepEqual(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), direct, info.name);
  }
  const i32 = header.tensors.get("i32")!;
  assert.deepEqual(
    new Int32Array(bytes.slice(i32.fileOffset, i32.fileOffset + 12).buffer),
    new Int32Array([7, -7, 2 ** 31 - 1]),
  );
});

Deno.test("sharded write and openCheckpoint find every tensor in its shard", async () => {
  const dir = await Deno.makeTempDir();
  const tensors = Array.from({ length: 7 }, (_, i): TensorToWrite => ({
    name: `w${i}`,
    dtype: "F32",
    shape: [i + 1, 3],
    data: () => new Float32Array(3 * (i + 1)).fill(i),
  }));
  const written = await writeCheckpoint(dir, tensors, { shards: 3 });
  assert.deepEqual(written, [
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
    INDEX_FILE,
  ]);
  const index = await readIndex(join(dir, INDEX_FILE));
  assert.equal(index.weightMap.size, 7);
  const ckpt = await openCheckpoint(dir);
  assert.equal(ckpt.files.length, 3);
  for (let i = 0; i < 7; i++) {
    const loc = ckpt.tensors.get(`w${i}`)!;
    assert.ok(loc.file.endsWith(index.weightMap.get(`w${i}`)!));
    const t = await readTensor(ckpt.headers.get(loc.file)!, `w${i}`);
    assert.deepEqual(t.data, new Float32Array(3 * (i + 1)).fill(i));
  }
  // Rewriting as one file replaces the sharded layout.
  assert.deepEqual(await writeCheckpoint(dir, tensors), [SINGLE_FILE]);
  assert.equal((await openCheckpoint(dir)).files.length, 1);
});

Deno.test("planShards splits by size limit or into a fixed number of non-empty shards", () => {
  assert.deepEqual(planShards([4, 4, 4, 4], { maxShardBytes: 8 }), [0, 0, 1, 1]);
  assert.deepEqual(planShards([10, 1, 1], { maxShardBytes: 8 }), [0, 1, 1]);
  assert.deepEqual(planShards([100, 1, 1, 1], { shards: 3 }), [0, 1, 2, 2]);
  assert.deepEqual(planShards([1, 1, 1, 1, 1, 1], { shards: 3 }), [0, 0, 1, 1, 2, 2]);
  assert.deepEqual(planShards([1, 1], { shards: 5 }), [0, 1]);
});

Deno.test("openCheckpoint resolves symlinked shards to their real files", async () => {
  const root = await Deno.makeTempDir();
  await Deno.mkdir(join(root, "blobs"));
  await Deno.mkdir(join(root, "snapshots", "rev"), { recursive: true });
  await writeSafetensors(join(root, "blobs", "abc123"), [{
    name: "x",
    dtype: "F32",
    shape: [2],
    data: new Float32Array([1, 2]),
  }]);
  await Deno.symlink("../../blobs/abc123", join(root, "snapshots", "rev", SINGLE_FILE));
  const ckpt = await openCheckpoint(join(root, "snapshots", "rev"));
  assert.equal(ckpt.tensors.get("x")!.file, await Deno.realPath(join(root, "blobs", "abc123")));
});

Deno.test("corrupt files give one-line errors naming the file and tensor", async () => {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "bad.safetensors");
  const header = (json: string, extra = 0) => {
    const body = new TextEncoder().encode(json);
    const out = new Uint8Array(8 + body.length + extra);
    new DataView(out.buffer).setBigUint64(0, BigInt(body.length), true);
    out.set(body, 8);
    return out;
  };
  await Deno.writeFile(path, new Uint8Array([1, 2, 3]));
  await expectUserError(() => readHeader(path), path, "shorter than the 8-byte");
  await Deno.writeFile(path, header('{"a": {"dtype": "F32"').subarray(0, 20));
  await expectUserError(() => readHeader(path), path, "header length exceeds");
  await Deno.writeFile(path, header("{not json"));
  await expectUserError(() => readHeader(path), path, "not valid UTF-8 JSON");
  await Deno.writeFile(path, header('{"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}}', 2));
  await expectUserError(() => readHeader(path), path, '"w"', "unknown dtype");
  await Deno.writeFile(path, header('{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}', 8));
  await expectUserError(() => readHeader(path), path, '"w"', "beyond the end of the file");
  await Deno.writeFile(path, header('{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}', 12));
  await expectUserError(() => readHeader(path), '"w"', "needs 16");
  await expectUserError(() => readHeader(join(dir, "missing.safetensors")), "does not exist");
  await writeSafetensors(path, [{ name: "w", dtype: "F32", shape: [1], data: new Float32Array(1) }]);
  await expectUserError(() => readTensor(path, "nope"), '"nope"', "not in the file");
});

Deno.test("writer rejects bad values and leaves no file behind", async () => {
  const dir = await Deno.makeTempDir();
  const path = join(dir, "w.safetensors");
  await expectUserError(
    () => writeSafetensors(path, [{ name: "w", dtype: "F32", shape: [3], data: new Float32Array(2) }]),
    '"w"',
    "needs 3 values",
  );
  await expectUserError(
    () => writeSafetensors(path, [{ name: "w", dtype: "I32", shape: [1], data: new Float32Array(1) }]),
    "takes Int32Array",
  );
  assert.deepEqual([...Deno.readDirSync(dir)], [], "no file and no temp file left");
});

Deno.test("a broken index names the missing tensor", async () => {
  const dir = await Deno.makeTempDir();
  await writeCheckpoint(dir, [
    { name: "a", dtype: "F32", shape: [1], data: new Float32Array(1) },
    { name: "b", dtype: "F32", shape: [1], data: new Float32Array(1) },
  ], { shards: 2 });
  const index = JSON.parse(await Deno.readTextFile(join(dir, INDEX_FILE)));
  index.weight_map.b = index.weight_map.a;
  await Deno.writeTextFile(join(dir, INDEX_FILE), JSON.stringify(index));
  await expectUserError(() => openCheckpoint(dir), INDEX_FILE, '"b"', "does not contain it");
  await expectUserError(() => openCheckpoint(join(dir, "nowhere")), "neither");
});
