/**
 * The judge's HTTP side: chat completions on an OpenAI-compatible server (vLLM, SGLang, `deno task serve`,
 * a hosted API) through the project's one HTTP client (lib/engine/remote/http.ts: a timeout per attempt,
 * retries with backoff on network faults, timeouts, 429 and 5xx, never on another 4xx). A request that
 * still fails is a `JudgeError`: one line naming the judge's URL, what it answered, and the key to change.
 *
 * `score.judge.url` is the server's base URL; `/v1/chat/completions` is appended, or `/chat/completions`
 * when the URL already ends in `/v1` (as hosted APIs write theirs). The key, when the judge needs one, is
 * read from the environment variable `score.judge.api_key_env` names, never from the configuration.
 *
 * @module
 */

import type { JudgeConfig } from "../../config/schema.ts";
import { UserError } from "../../errors.ts";
import { ServerClient, ServerError } from "../../engine/remote/http.ts";
import type { JudgeMessage } from "./prompt.ts";

/** The judge server could not grade: unreachable, refused, or an answer that is not a chat completion. */
export class JudgeError extends UserError {
  constructor(url: string, status: number, message: string, fix: string) {
    super(
      `judge ${url}`,
      status === 0
        ? { why: `no answer: ${message}`, fix }
        : { value: status, why: `it answered ${status}: ${message}`, fix },
    );
    this.name = "JudgeError";
  }
}

/** The API key from the environment variable `score.judge.api_key_env` names (null when none is named). */
export function judgeApiKey(c: JudgeConfig): string | null {
  const name = c.api_key_env;
  if (name === null) return null;
  let key: string | undefined;
  try {
    key = Deno.env.get(name);
  } catch {
    key = undefined; // no permission to read the environment: reported as unset
  }
  if (!key) {
    throw new UserError(`config key score.judge.api_key_env: environment variable ${name}`, {
      why: "it is not set (or empty), so the judge has no key to send",
      fix: `export ${name}=<your key> before the command, or set score.judge.api_key_env to null for a ` +
        "server without a key",
    });
  }
  return key;
}

/** The fix for a failed judge request, by HTTP status (0: no answer). */
function fixFor(status: number): string {
  if (status === 0) {
    return "start the judge server or correct score.judge.url; raise score.judge.timeout_s if it is slow";
  }
  if (status === 401 || status === 403) {
    return "export a valid key in the environment variable score.judge.api_key_env names";
  }
  if (status === 404) {
    return "set score.judge.model to a name the server's /v1/models lists, and score.judge.url to its base URL";
  }
  if (status === 429 || status >= 500) {
    return "check the judge server's log; lower score.judge.concurrency or raise score.judge.retries";
  }
  return "check score.judge.model, score.judge.max_tokens and score.judge.max_chars against the judge's " +
    "limits (a longer prompt than its context is refused)";
}

export class JudgeClient {
  readonly url: string;
  readonly #config: JudgeConfig;
  readonly #http: ServerClient;
  readonly #path: string;
  /** Requests sent (each counted once, whatever its retries). */
  requests = 0;

  constructor(c: JudgeConfig, apiKey: string | null) {
    this.url = (c.url ?? "").replace(/\/+$/, "");
    this.#config = c;
    this.#path = /\/v1$/.test(this.url) ? "/chat/completions" : "/v1/chat/completions";
    this.#http = new ServerClient(this.url, {
      apiKey,
      requestTimeoutS: c.timeout_s,
      retries: c.retries,
      backoffS: c.backoff_s,
    });
  }

  /** The judge's answer to `messages` (its message content; "" when it has none). */
  async answer(messages: JudgeMessage[], signal?: AbortSignal): Promise<string> {
    const c = this.#config;
    const body = { model: c.model, messages, temperature: c.temperature, max_tokens: c.max_tokens };
    this.requests += 1;
    let reply: unknown;
    try {
      reply = await this.#http.post(this.#path, body, signal);
    } catch (e) {
      if (e instanceof ServerError) {
        // The client names the path twice for a network fault ("POST /p: /p: Fetch failed"): once here.
        const message = e.serverMessage.replace(`${this.#path}: ${this.#path}: `, `${this.#path}: `);
        throw new JudgeError(this.url, e.status, message, fixFor(e.status));
      }
      throw e;
    }
    const message = (reply as { choices?: { message?: { content?: unknown } }[] })?.choices?.[0]?.message;
    if (!message || typeof message !== "object") {
      throw new JudgeError(
        this.url,
        200,
        `POST ${this.#path}: the answer has no choices[0].message (${JSON.stringify(reply).slice(0, 120)})`,
        "point score.judge.url at an OpenAI-compatible server (its chat completions API)",
      );
    }
    return typeof message.content === "string" ? message.content : "";
  }
}
