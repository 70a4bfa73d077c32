/** Schema of the `rollout` section: generation, tools, environment (see schema.ts). */
import { bool, choice, float, int, listOf, str, subset } from "../fields.ts";
import { mcp } from "./mcp.ts";
import { MAX_CONTEXT } from "./run.ts";

export const TOOL_NAMES = ["calculator", "execute_code", "read_file"] as const;
export const SANDBOXES = ["bwrap", "none"] as const;

const generation = {
  max_new_tokens: int({
    default: 256,
    min: 1,
    max: MAX_CONTEXT,
    doc: "tokens the policy may sample in one assistant turn",
  }),
  max_total_tokens: int({
    default: 1024,
    min: 16,
    max: MAX_CONTEXT,
    doc: "cap on a whole episode (prompt, all turns, tool results); reaching it truncates",
  }),
  temperature: float({
    default: 1.0,
    min: 0,
    minOpen: true,
    max: 10,
    doc: "sampling temperature; log-probs are computed at the same temperature",
  }),
  top_k: int({ default: 0, min: 0, doc: "sample from the k most likely tokens; 0 = off" }),
  top_p: float({ default: 1.0, min: 0, minOpen: true, max: 1, doc: "nucleus sampling mass; 1 = off" }),
  enable_thinking: bool({
    default: true,
    doc: "let Qwen3 think in <think>...</think> (passed to the chat template)",
  }),
  seed: int({
    default: 0,
    min: 0,
    doc: "run seed; per-sample seeds derive from it, the step, the task and the sample index",
  }),
  guided_tool_calls: bool({
    default: false,
    doc: "inside a <tool_call>, sample only tokens that keep the call well formed for an offered tool " +
      "(a grammar over the Hermes format and the tools' parameter types; local engine only; docs/tool_calls.md)",
  }),
};

const tools = {
  enabled: subset({
    choices: TOOL_NAMES,
    default: ["calculator"],
    doc: "tools offered to the model (rendered into the prompt by the chat template)",
  }),
  modules: listOf<string>({
    item: { kind: "string" },
    default: [],
    doc: "TypeScript modules exporting user tools (`tools: Tool[]`), offered beside the enabled built-ins",
  }),
  mcp,
  max_calls_per_episode: int({
    default: 16,
    min: 1,
    max: 10000,
    doc: "tool calls executed per episode; reaching it ends the episode (finish_reason tool_budget)",
  }),
  max_calls_per_turn: int({
    default: 4,
    min: 1,
    max: 64,
    doc: "tool calls executed per assistant turn; extra calls get an error result",
  }),
  timeout_s: float({
    default: 5,
    min: 0,
    minOpen: true,
    max: 3600,
    doc: "wall-clock limit for one tool call, in seconds",
  }),
  max_output_chars: int({
    default: 2000,
    min: 1,
    doc: "tool output longer than this is cut and marked as truncated",
  }),
  max_concurrency: int({
    default: 4,
    min: 1,
    max: 256,
    doc: "tool calls running at once across all episodes; more wait their turn",
  }),
  read_file_root: str({
    default: null,
    nullable: true,
    doc: "directory read_file may read below (a task's meta.files_dir under it, or meta.files in memory)",
  }),
  sandbox: choice({
    choices: SANDBOXES,
    default: "bwrap",
    doc: "isolation for execute_code and the code_exec reward (bwrap = bubblewrap)",
  }),
  unsafe_no_sandbox: bool({
    default: false,
    doc: "must be true to run model-written code with sandbox none (it runs as you)",
  }),
  calculator: {
    max_operations: int({
      default: null,
      nullable: true,
      min: 1,
      max: 1000,
      doc: "binary operations (+ - * / ^) one calculator call may hold; more get a tool_error; null = any",
    }),
  },
};

export const ENVIRONMENTS = ["tools", "scripted", "module", "agent"] as const;

const environment = {
  kind: choice({
    choices: ENVIRONMENTS,
    default: "tools",
    doc:
      "tools (run tool calls, feed results back) | scripted (next user message per step from the task) | " +
      "module (yours) | agent (your agent's run(task, client) through a gateway)",
  }),
  module: str({
    default: null,
    nullable: true,
    doc: "TypeScript module exporting an environment (kind: module; see examples/custom_environment.ts) " +
      "or run(task, client) (kind: agent; see examples/agents/openai_agent.ts)",
  }),
  command: listOf<string>({
    item: { kind: "string" },
    default: [],
    doc: "an agent in any language, as a command line (kind: agent, instead of module): one process per " +
      "episode, the gateway in OPENAI_BASE_URL / OPENAI_API_KEY, the task as JSON on stdin (docs/agents.md)",
  }),
  max_turns: int({ default: 4, min: 1, max: 50, doc: "assistant turns (steps) per episode at most" }),
  stop_on_final_answer: bool({
    default: true,
    doc: "end the episode at the first assistant turn without a tool call; false = continue until max_turns",
  }),
  continue_prompt: str({
    default: "Continue.",
    doc: "user message appended after a turn without a tool call when stop_on_final_answer is false",
  }),
};

export const rollout = {
  group_size: int({
    default: 8,
    min: 1,
    max: 1024,
    doc: "episodes sampled per task (the group GRPO compares)",
  }),
  max_batch: int({
    default: 32,
    min: 1,
    max: 1024,
    doc: "sequences the engine decodes together (continuous batching slots; KV memory grows with it)",
  }),
  tasks_per_step: int({
    default: 4,
    min: 1,
    doc: "tasks per step; a step samples tasks_per_step x group_size episodes",
  }),
  generation,
  tools,
  environment,
};
