/**
 * `judge`: a language model behind an OpenAI-compatible API grades each episode against `score.judge.rubric`
 * (docs/rewards.md "Judge").
 *
 * - `pointwise`: one request per episode; reward = grade / max_score.
 * - `group` (relative grading, as RULER does): one request per group listing its episodes in a shuffled
 *   order; each gets grade / max_score.
 *
 * Statuses: `judged`, or `judge_unparseable` (reward 0) when the answer does not hold the grade in the
 * fixed format (parse.ts) — for a group, every episode of it. Requests run `concurrency` at a time, each
 * retried on network faults, timeouts, 429 and 5xx; answers are cached by content (cache.ts), so a rerun
 * with the same inputs sends nothing. A judge that cannot be reached, or refuses a request, stops the stage
 * with one line (JudgeError): the other requests in flight are cancelled and no scored file is written.
 *
 * @module
 */

import { checkJudgeEndpoint } from "../../config/cross.ts";
import type { JudgeConfig } from "../../config/schema.ts";
import { UserError } from "../../errors.ts";
import type { Episode, JudgeContext, RewardContext, RewardFn, RewardResult } from "../types.ts";
import { type CachedAnswer, checkJudgeCacheDir, JudgeCache, judgeCacheKey } from "./cache.ts";
import { judgeApiKey, JudgeClient } from "./client.ts";
import { parseGroup, parsePointwise } from "./parse.ts";
import { groupRequests, type JudgeRequest, pointwiseRequests } from "./prompt.ts";

/** The cache directory: `score.judge.cache_dir`, else the caller's default (beside its output). */
export function judgeCacheDir(jc: JudgeContext): string {
  const dir = jc.config.cache_dir ?? jc.defaultCacheDir;
  if (dir === null) {
    throw new UserError("config key score.judge.cache_dir", {
      value: null,
      why: "the judge caches its answers, and this caller names no output to keep them beside",
      fix: "set score.judge.cache_dir to a directory for the judge's answers",
    });
  }
  return dir;
}

/**
 * Everything about the judge that can be wrong before any work: the endpoint keys, the API key in the
 * environment, the cache directory (checked against the output policy, not created). A command calls it
 * among its argument checks; the reward calls it again when it starts.
 */
export async function checkJudge(
  score: { rewards: Record<string, number | undefined>; judge: JudgeConfig },
  jc: Omit<JudgeContext, "config" | "log">,
): Promise<void> {
  if (score.rewards.judge === undefined) return;
  checkJudgeEndpoint(score);
  judgeApiKey(score.judge);
  await checkJudgeCacheDir(judgeCacheDir({ ...jc, config: score.judge }), jc.inputs);
}

/** Grades every episode (row order); see the module comment. */
export async function judgeEpisodes(episodes: Episode[], ctx: RewardContext): Promise<RewardResult[]> {
  const jc = ctx.judge;
  if (!jc) throw new Error("the judge reward ran without ctx.judge (a bug in the score stage)");
  if (episodes.length === 0) return [];
  const c = jc.config;
  checkJudgeEndpoint({ rewards: { judge: 1 }, judge: c });
  const client = new JudgeClient(c, judgeApiKey(c));
  const cache = await JudgeCache.open(judgeCacheDir(jc), jc.inputs);
  const requests = c.mode === "pointwise"
    ? await pointwiseRequests(episodes, c)
    : await groupRequests(episodes, c);
  const { answers, fromCache, distinct } = await answerAll(requests, c, cache, client);
  const results = resultsOf(requests, answers, episodes.length, c);
  const unparseable = results.filter((r) => r.status === "judge_unparseable").length;
  const same = requests.length - distinct;
  jc.log?.(
    `judge: ${requests.length} ${c.mode} requests${same ? ` (${same} the same as another)` : ""}, ` +
      `${fromCache} answered from ${cache.dir}, ` +
      `${client.requests} sent to ${client.url}; ${results.length - unparseable} episodes judged, ` +
      `${unparseable} judge_unparseable`,
  );
  return results;
}

/** The grades of one answer to `request` (null: unparseable). */
function gradesOf(answer: string, request: JudgeRequest, c: JudgeConfig): number[] | null {
  if (c.mode === "pointwise") {
    const grade = parsePointwise(answer, c.max_score);
    return grade === null ? null : [grade];
  }
  return parseGroup(answer, request.episodes.length, c.max_score);
}

/**
 * Every request's answer: from the cache, else from the judge (then cached), `concurrency` at a time.
 * Identical requests (the same key: episodes of a group that answered alike) are sent once.
 */
async function answerAll(
  requests: JudgeRequest[],
  c: JudgeConfig,
  cache: JudgeCache,
  client: JudgeClient,
): Promise<{ answers: string[]; fromCache: number; distinct: number }> {
  const keys = await Promise.all(requests.map((r) => judgeCacheKey(c, r.messages)));
  const cached = await Promise.all(keys.map((key) => cache.get(key)));
  const byKey = new Map<string, string>();
  cached.forEach((entry, i) => entry && byKey.set(keys[i], entry.answer));
  const fromCache = byKey.size;
  const missing = [...new Set(keys.filter((key) => !byKey.has(key)))];
  await inParallel(missing, c.concurrency, async (key, signal) => {
    const request = requests[keys.indexOf(key)];
    const answer = await client.answer(request.messages, signal);
    const entry: CachedAnswer = { key, model: c.model ?? "", answer, grades: gradesOf(answer, request, c) };
    await cache.put(entry);
    byKey.set(key, answer);
  });
  return { answers: keys.map((key) => byKey.get(key)!), fromCache, distinct: byKey.size };
}

/**
 * Runs `work` on every item, at most `limit` at once. The first failure aborts the signal handed to the
 * others, waits for them to stop, and is thrown; no new item starts after it.
 */
async function inParallel<T>(
  items: T[],
  limit: number,
  work: (item: T, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const controller = new AbortController();
  let next = 0;
  let failure: { error: unknown } | null = null;
  const worker = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++];
      try {
        await work(item, controller.signal);
      } catch (error) {
        failure ??= { error };
        controller.abort();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== null) throw (failure as { error: unknown }).error;
}

/** Per-episode results in row order: grade / max_score, or 0 with `judge_unparseable`. */
function resultsOf(requests: JudgeRequest[], answers: string[], n: number, c: JudgeConfig): RewardResult[] {
  const results = new Array<RewardResult>(n);
  requests.forEach((request, r) => {
    const grades = gradesOf(answers[r], request, c);
    request.episodes.forEach((row, k) => {
      results[row] = grades === null
        ? { value: 0, status: "judge_unparseable" }
        : { value: grades[k] / c.max_score, status: "judged" };
    });
  });
  return results;
}

export const judge: RewardFn = {
  name: "judge",
  doc: "a language model's grade of the episode against score.judge.rubric, scaled to [0, 1]",
  score: async (episode, ctx) => (await judgeEpisodes([episode], ctx))[0],
  scoreAll: judgeEpisodes,
};
