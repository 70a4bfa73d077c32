/**
 * Rules that involve more than one key. Each rule is a small function that throws a one-line
 * `UserError` naming the key to change; all run in `validateConfig`, before any model loads. The rules of
 * an algorithm come from its records (lib/advantages/registry.ts, lib/losses/registry.ts): what an
 * estimator needs and the rules each record declares; none here names an algorithm.
 */
import { UserError } from "../errors.ts";
import { type Config, ESTIMATORS, OBJECTIVES, WEBGPU_DEFAULTS, WEBGPU_OPTION_NAMES } from "./schema.ts";
import { pickEstimator } from "../advantages/registry.ts";
import { policyLossNamed } from "../losses/registry.ts";
import { checkMcpServers } from "./sections/mcp.ts";

type Rule = (config: Config) => void;

/** An estimator that compares the episodes of one task (its record's `needs.groups`) needs two of them. */
const groupSize: Rule = ({ rollout, mask }) => {
  if (pickEstimator(mask.estimator).needs.groups && rollout.group_size < 2) {
    const alone = ESTIMATORS.filter((name) => !pickEstimator(name).needs.groups);
    throw new UserError("config key rollout.group_size", {
      value: rollout.group_size,
      why: `mask.estimator ${mask.estimator} compares episodes within a group, so it needs at least 2`,
      fix: `set rollout.group_size to 2 or more (8 is typical), or mask.estimator to ${alone.join(" or ")}`,
    });
  }
};

/** Dynamic sampling keeps groups whose episodes differ, so a group needs two episodes to ever be kept. */
const filterGroupsSize: Rule = ({ rollout, loop }) => {
  if (!loop.filter_groups.enable || rollout.group_size >= 2) return;
  throw new UserError("config key rollout.group_size", {
    value: rollout.group_size,
    why: "loop.filter_groups.enable keeps only groups whose episodes differ, and a group of one never does",
    fix: "set rollout.group_size to 2 or more (8 is typical), or loop.filter_groups.enable to false",
  });
};

/**
 * The heads an estimator needs (PPO's value head: gae) train beside the policy loss, so the loss must take
 * them (its record's `takesHeads`).
 */
const headsTrain: Rule = ({ mask, train }) => {
  const heads = pickEstimator(mask.estimator).needs.heads ?? [];
  if (heads.length === 0 || policyLossNamed(train.loss.objective).takesHeads) return;
  const taking = OBJECTIVES.filter((name) => policyLossNamed(name).takesHeads);
  throw new UserError("config key train.loss.objective", {
    value: train.loss.objective,
    why:
      `mask.estimator ${mask.estimator} trains a ${heads.join(" and ")} head beside the policy loss, and ` +
      `${train.loss.objective} trains none`,
    fix: `set train.loss.objective to ${taking.join(" or ")}, or mask.estimator to another estimator`,
  });
};

/** The rules the estimator's and the loss's records declare (lib/algorithm_rules.ts). */
const algorithmRules: Rule = (config) => {
  const rules = [
    ...(pickEstimator(config.mask.estimator).rules ?? []),
    ...(policyLossNamed(config.train.loss.objective).rules ?? []),
  ];
  for (const rule of rules) rule(config);
};

/** The overlong reward's soft zone lies inside its limit, and the limit is one an episode can reach. */
const overlongLengths: Rule = ({ score, rollout }) => {
  if (score.rewards.overlong === undefined) return;
  const { max_tokens, cache_tokens } = score.overlong;
  if (cache_tokens >= max_tokens) {
    throw new UserError("config key score.overlong.cache_tokens", {
      value: cache_tokens,
      why: `it must be below score.overlong.max_tokens (${max_tokens}): the soft zone ends there`,
      fix: "lower score.overlong.cache_tokens or raise score.overlong.max_tokens",
    });
  }
  const budget = rollout.generation.max_total_tokens;
  if (max_tokens > budget) {
    throw new UserError("config key score.overlong.max_tokens", {
      value: max_tokens,
      why: `above rollout.generation.max_total_tokens (${budget}): no episode can sample that many tokens`,
      fix: `set score.overlong.max_tokens to ${budget} or less`,
    });
  }
};

/** One turn cannot sample more tokens than the whole episode may hold. */
const turnFitsContext: Rule = ({ rollout: { generation } }) => {
  if (generation.max_new_tokens > generation.max_total_tokens) {
    throw new UserError("config key rollout.generation.max_new_tokens", {
      value: generation.max_new_tokens,
      why: `above rollout.generation.max_total_tokens (${generation.max_total_tokens})`,
      fix: "lower rollout.generation.max_new_tokens or raise rollout.generation.max_total_tokens",
    });
  }
};

/** Guided tool calls mask the engine's logits each step: inference servers are not sent constraints. */
const guidedCallsLocal: Rule = ({ rollout: { generation }, model }) => {
  if (generation.guided_tool_calls && model.backend !== "local") {
    throw new UserError("config key rollout.generation.guided_tool_calls", {
      value: true,
      why:
        `model.backend ${model.backend} samples on inference servers, which this toolkit sends no constraints`,
      fix: "set rollout.generation.guided_tool_calls to false, or model.backend to local",
    });
  }
};

