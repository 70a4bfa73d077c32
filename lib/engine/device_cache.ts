/**
 * `DeviceKvCache`: a batch's KV cache in the execution provider's memory, so that a decode step on a GPU
 * provider reads and writes it in place and nothing of it crosses to the host (kv_cache.ts is the host
 * cache the CPU provider uses; both implement `BatchCache`).
 *
 * Per layer, one key and one value tensor `[B, nKV, M, D]` in device memory (lib/ort/device.ts), bound as
 * both GroupQueryAttention's past input and its present output. Rows `[0, n)` are a view of the same
 * buffer (a prefix: the batch is the outermost dimension), which covers every decode step (all slots, or
 * the slots up to the highest live one) and prefills that start at row 0. Rows that start later cannot be
 * viewed on WebGPU, whose tensors are buffer handles rather than addresses; a call on them (a prompt
 * prefilled into a freed slot, a continuation after a tool result) runs on a staging cache of its row
 * count instead, with the rows copied in before the run and back after it, on the device, by two small
 * graphs (Gather, and ScatterND bound in place). That is a copy of those rows per prefill or continuation,
 * never per decode step.
 *
 * Dimension legend: L layers, B sequences, nKV key/value heads, M positions, D head dim, n staged rows.
 *
 * @module
 */

import { GraphBuilder } from "../onnx/builder.ts";
import { OPS } from "../onnx/ops.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { type DeviceElementType, type DeviceMemory, DeviceTensor } from "../ort/device.ts";
import { OrtSession } from "../ort/session.ts";
import { OrtTensor } from "../ort/value.ts";
import { type BatchCache, type CacheBinding, rangeKey } from "./kv_cache.ts";

export class DeviceKvCache implements BatchCache {
  readonly batch: number;
  readonly capacity: number;
  readonly #memory: DeviceMemory;
  readonly #type: DeviceElementType;
  /** Per layer, key then value: `[B, nKV, M, D]`. */
  readonly #tensors: DeviceTensor[];
  readonly #ranges = new Map<number, CacheBinding>();
  #staging: DeviceTensor[] = [];
  #copier: RowCopier | null = null;

  constructor(
    cfg: Qwen3Config,
    batch: number,
    capacity: number,
    memory: DeviceMemory,
    type: DeviceElementType,
  ) {
    this.batch = batch;
    this.capacity = capacity;
    this.#memory = memory;
    this.#type = type;
    const dims = [batch, cfg.num_key_value_heads, capacity, cfg.head_dim];
    this.#tensors = Array.from({ length: 2 * cfg.num_hidden_layers }, () => memory.tensor(type, dims));
  }

  get bytes(): number {
    return this.#tensors.reduce((sum, t) => sum + t.bytes, 0) +
      this.#staging.reduce((s, t) => s + t.bytes, 0);
  }

  range(from: number, to: number): CacheBinding {
    const key = rangeKey(from, to, this.batch);
    let binding = this.#ranges.get(key);
    if (!binding) {
      binding = from === 0 ? this.#prefix(to) : this.#staged(from, to - from);
      this.#ranges.set(key, binding);
    }
    return binding;
  }

  /** Frees the device memory (the cache is unusable after). */
  release(): void {
    this.#ranges.clear();
    for (const t of [...this.#tensors, ...this.#staging]) t.release();
    this.#copier?.release();
  }

  #prefix(rows: number): CacheBinding {
    return { layers: pairs(this.#tensors.map((t) => this.#memory.prefix(t, rows))) };
  }

  /** Rows `[from, from + n)` through the first n rows of the staging cache. */
  #staged(from: number, n: number): CacheBinding {
    const staging = this.#stagingRows(n);
    const indices = BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i));
    return {
      layers: pairs(staging),
      stage: {
        before: () => this.#rowCopier().read(this.#tensors, staging, indices),
        after: () => this.#rowCopier().write(this.#tensors, staging, indices),
      },
    };
  }

