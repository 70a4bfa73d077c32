/**
 * Sharded checkpoints (`model.safetensors.index.json` + `model-0000N-of-0000M.safetensors`) and
 * `openCheckpoint`, the tensor index of a model directory across shards with each tensor's real file.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { UserError } from "../errors.ts";
import { writeTextAtomic } from "../fs/atomic.ts";
import { readHeader, type SafetensorsHeader, type TensorInfo } from "./header.ts";
import { tensorBytes, type TensorToWrite, writeSafetensors } from "./write.ts";

/** The single-file checkpoint name Hugging Face uses. */
export const SINGLE_FILE = "model.safetensors";
/** The index file of a sharded checkpoint. */
export const INDEX_FILE = "model.safetensors.index.json";

/** A parsed `model.safetensors.index.json`. */
export interface ShardIndex {
  path: string;
  metadata: Record<string, unknown>;
  /** Tensor name → shard file name (relative to the index's directory). */
  weightMap: Map<string, string>;
}

/** Reads and validates an index file. */
export async function readIndex(path: string): Promise<ShardIndex> {
  const bad = (value: unknown, why: string) =>
    new UserError(`checkpoint index ${path}`, { value, why, fix: "re-download or re-export the checkpoint" });
  let raw: unknown;
  try {
    raw = JSON.parse(await Deno.readTextFile(path));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw bad(undefined, "it does not exist");
    throw bad((e as Error).message, "it is not valid JSON");
  }
  const map = (raw as { weight_map?: unknown })?.weight_map;
  if (typeof map !== "object" || map === null || Array.isArray(map)) throw bad(map, "weight_map is missing");
  const weightMap = new Map<string, string>();
  for (const [name, file] of Object.entries(map)) {
    if (typeof file !== "string" || file.includes("/") || file.includes("\\")) {
      throw bad(file, `weight_map["${name}"] must be a file name in the same directory`);
    }
    weightMap.set(name, file);
  }
  const metadata = (raw as { metadata?: Record<string, unknown> }).metadata ?? {};
  return { path, metadata, weightMap };
}

/** How to split a checkpoint. */
export interface ShardOptions {
  /** Start a new shard before a tensor that would push the current one past this size (HF style). */
  maxShardBytes?: number;
  /** Or: exactly this many shards (fewer only when there are fewer tensors), balanced by size. */
  shards?: number;
  metadata?: Record<string, string>;
}

/** Default shard size limit, as Hugging Face's `save_pretrained` (5 GB). */
export const DEFAULT_MAX_SHARD_BYTES = 5_000_000_000;

/**
 * Which shard each tensor goes to (contiguous runs, in order). With `shards`, a new shard starts when
 * the tensor's midpoint passes the next equal share of the total, or when each remaining shard needs one
 * of the remaining tensors.
 */
export function planShards(sizes: readonly number[], options: ShardOptions = {}): number[] {
  const plan: number[] = [];
  if (options.shards !== undefined) {
    const n = Math.max(1, Math.min(options.shards, sizes.length));
    const total = sizes.reduce((a, b) => a + b, 0) || 1;
    let shard = 0, before = 0, inShard = 0;
    sizes.forEach((size, i) => {
      const mustSplit = sizes.length - i === n - 1 - shard;
      const pastShare = before + size / 2 > ((shard + 1) * total) / n && shard < n - 1;
      if (inShard > 0 && (mustSplit || pastShare)) [shard, inShard] = [shard + 1, 0];
      plan.push(shard);
      before += size;
      inShard++;
    });
    return plan;
  }
  const max = options.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES;
  let shard = 0, current = 0;
  for (const size of sizes) {
    if (current > 0 && current + size > max) [shard, current] = [shard + 1, 0];
    plan.push(shard);
    current += size;
  }
  return plan;
}

/**
 * Writes `tensors` into `dir` as `model.safetensors` (one shard) or as shards plus the index (written
 * last, atomically). Removes the other layout's entry file so the directory names one checkpoint.
 * Returns the file names written.
 */
