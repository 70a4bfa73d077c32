/**
 * The pieces of the official MCP SDK (`npm:@modelcontextprotocol/sdk`) the client uses, with their types.
 *
 * Only the SDK's named exports (`/client`, `/server`, `/validation/ajv`) carry types under Deno: its
 * catch-all export pattern maps `types.js` to a declaration file `types.js.d.ts` that does not exist, so
 * everything imported through it (`/types.js`, `/shared/stdio.js`, `/client/streamableHttp.js`) is
 * untyped. This file imports those at run time and states the types we rely on, derived from the typed
 * `Client` wherever it can be; nothing else in lib/tools/mcp/ imports the SDK's untyped paths.
 *
 * @module
 */

import { Client } from "@modelcontextprotocol/sdk/client";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import * as streamableHttp from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import * as stdio from "@modelcontextprotocol/sdk/shared/stdio.js";
import * as types from "@modelcontextprotocol/sdk/types.js";

export { AjvJsonSchemaValidator, Client };

/** The SDK's transport contract (what `Client.connect` takes). */
export type Transport = Parameters<Client["connect"]>[0];
/** One JSON-RPC message, as a transport hands it to the client. */
export type JSONRPCMessage = Parameters<NonNullable<Transport["onmessage"]>>[0];
/** A `tools/list` page and one tool in it. */
export type ListToolsResult = Awaited<ReturnType<Client["listTools"]>>;
export type McpTool = ListToolsResult["tools"][number];
/** A `tools/call` result. */
export type CallToolResult = Awaited<ReturnType<Client["callTool"]>>;

/** JSON-RPC error codes the client tells apart (the SDK's `ErrorCode`). */
export const ErrorCode: { ConnectionClosed: number; RequestTimeout: number } = types.ErrorCode;

/** The schema `tools/list` answers are parsed with. */
export const ListToolsResultSchema: Parameters<Client["request"]>[1] = types.ListToolsResultSchema;

/** The JSON-RPC error code of an error the SDK raised for an error answer or a lost connection. */
export function mcpErrorCode(error: unknown): number | undefined {
  return error instanceof types.McpError ? (error as { code: number }).code : undefined;
}

/** One line of MCP's stdio framing, parsed and checked (throws on anything else). */
export const deserializeMessage: (line: string) => JSONRPCMessage = stdio.deserializeMessage;
/** A message as one line of MCP's stdio framing, newline included. */
export const serializeMessage: (message: JSONRPCMessage) => string = stdio.serializeMessage;

/** The SDK's streamable-HTTP client transport, with the one method beyond `Transport` we call. */
export type HttpTransport = Transport & { terminateSession(): Promise<void> };

/** A streamable-HTTP transport to `url`, sending `headers` with every request. */
export function httpTransport(url: string, headers: Record<string, string>): HttpTransport {
  return new streamableHttp.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}
