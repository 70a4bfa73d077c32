/**
 * `Session`: one per run. It holds what is expensive to open — the task split, the tools, the tokenizer,
 * the policy (the inference engine in its Worker, or the servers) and the trainer with its train graph —
 * and every stage function, loop step, evaluation and warm start borrows them. Each part opens on first
 * use, so `deno task score` opens no model and `deno task rollout` builds no train graph; the loop
 * opens everything once and reuses it for every step.
 *
 * The tools may hold MCP servers (`rollout.tools.mcp`); `close` stops them.
 *
 * The engine and the trainer (onnxruntime) are imported when first opened, so a command that opens
 * neither (score, mask) runs without the native library and its permissions.
 *
 * The adapter: the policy and the trainer start from `options.adapter` (default `model.adapter`). A
 * train step changes the trainer's adapter in memory; `useAdapter(dir)` then points the policy at the
 * checkpoint that step wrote, so the next rollout samples with it (the loop does this every step).
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { loadTasks, type Task } from "../data/mod.ts";
import type { Policy } from "../engine/policy.ts";
import { policyOptionsOf } from "../engine/policy_options.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { ModelDir } from "../model/model_dir.ts";
import type { SharedWeights } from "../model/shared_weights.ts";
import { loadTokenizer } from "../model/tokenizer.ts";
import { type Progress, progress as stderrProgress } from "../progress.ts";
import { splitHeldOut } from "../rollout/tasks.ts";
import { loadTools, ToolSet } from "../tools/registry.ts";
import type { Tool } from "../tools/types.ts";
import type { TrainSession } from "../train/train_session.ts";
import { algorithmOf } from "../train/algorithm.ts";

export interface SessionOptions {
  /** The adapter the policy and the trainer start from (default `model.adapter`; the loop's resume). */
  adapter?: string | null;
  /** Where progress lines go (default stderr). */
  progress?: Progress;
  /** Print per-stage progress bars (default true). */
  showProgress?: boolean;
  /** Parts already open, used instead of opening them from the config (notebooks, test doubles). */
  open?: { policy?: Policy; tokenizer?: ChatTokenizer; tools?: ReadonlyMap<string, Tool> };
  /**
   * Where the judge reward caches its answers when `score.judge.cache_dir` is null: beside the command's
   * output (`judge-cache/`), the loop's run directory for the loop. Without it (and without
   * `score.judge.cache_dir`) the judge reward refuses to run, since nothing else names where it may write.
   */
  judgeCacheDir?: string;
}

/** The data set, split as every stage splits it: the last `eval.num_tasks` held out. */
export interface TaskSplit {
  train: Task[];
  heldOut: Task[];
}

export class Session {
  readonly config: Config;
  /** sha256 of the resolved configuration, written into every output's metadata. */
  readonly configHash: string;
  readonly progress: Progress;
  readonly showProgress: boolean;
  /** See `SessionOptions.judgeCacheDir`; null when the caller named none. */
  readonly judgeCacheDir: string | null;
  #adapter: string | null;
  #tasks?: Promise<TaskSplit>;
  #tools?: Promise<ReadonlyMap<string, Tool>>;
  /** The tools this session opened itself (not given in `options.open`), closed by `close`. */
  #openedTools?: Promise<ToolSet>;
  #tokenizer?: Promise<ChatTokenizer>;
  #policy?: Promise<Policy>;
  #trainer?: Promise<TrainSession>;
  #weights?: Promise<{ dir: ModelDir; weights: SharedWeights | null }>;

  constructor(config: Config, configHash: string, options: SessionOptions = {}) {
    this.config = config;
    this.configHash = configHash;
    this.progress = options.progress ?? stderrProgress;
    this.showProgress = options.showProgress ?? true;
    this.judgeCacheDir = options.judgeCacheDir ?? null;
    this.#adapter = options.adapter === undefined ? config.model.adapter : options.adapter;
    const given = options.open ?? {};
    if (given.policy) this.#policy = Promise.resolve(given.policy);
    if (given.tokenizer) this.#tokenizer = Promise.resolve(given.tokenizer);
    if (given.tools) this.#tools = Promise.resolve(given.tools);
  }

