/**
 * What a command loads before it runs: the MCP SDK (with Express and Ajv, the heaviest import of the
 * toolkit) is imported on first use by lib/tools/mcp/sdk.ts, so that no command, `--help` or refusal pays
 * for it unless a rollout has MCP servers. Read from `deno info --json`: the modules a command reaches
 * through static value imports (type-only and dynamic imports left out) hold no package of the SDK.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT } from "../helpers/commands.ts";

interface Dependency {
  code?: { specifier?: string };
  isDynamic?: boolean;
}
interface InfoModule {
  specifier: string;
  dependencies?: Dependency[];
}

/** The specifiers `entry` reaches through static value imports (npm packages' own imports not followed). */
async function loadedAtStart(entry: string): Promise<Set<string>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", join(ROOT, entry)],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { roots: string[]; modules: InfoModule[] };
  const modules = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const visit = (specifier: string) => {
    if (seen.has(specifier)) return;
    seen.add(specifier);
    for (const dep of modules.get(specifier)?.dependencies ?? []) {
      if (dep.code?.specifier && !dep.isDynamic) visit(dep.code.specifier);
    }
  };
  info.roots.forEach(visit);
  return seen;
}

const SDK = /^npm:\/?@modelcontextprotocol\/sdk@/;

Deno.test("no command imports the MCP SDK at start: lib/tools/mcp/sdk.ts loads it on first use", async () => {
  const commands = [...Deno.readDirSync(join(ROOT, "stages"))].map((e) => `stages/${e.name}`).sort();
  assert.ok(commands.includes("stages/rollout.ts"), "the stage commands were found");
  for (const command of commands) {
    const loaded = [...await loadedAtStart(command)];
    if (command === "stages/rollout.ts") { // the walk reaches the module that loads the SDK
      assert.ok(
        loaded.some((s) => s.endsWith("/lib/tools/mcp/sdk.ts")),
        "rollout reaches lib/tools/mcp/sdk.ts",
      );
    }
    assert.deepEqual(loaded.filter((s) => SDK.test(s)), [], `${command} imports the MCP SDK at start`);
  }
});
