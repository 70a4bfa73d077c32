/**
 * Schema of `score.judge`: the `judge` reward, a language model behind an OpenAI-compatible API that grades
 * each episode against a rubric (docs/rewards.md "Judge"). See schema.ts.
 */
import { bool, choice, float, int, str } from "../fields.ts";

export const JUDGE_MODES = ["pointwise", "group"] as const;
/** What the judge is shown of an episode. */
export const JUDGE_VIEWS = ["answer", "trajectory"] as const;

export const judge = {
  url: str({
    default: null,
    nullable: true,
    doc: "base URL of the judge's OpenAI-compatible server (http://host:port or https://host/v1); " +
      "null = none (required when judge is in score.rewards)",
  }),
  model: str({
    default: null,
    nullable: true,
    doc: "model name sent with every judge request (as /v1/models lists it); required with the judge reward",
  }),
  api_key_env: str({
    default: null,
    nullable: true,
    doc: "NAME of the environment variable holding the judge's API key (never the key itself); null = no key",
  }),
  rubric: str({
    default: "Score how well the response solves the task: 10 = correct, complete and clear; " +
      "5 = partly correct; 0 = wrong, empty or off-topic.",
    doc: "what the judge grades against (YAML block text for several lines)",
  }),
  mode: choice({
    choices: JUDGE_MODES,
    default: "pointwise",
    doc: "pointwise (one request per episode) | group (one request per group, episodes scored " +
      "against each other)",
  }),
  sees: choice({
    choices: JUDGE_VIEWS,
    default: "answer",
    doc: "what the judge is shown of an episode: answer (the final answer, reasoning removed) | " +
      "trajectory (every turn after the prompt, tool calls and results included)",
  }),
  show_reference: bool({
    default: true,
    doc: "show the task's reference answer (task.answer) to the judge when the task has one",
  }),
  max_chars: int({
    default: 4000,
    min: 100,
    max: 1_000_000,
    doc: "longest text of the task prompt and of each episode shown to the judge; longer ones keep " +
      "their start and end",
  }),
  max_score: int({
    default: 10,
    min: 1,
    max: 1000,
    doc: "the judge grades from 0 to max_score; the reward is grade / max_score, in [0, 1]",
  }),
  seed: int({
    default: 0,
    min: 0,
    doc: "group mode: seed of the order the group's episodes are listed in (shuffled per group)",
  }),
  temperature: float({ default: 0, min: 0, max: 2, doc: "sampling temperature of the judge" }),
  max_tokens: int({ default: 512, min: 1, max: 1_000_000, doc: "longest answer of the judge, in tokens" }),
  concurrency: int({ default: 4, min: 1, max: 256, doc: "judge requests in flight at once" }),
  retries: int({
    default: 3,
    min: 0,
    max: 100,
    doc: "retries of a judge request that failed on the network, timed out, or got 429 / 5xx",
  }),
  backoff_s: float({ default: 1, min: 0, doc: "wait before the first retry; doubled at each further retry" }),
  timeout_s: float({
    default: 120,
    min: 0,
    minOpen: true,
    doc: "longest wait for one judge request before it is retried",
  }),
  cache_dir: str({
    default: null,
    nullable: true,
    doc: "directory of cached judge answers; null = judge-cache/ beside the command's output " +
      "(the loop: inside loop.run_dir)",
  }),
};
