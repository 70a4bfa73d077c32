/**
 * `deno task serve --record DIR` (docs/agents.md): each chat completion that names an episode (header
 * `x-episode-id` or `metadata.episode_id`; its group: `x-group-id` or `metadata.group_id`) is one turn of
 * that episode. The episode keeps its token sequence as the rollout stage does (lib/rollout/trajectory.ts):
 * the prompt rendered once, each turn's sampled tokens and log-probs, the client's answers appended as the
 * template's pieces (history.ts). `POST /v1/episodes/{id}/end` closes it, and `DIR/rollouts.arrow` is then
 * rewritten (atomically) with every episode ended so far, in today's schema and provenance.
 *
 * A request whose history is not the recorded one is still answered (from its own messages, rendered
 * whole), but the episode stops recording there: its row keeps the turns up to the change and the status
 * `history_mismatch`, never tokens that the policy did not see in that order.
 *
 * An episode whose recorded tokens and the client's new answer no longer fit `max_model_len` is full: the
 * request is refused (400, naming the episode), and the episode, once ended, is truncated (finish reason
 * `truncated`, status ok), as the rollout stage's own environments end an episode that fills the context.
 *
 * @module
 */

import { join } from "node:path";
import { buildTable } from "../../arrow/write.ts";
import { writeTable } from "../../arrow/stage_io.ts";
import type { EpisodeStatus } from "../../arrow/kinds.ts";
import type { MetadataInput } from "../../arrow/metadata.ts";
import type { ChatMessage, ChatTokenizer, ToolCall } from "../../model/chat.ts";
import { rolloutColumns } from "../../rollout/columns.ts";
import type { ToolCallRecord } from "../../rollout/dispatch.ts";
import type { Episode } from "../../rollout/rollout.ts";
import { parseToolCalls } from "../../rollout/tool_calls.ts";
import { Trajectory } from "../../rollout/trajectory.ts";
import { answerTokens, continuation, type RecordedHistory, sameAnswer } from "./history.ts";
import { HttpError } from "../limits.ts";

type Json = Record<string, unknown>;

/** Which episode a request belongs to. */
export interface EpisodeKey {
  episodeId: string;
  groupId: string;
}

/** The status of an episode whose client rewrote its history. */
export const HISTORY_MISMATCH: EpisodeStatus = "history_mismatch";

interface Recording {
  key: EpisodeKey;
  seed: number;
  thinking: boolean;
  history: RecordedHistory;
  trajectory: Trajectory;
  /** Whether the last turn ended with its end-of-turn token. */
  lastStopped: boolean;
  toolCalls: ToolCallRecord[];
  adapter: string;
  /** The reward the client sent when it ended the episode (null: none). */
  reward: number | null;
  /** Why recording stopped (null: still in step with the client). */
  mismatch: string | null;
  /** Whether the episode filled max_model_len (a further turn was refused). */
  full: boolean;
}

/** What the recorder needs from the server. */
export interface RecorderOptions {
  /** Where `rollouts.arrow` is written; null: nowhere (the rollout stage's agent environment reads `episodes()`). */
  dir: string | null;
  tokenizer: ChatTokenizer;
  model: string;
  configHash: string;
  maxModelLen: number;
  /** The sampling of every recorded turn (the rollout's, in the agent environment); absent: the request's. */
  sampling?: RecordedSampling;
}

/**
 * Sampling a recorded turn must use, in request parameters: `temperature`, `top_p` and `top_k` fill a
 * request that leaves them out and refuse one that sets another value (the trainer scores the tokens at the
 * rollout's temperature); `max_tokens` caps a turn whose request names no limit, and
 * `chat_template_kwargs.enable_thinking` fills one that leaves it out.
 */
export interface RecordedSampling {
  temperature: number;
  top_p: number;
  top_k: number;
  max_tokens: number;
  enable_thinking: boolean;
}

/** The prompt of the next turn of an episode, and whether its turn is recorded. */
export interface TurnPlan {
  prompt: number[];
  recorded: boolean;
}

export class Recorder {
  readonly #o: RecorderOptions;
  readonly #open = new Map<string, Recording>();
  readonly #ended: Recording[] = [];