/** Model-written code runs unsandboxed only when the user says so explicitly. */
const sandboxOptIn: Rule = ({ rollout: { tools }, score }) => {
  const runsCode = tools.enabled.includes("execute_code") || score.rewards.code_exec !== undefined;
  if (tools.sandbox === "none" && runsCode && !tools.unsafe_no_sandbox) {
    throw new UserError("config key rollout.tools.sandbox", {
      value: "none",
      why:
        "model-written code (execute_code or the code_exec reward) would run unsandboxed with your permissions",
      fix:
        "set rollout.tools.sandbox to bwrap, or set rollout.tools.unsafe_no_sandbox to true to accept the risk",
    });
  }
};

/** read_file needs a directory to confine it to. */
const readFileRoot: Rule = ({ rollout: { tools } }) => {
  if (tools.enabled.includes("read_file") && tools.read_file_root === null) {
    throw new UserError("config key rollout.tools.read_file_root", {
      value: null,
      why: "read_file is enabled but has no directory to read from",
      fix: "set rollout.tools.read_file_root to a directory, or remove read_file from rollout.tools.enabled",
    });
  }
};

/** float16 compute is for GPU providers: onnxruntime's CPU kernels would cast it back, with no gain. */
const computeDtype: Rule = ({ model }) => {
  if (model.compute_dtype === "float16" && model.ep === "cpu") {
    throw new UserError("config key model.compute_dtype", {
      value: "float16",
      why: "float16 compute needs a GPU provider (on cpu onnxruntime casts it back to float32, slower)",
      fix: "set model.ep to webgpu or cuda, or model.compute_dtype to float32",
    });
  }
};

/**
 * WebGPU's options with another provider are refused, not ignored: onnxruntime takes provider options only
 * with their provider (`SessionOptionsAppendExecutionProvider("WebGPU", keys, values)`, onnxruntime-node's
 * `{ name: "webgpu", ... }`), so on cpu or cuda they would do nothing, and a value changed from its default
 * there is most likely a forgotten `--model.ep=webgpu`. Keys left at their defaults pass on any provider.
 */
const webgpuOptions: Rule = ({ model }) => {
  if (model.ep === "webgpu") return captureNeedsDecodeGraph(model.webgpu);
  if (model.webgpu.graph_capture) {
    throw new UserError("config key model.webgpu.graph_capture", {
      value: true,
      why: `graph capture is onnxruntime's WebGPU provider's, and model.ep is ${model.ep}`,
      fix: "set model.ep to webgpu, or model.webgpu.graph_capture back to false",
    });
  }
  if (!model.webgpu.decode_graph) {
    throw new UserError("config key model.webgpu.decode_graph", {
      value: false,
      why: `only the WebGPU engine opens a decode session by this key, and model.ep is ${model.ep}`,
      fix: "set model.ep to webgpu, or model.webgpu.decode_graph back to true",
    });
  }
  if (!model.webgpu.forward_session) {
    throw new UserError("config key model.webgpu.forward_session", {
      value: false,
      why: `only the WebGPU trainer opens a forward-alone session by this key, and model.ep is ${model.ep}`,
      fix: "set model.ep to webgpu, or model.webgpu.forward_session back to true",
    });
  }
  for (const [key, option] of Object.entries(WEBGPU_OPTION_NAMES)) {
    const value = model.webgpu[key as keyof typeof WEBGPU_OPTION_NAMES];
    if (value === WEBGPU_DEFAULTS[option]) continue;
    throw new UserError(`config key model.webgpu.${key}`, {
      value,
      why:
        `it is an option of onnxruntime's WebGPU provider, and model.ep is ${model.ep}, which would ignore it`,
      fix: `set model.ep to webgpu, or model.webgpu.${key} back to ${WEBGPU_DEFAULTS[option]}`,
    });
  }
};

/** Graph capture records the decode session's steps, so it needs that session. */
function captureNeedsDecodeGraph(webgpu: Config["model"]["webgpu"]): void {
  if (webgpu.graph_capture && !webgpu.decode_graph) {
    throw new UserError("config key model.webgpu.graph_capture", {
      value: true,
      why: "it captures the decode session's steps, and model.webgpu.decode_graph is false",
      fix: "set model.webgpu.decode_graph to true, or model.webgpu.graph_capture to false",
    });
  }
}

/** Every source but the generator reads a file; the generator reads none, so a named file would be ignored. */
const dataPath: Rule = ({ data }) => {
  if (data.source === "arithmetic" && data.path !== null) {
    throw new UserError("config key data.path", {
      value: data.path,
      why:
        "data.source is arithmetic, which generates its tasks and reads no file, so the file would be ignored",
      fix:
        `set data.source to the file's kind (--data.source=jsonl, parquet, gsm8k, mbpp) or remove data.path`,
    });
  }
  if (data.source !== "arithmetic" && data.path === null) {
    throw new UserError("config key data.path", {
      value: null,
      why: `data.source ${data.source} reads a file, and none is named`,
      fix: "set data.path to a .jsonl or .parquet file, e.g. --data.path=data/gsm8k_sample.jsonl",
    });
  }
};

