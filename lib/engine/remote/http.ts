/**
 * `ServerClient`: JSON over HTTP to one inference server, with a timeout per request, retries with
 * exponential backoff (network faults, timeouts, 429 and 5xx; never other 4xx), a start-up health
 * check, and one-line errors that name the server, what it said, and the fix (docs/serving.md).
 *
 * @module
 */

import { UserError } from "../../errors.ts";

/** How a client talks to its server. */
export interface ClientOptions {
  /** Bearer key; null = none. */
  apiKey?: string | null;
  /** Longest wait for one attempt, in seconds. */
  requestTimeoutS: number;
  /** Attempts after the first. */
  retries: number;
  /** Wait before the first retry, doubled at each further retry, in seconds. */
  backoffS: number;
}

/** An error answer of a server (4xx / 5xx), or a server that could not be reached. */
export class ServerError extends UserError {
  /** HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The server's own message. */
  readonly serverMessage: string;

  constructor(url: string, status: number, serverMessage: string, fix: string) {
    super(`inference server ${url}`, {
      value: status === 0 ? undefined : status,
      why: status === 0 ? `no answer: ${serverMessage}` : `it answered ${status}: ${serverMessage}`,
      fix,
    });
    this.status = status;
    this.serverMessage = serverMessage;
  }
}

/** Whether a failed attempt may be tried again. */
function retryable(status: number): boolean {
  return status === 0 || status === 408 || status === 429 || status >= 500;
}

export class ServerClient {
  readonly url: string;
  readonly #options: ClientOptions;

  constructor(url: string, options: ClientOptions) {
    this.url = url.replace(/\/+$/, "");
    this.#options = options;
  }

  /**
   * POSTs `body` as JSON to `path` and returns the parsed answer (text when not JSON). When `signal`
   * fires the request is aborted and not retried: the AbortError propagates.
   */
  post(path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    return this.#withRetries("POST", path, body, signal);
  }

  get(path: string): Promise<unknown> {
    return this.#withRetries("GET", path, undefined);
  }

  /** One attempt, no retries: `{ status, body }` whatever the status (the 404 probe uses it). */
  async probe(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
    const response = await this.#fetch(method, path, body);
    return { status: response.status, body: await readBody(response) };
  }

  /** Waits until `/health` answers 200, polling every half second for up to `timeoutS`. */
  async waitHealthy(timeoutS: number): Promise<void> {
    const deadline = Date.now() + timeoutS * 1000;
    let last = "";
    for (;;) {
      try {
        const response = await this.#fetch("GET", "/health", undefined);
        await response.body?.cancel();
        if (response.ok) return;
        last = `/health answered ${response.status}`;
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() >= deadline) {
        throw new ServerError(
          this.url,
          0,
          `not healthy after ${timeoutS} s (${last})`,
          "start the server (docs/serving.md), check model.server.urls, or raise model.server.health_timeout_s",
        );
      }
      await sleep(500);
    }
  }

  async #withRetries(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    const { retries, backoffS } = this.#options;
    for (let attempt = 0;; attempt++) {
      let status = 0;
      let message: string;
      let answer: unknown;
      try {
        const response = await this.#fetch(method, path, body, signal);
        status = response.status;
        answer = await readBody(response);
        if (response.ok) return answer;
        message = errorMessage(answer);
      } catch (e) {
        if (e instanceof DOMException && e.name === "TimeoutError") {
          message = `${path} timed out after ${this.#options.requestTimeoutS} s`;
        } else if (e instanceof TypeError) message = `${path}: ${e.message}`;
        else throw e;
      }
      if (!retryable(status) || attempt >= retries) {
        throw new ServerError(
          this.url,
          status,
          `${method} ${path}: ${message}`,
          fixFor(status, path, message),
        );
      }
      await sleep(backoffS * 1000 * 2 ** attempt);
    }
  }

  #fetch(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#options.apiKey) headers["authorization"] = `Bearer ${this.#options.apiKey}`;
    const timeout = AbortSignal.timeout(this.#options.requestTimeoutS * 1000);
    return fetch(this.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  }
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The message of an error body. vLLM answers `{"error": {"message", "type", "code"}}` (older releases
 * `{"object": "error", "message", ...}`), SGLang `{"error": {"message"}}` or `{"detail": ...}`
 * (FastAPI), and proxies plain text.
 */
export function errorMessage(body: unknown): string {
  let text: string;
  if (typeof body === "string") text = body;
  else if (body && typeof body === "object") {
    const b = body as Record<string, unknown>;
    const inner = b.error && typeof b.error === "object" ? b.error as Record<string, unknown> : b;
    const m = inner.message ?? b.message ?? b.detail ?? b.error;
    text = typeof m === "string" ? m : JSON.stringify(m ?? body);
  } else text = String(body);
  text = text.replace(/\s+/g, " ").trim();
  return text.length > 300 ? `${text.slice(0, 297)}...` : text || "(empty body)";
}

/** The fix for an error answer, by status and what the server said. */
export function fixFor(status: number, path: string, message: string): string {
  const m = message.toLowerCase();
  if (status === 0) {
    return "check that the server is up and reachable, or raise model.server.request_timeout_s";
  }
  if (status === 401 || status === 403) return "set model.server.api_key to the server's --api-key";
  if (path.includes("lora_adapter")) {
    if (m.includes("adapter_root")) {
      return "put the adapters (loop.run_dir) below the server's serve.adapter_root, " +
        "or set model.server.adapter_dir to a directory there";
    }
    if (status === 404 || status === 405) {
      return "start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (SGLang: --enable-lora)";
    }
    if (m.includes("max_lora_rank") || m.includes("rank")) {
      return "start the server with --max-lora-rank >= the adapter's r";
    }
    return "check that the adapter directory is readable by the server (model.server.adapter_dir, docs/serving.md)";
  }
  if (status === 404) {
    return m.includes("model") || m.includes("lora")
      ? "load the adapter first, or set model.server.model_name to a name /v1/models lists"
      : "check model.backend: the server does not have this endpoint";
  }
  if (m.includes("maximum context") || m.includes("max_model_len") || m.includes("context length")) {
    return "lower rollout max tokens or start the server with a larger --max-model-len";
  }
  if (status === 429 || status >= 500) {
    return "check the server's log; raise model.server.retries if it is overloaded";
  }
  return "check the request against the server's API version (docs/serving.md)";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
