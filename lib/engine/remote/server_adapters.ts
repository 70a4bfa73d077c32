/**
 * LoRA adapters on inference servers, for `ServerPolicy`: each adapter is loaded on every server under a
 * versioned name, `<adapter_name>@<first 12 hex of its sha256>` (content-addressed, so a retried or
 * resumed step maps to the same name and a server that already has it is fine), requests name the
 * current one, and the previous one is unloaded once no request uses it. Never `load_inplace`: it
 * makes vLLM reload from disk on every request.
 *
 * The servers read the adapter from a path: ours, or with `adapterDir` (shared storage the servers
 * mount) a copy written there first (docs/serving.md).
 *
 * @module
 */

import { join, resolve } from "node:path";
import { adapterHash, adapterIdOfHash } from "../../model/adapter_id.ts";
import type { Qwen3Config } from "../../model/hf_config.ts";
import type { Adapter } from "../../model/lora.ts";
import { readPeftAdapter, writePeftAdapter } from "../../model/peft.ts";
import { type ServerClient, ServerError } from "./http.ts";
import type { ServerDialect } from "./protocol.ts";

/** What `ServerPolicy` needs to know about the adapter requests should name. */
export interface ActiveModel {
  /** The model name requests carry. */
  model: string;
  isAdapter: boolean;
}

export class ServerAdapters {
  readonly #clients: readonly ServerClient[];
  readonly #dialect: ServerDialect;
  readonly #config: Qwen3Config;
  readonly #baseModel: string;
  readonly #prefix: string;
  readonly #copyDir: string | null;
  /** Name → requests in flight naming it. */
  readonly #inFlight = new Map<string, number>();
  /** Loaded names no longer current, unloaded when their last request ends. */
  readonly #retired = new Set<string>();
  #current: string | null = null;
  #id = "base";

  constructor(
    clients: readonly ServerClient[],
    dialect: ServerDialect,
    config: Qwen3Config,
    options: { baseModel: string; prefix: string; copyDir: string | null },
  ) {
    this.#clients = clients;
    this.#dialect = dialect;
    this.#config = config;
    this.#baseModel = options.baseModel;
    this.#prefix = options.prefix;
    this.#copyDir = options.copyDir;
  }

  /** "base", or `lora:<sha256 prefix>` as `LocalPolicy` reports it. */
  get id(): string {
    return this.#id;
  }

  /** The name the server knows the current adapter by (null: the base model). */
  get currentName(): string | null {
    return this.#current;
  }

  /** Runs `fn` with the current model named, counting it as in flight. */
  async use<T>(fn: (active: ActiveModel) => Promise<T>): Promise<T> {
    const name = this.#current;
    if (name) this.#inFlight.set(name, (this.#inFlight.get(name) ?? 0) + 1);
    try {
      return await fn(name ? { model: name, isAdapter: true } : { model: this.#baseModel, isAdapter: false });
    } finally {
      if (name) {
        const left = this.#inFlight.get(name)! - 1;
        this.#inFlight.set(name, left);
        if (left === 0 && this.#retired.has(name)) await this.#unload(name);
      }
    }
  }

  /** Makes `adapter` current on every server (null: the base model); retires the previous one. */
  async set(adapter: string | Adapter | null): Promise<void> {
    const previous = this.#current;
    if (adapter === null) {
      this.#current = null;
      this.#id = "base";
    } else {
      const tensors = typeof adapter === "string" ? await readPeftAdapter(adapter, this.#config) : adapter;
      const hash = await adapterHash(tensors, this.#config);
      const name = `${this.#prefix}@${hash.slice(0, 12)}`;
      if (name === previous) return;
      const path = await this.#serverPath(adapter, tensors, name);
      await Promise.all(this.#clients.map((c) => this.#load(c, name, path)));
      this.#current = name;
      this.#id = adapterIdOfHash(hash);
    }
    if (previous && previous !== this.#current) {
      this.#retired.add(previous);
      if ((this.#inFlight.get(previous) ?? 0) === 0) await this.#unload(previous);
    }
  }

  /** Unloads every adapter this policy loaded (at close). */
  async unloadAll(): Promise<void> {
    const names = new Set([...this.#retired, ...(this.#current ? [this.#current] : [])]);
    this.#current = null;
    for (const name of names) await this.#unload(name).catch(() => {});
  }

  /** Where the servers read the adapter: a copy in `copyDir`, or our directory's absolute path. */
  async #serverPath(adapter: string | Adapter, tensors: Adapter, name: string): Promise<string> {
    if (this.#copyDir === null && typeof adapter === "string") return resolve(adapter);
    const dir = this.#copyDir ?? await Deno.makeTempDir({ prefix: "server-adapter-" });
    const target = resolve(join(dir, name.replace(/[^A-Za-z0-9._-]/g, "_")));
    await writePeftAdapter(target, tensors, this.#config, this.#baseModel);
    return target;
  }

  async #load(client: ServerClient, name: string, path: string): Promise<void> {
    try {
      await this.#dialect.loadAdapter(client, name, path);
    } catch (e) {
      // The same name means the same tensors (it carries their hash): already loaded is loaded.
      if (e instanceof ServerError && e.status === 400 && /already/i.test(e.serverMessage)) return;
      throw e;
    }
  }

  async #unload(name: string): Promise<void> {
    this.#retired.delete(name);
    this.#inFlight.delete(name);
    await Promise.all(this.#clients.map((c) => this.#dialect.unloadAdapter(c, name)));
  }
}