  constructor(options: RecorderOptions) {
    this.#o = options;
  }

  /** The path of the rollouts file (null: none is written). */
  get path(): string | null {
    return this.#o.dir === null ? null : join(this.#o.dir, "rollouts.arrow");
  }

  /** The sampling every recorded turn uses, if the recorder imposes one. */
  get sampling(): RecordedSampling | undefined {
    return this.#o.sampling;
  }

  /** The episodes ended so far, in the order they ended, as the file holds them. */
  episodes(): Episode[] {
    return this.#episodes(this.#ended);
  }

  /**
   * The prompt tokens of a request of episode `key`: the recorded tokens plus the client's new messages,
   * or `rendered` (the request's own render) for a new episode or one whose history no longer matches.
   */
  plan(
    key: EpisodeKey,
    messages: ChatMessage[],
    rendered: number[],
    o: { seed: number; thinking: boolean },
  ): TurnPlan {
    if (this.#ended.some((r) => r.key.episodeId === key.episodeId)) {
      throw new HttpError(409, `episode ${key.episodeId} has ended; use a new x-episode-id`, "Conflict");
    }
    const rec = this.#open.get(key.episodeId);
    if (!rec) {
      const trajectory = new Trajectory(rendered, messages);
      const history = { promptMessages: messages, turns: [] };
      this.#open.set(key.episodeId, {
        key,
        seed: o.seed,
        thinking: o.thinking,
        history,
        trajectory,
        lastStopped: true,
        toolCalls: [],
        adapter: "",
        reward: null,
        mismatch: null,
        full: false,
      });
      return { prompt: rendered, recorded: true };
    }
    if (rec.mismatch !== null) return { prompt: rendered, recorded: false };
    const next = this.#continue(rec, messages, o.thinking);
    if (typeof next === "string") {
      rec.mismatch = next;
      return { prompt: rendered, recorded: false };
    }
    return { prompt: next, recorded: true };
  }

  /** Records a sampled turn (its tokens end with the end-of-turn token when it stopped). */
  addTurn(
    key: EpisodeKey,
    tokens: number[],
    logprobs: number[],
    stopped: boolean,
    reply: Json,
    adapter: string,
  ) {
    const rec = this.#open.get(key.episodeId)!;
    const turn = rec.history.turns.length + 1;
    const text = this.#o.tokenizer.decode(stopped ? tokens.slice(0, -1) : tokens);
    rec.trajectory.addTurn(turn, tokens, logprobs);
    rec.trajectory.addAssistantMessage(text, wellFormedCalls(text));
    rec.history.turns.push({ reply, answer: [] });
    rec.lastStopped = stopped;
    rec.adapter = adapter;
  }

  /** Whether open episode `id` filled max_model_len (its last request was refused for it). */
  isFull(id: string): boolean {
    return this.#open.get(id)?.full ?? false;
  }

  /**
   * Notes that a request of open episode `id` did not fit max_model_len (the server refused it before
   * asking the recorder); false when no such episode is open (a new one: nothing recorded to truncate).
   */
  markFull(id: string): boolean {
    const rec = this.#open.get(id);
    if (rec) rec.full = true;
    return rec !== undefined;
  }

  /** Ends episode `id` (404 when unknown) and rewrites the file; returns its row's summary. */
  async end(id: string, reward: number | null): Promise<Json> {
    const rec = this.#open.get(id);
    if (!rec) throw new HttpError(404, `no open episode ${id}`, "NotFoundError");
    rec.reward = reward;
    // The episode counts as ended once the file holding it is written (a failed write leaves it open).
    if (this.path !== null) await writeTable(this.path, "rollouts", this.#table([...this.#ended, rec]));
    this.#open.delete(id);
    this.#ended.push(rec);
    const status = rec.mismatch === null ? "ok" : HISTORY_MISMATCH;
    return { episode_id: id, status, reason: rec.mismatch, turns: rec.history.turns.length, path: this.path };
  }

  #continue(rec: Recording, messages: ChatMessage[], thinking: boolean): number[] | string {
    if (thinking !== rec.thinking) return "enable_thinking changed";
    const c = continuation(rec.history, messages);
    if (!c.ok) return c.why;
    const turn = rec.history.turns.length;
    // A retry of a turn whose sampling failed after its answer was appended: the same answer, no new tokens.
    const pending = turn === 0 ? [] : rec.history.turns[turn - 1].answer;
    if (c.answer.length === 0 || pending.length > 0) {
      return sameAnswer(pending, c.answer)
        ? [...rec.trajectory.tokens]
        : `the answer to turn ${turn} changed`;
    }
    const appended = answerTokens(this.#o.tokenizer, c.answer, thinking, !rec.lastStopped);
    if (typeof appended === "string") return appended;
    if (rec.trajectory.length + appended.length + 1 > this.#o.maxModelLen) {
      rec.full = true;
      throw new HttpError(
        400,
        `episode ${rec.key.episodeId} is full: its ${rec.trajectory.length} tokens and the ` +
          `${appended.length} of the new messages leave no room to sample within max_model_len ` +
          `${this.#o.maxModelLen}; end the episode (it is recorded as truncated)`,
      );
    }
    rec.history.turns[turn - 1].answer = c.answer;
    rec.trajectory.addEnvironment(turn, appended, c.answer);
    rec.toolCalls.push(...answeredCalls(rec.history.turns[turn - 1].reply, c.answer, turn));
    return [...rec.trajectory.tokens];
  }

  #episodes(ended: readonly Recording[]): Episode[] {
    const groups = [...new Set(ended.map((r) => r.key.groupId))];
    return ended.map((rec, i): Episode => {
      const group = groups.indexOf(rec.key.groupId);
      const sampleIdx = ended.slice(0, i).filter((r) => r.key.groupId === rec.key.groupId).length;
      const status = rec.mismatch === null ? "ok" : HISTORY_MISMATCH;
      const finish = rec.full ? "truncated" : rec.lastStopped ? "stop" : "length";
      const result = rec.trajectory.finish(finish, rec.toolCalls, status);
      const prompt = [...rec.history.promptMessages].reverse().find((m) => m.role === "user")?.content ?? "";
      return {
        ...result,
        episodeId: rec.key.episodeId,
        taskId: rec.key.groupId,
        groupId: group,
        sampleIdx,
        task: {
          id: rec.key.groupId,
          source: "generic",
          prompt,
          meta: { gateway: { reward: rec.reward, mismatch: rec.mismatch } },
        },
        seed: rec.seed,
        policyVersion: rec.adapter,
      };
    });
  }

  #table(ended: readonly Recording[]) {
    const episodes = this.#episodes(ended);
    const tok = this.#o.tokenizer;
    const adapters = [...new Set(episodes.map((e) => e.policyVersion))];
    const metadata: MetadataInput = {
      config_hash: this.#o.configHash,
      model: this.#o.model,
      adapter: adapters.length === 1 ? adapters[0] : adapters.join(","),
      tokenizer_hash: tok.info.tokenizerSha256,
      chat_template_hash: tok.info.chatTemplateSha256,
      sampling: { source: "gateway" },
      seed: episodes[0]?.seed ?? 0,
    };
    return buildTable("(rollouts)", "rollouts", rolloutColumns(episodes), metadata);
  }
}

/** A turn's well-formed calls as chat-message tool calls (as the rollout's tool environment writes them). */
function wellFormedCalls(text: string): ToolCall[] {
  return parseToolCalls(text).flatMap((c) =>
    c.ok ? [{ type: "function" as const, function: { name: c.name, arguments: { ...c.arguments } } }] : []
  );
}

/**
 * The calls of a reply the client answered with tool messages. The gateway ran none of them: a call
 * answered is `ok` and its output is what the client sent (the client's own failures are in it).
 */
function answeredCalls(reply: Json, answer: readonly { role: string; content: string }[], turn: number) {
  const calls = (reply.tool_calls as Json[] | undefined) ?? [];
  const results = answer.filter((m) => m.role === "tool");
  return calls.slice(0, results.length).map((c, i): ToolCallRecord => {
    const f = c.function as { name: string; arguments: string };
    return { turn, name: f.name, arguments: f.arguments, status: "ok", output: results[i].content, ms: 0 };
  });
}
