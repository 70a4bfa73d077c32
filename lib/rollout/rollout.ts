/**
 * A rollout: `group_size` episodes per task, all started at once as independent async tasks. The policy
 * batches whatever turns are pending (continuous batching), so the number of episodes in flight is
 * bounded by its slots, not by this driver, and an episode waiting on a tool holds up no other.
 *
 * Episode `sample_idx` of task `task_id` at `step` is seeded from (run seed, step, task id, sample index)
 * (seeds.ts), and rows come out in task order, then sample order, whatever order episodes finish in.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { Policy } from "../engine/policy.ts";
import type { EnvironmentFactory } from "./environment.ts";
import { type EpisodeOptions, runEpisode } from "./episode.ts";
import type { EpisodeResult } from "./trajectory.ts";
import { episodeSeed } from "./seeds.ts";

/** One row of rollouts.arrow. */
export interface Episode extends EpisodeResult {
  episodeId: string;
  taskId: string;
  groupId: number;
  sampleIdx: number;
  task: Task;
  seed: number;
  policyVersion: string;
}

export interface RolloutOptions extends EpisodeOptions {
  groupSize: number;
  /** Run seed (`rollout.generation.seed`). */
  seed: number;
  /** Loop step (0 for a single rollout): part of every seed and episode id. */
  step: number;
  /** The group id of each task (default its index): a shard's tasks keep their ids in the whole step. */
  groupIds?: readonly number[];
  /** Called as each episode finishes (progress). */
  onEpisode?: (episode: Episode) => void;
}

/** Samples every episode of `tasks` and returns them in task, then sample, order. */
export async function runRollout(
  policy: Policy,
  tokenizer: ChatTokenizer,
  tasks: readonly Task[],
  makeEnv: EnvironmentFactory,
  o: RolloutOptions,
): Promise<Episode[]> {
  const policyVersion = await policy.adapterId();
  const options = { ...o, promptCache: o.promptCache ?? new Map<string, number[]>() };
  const jobs = tasks.flatMap((task, index) =>
    Array.from({ length: o.groupSize }, async (_, sampleIdx): Promise<Episode> => {
      const seed = episodeSeed(o.seed, o.step, task.id, sampleIdx);
      const env = makeEnv(task);
      const result = await runEpisode(policy, tokenizer, env, seed, options);
      const episode: Episode = {
        ...result,
        episodeId: `s${o.step}/${task.id}/${sampleIdx}`,
        taskId: task.id,
        groupId: o.groupIds?.[index] ?? index,
        sampleIdx,
        task,
        seed,
        policyVersion,
      };
      o.onEpisode?.(episode);
      return episode;
    })
  );
  return await Promise.all(jobs);
}