  /** Prefix views of n rows of a staging cache that holds at least n rows (grown on demand). */
  #stagingRows(n: number): DeviceTensor[] {
    if ((this.#staging[0]?.dims[0] ?? 0) < n) {
      this.#staging.forEach((t) => t.release());
      const [, ...inner] = this.#tensors[0].dims;
      this.#staging = this.#tensors.map(() => this.#memory.tensor(this.#type, [n, ...inner]));
      // The staged ranges' bindings read the old tensors: drop them. A range from row 0 (its key, `to`, at
      // most the batch: kv_cache.ts `rangeKey`) is a view of the cache itself and keeps its binding, which
      // graphs captured on it replay (decode_session.ts).
      for (const key of this.#ranges.keys()) if (key > this.batch) this.#ranges.delete(key);
    }
    return this.#staging.map((t) => this.#memory.prefix(t, n));
  }

  #rowCopier(): RowCopier {
    this.#copier ??= new RowCopier(
      this.#memory,
      this.#tensors.length,
      this.#tensors[0].dims,
      this.#type,
    );
    return this.#copier;
  }
}

/** `[k0, v0, k1, v1, …]` → per-layer pairs. */
function pairs(tensors: readonly DeviceTensor[]) {
  return Array.from(
    { length: tensors.length / 2 },
    (_, l) => ({ key: tensors[2 * l], value: tensors[2 * l + 1] }),
  );
}

/**
 * Copies rows between the cache and a staging cache on the device: `read` gathers rows of every tensor
 * into the staging tensors, `write` scatters them back into the cache tensors, bound as both ScatterND's
 * data input and its output, which the provider updates in place (measured on WebGPU, ENGINE_FACTS.md).
 */
class RowCopier {
  readonly #read: OrtSession;
  readonly #write: OrtSession;

  /** Graphs over `count` tensors of `dims`, in sessions on `memory`'s provider with its options. */
  constructor(
    memory: DeviceMemory,
    count: number,
    dims: readonly number[],
    type: DeviceElementType,
  ) {
    const [, ...inner] = dims;
    const read = new GraphBuilder("cache_rows_read");
    const rows = read.input("rows", "int64", ["n"]);
    const write = new GraphBuilder("cache_rows_write");
    const at = write.input("at", "int64", ["n", 1]);
    for (let i = 0; i < count; i++) {
      const all = read.input(`cache.${i}`, type, ["B", ...inner]);
      read.output(OPS.Gather.emit(read, all, rows, 0), `rows.${i}`); // [n, nKV, M, D]
      const into = write.input(`cache.${i}`, type, ["B", ...inner]);
      const part = write.input(`rows.${i}`, type, ["n", ...inner]);
      write.output(OPS.ScatterND.emit(write, into, at, part), `updated.${i}`); // [B, nKV, M, D]
    }
    const options = {
      providers: [memory.provider],
      providerOptions: { [memory.provider]: memory.providerOptions },
    };
    this.#read = OrtSession.create(read.toModel(), options);
    this.#write = OrtSession.create(write.toModel(), options);
  }

  read(cache: readonly DeviceTensor[], staging: readonly DeviceTensor[], indices: BigInt64Array): void {
    const binding = this.#read.createBinding();
    try {
      binding.input("rows", new OrtTensor("int64", indices, [indices.length]));
      cache.forEach((t, i) => binding.input(`cache.${i}`, t));
      staging.forEach((t, i) => binding.output(`rows.${i}`, t));
      this.#read.runBinding(binding);
    } finally {
      binding.release();
    }
  }

  write(cache: readonly DeviceTensor[], staging: readonly DeviceTensor[], indices: BigInt64Array): void {
    const binding = this.#write.createBinding();
    try {
      binding.input("at", new OrtTensor("int64", indices, [indices.length, 1]));
      cache.forEach((t, i) => {
        binding.input(`cache.${i}`, t);
        binding.output(`updated.${i}`, t); // in place
      });
      staging.forEach((t, i) => binding.input(`rows.${i}`, t));
      this.#write.runBinding(binding);
    } finally {
      binding.release();
    }
  }

  release(): void {
    this.#read.release();
    this.#write.release();
  }
}
