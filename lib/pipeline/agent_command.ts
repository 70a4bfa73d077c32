/**
 * An agent in any language (`rollout.environment.command`, docs/agents.md): one process per episode,
 * started from the command line with the episode in its environment — the variables the official OpenAI
 * clients read (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), the model's name (`OPENAI_MODEL`), and the episode's
 * `AGENT_EPISODE_ID`, `AGENT_GROUP_ID`, `AGENT_SEED` and `AGENT_HEADERS` (JSON: the headers to send with every
 * chat completion) — and the task as one line of JSON on stdin. It exits 0 when the episode is over; the
 * last line of its stdout that is a JSON object with a `reward` is the reward it judged (none, or null: no
 * reward; anything but a finite number or null there fails the episode).
 * Anything else on stdout is ignored; stderr is kept and its last line shown when the process fails.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { AgentClient, AgentResult, AgentRun } from "../serve/gateway/agent.ts";

/** The `run` of an agent that is the command line `argv` (started in the current directory). */
export function commandAgent(argv: readonly string[]): AgentRun {
  return async (task: Task, client: AgentClient): Promise<AgentResult> => {
    const child = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: episodeEnv(client),
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    // A process that exits without reading its stdin closes the pipe: its exit status says what happened.
    await writer.write(new TextEncoder().encode(JSON.stringify(task) + "\n")).catch(() => {});
    await writer.close().catch(() => {});
    const out = await child.output();
    const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
    if (!out.success) {
      const last = decode(out.stderr).trim().split("\n").at(-1) || "(nothing on stderr)";
      throw new Error(`${argv.join(" ")} exited with status ${out.code}: ${last}`);
    }
    return { reward: rewardOf(decode(out.stdout)) };
  };
}

/** The environment variables that tell the process its episode and where the gateway is. */
export function episodeEnv(client: AgentClient): Record<string, string> {
  return {
    OPENAI_BASE_URL: client.baseURL,
    OPENAI_API_KEY: client.apiKey,
    OPENAI_MODEL: client.model,
    AGENT_EPISODE_ID: client.episodeId,
    AGENT_GROUP_ID: client.groupId,
    AGENT_SEED: String(client.seed),
    AGENT_HEADERS: JSON.stringify(client.headers),
  };
}

/** The reward on the last stdout line that is a JSON object holding `reward` (a number or null). */
export function rewardOf(stdout: string): number | null {
  for (const line of stdout.trim().split("\n").reverse()) {
    try {
      const value = JSON.parse(line);
      if (value === null || typeof value !== "object" || !("reward" in value)) continue;
      if (value.reward === null || (typeof value.reward === "number" && Number.isFinite(value.reward))) {
        return value.reward;
      }
      throw new Error(`its reward line ${line.slice(0, 80)} holds no finite number (nor null)`);
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error; // not JSON: a line of the agent's own output
    }
  }
  return null;
}
