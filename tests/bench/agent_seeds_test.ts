/**
 * `deno task bench --only agent_seeds` (bench/demo_seeds.ts `agentSeedsPlan`, issue 31) is wired, not
 * run: the section exists and runs only when named; it runs configs/demo_agent.yaml — GRPO through the
 * `openai` example agent — on that file's own three seeds, the command line's `bench.*` overrides on top;
 * the agent configuration is configs/demo.yaml but for the keys marked "(agent)"; a bad override is
 * refused in one line before anything runs.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { benchArgs } from "../../bench/bench.ts";
import { AGENT_DEMO_CONFIG, agentSeedsPlan } from "../../bench/demo_seeds.ts";
import { ON_REQUEST, parseOnly } from "../../bench/only.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { assertRefused, command, ROOT } from "../helpers/commands.ts";

Deno.test("bench --only agent_seeds runs the agent demo's config on its own seeds, overrides on top", async () => {
  assert.ok(parseOnly(["agent_seeds"]).has("agent_seeds"));
  assert.ok(ON_REQUEST.includes("agent_seeds") && !parseOnly([]).has("agent_seeds"), "only when named");
  assert.deepEqual(await agentSeedsPlan([]), { config: AGENT_DEMO_CONFIG, seeds: [1, 2, 3] });
  const plan = await agentSeedsPlan([["bench.demo_seeds", "[4, 5]"], ["loop.steps", "3"]]);
  assert.deepEqual(plan, { config: AGENT_DEMO_CONFIG, seeds: [4, 5] });
});

Deno.test("configs/demo_agent.yaml is configs/demo.yaml with the openai agent, the keys that differ marked", async () => {
  const load = async (name: string) => (await loadConfig({ file: join(ROOT, name) })).config;
  const [demo, agent] = [await load("configs/demo.yaml"), await load(AGENT_DEMO_CONFIG)];
  assert.equal(agent.rollout.environment.kind, "agent");
  assert.equal(agent.rollout.environment.module, "examples/agents/openai_agent.ts");
  await Deno.stat(join(ROOT, agent.rollout.environment.module!));
  const marked = (await Deno.readTextFile(join(ROOT, AGENT_DEMO_CONFIG))).split("\n")
    .filter((line) => line.includes("# (agent)")).map((line) => line.trim().split(":")[0]);
  const differing = leafDiffs(demo, agent).map((path) => path.split(".").at(-1));
  assert.deepEqual(differing.sort(), marked.sort(), "every differing key marked (agent), and only those");
});

Deno.test("the bench's command line plans agent_seeds only when named, and refuses a bad override", async () => {
  const named = await benchArgs(["--only", "agent_seeds", "--bench.demo_seeds=[2]"]);
  assert.deepEqual(named.agentSeeds, { config: AGENT_DEMO_CONFIG, seeds: [2] });
  assert.equal((await benchArgs(["--only", "demo_seeds"])).agentSeeds, null);
  const r = await command("bench/bench.ts", ["--only", "agent_seeds", "--bench.demo_seedz=[1]"]);
  assertRefused(r, /bench\.demo_seedz/);
});

/** The dotted paths of the leaves where `a` and `b` differ. */
function leafDiffs(a: unknown, b: unknown, path = ""): string[] {
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object" && !Array.isArray(a)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    const at = (o: object, k: string) => (o as Record<string, unknown>)[k];
    return keys.flatMap((k) => leafDiffs(at(a, k), at(b, k), path ? `${path}.${k}` : k));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [path];
}
