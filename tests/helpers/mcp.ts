/**
 * MCP servers for tests: the published servers installed from npm with the project's dependencies
 * (`@modelcontextprotocol/server-filesystem`, `server-everything`, run with node from their package's
 * `bin`), the repository's fixture server, config entries for them, a raw `tools/list` that does not go
 * through our client, and the pids of the servers this process started (to kill one mid-rollout).
 *
 * @module
 */

import { join } from "node:path";
import { loadConfig } from "../../lib/config/mod.ts";
import type { Config } from "../../lib/config/schema.ts";
import { findExecutable } from "../../lib/tools/sandbox_command.ts";
import { ROOT } from "./commands.ts";

const HAVE_BWRAP_AND_NODE = (await findExecutable("bwrap")) !== undefined &&
  (await findExecutable("node")) !== undefined;

/**
 * A test that starts MCP servers (Node.js, and bubblewrap for jailed ones): skipped where either is
 * missing outside CI, as the sandbox's tests are; in CI (which installs both) it runs and fails loudly.
 */
export function mcpTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, ignore: !HAVE_BWRAP_AND_NODE && Deno.env.get("CI") === undefined, fn });
}

export const NODE_MODULES = join(ROOT, "node_modules");

/** The script a package's `bin` names, from its installed package.json. */
export async function packageBin(name: string): Promise<string> {
  const dir = join(NODE_MODULES, name);
  const pkg = JSON.parse(await Deno.readTextFile(join(dir, "package.json")));
  const bin = typeof pkg.bin === "string" ? pkg.bin : Object.values(pkg.bin as Record<string, string>)[0];
  return join(dir, bin);
}

export const FILESYSTEM = "@modelcontextprotocol/server-filesystem";
export const EVERYTHING = "@modelcontextprotocol/server-everything";
export const FIXTURE_SERVER = join(ROOT, "tests/fixtures/mcp_fixture_server.mjs");

/** A temporary directory the jail's user may write (as root the jail runs as nobody). */
export async function tempRoot(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  await Deno.chmod(dir, 0o777);
  return dir;
}

/** The filesystem server over stdio inside bubblewrap, rooted in `root` (bound read-write). */
export async function filesystemServer(root: string, extra: Record<string, unknown> = {}) {
  return {
    name: "files",
    command: "node",
    args: [await packageBin(FILESYSTEM), root],
    read_only: [NODE_MODULES],
    read_write: [root],
    ...extra,
  };
}

/** The everything server over stdio (`sandbox` bwrap unless `extra` says otherwise). */
export async function everythingServer(extra: Record<string, unknown> = {}) {
  return {
    name: "everything",
    command: "node",
    args: [await packageBin(EVERYTHING), "stdio"],
    read_only: [NODE_MODULES],
    ...extra,
  };
}

/**
 * The default configuration with these MCP servers and overrides; room for a prompt holding a server's
 * many tool schemas (several thousand tokens) and for scripted turns of several calls.
 */
export async function mcpConfig(
  servers: unknown[],
  overrides: Array<[string, string]> = [],
): Promise<Config> {
  const room: Array<[string, string]> = [
    ["rollout.generation.max_total_tokens", "32768"],
    ["rollout.generation.max_new_tokens", "2048"],
  ];
  const mcp: [string, string] = ["rollout.tools.mcp", JSON.stringify(servers)];
  return (await loadConfig({ overrides: [...room, mcp, ...overrides] })).config;
}

/** `tools/list` of the server `node argv…`, asked over raw JSON-RPC lines (no MCP client of ours). */
export async function rawToolsList(argv: string[]): Promise<Array<Record<string, unknown>>> {
  const child = new Deno.Command("node", { args: argv, stdin: "piped", stdout: "piped", stderr: "null" })
    .spawn();
  const lines = [
    {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test", version: "1" } },
    },
    { jsonrpc: "2.0", method: "notifications/initialized" },
    { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} },
  ].map((m) => JSON.stringify(m) + "\n").join("");
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(lines));
  let text = "";
  const decoder = new TextDecoder();
  try {
    for await (const chunk of child.stdout) {
      text += decoder.decode(chunk, { stream: true });
      const answer = text.split("\n").map((l) => l.trim() ? JSON.parse(l) : null).find((m) => m?.id === 2);
      if (answer) return answer.result.tools;
    }
    throw new Error(`no tools/list answer from node ${argv.join(" ")}`);
  } finally {
    child.kill("SIGKILL");
    await writer.close().catch(() => {});
    await child.status;
  }
}

/** The fields of `/proc/<pid>/stat` after the command name (state, then ppid, …); null once it is gone. */
export function procStat(pid: number | string): string[] | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/** Pids of this process's children whose command line contains `marker` (the servers it started). */
export function childPids(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const ppid = Number(procStat(entry.name)?.[1]);
      const cmdline = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).replaceAll("\0", " ");
      if (ppid === Deno.pid && cmdline.includes(marker)) pids.push(Number(entry.name));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** The `<tools>` section of a rendered Qwen3 prompt, one parsed spec per line. */
export function promptToolSpecs(prompt: string): Array<{ type: string; function: Record<string, unknown> }> {
  const start = prompt.indexOf("<tools>\n");
  const end = prompt.indexOf("\n</tools>");
  if (start < 0 || end < 0) throw new Error("the prompt has no <tools> section");
  return prompt.slice(start + "<tools>\n".length, end).split("\n").map((line) => JSON.parse(line));
}
