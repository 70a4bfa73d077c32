/**
 * `GET /v1/models`, `POST /v1/load_lora_adapter` and `POST /v1/unload_lora_adapter` of
 * `deno task serve`, as vLLM answers them. Adapters load only from directories below
 * `serve.adapter_root` (real paths, symbolic links resolved); a load reads and checks the PEFT files
 * at once, so a bad adapter fails its load, not a later request. A name cannot be loaded twice
 * (unload it first); `load_inplace` is refused.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { readPeftAdapter } from "../model/peft.ts";
import { HttpError, pathBelow } from "./limits.ts";
import type { ServeContext } from "./serve_context.ts";

type Json = Record<string, unknown>;

export function listModels(ctx: ServeContext): Response {
  const base = {
    id: ctx.baseName,
    object: "model",
    created: 0,
    owned_by: "deno-rl",
    root: ctx.baseName,
    parent: null,
  };
  const adapters = [...ctx.adapters].map(([id, a]) => ({
    id,
    object: "model",
    created: a.created,
    owned_by: "deno-rl",
    root: a.path,
    parent: ctx.baseName,
  }));
  return Response.json({ object: "list", data: [base, ...adapters] });
}

export async function loadAdapter(ctx: ServeContext, body: Json): Promise<Response> {
  const name = loraName(body);
  if (body.load_inplace === true) {
    throw new HttpError(400, "load_inplace is not supported; load under a new name");
  }
  if (name === ctx.baseName) throw new HttpError(400, `lora_name ${name} is the base model's name`);
  if (ctx.adapters.has(name)) {
    throw new HttpError(400, `The lora adapter '${name}' has already been loaded.`, "InvalidUserInput");
  }
  const path = await pathBelow(body.lora_path, ctx.adapterRoot, "lora_path");
  let adapter;
  try {
    adapter = await readPeftAdapter(path, ctx.policy.config);
  } catch (e) {
    if (e instanceof UserError || e instanceof Deno.errors.NotFound) {
      throw new HttpError(400, `lora_path ${path} is not a usable PEFT adapter: ${(e as Error).message}`);
    }
    throw e;
  }
  ctx.adapters.set(name, { path, adapter, created: Math.floor(Date.now() / 1000) });
  return new Response(`Success: LoRA adapter '${name}' added successfully.`);
}

export function unloadAdapter(ctx: ServeContext, body: Json): Response {
  const name = loraName(body);
  if (!ctx.adapters.delete(name)) {
    throw new HttpError(404, `The lora adapter '${name}' cannot be found.`, "NotFoundError");
  }
  return new Response(`Success: LoRA adapter '${name}' removed successfully.`);
}

function loraName(body: Json): string {
  const name = body.lora_name;
  if (typeof name !== "string" || !/^[\w.@:\/-]{1,200}$/.test(name)) {
    throw new HttpError(400, "lora_name must be 1-200 characters of letters, digits and . _ - @ : /");
  }
  return name;
}
