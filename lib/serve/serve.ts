/**
 * `startServer`: our engine behind vLLM's HTTP API (docs/serving.md): `/health`, `/version`,
 * `/metrics`, `/v1/models`, `/v1/completions`, `/v1/chat/completions`, `/tokenize`, `/detokenize`,
 * `/v1/load_lora_adapter`, `/v1/unload_lora_adapter`. Binds 127.0.0.1 unless told otherwise; any other address requires an
 * API key. Every bad request gets a 4xx with a message (limits.ts) and the server stays up; a fault
 * inside a request is a 500 for that request only.
 *
 * ```ts
 * import { loadPolicy } from "../engine/worker_policy.ts";
 * import { startServer } from "./serve.ts";
 * const policy = await loadPolicy("runs/demo/model", { maxSequences: 8 });
 * const server = await startServer(policy, { modelDir: "runs/demo/model", port: 0 });
 * // POST http://127.0.0.1:<server.port>/v1/completions {"prompt": [1, 2, 3], "max_tokens": 8}
 * await server.close();
 * ```
 *
 * @module
 */

import { basename, resolve } from "node:path";
import { UserError } from "../errors.ts";
import { isAbortError } from "../engine/abort.ts";
import type { Policy } from "../engine/policy.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import { loadTokenizer } from "../model/tokenizer.ts";
import { AdapterGate } from "./adapter_gate.ts";
import { checkApiKey, errorResponse, HttpError, isLoopback, readJsonBody } from "./limits.ts";
import { chatCompletions } from "./routes_chat.ts";
import { completions } from "./routes_completions.ts";
import { listModels, loadAdapter, unloadAdapter } from "./routes_adapters.ts";
import { detokenize, tokenize, version } from "./routes_tokens.ts";
import { Metrics } from "./metrics.ts";
import { endEpisode } from "./gateway/routes.ts";
import type { Recorder } from "./gateway/recorder.ts";
import type { ServeContext } from "./serve_context.ts";

/** Options of `startServer` (the `serve` config section). */
export interface ServeOptions {
  /** The model directory the policy was loaded from (its tokenizer, its name). */
  modelDir: string;
  host?: string;
  /** 0 = any free port. */
  port?: number;
  apiKey?: string | null;
  /** Default "runs" (DEFAULT_ADAPTER_ROOT); any other must be an existing directory. */
  adapterRoot?: string;
  /** Default: the model directory's name. */
  modelName?: string | null;
  /** Default 4096; must match the capacity the policy can hold. */
  maxModelLen?: number;
  /** Default 4 MiB. */
  maxBodyBytes?: number;
  /** Makes the recorder of `--record DIR` (lib/serve/gateway/), given the tokenizer and the context length. */
  recorder?: (tokenizer: ChatTokenizer, maxModelLen: number) => Recorder;
}

export interface RunningServer {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  /** Stops accepting requests and waits for those in progress. */
  close(): Promise<void>;
  /** Resolves when the server has stopped. */
  readonly finished: Promise<void>;
}

/** The default `serve.adapter_root`: the one directory that may be missing at start (docs/serving.md). */
export const DEFAULT_ADAPTER_ROOT = "runs";

/**
 * Checks `serve.adapter_root` before anything loads: an existing directory, or the default `runs` not
 * made yet (a fresh clone), which is allowed and never created: adapter loads answer 404 until it
 * exists. Returns whether it exists; throws a UserError for any other missing path or a non-directory.
 */
export async function checkAdapterRoot(root: string): Promise<boolean> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(root);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound && root === DEFAULT_ADAPTER_ROOT) return false;
    throw new UserError("serve.adapter_root", {
      value: root,
      why: e instanceof Deno.errors.NotFound ? "the directory does not exist" : `it cannot be read (${e})`,
      fix: "create it, or point --serve.adapter_root at the directory holding the adapters to serve",
    });
  }
  if (!info.isDirectory) {
    throw new UserError("serve.adapter_root", {
      value: root,
      why: "it is not a directory",
      fix: "point --serve.adapter_root at the directory holding the adapters to serve",
    });
  }
  return true;
}

/** Refuses an address other machines can reach unless requests need an API key. */
export function checkExposure(host: string, apiKey: string | null): void {
  if (isLoopback(host) || apiKey) return;
  throw new UserError("serve.host", {
    value: host,
    why: "a server reachable from other machines must require an API key",
    fix: "pass --api-key KEY (clients send Authorization: Bearer KEY), or bind 127.0.0.1",
  });
}

/**
 * Refuses a port that cannot be bound (in use, e.g. by vLLM, whose default is also 8000; or privileged),
 * by binding it once and letting it go: called before the model loads, so the refusal takes a moment
 * instead of following a minute of loading. Port 0 (any free port) always passes.
 */
export function checkPortFree(host: string, port: number): void {
  if (port === 0) return;
  try {
    Deno.listen({ hostname: host, port }).close();
  } catch (e) {
    const inUse = e instanceof Deno.errors.AddrInUse;
    if (!inUse && !(e instanceof Deno.errors.PermissionDenied)) throw e;
    throw new UserError("serve.port", {
      value: port,
      why: inUse
        ? `${host}:${port} is already in use by another process (vLLM's default port is 8000 too)`
        : `${host}:${port} may not be bound by this user (ports below 1024 need privileges)`,
      fix: "stop the other server, or pass --port with a free port (--port 0 picks one)",
    });
  }
}