/** The generator's operand-count range must not be empty. */
const arithmeticRange: Rule = ({ data: { arithmetic } }) => {
  if (arithmetic.min_operands > arithmetic.max_operands) {
    throw new UserError("config key data.arithmetic.min_operands", {
      value: arithmetic.min_operands,
      why: `above data.arithmetic.max_operands (${arithmetic.max_operands})`,
      fix: "set data.arithmetic.min_operands <= data.arithmetic.max_operands",
    });
  }
};

/**
 * The judge reward needs a server and a model; the key comes from the environment, never the config.
 * Also run by the judge itself, for a configuration that did not come through the loader.
 */
export function checkJudgeEndpoint(score: Pick<Config["score"], "rewards" | "judge">): void {
  if (score.rewards.judge === undefined) return;
  const { url, model, api_key_env } = score.judge;
  const need = (key: string, example: string) =>
    new UserError(`config key score.judge.${key}`, {
      value: null,
      why: "the judge reward is in score.rewards, and it needs one",
      fix: `set score.judge.${key}, e.g. --score.judge.${key}=${example}`,
    });
  if (url === null) throw need("url", "http://127.0.0.1:8000");
  if (model === null) throw need("model", "model (a name the server's /v1/models lists)");
  let protocol = "";
  try {
    protocol = new URL(url).protocol;
  } catch { /* not a URL: refused below */ }
  if (protocol !== "http:" && protocol !== "https:") {
    throw new UserError("config key score.judge.url", {
      value: url,
      why: "it is not an http:// or https:// URL",
      fix: "give the server's base URL, e.g. http://127.0.0.1:8000 or https://api.example.com/v1",
    });
  }
  if (api_key_env !== null && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(api_key_env)) {
    throw new UserError("config key score.judge.api_key_env", {
      value: "(not shown)",
      why: "it is not an environment variable name; the key itself never belongs in the config",
      fix: "put the key in an environment variable (export JUDGE_API_KEY=...) and set " +
        "score.judge.api_key_env to its name (JUDGE_API_KEY)",
    });
  }
}

const judgeEndpoint: Rule = ({ score }) => checkJudgeEndpoint(score);

/** Each MCP server entry: a name of its own, exactly one of command and url, keys that fit its kind. */
const mcpServers: Rule = ({ rollout: { tools } }) => checkMcpServers(tools.mcp);

/** The demo model's attention: query heads share key/value heads evenly; the engine's kernel needs head_dim % 16 = 0. */
const demoHeads: Rule = ({ demo: { model } }) => {
  if (model.heads % model.kv_heads !== 0) {
    throw new UserError("config key demo.model.kv_heads", {
      value: model.kv_heads,
      why: `demo.model.heads (${model.heads}) is not a multiple of it`,
      fix: "set demo.model.kv_heads to a divisor of demo.model.heads (e.g. heads / 2)",
    });
  }
  if (model.head_dim % 16 !== 0) {
    throw new UserError("config key demo.model.head_dim", {
      value: model.head_dim,
      why: "onnxruntime's GroupQueryAttention, which the engine runs, needs a multiple of 16",
      fix: "set demo.model.head_dim to a multiple of 16 (e.g. 64)",
    });
  }
};

/** An agent is a module or a command line, never both; a command line is an agent's only. */
const agentCommand: Rule = ({ rollout: { environment: e } }) => {
  if (e.command.length === 0) return;
  if (e.kind !== "agent") {
    throw new UserError("config key rollout.environment.command", {
      value: e.command.join(" "),
      why: `it runs an agent, and rollout.environment.kind is ${e.kind}`,
      fix: "set rollout.environment.kind to agent, or remove the command",
    });
  }
  if (e.module !== null) {
    throw new UserError("config key rollout.environment.command", {
      value: e.command.join(" "),
      why: `rollout.environment.module (${e.module}) names an agent too, and an episode has one agent`,
      fix: "keep the module or the command, not both",
    });
  }
};

/** Every cross-field rule, run in this order. */
const RULES: Rule[] = [
  groupSize,
  filterGroupsSize,
  headsTrain,
  algorithmRules,
  turnFitsContext,
  overlongLengths,
  sandboxOptIn,
  readFileRoot,
  mcpServers,
  agentCommand,
  dataPath,
  arithmeticRange,
  judgeEndpoint,
  computeDtype,
  webgpuOptions,
  demoHeads,
  guidedCallsLocal,
];

/** Throws the first cross-field violation as a `UserError`. */
export function checkCrossFields(config: Config): void {
  for (const rule of RULES) rule(config);
}
