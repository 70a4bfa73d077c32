/**
 * An MCP tool result as the tool response the model reads (docs/mcp.md, "What the model sees"):
 *
 * - `text` content is shown as it is; an embedded text resource as its text under a `[resource URI]`
 *   line; several items are joined with newlines, in order.
 * - `structuredContent` (JSON) is shown as compact JSON when the result has no content to show (a
 *   server that follows the spec also sends it as text, which is then what is shown).
 * - anything else is named, not shown: `[image: image/png, 1234 bytes]`, `[audio: …]`, `[resource link:
 *   NAME URI]`, `[resource URI: application/pdf, 1234 bytes]` (a binary resource), `[content of type X]`.
 * - `isError: true` makes the call's status `tool_error`; otherwise it is `ok` (the rollout then cuts
 *   output over `max_output_chars` and marks it `output_truncated`).
 *
 * @module
 */

import type { ToolResult } from "../types.ts";

/** What a `tools/call` result holds, as far as the model is concerned. */
export interface CallResult {
  content?: unknown[];
  structuredContent?: unknown;
  isError?: boolean;
}

/** The model's view of a result: its text and its status. */
export function resultToTool(result: CallResult): ToolResult {
  const parts = (Array.isArray(result.content) ? result.content : []).map(describeContent);
  let output = parts.join("\n");
  if (parts.length === 0 && result.structuredContent !== undefined) {
    output = JSON.stringify(result.structuredContent);
  }
  return { status: result.isError === true ? "tool_error" : "ok", output };
}

/** One content item as text: text itself, anything else by name. */
export function describeContent(item: unknown): string {
  const c = (item ?? {}) as Record<string, unknown>;
  switch (c.type) {
    case "text":
      return typeof c.text === "string" ? c.text : "";
    case "image":
    case "audio":
      return `[${c.type}: ${mime(c.mimeType)}, ${base64Bytes(c.data)} bytes]`;
    case "resource_link":
      return `[resource link: ${text(c.name)} ${text(c.uri)}]`;
    case "resource":
      return describeResource((c.resource ?? {}) as Record<string, unknown>);
    default:
      return `[content of type ${text(c.type)}]`;
  }
}

function describeResource(r: Record<string, unknown>): string {
  if (typeof r.text === "string") return `[resource ${text(r.uri)}]\n${r.text}`;
  return `[resource ${text(r.uri)}: ${mime(r.mimeType)}, ${base64Bytes(r.blob)} bytes]`;
}

function mime(value: unknown): string {
  return typeof value === "string" && value !== "" ? value : "unknown type";
}

function text(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value) ?? "?";
}

/** The decoded size of a base64 string, without decoding it. */
function base64Bytes(data: unknown): number {
  if (typeof data !== "string") return 0;
  const clean = data.replace(/[^A-Za-z0-9+/]/g, "");
  return Math.floor(clean.length * 3 / 4);
}
