/**
 * The identity of a LoRA adapter, as every rollout row, stage file and server names it: "base" for
 * none, else `lora:<16 hex of sha256>` over the adapter's spec and its tensors in PEFT order. Equal
 * ids mean the same spec and bit-identical tensors, wherever the adapter came from (a file, a train
 * step in memory, a server's copy).
 *
 * @module
 */

import { sha256Hex } from "../fs/sha256.ts";
import type { Qwen3Config } from "./hf_config.ts";
import { type Adapter, loraTensorSpecs } from "./lora.ts";

/** sha256 of an adapter's spec and tensors, in PEFT order (hex, all 64 digits). */
export async function adapterHash(adapter: Adapter, cfg: Qwen3Config): Promise<string> {
  const specs = loraTensorSpecs(cfg, adapter.spec);
  const head = new TextEncoder().encode(JSON.stringify(adapter.spec));
  const size = specs.reduce((n, t) => n + 4 * t.dims[0] * t.dims[1], head.length);
  const bytes = new Uint8Array(size);
  bytes.set(head, 0);
  let at = head.length;
  for (const t of specs) {
    const data = adapter.weights.get(t.key)!;
    bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
    at += data.byteLength;
  }
  return await sha256Hex(bytes);
}

/** `lora:<16 hex>` for an adapter, "base" for none. */
export async function adapterId(adapter: Adapter | null, cfg: Qwen3Config): Promise<string> {
  return adapter ? adapterIdOfHash(await adapterHash(adapter, cfg)) : "base";
}

/** The id of an adapter whose `adapterHash` is `hash`. */
export function adapterIdOfHash(hash: string): string {
  return `lora:${hash.slice(0, 16)}`;
}
