/**
 * The pieces of the official MCP SDK (`npm:@modelcontextprotocol/sdk`) the client uses, with their types.
 *
 * Only the SDK's named exports (`/client`, `/server`, `/validation/ajv`) carry types under Deno: its
 * catch-all export pattern maps `types.js` to a declaration file `types.js.d.ts` that does not exist, so
 * everything imported through it (`/types.js`, `/shared/stdio.js`, `/client/streamableHttp.js`) is
 * untyped. This file imports those at run time and states the types we rely on, derived from the typed
 * `Client` wherever it can be; nothing else in lib/tools/mcp/ imports the SDK's untyped paths.
 *
 * The SDK is imported on first use (`mcpSdk()`), not with this module: with Express and Ajv it is the
 * heaviest import of the toolkit (~0.15 s of a stage's ~0.6 s start here), and only a rollout with MCP
 * servers needs it — every other command, `--help` and every refusal would pay it for nothing.
 *
 * @module
 */

import type { Client } from "@modelcontextprotocol/sdk/client";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

export type { AjvJsonSchemaValidator, Client };

/** The SDK's transport contract (what `Client.connect` takes). */
export type Transport = Parameters<Client["connect"]>[0];
/** One JSON-RPC message, as a transport hands it to the client. */
export type JSONRPCMessage = Parameters<NonNullable<Transport["onmessage"]>>[0];
/** A `tools/list` page and one tool in it. */
export type ListToolsResult = Awaited<ReturnType<Client["listTools"]>>;
export type McpTool = ListToolsResult["tools"][number];
/** A `tools/call` result. */
export type CallToolResult = Awaited<ReturnType<Client["callTool"]>>;
/** The SDK's streamable-HTTP client transport, with the one method beyond `Transport` we call. */
export type HttpTransport = Transport & { terminateSession(): Promise<void> };

/** MCP's stdio framing: one JSON-RPC message a line. */
export interface StdioCodec {
  /** One line, parsed and checked (throws on anything else). */
  deserializeMessage(line: string): JSONRPCMessage;
  /** A message as one line, newline included. */
  serializeMessage(message: JSONRPCMessage): string;
}

/** What the client uses of the SDK at run time. */
export interface McpSdk extends StdioCodec {
  Client: typeof Client;
  AjvJsonSchemaValidator: typeof AjvJsonSchemaValidator;
  /** JSON-RPC error codes the client tells apart (the SDK's `ErrorCode`). */
  ErrorCode: { ConnectionClosed: number; RequestTimeout: number };
  /** The schema `tools/list` answers are parsed with. */
  ListToolsResultSchema: Parameters<Client["request"]>[1];
  /** The JSON-RPC error code of an error the SDK raised for an error answer or a lost connection. */
  mcpErrorCode(error: unknown): number | undefined;
  /** A streamable-HTTP transport to `url`, sending `headers` with every request. */
  httpTransport(url: string, headers: Record<string, string>): HttpTransport;
}

let loaded: Promise<McpSdk> | undefined;

/** The SDK, imported once, on the first call. */
export function mcpSdk(): Promise<McpSdk> {
  return loaded ??= importSdk();
}

async function importSdk(): Promise<McpSdk> {
  const [client, ajv, streamableHttp, stdio, types] = await Promise.all([
    import("@modelcontextprotocol/sdk/client"),
    import("@modelcontextprotocol/sdk/validation/ajv"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/shared/stdio.js"),
    import("@modelcontextprotocol/sdk/types.js"),
  ]);
  return {
    Client: client.Client,
    AjvJsonSchemaValidator: ajv.AjvJsonSchemaValidator,
    ErrorCode: types.ErrorCode,
    ListToolsResultSchema: types.ListToolsResultSchema,
    mcpErrorCode: (error) => error instanceof types.McpError ? (error as { code: number }).code : undefined,
    deserializeMessage: stdio.deserializeMessage,
    serializeMessage: stdio.serializeMessage,
    httpTransport: (url, headers) =>
      new streamableHttp.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }),
  };
}