  /** The adapter the policy samples with (null: the base model). */
  get adapter(): string | null {
    return this.#adapter;
  }

  tasks(): Promise<TaskSplit> {
    return this.#tasks ??= loadTasks(this.config.data).then((all) =>
      splitHeldOut(all, this.config.eval.num_tasks)
    );
  }

  /** The tools of `rollout.tools`, opened once (MCP servers started then, stopped by `close`). */
  tools(): Promise<ReadonlyMap<string, Tool>> {
    if (this.#tools === undefined) {
      const opened = loadTools(this.config.rollout.tools);
      this.#openedTools = opened.catch(() => new ToolSet()); // a failed open has nothing to close
      this.#tools = opened;
    }
    return this.#tools;
  }

  tokenizer(): Promise<ChatTokenizer> {
    return this.#tokenizer ??= loadTokenizer(this.config.model.path);
  }

  /** The policy of `model.backend`, opened once, with the session's current adapter. */
  policy(): Promise<Policy> {
    return this.#policy ??= this.#openPolicy();
  }

  /** The trainer and its train graph, built once, training the session's starting adapter. */
  trainer(): Promise<TrainSession> {
    return this.#trainer ??= this.#openTrainer();
  }

  /** Whether the algorithm has a value head (mask.estimator gae): the rollout then writes `values`. */
  get hasValueHead(): boolean {
    return algorithmOf(this.config).valueLoss !== undefined;
  }

  /** Whether the trainer has been opened (its adapter may then differ from the starting one). */
  get trainerOpen(): boolean {
    return this.#trainer !== undefined;
  }

  /** Points the policy at the adapter checkpoint `dir` (a train step's output) for what it samples next. */
  async useAdapter(dir: string | null): Promise<void> {
    this.#adapter = dir;
    if (this.#policy) await (await this.#policy).setAdapter(dir);
  }

  /**
   * Closes what was opened (the policy, the trainer, the MCP servers the tools started; tools given in
   * `options.open` are the caller's to close); safe to call twice.
   */
  async close(): Promise<void> {
    const [policy, trainer, tools] = [this.#policy, this.#trainer, this.#openedTools];
    this.#policy = this.#trainer = this.#openedTools = undefined;
    await Promise.allSettled([
      policy?.then((p) => p.close()),
      trainer?.then((t) => t.close()),
      tools?.then((t) => t.close()),
    ]);
  }

  async #openPolicy(): Promise<Policy> {
    const { model } = this.config;
    const adapter = this.#adapter;
    this.progress.log(`loading ${model.path}${adapter ? ` + ${adapter}` : ""} (${model.backend})`);
    const { openPolicy } = await import("../engine/open_policy.ts");
    const sharedWeights = model.backend === "local" ? (await this.#sharedWeights()).weights : null;
    return await openPolicy({ ...model, adapter }, {
      ...policyOptionsOf(this.config, adapter),
      sharedWeights,
    });
  }

  async #openTrainer(): Promise<TrainSession> {
    const loading = this.progress.start("train: loading the model and building the train graph");
    const { TrainSession } = await import("../train/train_session.ts");
    const session = await TrainSession.open(this.config, this.#adapter, await this.#sharedWeights());
    loading.done(`${session.model.dir} (${session.model.config.num_hidden_layers} layers)`);
    return session;
  }

  /**
   * The model directory and, with `model.shared_weights` on the cpu provider, its one float32 copy of
   * the weights that the policy and the trainer both compute on (read once, when the first of them opens).
   */
  #sharedWeights(): Promise<{ dir: ModelDir; weights: SharedWeights | null }> {
    return this.#weights ??= (async () => {
      const { model } = this.config;
      const { openModelDir } = await import("../model/model_dir.ts");
      const dir = await openModelDir(model.path);
      if (!model.shared_weights || model.ep !== "cpu") return { dir, weights: null };
      const { loadSharedWeights } = await import("../model/shared_weights.ts");
      return { dir, weights: await loadSharedWeights(dir) };
    })();
  }
}

/** Opens a session for `config` (nothing loads until a stage asks for it). */
export function openSession(config: Config, configHash: string, options: SessionOptions = {}): Session {
  return new Session(config, configHash, options);
}
