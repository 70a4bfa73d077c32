/**
 * What can be checked about `rollout.tools.mcp` before anything starts: each stdio server's program
 * exists and its declared paths exist. A command calls it with its other argument checks, so a typo is
 * one line and exit 2 before a model loads (the servers themselves start with the tools).
 *
 * @module
 */

import type { McpServerConfig } from "../../config/sections/mcp.ts";
import { declaredBinds, resolveCommand } from "./launch.ts";

/** Throws the first UserError: a program not found, a read_only or read_write path that does not exist. */
export async function checkMcpServers(
  servers: readonly McpServerConfig[],
  baseDir = Deno.cwd(),
): Promise<void> {
  for (const server of servers) {
    if (server.command === null) continue;
    await resolveCommand(server, baseDir);
    await declaredBinds(server, baseDir);
  }
}

/** Every host path the servers are given (read or written), for the output policy's list of inputs. */
export function mcpPaths(servers: readonly McpServerConfig[]): string[] {
  return servers.flatMap((server) => [...server.read_only, ...server.read_write]);
}
