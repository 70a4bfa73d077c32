/**
 * The MCP client's infrastructure error: a server that cannot start, does not answer, or dies during
 * the rollout. It stops the stage with one line naming the server (never a reward of 0).
 *
 * @module
 */

import { type ErrorParts, formatMessage, InfrastructureError } from "../../errors.ts";

export class McpServerError extends InfrastructureError {
  /** The server's name (`rollout.tools.mcp[].name`). */
  readonly server: string;

  constructor(server: string, parts: ErrorParts) {
    super(formatMessage(`mcp server ${JSON.stringify(server)}`, parts));
    this.name = "McpServerError";
    this.server = server;
  }
}

/** The last `chars` characters of a server's stderr, on one line, for messages ("" when empty). */
export function stderrTail(text: string, chars = 300): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat === "") return "";
  return flat.length > chars ? `...${flat.slice(-chars)}` : flat;
}