export async function writeCheckpoint(
  dir: string,
  tensors: readonly TensorToWrite[],
  options: ShardOptions = {},
): Promise<string[]> {
  const sizes = tensors.map(tensorBytes);
  const plan = planShards(sizes, options);
  const count = plan.length ? plan[plan.length - 1] + 1 : 1;
  if (count === 1) {
    await writeSafetensors(join(dir, SINGLE_FILE), tensors, options.metadata);
    await Deno.remove(join(dir, INDEX_FILE)).catch(() => {});
    return [SINGLE_FILE];
  }
  const names = Array.from({ length: count }, (_, i) => shardName(i, count));
  const weightMap: Record<string, string> = {};
  for (let s = 0; s < count; s++) {
    const group = tensors.filter((_, i) => plan[i] === s);
    for (const t of group) weightMap[t.name] = names[s];
    await writeSafetensors(join(dir, names[s]), group, options.metadata);
  }
  const totalSize = sizes.reduce((a, b) => a + b, 0);
  const index = { metadata: { total_size: totalSize }, weight_map: weightMap };
  await writeTextAtomic(join(dir, INDEX_FILE), JSON.stringify(index, null, 2) + "\n");
  await Deno.remove(join(dir, SINGLE_FILE)).catch(() => {});
  return [...names, INDEX_FILE];
}

/** `model-00001-of-00003.safetensors` for shard 0 of 3. */
export function shardName(i: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, "0");
  return `model-${pad(i + 1)}-of-${pad(count)}.safetensors`;
}

/** A tensor of a checkpoint and the real file it lives in. */
export interface TensorLocation extends TensorInfo {
  /** Absolute path of the shard with symlinks resolved (Hugging Face cache blobs). */
  file: string;
}

/** The tensor index of a model directory's checkpoint. */
export interface Checkpoint {
  /** The model directory, absolute. */
  dir: string;
  /** Real paths of the safetensors files, in shard order. */
  files: string[];
  /** Every tensor, by name. */
  tensors: Map<string, TensorLocation>;
  /** Parsed headers by real path (pass to `readTensor` to read without re-parsing). */
  headers: Map<string, SafetensorsHeader>;
}

/**
 * Opens the checkpoint of `modelDir`: `model.safetensors` if present (Hugging Face's own preference),
 * else the shards of `model.safetensors.index.json`. Reads headers only.
 */
export async function openCheckpoint(modelDir: string): Promise<Checkpoint> {
  const dir = resolve(modelDir);
  if (await exists(join(dir, SINGLE_FILE))) return await fromFiles(dir, [SINGLE_FILE], null);
  if (await exists(join(dir, INDEX_FILE))) {
    const index = await readIndex(join(dir, INDEX_FILE));
    return await fromFiles(dir, [...new Set(index.weightMap.values())], index);
  }
  throw new UserError(`model directory ${dir}`, {
    why: `it holds neither ${SINGLE_FILE} nor ${INDEX_FILE}`,
    fix: "point model.path at a Hugging Face model directory, or make one with `deno task make-model`",
  });
}

async function fromFiles(dir: string, names: string[], index: ShardIndex | null): Promise<Checkpoint> {
  const files: string[] = [];
  const tensors = new Map<string, TensorLocation>();
  const headers = new Map<string, SafetensorsHeader>();
  for (const name of names) {
    const file = await realFile(dir, name, index);
    const header = await readHeader(file);
    files.push(file);
    headers.set(file, header);
    for (const info of header.tensors.values()) {
      const owner = index?.weightMap.get(info.name);
      if (owner === undefined || owner === name) tensors.set(info.name, { ...info, file });
    }
  }
  for (const [name, shard] of index?.weightMap ?? []) {
    if (!tensors.has(name)) {
      throw new UserError(`checkpoint index ${index!.path}: tensor "${name}"`, {
        why: `the index puts it in ${shard}, which does not contain it`,
        fix: "re-download the checkpoint; the index and its shards do not match",
      });
    }
  }
  return { dir, files, tensors, headers };
}

/** Resolves symlinks (HF cache `snapshots/<rev>/x -> ../../blobs/<hash>`) to the real file. */
async function realFile(dir: string, name: string, index: ShardIndex | null): Promise<string> {
  try {
    return await Deno.realPath(join(dir, name));
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new UserError(`checkpoint file ${join(dir, name)}`, {
      why: index ? `${index.path} names it but it is missing (or a broken symlink)` : "it is missing",
      fix: "re-download the checkpoint",
    });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path); // a broken symlink still counts: realFile reports it
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
