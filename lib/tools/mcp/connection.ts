/**
 * One client connection to one MCP server (the official SDK's `Client`): started (a stdio server, see
 * launch.ts) or reached (a streamable-HTTP URL), initialized within `startup_timeout_s`, asked for its
 * tools, called, closed.
 *
 * What a call's failure becomes (docs/mcp.md, "Statuses"):
 * - the rollout's time limit fired: the SDK cancels the request and rejects with the signal's reason,
 *   which the rollout records as `timeout`;
 * - the server answered with a JSON-RPC error (bad parameters, a tool it does not have): the model's
 *   call was wrong, `invalid_arguments`, with the server's message;
 * - the server's process ended, or the HTTP server cannot be reached or answers with an HTTP error: an
 *   infrastructure fault, `McpServerError`, which stops the stage with one line naming the server.
 *
 * Tools are listed with a plain `tools/list` request rather than `Client.listTools`, which would also
 * make the client check every result against the tool's `outputSchema`: the model is shown what the
 * server returned, checked or not.
 *
 * @module
 */

import type { McpServerConfig } from "../../config/sections/mcp.ts";
import { TOOLKIT_VERSION } from "../../arrow/metadata.ts";
import type { ToolContext, ToolResult } from "../types.ts";
import { type CallResult, resultToTool } from "./content.ts";
import { McpServerError, stderrTail } from "./errors.ts";
import { type LaunchOptions, launchSpec } from "./launch.ts";
import { ServerProcess } from "./process.ts";
import {
  type Client,
  type HttpTransport,
  type ListToolsResult,
  type McpSdk,
  mcpSdk,
  type McpTool,
  type Transport,
} from "./sdk.ts";
import { ProcessTransport } from "./stdio_transport.ts";

export type McpToolInfo = McpTool;

/** The SDK's own request timeout, set past the rollout's so that ours (with its status) fires first. */
const CALL_TIMEOUT_SLACK_MS = 60_000;
/** At most this many `tools/list` pages are read (a server that pages forever is a fault). */
const MAX_PAGES = 100;

export class McpConnection {
  readonly server: McpServerConfig;
  readonly #client: Client;
  readonly #sdk: McpSdk;
  readonly #process?: ServerProcess;
  readonly #http?: HttpTransport;
  #closing = false;
  /** The transport closed (for a stdio server: its stdout ended or its stdin broke) without our asking. */
  #lost = false;

  private constructor(
    server: McpServerConfig,
    sdk: McpSdk,
    client: Client,
    via: ServerProcess | HttpTransport,
  ) {
    this.server = server;
    this.#sdk = sdk;
    this.#client = client;
    client.onclose = () => this.#lost = true;
    if (via instanceof ServerProcess) this.#process = via;
    else this.#http = via;
  }

  /** Starts or reaches the server and completes MCP's initialization; McpServerError when it cannot. */
  static async open(server: McpServerConfig, o: LaunchOptions = {}): Promise<McpConnection> {
    const sdk = await mcpSdk();
    const client = new sdk.Client({ name: "deno-rl", version: TOOLKIT_VERSION }, { capabilities: {} });
    client.onerror = () => {}; // stray non-JSON lines on stdout: skipped, not fatal
    const timeout = server.startup_timeout_s * 1000;
    if (server.url !== null) {
      const transport = sdk.httpTransport(server.url, server.headers);
      await connect(sdk, client, transport, timeout, (why) => unreachable(server, why));
      return new McpConnection(server, sdk, client, transport);
    }
    const launch = await launchSpec(server, o);
    try {
      const process = new ServerProcess(launch.spec);
      const failed = async (why: string) => {
        process.kill();
        const status = await process.exited;
        process.startFailure(status); // bwrap never started it: the sandbox's own diagnosis
        return notStarted(server, why, status, process.stderrText());
      };
      await connect(sdk, client, new ProcessTransport(process, sdk), timeout, failed);
      return new McpConnection(server, sdk, client, process);
    } finally {
      await launch.cleanup();
    }
  }

