/**
 * The gateway's HTTP surface (`deno task serve --record DIR`, docs/agents.md): which episode a chat request
 * belongs to, what a recorded request may not ask, and `POST /v1/episodes/{id}/end`.
 *
 * @module
 */

import { HttpError } from "../limits.ts";
import type { EpisodeKey, RecordedSampling, Recorder } from "./recorder.ts";

type Json = Record<string, unknown>;

/** The episode a request names (header first, then OpenAI `metadata`); null: not recorded. */
export function episodeKeyOf(headers: Headers | undefined, body: Json): EpisodeKey | null {
  const metadata = (body.metadata ?? {}) as Record<string, string>;
  const episodeId = headers?.get("x-episode-id") ?? metadata.episode_id;
  if (!episodeId) return null;
  const groupId = headers?.get("x-group-id") ?? metadata.group_id ?? episodeId;
  return { episodeId, groupId };
}

/**
 * Refuses what a recorded turn cannot be: several choices (an episode has one path: sample a group as
 * several episodes), a stream, prompt log-probs, or a reply whose start the request forces or whose end
 * a stop string cuts (the recorded turn would not be what the policy sampled from the recorded context).
 */
export function checkRecordable(body: Json): void {
  const refuse = (key: string, why: string) => {
    throw new HttpError(400, `${key}: ${why} in a recorded episode (x-episode-id); ${FIX}`, undefined, key);
  };
  if (body.n != null && body.n !== 1) refuse("n", "only one choice is recorded per turn");
  if (body.stream === true) refuse("stream", "streaming is not recorded yet");
  if (body.prompt_logprobs != null) refuse("prompt_logprobs", "the prompt is not scored");
  const choice = body.tool_choice;
  if (choice != null && choice !== "auto" && choice !== "none") {
    refuse("tool_choice", "a forced call is not sampled");
  }
  if (body.continue_final_message === true) refuse("continue_final_message", "the turn must start fresh");
  if (body.add_generation_prompt === false) refuse("add_generation_prompt", "the turn must start fresh");
  const stops = [body.stop, body.stop_token_ids].some((v) =>
    v != null && !(Array.isArray(v) && v.length === 0)
  );
  if (stops) refuse("stop", "a turn ends at the end-of-turn token only");
}

/** `body` with the recorder's sampling where it leaves a parameter out; 400 naming one it sets otherwise. */
export function withSampling(body: Json, sampling: RecordedSampling | undefined): Json {
  if (!sampling) return body;
  const out = { ...body };
  const kwargs = (out.chat_template_kwargs ?? {}) as Json;
  if (typeof kwargs === "object" && kwargs.enable_thinking == null) {
    out.chat_template_kwargs = { ...kwargs, enable_thinking: sampling.enable_thinking };
  }
  for (const key of ["temperature", "top_p", "top_k"] as const) {
    if (out[key] == null) out[key] = sampling[key];
    else if (!sameSampling(key, out[key], sampling[key])) {
      throw new HttpError(
        400,
        `${key} = ${JSON.stringify(out[key])}: this run samples and trains at ${key} ${sampling[key]} ` +
          `(rollout.generation.${key}); leave it out, or set rollout.generation.${key}`,
        undefined,
        key,
      );
    }
  }
  return out;
}

/**
 * The most tokens a recorded turn may sample beyond the room left: the recorder's `max_tokens` where the
 * request names none (a turn near the end of the context is cut there, as the rollout stage cuts it).
 */
export function turnCap(body: Json, sampling: RecordedSampling | undefined): number {
  const asked = body.max_tokens != null || body.max_completion_tokens != null;
  return sampling && !asked ? sampling.max_tokens : Infinity;
}

/** Whether a request's value is the recorder's (top_k: -1, vLLM's "off", is 0, ours). */
function sameSampling(key: string, asked: unknown, value: number): boolean {
  return key === "top_k" && typeof asked === "number" ? Math.max(0, asked) === value : asked === value;
}

const FIX = "leave it out, or send the request without x-episode-id to have it served unrecorded";

/** `POST /v1/episodes/{id}/end` with an optional `{"reward": number}`: closes the episode, writes the file. */
export async function endEpisode(recorder: Recorder, id: string, body: Json): Promise<Response> {
  const reward = body.reward ?? null;
  if (reward !== null && (typeof reward !== "number" || !Number.isFinite(reward))) {
    throw new HttpError(
      400,
      `reward = ${JSON.stringify(reward)}: send a finite number or leave it out`,
      undefined,
      "reward",
    );
  }
  return Response.json(await recorder.end(id, reward as number | null));
}
