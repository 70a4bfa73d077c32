/**
 * Which tools an episode may call: the enabled built-ins (calculator, execute_code, read_file), the
 * user tools exported by the TypeScript modules named in `rollout.tools.modules`, and the tools of the
 * MCP servers in `rollout.tools.mcp` (lib/tools/mcp/, docs/mcp.md). A user module exports
 * `tools: Tool[]` (or a default export of a Tool or Tool[]); see examples/user_tools.ts.
 *
 * Every problem with a module is a one-line UserError naming the module and the tool, found when the
 * stage starts, before any model loads. MCP servers are started here and stopped by `ToolSet.close`.
 *
 * @module
 */

import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { RolloutConfig } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import type { ToolSpec } from "../model/chat.ts";
import { makeCalculatorTool } from "./calculator.ts";
import { openMcpTools } from "./mcp/tools.ts";
import { executeCodeTool } from "./execute_code.ts";
import { readFileTool } from "./read_file.ts";
import { openSandbox, type Sandbox } from "./sandbox.ts";
import { validateSchemaDefinition } from "./schema.ts";
import type { Tool } from "./types.ts";

export type RolloutToolsConfig = RolloutConfig["tools"];

export interface LoadToolsOptions {
  /** A sandbox already opened (shared with the code_exec reward); otherwise one is opened here. */
  sandbox?: Sandbox;
  /** Relative module paths resolve against this directory (default: the working directory). */
  baseDir?: string;
}

/** A tool name the chat template and the tool-call parser both accept. */
const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const BUILT_IN_NAMES = ["calculator", "execute_code", "read_file"];

/** The tools by name, and `close`, which stops what they started (MCP servers). */
export class ToolSet extends Map<string, Tool> {
  #closers: Array<() => Promise<void>> = [];

  /** Registers what `close` must stop. */
  onClose(closer: () => Promise<void>): void {
    this.#closers.push(closer);
  }

  /** Stops every MCP server the tools started; safe to call twice. */
  async close(): Promise<void> {
    const closers = this.#closers;
    this.#closers = [];
    await Promise.allSettled(closers.map((close) => close()));
  }
}

/**
 * The enabled tools by name: built-ins first, in config order, then each module's tools in order, then
 * each MCP server's. Close the set when the run ends (it may hold running MCP servers).
 */
export async function loadTools(
  section: RolloutToolsConfig,
  options: LoadToolsOptions = {},
): Promise<ToolSet> {
  const tools = new ToolSet();
  for (const name of section.enabled) tools.set(name, await builtIn(name, section, options));
  for (const path of section.modules) {
    for (const tool of await loadModule(path, options.baseDir ?? Deno.cwd())) {
      if (BUILT_IN_NAMES.includes(tool.name) || tools.has(tool.name)) {
        throw moduleError(
          path,
          `tool ${JSON.stringify(tool.name)}`,
          "its name is already taken by another tool",
          {
            fix: "rename the tool",
          },
        );
      }
      tools.set(tool.name, tool);
    }
  }
  if (section.mcp.length > 0) {
    const taken = new Map([...tools.keys()].map((name) => [name, `the ${name} tool`]));
    const mcp = await openMcpTools(section.mcp, { taken, baseDir: options.baseDir });
    for (const tool of mcp.tools) tools.set(tool.name, tool);
    tools.onClose(mcp.close);
  }
  return tools;
}

/** The tools as the chat template's `tools` argument. */
export function toolSpecs(tools: Iterable<Tool>): ToolSpec[] {
  return [...tools].map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }));
}

async function builtIn(name: string, section: RolloutToolsConfig, options: LoadToolsOptions): Promise<Tool> {
  switch (name) {
    case "calculator":
      return makeCalculatorTool({ maxOperations: section.calculator.max_operations });
    case "read_file":
      return readFileTool(section.read_file_root === null ? null : resolve(section.read_file_root));
    case "execute_code": {
      const sandbox = options.sandbox ??
        await openSandbox({
          kind: section.sandbox,
          unsafeNoSandbox: section.unsafe_no_sandbox,
          maxConcurrency: section.max_concurrency,
        });
      return executeCodeTool(sandbox);
    }
  }
  throw new UserError("config key rollout.tools.enabled", {
    value: name,
    why: "there is no built-in tool by this name",
    fix: `use ${BUILT_IN_NAMES.join(", ")}, or export the tool from a module in rollout.tools.modules`,
  });
}

async function loadModule(path: string, baseDir: string): Promise<Tool[]> {
  const absolute = isAbsolute(path) ? path : resolve(baseDir, path);
  try {
    await Deno.stat(absolute);
  } catch {
    throw moduleError(path, "module", "the file does not exist", {
      fix: "fix the path (relative to the working directory)",
    });
  }
  let exports: Record<string, unknown>;
  try {
    exports = await import(pathToFileURL(absolute).href);
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw moduleError(path, "module", `it failed to load: ${message}`, { fix: "fix the module" });
  }
  const list = exports.tools ?? exports.default;
  const tools = Array.isArray(list) ? list : list === undefined ? undefined : [list];
  if (tools === undefined || tools.length === 0) {
    throw moduleError(path, "module", "it exports no tools", {
      fix: "export const tools: Tool[] = [...] (or a default export)",
    });
  }
  return tools.map((tool, index) => checkTool(path, tool, index));
}

/** Checks one exported value's shape and schema; returns it as a Tool. */
function checkTool(path: string, value: unknown, index: number): Tool {
  const tool = value as Partial<Tool> | null;
  const label = `tool #${index + 1}${typeof tool?.name === "string" ? ` ${JSON.stringify(tool.name)}` : ""}`;
  const bad = (why: string, fix: string) => moduleError(path, label, why, { fix });
  if (tool === null || typeof tool !== "object") {
    throw bad("it is not an object", "export { name, description, parameters, run }");
  }
  if (typeof tool.name !== "string" || !TOOL_NAME.test(tool.name)) {
    throw bad(
      "its name is missing or not an identifier",
      "give it a name of letters, digits, _ or - (at most 64)",
    );
  }
  if (typeof tool.description !== "string") {
    throw bad("its description is missing", "add a one-line description");
  }
  if (typeof tool.run !== "function") throw bad("it has no run function", "add async run(args, ctx)");
  const problems = validateSchemaDefinition(tool.parameters);
  if (problems.length > 0) throw bad(`its parameters schema is invalid: ${problems[0]}`, "fix the schema");
  return tool as Tool;
}

function moduleError(path: string, what: string, why: string, o: { fix: string }): UserError {
  return new UserError(`rollout.tools.modules: ${what} in ${path}`, { why, fix: o.fix });
}