/** Starts serving `policy`; the caller keeps owning it (close it after the server). */
export async function startServer(policy: Policy, options: ServeOptions): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  const apiKey = options.apiKey ?? null;
  checkExposure(host, apiKey);
  const adapterRoot = options.adapterRoot ?? DEFAULT_ADAPTER_ROOT;
  await checkAdapterRoot(adapterRoot);
  const adapters: ServeContext["adapters"] = new Map();
  const ctx: ServeContext = {
    policy,
    tokenizer: await tokenizerIfAny(options.modelDir),
    baseName: options.modelName ?? basename(resolve(options.modelDir)),
    maxModelLen: options.maxModelLen ?? 4096,
    adapterRoot: resolve(adapterRoot),
    adapters,
    gate: new AdapterGate(policy, (name) => adapters.get(name)?.adapter),
    metrics: new Metrics(),
  };
  if (options.recorder) {
    if (!ctx.tokenizer) {
      throw new UserError("serve --record", {
        value: options.modelDir,
        why:
          "recording chat episodes needs the model's tokenizer and chat template, and the directory has none",
        fix: "serve a model directory with tokenizer.json and its chat template",
      });
    }
    ctx.recorder = options.recorder(ctx.tokenizer, ctx.maxModelLen);
  }
  const maxBody = options.maxBodyBytes ?? 4_194_304;
  const server = Deno.serve(
    { hostname: host, port: options.port ?? 8000, onListen() {} },
    async (request) => {
      const started = performance.now();
      const response = await handle(ctx, request, apiKey, maxBody);
      ctx.metrics.request(new URL(request.url).pathname, response.status, performance.now() - started);
      return response;
    },
  );
  const port = server.addr.port;
  return {
    host,
    port,
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    close: () => server.shutdown(),
    finished: server.finished,
  };
}

async function handle(
  ctx: ServeContext,
  request: Request,
  apiKey: string | null,
  maxBody: number,
): Promise<Response> {
  const path = new URL(request.url).pathname;
  try {
    if (path === "/health") return new Response(null, { status: 200 });
    checkApiKey(request, apiKey);
    if (request.method === "GET" && path === "/v1/models") return listModels(ctx);
    if (request.method === "GET" && path === "/version") return version();
    if (request.method === "GET" && path === "/metrics") {
      return new Response(ctx.metrics.render(ctx.baseName), {
        headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
      });
    }
    const ended = path.match(EPISODE_END);
    if (ended && ctx.recorder) {
      if (request.method !== "POST") throw new HttpError(405, `${path} takes POST`, "MethodNotAllowed");
      return await endEpisode(
        ctx.recorder,
        decodeURIComponent(ended[1]),
        await readJsonBody(request, maxBody),
      );
    }
    const route = POST_ROUTES[path];
    if (!route) throw new HttpError(404, `no route ${request.method} ${path}`, "NotFoundError");
    if (request.method !== "POST") throw new HttpError(405, `${path} takes POST`, "MethodNotAllowed");
    return await route(ctx, await readJsonBody(request, maxBody), request.signal, request.headers);
  } catch (error) {
    if (error instanceof HttpError) return errorResponse(error);
    // The client hung up and its sequence was cancelled (request.signal): nobody reads this answer.
    if (isAbortError(error)) return errorResponse(new HttpError(499, "client closed the request", "Aborted"));
    // Bad values the engine itself refuses (a prompt over capacity, a token outside the vocabulary).
    if (error instanceof RangeError || error instanceof UserError) {
      return errorResponse(new HttpError(400, error.message));
    }
    console.error(`serve: ${request.method} ${path} failed:`, error);
    return errorResponse(
      new HttpError(500, `internal error: ${(error as Error)?.message ?? error}`, "InternalServerError"),
    );
  }
}

/** Each POST route; `signal` fires when the client hangs up (sampling routes cancel their sequence). */
/** `POST /v1/episodes/{id}/end` (with `--record`). */
const EPISODE_END = /^\/v1\/episodes\/([^/]+)\/end$/;

const POST_ROUTES: Record<
  string,
  (
    ctx: ServeContext,
    body: Record<string, unknown>,
    signal: AbortSignal,
    headers: Headers,
  ) => Promise<Response> | Response
> = {
  "/v1/completions": completions,
  "/v1/chat/completions": chatCompletions,
  "/v1/load_lora_adapter": loadAdapter,
  "/v1/unload_lora_adapter": unloadAdapter,
  "/tokenize": tokenize,
  "/detokenize": detokenize,
};

/** The model directory's tokenizer, or null when it has none (token-id requests still work). */
async function tokenizerIfAny(dir: string): Promise<ChatTokenizer | null> {
  try {
    await Deno.stat(resolve(dir, "tokenizer.json"));
  } catch {
    return null;
  }
  return await loadTokenizer(dir);
}
