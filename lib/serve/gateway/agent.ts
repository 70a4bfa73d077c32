/**
 * The contract between the gateway and a user's agent (docs/agents.md): an agent module exports
 * `run(task, client)`, where `client` says where the gateway is and which episode the agent plays; the
 * agent sends `client.headers` with every chat completion and returns the reward it judged, if any. Who
 * drives the agent (a script of the user's, or `rollout.environment.kind: agent`) ends the episode.
 *
 * @module
 */

import type { Task } from "../../data/task.ts";

/** Where the gateway is and which episode an agent plays. */
export interface AgentClient {
  /** The OpenAI base URL, `http://host:port/v1`. */
  baseURL: string;
  apiKey: string;
  /** The served model's name. */
  model: string;
  episodeId: string;
  groupId: string;
  /** The episode's sampling seed: send it as `seed` to have the rollout stage's tokens. */
  seed: number;
  /** `x-episode-id` and `x-group-id`: send them with every chat completion. */
  headers: Record<string, string>;
}

/** What an agent's `run` returns: the reward it judged (null or absent: none). */
export interface AgentResult {
  reward?: number | null;
}

/** An agent: plays one episode of `task` through the gateway. */
export type AgentRun = (task: Task, client: AgentClient) => Promise<AgentResult | void>;

/** The client of one episode. */
export function agentClient(
  at: { baseURL: string; apiKey: string; model: string },
  episodeId: string,
  groupId: string,
  seed: number,
): AgentClient {
  return { ...at, episodeId, groupId, seed, headers: { "x-episode-id": episodeId, "x-group-id": groupId } };
}

/** The gateway's answer to ending an episode. */
export interface EndAnswer {
  episode_id: string;
  status: string;
  reason: string | null;
  turns: number;
  /** The rollouts file (null: the rollout stage's own gateway, which writes none). */
  path: string | null;
}

/** `POST /v1/episodes/{id}/end` with the reward, if any; a refusal throws its message. */
export async function endEpisode(client: AgentClient, reward: number | null = null): Promise<EndAnswer> {
  const url = `${client.baseURL}/episodes/${encodeURIComponent(client.episodeId)}/end`;
  const response = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${client.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(reward === null ? {} : { reward }),
  });
  const answer = await response.json();
  if (!response.ok) {
    throw new Error(`ending episode ${client.episodeId}: ${answer?.error?.message ?? response.status}`);
  }
  return answer as EndAnswer;
}

/** Plays one episode with `run` and ends it with the reward the agent returned. */
export async function playEpisode(run: AgentRun, task: Task, client: AgentClient): Promise<EndAnswer> {
  const result = await run(task, client);
  return await endEpisode(client, result?.reward ?? null);
}
