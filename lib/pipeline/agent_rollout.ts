/**
 * `rollout.environment.kind: agent` (docs/agents.md): the user's agent module — `run(task, client)`,
 * lib/serve/gateway/agent.ts — or command line (`rollout.environment.command`, agent_command.ts) plays
 * every episode against a gateway started in this process on the session's policy, so the turns it asks
 * for are sampled with the current adapter (in the loop, each step's adapter, with no restart) and
 * recorded token for token as the gateway records them. Each episode has the
 * rollout stage's id (`s{step}/{task}/{sample}`) and seed (the client carries it), and its group is its
 * task. The rollout's sampling is imposed on every turn: `temperature`, `top_p` and `top_k` fill a request
 * that leaves them out and refuse another value (the trainer scores at that temperature);
 * `max_new_tokens` and `enable_thinking` fill what the agent leaves out. The driver ends each episode
 * with the reward the agent returned (`task.meta.gateway.reward`, the `agent` reward); the episode keeps its
 * task, answer included, so the other configured rewards score it as usual.
 *
 * An agent that throws, or that ends without asking anything under its episode's headers, stops the
 * rollout in one line naming the module and the episode — unless its episode filled the context and the
 * gateway refused the next turn: that episode is kept, truncated, as the other environments keep one.
 *
 * @module
 */

import type { RolloutConfig } from "../config/schema.ts";
import type { Task } from "../data/task.ts";
import type { Policy } from "../engine/policy.ts";
import { UserError } from "../errors.ts";
import { importEnvironmentModule } from "../rollout/environments.ts";
import { Limiter } from "../rollout/limiter.ts";
import type { Episode } from "../rollout/rollout.ts";
import { episodeSeed } from "../rollout/seeds.ts";
import { agentClient, type AgentRun, endEpisode, playEpisode } from "../serve/gateway/agent.ts";
import { commandAgent } from "./agent_command.ts";
import { Recorder } from "../serve/gateway/recorder.ts";
import { startServer } from "../serve/serve.ts";

/** The model name the in-process gateway answers to. */
const MODEL_NAME = "policy";

/** What the agent rollout needs beyond the policy and the tasks. */
export interface AgentRolloutOptions {
  /** The policy's model directory (its tokenizer and chat template). */
  modelDir: string;
  settings: RolloutConfig;
  step: number;
  groupIds?: readonly number[];
  configHash: string;
  onEpisode?: (episode: Episode) => void;
}

/** One episode to play: its task, ids and seed. */
interface Play {
  task: Task;
  episodeId: string;
  groupId: number;
  sampleIdx: number;
  seed: number;
}

/** Plays `group_size` episodes of each task with the agent module; returns them in task, then sample, order. */
export async function agentRollout(
  policy: Policy,
  tasks: readonly Task[],
  o: AgentRolloutOptions,
): Promise<Episode[]> {
  const { generation: g, environment: e } = o.settings;
  const [run, agent] = e.command.length > 0
    ? [commandAgent(e.command), `rollout.environment.command ${e.command.join(" ")}`]
    : [await loadAgent(e.module), `rollout.environment.module ${e.module}`];
  let recorder: Recorder | undefined;
  const apiKey = crypto.randomUUID(); // the gateway is the run's own: other local processes get 401
  const server = await startServer(policy, {
    modelDir: o.modelDir,
    port: 0,
    apiKey,
    maxModelLen: g.max_total_tokens,
    modelName: MODEL_NAME,
    recorder: (tokenizer, maxModelLen) =>
      recorder = new Recorder({
        dir: null,
        tokenizer,
        model: o.modelDir,
        configHash: o.configHash,
        maxModelLen,
        sampling: {
          temperature: g.temperature,
          top_p: g.top_p,
          top_k: g.top_k,
          max_tokens: g.max_new_tokens,
          enable_thinking: g.enable_thinking,
        },
      }),
  });
  try {
    const at = { baseURL: `${server.url}/v1`, apiKey, model: MODEL_NAME };
    const plays = playsOf(tasks, o);
    const limiter = new Limiter(o.settings.max_batch);
    const played = await Promise.allSettled(plays.map((p) =>
      limiter.run(async () => {
        const client = agentClient(at, p.episodeId, String(p.groupId), p.seed);
        await playOne(run, agent, p, client, (id) => recorder!.isFull(id));
      })
    ));
    const failed = played.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const recorded = new Map(recorder!.episodes().map((ep) => [ep.episodeId, ep]));
    return plays.map((p) => {
      const episode = episodeOf(recorded.get(p.episodeId)!, p);
      o.onEpisode?.(episode);
      return episode;
    });
  } finally {
    await server.close();
  }
}

/** Every episode of the rollout, with the rollout stage's ids and seeds. */
function playsOf(tasks: readonly Task[], o: AgentRolloutOptions): Play[] {
  return tasks.flatMap((task, index) =>
    Array.from({ length: o.settings.group_size }, (_, sampleIdx) => ({
      task,
      episodeId: `s${o.step}/${task.id}/${sampleIdx}`,
      groupId: o.groupIds?.[index] ?? index,
      sampleIdx,
      seed: episodeSeed(o.settings.generation.seed, o.step, task.id, sampleIdx),
    }))
  );
}

/**
 * Plays one episode and ends it. An agent that fails after the gateway refused a turn of its full episode
 * (an agent that asked again after a reply was cut at the context's end) leaves a truncated episode, which
 * is the model's doing and so data; any other failure is the agent's (`agent`: its config key and value),
 * named with its episode.
 */
async function playOne(
  run: AgentRun,
  agent: string,
  p: Play,
  client: Parameters<AgentRun>[1],
  isFull: (episodeId: string) => boolean,
) {
  try {
    await playEpisode(run, p.task, client);
  } catch (error) {
    if (isFull(p.episodeId)) {
      await endEpisode(client, null);
      return;
    }
    throw new UserError(agent, {
      why: `its agent failed in episode ${p.episodeId}: ${(error as Error).message.split("\n")[0]}`,
      fix: "send the episode's headers with every chat completion and end normally (the rollout ends the " +
        "episode); see examples/agents/ (openai_agent.ts; calculator_agent.py for a command)",
    });
  }
}

/** The recorded episode with the rollout's task, group and sample; the agent's reward stays in its meta. */
function episodeOf(recorded: Episode, p: Play): Episode {
  return {
    ...recorded,
    taskId: p.task.id,
    groupId: p.groupId,
    sampleIdx: p.sampleIdx,
    task: { ...p.task, meta: { ...p.task.meta, gateway: recorded.task.meta?.gateway } },
  };
}

/** The agent module's `run` (or its default export). */
async function loadAgent(path: string | null): Promise<AgentRun> {
  const mod = await importEnvironmentModule(path, "agent", "examples/agents/openai_agent.ts");
  const run = mod.run ?? mod.default;
  if (typeof run !== "function") {
    throw new UserError(`rollout.environment.module ${path}`, {
      why: "rollout.environment.kind is agent, and the module exports neither run nor a default function",
      fix: "export async function run(task, client) (see examples/agents/openai_agent.ts)",
    });
  }
  return run as AgentRun;
}