  /** Every tool the server lists (all pages). */
  async listTools(): Promise<McpToolInfo[]> {
    const tools: McpToolInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const params = cursor === undefined ? {} : { cursor };
      const timeout = this.server.startup_timeout_s * 1000;
      const result = await this.#guard(() =>
        this.#client.request({ method: "tools/list", params }, this.#sdk.ListToolsResultSchema, { timeout })
      ) as ListToolsResult;
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (cursor === undefined) return tools;
    }
    throw new McpServerError(this.server.name, {
      why: `its tools/list went on for more than ${MAX_PAGES} pages`,
      fix: "check the server",
    });
  }

  /** Calls tool `name` (its name on the server) and returns what the model sees. */
  async call(name: string, args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> {
    const options = { signal: ctx.signal, timeout: ctx.timeoutMs + CALL_TIMEOUT_SLACK_MS };
    try {
      const result = await this.#guard(() =>
        this.#client.callTool({ name, arguments: args }, undefined, options)
      );
      // The SDK's type also allows the protocol's older `toolResult` form: it has no content, shown as JSON.
      return resultToTool(
        "toolResult" in result ? { structuredContent: result.toolResult } : result as CallResult,
      );
    } catch (error) {
      if (ctx.signal.aborted || error instanceof McpServerError) throw error;
      const code = this.#sdk.mcpErrorCode(error);
      if (code === this.#sdk.ErrorCode.RequestTimeout) {
        return { status: "timeout", output: `Error: ${name} did not answer in time.` };
      }
      if (code !== undefined) {
        return {
          status: "invalid_arguments",
          output: `Error: the ${name} tool refused the call: ${(error as Error).message}`,
        };
      }
      throw error;
    }
  }

  /** Stops the server (stdio) or ends the session (HTTP); safe to call twice. */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    await this.#http?.terminateSession().catch(() => {});
    await this.#client.close().catch(() => {});
    if (this.#process !== undefined) await this.#process.stop(0);
  }

  /**
   * Runs a request; a lost connection (the process ended, the HTTP server unreachable) becomes the
   * McpServerError that stops the stage. JSON-RPC errors and aborts pass through, and so does anything
   * else from a stdio server still running (a malformed answer: that call fails, the rollout goes on).
   */
  async #guard<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      const code = this.#sdk.mcpErrorCode(error);
      // After the transport closed, the SDK answers every request with a plain "Not connected" error.
      const closed = code === this.#sdk.ErrorCode.ConnectionClosed || this.#lost;
      if (this.#closing || isAbort(error) || (code !== undefined && !closed)) throw error;
      if (this.#process === undefined) {
        throw unreachable(this.server, (error as Error).message ?? String(error));
      }
      const status = await exitedWithin(this.#process, closed ? EXIT_WAIT_MS : 0);
      if (status !== undefined) throw died(this.server, status, this.#process);
      if (!closed) throw error;
      this.#process.kill(); // it closed its stdout or its stdin but lives on: it can no longer answer
      await this.#process.exited;
      throw stopped(this.server, this.#process);
    }
  }
}

/** How long a server whose connection closed may take to be seen exiting. */
const EXIT_WAIT_MS = 2000;

/** The process's exit status if it has exited within `ms` (0: already), else undefined. */
async function exitedWithin(process: ServerProcess, ms: number): Promise<Deno.CommandStatus | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => timer = setTimeout(() => resolve(undefined), ms));
  const status = await Promise.race([process.exited, late]);
  clearTimeout(timer);
  return status;
}

/** `client.connect` within `timeoutMs`; any failure becomes `fail(why)`'s error. */
async function connect(
  sdk: McpSdk,
  client: Client,
  transport: Transport,
  timeoutMs: number,
  fail: (why: string) => Error | Promise<Error>,
): Promise<void> {
  try {
    await client.connect(transport, { timeout: timeoutMs });
  } catch (error) {
    const timedOut = sdk.mcpErrorCode(error) === sdk.ErrorCode.RequestTimeout;
    const why = timedOut
      ? `it did not answer MCP's initialize within ${timeoutMs / 1000} s`
      : `it did not complete MCP's initialize (${(error as Error).message})`;
    await client.close().catch(() => {});
    throw await fail(why);
  }
}

function isAbort(error: unknown): boolean {
  return error instanceof DOMException || (error instanceof Error && error.name === "AbortError");
}

function exitText(status: Deno.CommandStatus): string {
  return status.signal ? `killed by ${status.signal}` : `exit code ${status.code}`;
}

function withStderr(text: string): string {
  const tail = stderrTail(text);
  return tail ? `; its stderr ends: ${tail}` : "";
}

function notStarted(server: McpServerConfig, why: string, status: Deno.CommandStatus, err: string): Error {
  return new McpServerError(server.name, {
    why: `it did not start: ${why} (${exitText(status)})${withStderr(err)}`,
    fix: "run its command by hand to see why; in bwrap it sees only read_only and read_write paths " +
      "(docs/mcp.md)",
  });
}

function died(server: McpServerConfig, status: Deno.CommandStatus, process: ServerProcess): Error {
  const why = process.overflow
    ? "it wrote a message over 64 MiB and was stopped"
    : `it exited during the rollout (${exitText(status)})${withStderr(process.stderrText())}`;
  return new McpServerError(server.name, {
    why,
    fix: "find out why it stopped (its stderr, memory_mb, the paths it needs), then run the stage again",
  });
}

/** A server that lives on but can no longer be talked to, which the client has killed. */
function stopped(server: McpServerConfig, process: ServerProcess): Error {
  const what = process.stdinBroken ? "stopped reading its stdin" : "closed its stdout";
  return new McpServerError(server.name, {
    why: `it ${what} and was stopped${withStderr(process.stderrText())}`,
    fix: "find out why it stopped answering (its stderr, the paths it needs), then run the stage again",
  });
}

function unreachable(server: McpServerConfig, why: string): Error {
  return new McpServerError(server.name, {
    why: `${server.url} cannot be reached or failed: ${why.split("\n")[0]}`,
    fix: "check that the server is running at that URL",
  });
}
