/**
 * TEST DOUBLE of `deno task rollout` for MCP faults: the rollout stage's command line (lib/cli's
 * `runStageMain`: flags, config, one-line errors, exit codes), the pipeline's `rollout` and the file
 * writer, with a scripted policy in place of a model (a random model never writes a tool call).
 *
 *   deno run -A tests/helpers/mcp_stage.ts --config FILE --out FILE
 *
 * Each episode's turn 1 and turn 2 call the tool named by `MCP_STAGE_TOOL` with the JSON arguments in
 * `MCP_STAGE_ARGS`; before turn 2, the servers this process started whose command line contains
 * `MCP_STAGE_KILL` (when set) are killed, as an operator or the kernel's OOM killer would.
 *
 * @module
 */

import { runStageMain } from "../../lib/cli/cli.ts";
import type { Task } from "../../lib/data/task.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { openSession, rollout, writeStageOutput } from "../../lib/pipeline/mod.ts";
import { childPids, procStat } from "./mcp.ts";
import { ScriptedPolicy } from "./scripted_policy.ts";
import { makeTinyModel } from "./tiny_model.ts";

const tool = Deno.env.get("MCP_STAGE_TOOL") ?? "echo";
const args = JSON.parse(Deno.env.get("MCP_STAGE_ARGS") ?? "{}");
const kill = Deno.env.get("MCP_STAGE_KILL");
const call = `<tool_call>\n${JSON.stringify({ name: tool, arguments: args })}\n</tool_call>`;

function script(_prompt: readonly number[], turn: number): string {
  if (turn === 2 && kill) killServers(kill);
  return turn <= 2 ? call : "Final answer: done";
}

/**
 * Kills the servers and waits until they are gone: the sandbox's bwrap and the server inside it (which
 * bwrap's --die-with-parent would only end a moment later; under load turn 2's call could still reach it).
 */
function killServers(marker: string): void {
  const pids = childPids(marker);
  // A kill that finds nothing would let the stage finish and the test prove nothing: say so instead.
  if (pids.length === 0) throw new Error(`mcp_stage: no server of ours matches ${marker} to kill`);
  const inside = pids.flatMap((pid) => descendants(pid));
  for (const pid of [...inside, ...pids]) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* already gone */ }
  }
  const deadline = Date.now() + 10_000;
  while ([...inside, ...pids].some(running) && Date.now() < deadline) { /* a few ms at most */ }
}

/** Every descendant of `pid` (children, their children, …). */
function descendants(pid: number): number[] {
  let text = "";
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`);
  } catch { /* it ended while we looked */ }
  const children = text.trim().split(/\s+/).filter((x) => x !== "").map(Number);
  return children.flatMap((child) => [child, ...descendants(child)]);
}

/** Whether `pid` still runs (a zombie, killed but not reaped, counts as gone). */
function running(pid: number): boolean {
  const state = procStat(pid)?.[0];
  return state !== undefined && state !== "Z";
}

await runStageMain({
  name: "rollout",
  summary: "The rollout stage with a scripted policy (a test double).",
  needsOutput: true,
  output: { kind: "stage-file", fileKind: "rollouts" },
  run: async ({ config, configHash, output }) => {
    const tokenizer = await loadTokenizer(await makeTinyModel());
    const policy = new ScriptedPolicy(tokenizer, script);
    const session = openSession({ ...config, rollout: { ...config.rollout, group_size: 1 } }, configHash, {
      open: { policy, tokenizer },
      showProgress: false,
    });
    try {
      const task: Task = { id: "t0", source: "arithmetic", prompt: "Use the tools.", answer: "0" };
      await writeStageOutput(output!, await rollout(session, [task], { step: 0 }));
    } finally {
      await session.close();
    }
  },
});
