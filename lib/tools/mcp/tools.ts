/**
 * The tools of the MCP servers in `rollout.tools.mcp`, as rollout tools (docs/mcp.md).
 *
 * At start every server is started (or reached) and asked for its tools; each tool becomes a `Tool`
 * whose name is the server's `name_prefix` plus its name on the server, whose description and
 * parameters are exactly what `tools/list` gave (so the chat template offers the model the server's own
 * JSON Schema), and whose arguments are checked against that schema by the SDK's JSON Schema validator
 * (Ajv) before the call is sent. A server is shared by every episode, or — with `per_episode: true` —
 * started again for each episode (when the episode starts, so its start-up overlaps the first turn) and
 * stopped when the episode ends; the one started at start only lists the tools.
 *
 * Refused at start, each in one line naming the server: a tool name that is not an identifier the
 * tool-call format can carry, a name already taken (a built-in, a user tool, another server's tool; fix
 * with `name_prefix` or `tools`), a `tools` entry the server does not have, a schema the validator
 * cannot compile. A server that fails to start is an McpServerError.
 *
 * @module
 */

import { UserError } from "../../errors.ts";
import type { McpServerConfig } from "../../config/sections/mcp.ts";
import type { EpisodeScope } from "../episode_scope.ts";
import type { Tool, ToolContext, ToolResult } from "../types.ts";
import { McpConnection, type McpToolInfo } from "./connection.ts";
import type { LaunchOptions } from "./launch.ts";
import { type AjvJsonSchemaValidator, mcpSdk } from "./sdk.ts";

/** A tool name the chat template and the tool-call parser both accept (as lib/tools/registry.ts). */
const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** The MCP tools of a run, and what closes every server they started. */
export interface McpTools {
  tools: Tool[];
  /** Stops every server still running (shared and per-episode); safe to call twice. */
  close(): Promise<void>;
}

export interface OpenMcpOptions extends LaunchOptions {
  /** Names already offered (built-ins, user tools) → what offers them, for the collision message. */
  taken?: ReadonlyMap<string, string>;
}

/** Starts every server, lists its tools and makes them tools; on any failure stops those it started. */
export async function openMcpTools(
  servers: readonly McpServerConfig[],
  o: OpenMcpOptions = {},
): Promise<McpTools> {
  const live = new Connections();
  const close = () => live.close();
  const opened = await Promise.allSettled(servers.map((server) => openServer(server, live, o)));
  const failed = opened.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed !== undefined) {
    await close();
    throw failed.reason;
  }
  const tools: Tool[] = [];
  const taken = new Map(o.taken ?? []);
  for (const [i, result] of opened.entries()) {
    for (const tool of (result as PromiseFulfilledResult<Tool[]>).value) {
      const owner = taken.get(tool.name);
      if (owner !== undefined) {
        await close();
        throw nameTaken(servers[i], tool.name, owner);
      }
      taken.set(tool.name, `MCP server ${servers[i].name}`);
      tools.push(tool);
    }
  }
  return { tools, close };
}

/** The connections the tools hold open; once closed, one that finishes opening late is closed at once. */
class Connections {
  readonly #live = new Set<McpConnection>();
  #closed = false;

  async open(server: McpServerConfig, o: LaunchOptions): Promise<McpConnection> {
    const closed = () => new Error(`the MCP tools are closed; server ${server.name} is not started again`);
    if (this.#closed) throw closed();
    const connection = await McpConnection.open(server, o);
    if (this.#closed) {
      await connection.close();
      throw closed();
    }
    this.#live.add(connection);
    return connection;
  }

  async stop(connection: McpConnection): Promise<void> {
    this.#live.delete(connection);
    await connection.close();
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#live];
    this.#live.clear();
    await Promise.allSettled(all.map((c) => c.close()));
  }
}

/** One server's tools; its shared connection (or, per episode, the way to open one) held by `live`. */
async function openServer(
  server: McpServerConfig,
  live: Connections,
  o: LaunchOptions,
): Promise<Tool[]> {
  const first = await live.open(server, o);
  const infos = pick(server, await first.listTools());
  const validator = new (await mcpSdk()).AjvJsonSchemaValidator();
  let connection: (ctx: { episode?: EpisodeScope }) => Promise<McpConnection> = () => Promise.resolve(first);
  let startEpisode: ((episode: EpisodeScope) => void) | undefined;
  if (server.per_episode) {
    await live.stop(first); // it only listed the tools
    const open = () => live.open(server, o);
    const stop = (c: McpConnection) => live.stop(c);
    connection = (ctx) => {
      if (ctx.episode === undefined) {
        throw new Error(`MCP server ${server.name} (per_episode) called outside an episode`);
      }
      return ctx.episode.resource(server, open, stop);
    };
    // Started with the episode; a failure here is seen (and thrown) by the episode's first call.
    startEpisode = (episode) => void episode.resource(server, open, stop).catch(() => {});
  }
  return infos.map((info) => {
    const validate = compile(server, info, validator);
    const tool: Tool = {
      name: server.name_prefix + info.name,
      description: info.description ?? info.title ?? "",
      parameters: info.inputSchema as Record<string, unknown>,
      validate,
      run: async (args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> =>
        await (await connection(ctx)).call(info.name, args, ctx),
    };
    if (startEpisode !== undefined) tool.startEpisode = startEpisode;
    return tool;
  });
}

/** The tools offered: all, or those named in `tools` (each must exist); every name must be usable. */
function pick(server: McpServerConfig, infos: McpToolInfo[]): McpToolInfo[] {
  const names = infos.map((t) => t.name);
  const missing = server.tools.find((name) => !names.includes(name));
  if (missing !== undefined) {
    throw new UserError(`mcp server ${JSON.stringify(server.name)}: tools`, {
      value: missing,
      why: `the server has no tool by this name; it has ${names.join(", ") || "none"}`,
      fix: "list only tools the server has (or leave tools empty for all)",
    });
  }
  const chosen = server.tools.length === 0 ? infos : infos.filter((t) => server.tools.includes(t.name));
  for (const info of chosen) {
    const name = server.name_prefix + info.name;
    if (!TOOL_NAME.test(name)) {
      throw new UserError(`mcp server ${JSON.stringify(server.name)}: tool ${JSON.stringify(name)}`, {
        why: "a tool name must be a letter or _ followed by letters, digits, _ or - (at most 64)",
        fix: "leave the tool out with tools: [...], or change name_prefix",
      });
    }
  }
  return chosen;
}

/** The argument check of one tool: the SDK's Ajv validator over the server's own schema. */
function compile(
  server: McpServerConfig,
  info: McpToolInfo,
  validator: AjvJsonSchemaValidator,
): (args: Record<string, unknown>) => string[] {
  let check: ReturnType<AjvJsonSchemaValidator["getValidator"]>;
  try {
    check = validator.getValidator(info.inputSchema as Parameters<AjvJsonSchemaValidator["getValidator"]>[0]);
  } catch (error) {
    throw new UserError(`mcp server ${JSON.stringify(server.name)}: tool ${JSON.stringify(info.name)}`, {
      why: `its inputSchema cannot be compiled: ${(error as Error).message.split("\n")[0]}`,
      fix: "leave the tool out with tools: [...], or fix the server",
    });
  }
  return (args) => {
    const result = check(args);
    // Ajv names the value `data`: the model's message says `arguments`, as for the built-in tools.
    return result.valid ? [] : [result.errorMessage.replace(/\bdata(?=[/ ]|$)/g, "arguments")];
  };
}

function nameTaken(server: McpServerConfig, name: string, owner: string): UserError {
  return new UserError(`mcp server ${JSON.stringify(server.name)}: tool ${JSON.stringify(name)}`, {
    why: `the name is already taken by ${owner}`,
    fix:
      `set name_prefix on the server (e.g. name_prefix: ${server.name}_), or leave the tool out with tools`,
  });
}
