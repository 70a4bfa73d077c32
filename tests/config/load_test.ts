/**
 * The configuration: config.yaml against the schema, one-line errors for bad keys and values,
 * command-line overrides, and the config hash.
 */
import assert from "node:assert/strict";
import { parse } from "@std/yaml";
import { UserError } from "../../lib/errors.ts";
import {
  applyOverrides,
  type Config,
  configHash,
  configHelp,
  DEFAULT_CONFIG_FILE,
  defaultConfig,
  loadConfig,
  providerOptionsOf,
  SCHEMA,
  schemaPaths,
  validateConfig,
  WEBGPU_DEFAULTS,
  webgpuProviderOptions,
} from "../../lib/config/mod.ts";
import { isField, type Section } from "../../lib/config/fields.ts";
import { WEBGPU_BUFFER_CACHE_MODES, WEBGPU_VALIDATION_MODES } from "../../lib/ort/webgpu_options.ts";
import { demoSettings } from "../../lib/demo/settings.ts";
import { policyOptionsOf } from "../../lib/engine/policy_options.ts";

/** Runs `body`, expects a one-line `UserError`, and checks its message holds every fragment. */
function expectUserError(body: () => unknown, ...fragments: string[]): string {
  let caught: unknown;
  try {
    body();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof UserError, `expected a UserError, got ${caught}`);
  const message = caught.message;
  assert.ok(!message.includes("\n"), `message is one line: ${message}`);
  assert.match(message, /Fix: /);
  for (const fragment of fragments) assert.ok(message.includes(fragment), `"${fragment}" in: ${message}`);
  return message;
}

/** `validateConfig` of the defaults with one nested value replaced. */
function validateWith(path: string, value: unknown): Config {
  const raw = defaultConfig() as unknown as Record<string, unknown>;
  const keys = path.split(".");
  let node = raw;
  for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>;
  node[keys[keys.length - 1]] = value;
  return validateConfig(raw);
}

/** Leaf paths of a parsed YAML value, walked along the schema (a weights mapping is one leaf). */
function yamlPaths(value: Record<string, unknown>, section: Section = SCHEMA, prefix = ""): string[] {
  return Object.entries(value).flatMap(([key, child]) => {
    const path = prefix ? `${prefix}.${key}` : key;
    const node = section[key];
    if (node === undefined || isField(node)) return [path];
    return yamlPaths(child as Record<string, unknown>, node, path);
  });
}

Deno.test("config.yaml loads and validates from any working directory", async () => {
  const here = Deno.cwd();
  Deno.chdir(await Deno.makeTempDir());
  try {
    const { config, hash, source } = await loadConfig();
    assert.equal(source, DEFAULT_CONFIG_FILE);
    assert.match(hash, /^[0-9a-f]{64}$/);
    assert.equal(config.rollout.generation.temperature, 1);
    assert.deepEqual(config.train.lora.targets, ["q", "k", "v", "o", "gate", "up", "down"]);
  } finally {
    Deno.chdir(here);
  }
});

Deno.test("config.yaml holds exactly the schema's keys, with the schema's defaults", async () => {
  const raw = parse(await Deno.readTextFile(DEFAULT_CONFIG_FILE)) as Record<string, unknown>;
  const inFile = yamlPaths(raw);
  const inSchema = schemaPaths();
  assert.deepEqual(inFile.filter((p) => !inSchema.includes(p)), [], "keys in config.yaml but not the schema");
  assert.deepEqual(inSchema.filter((p) => !inFile.includes(p)), [], "keys in the schema but not config.yaml");
  assert.deepEqual(inFile, inSchema, "same order");
  assert.deepEqual(raw, defaultConfig());
});

Deno.test("every key in config.yaml has a comment on its line or the line above", async () => {
  const lines = (await Deno.readTextFile(DEFAULT_CONFIG_FILE)).split("\n");
  const missing: string[] = [];
  lines.forEach((line, i) => {
    const key = /^\s*([A-Za-z_][\w-]*):(\s|$)/.exec(line);
    if (!key) return;
    const above = (lines[i - 1] ?? "").trim();
    if (!/\s#\s/.test(line) && !above.startsWith("#")) missing.push(`line ${i + 1}: ${key[1]}`);
  });
  assert.deepEqual(missing, []);
});

Deno.test("an unknown key is rejected with the valid keys listed", () => {
  expectUserError(
    () => validateConfig({ rollout: { wibble: 3 } }),
    "unknown key rollout.wibble",
    "valid keys in rollout: group_size, max_batch, tasks_per_step, generation, tools, environment",
  );
  expectUserError(() => validateConfig({ modle: {} }), "unknown key modle", "did you mean model?");
});

Deno.test("a typo gets a did-you-mean and a rename fix", () => {
  expectUserError(
    () => validateConfig({ rollout: { generation: { temprature: 0.7 } } }),
    "unknown key rollout.generation.temprature",
    "did you mean temperature?",
    "Fix: rename it to rollout.generation.temperature",
  );
});

Deno.test("a key in the wrong section points to where it belongs", () => {
  expectUserError(
    () => validateConfig({ rollout: { temperature: 0.7 } }),
    "unknown key rollout.temperature",
    "rollout.generation.temperature",
  );
});

Deno.test("a wrong type names the key, the expected type, the value and the fix", () => {
  expectUserError(
    () => validateWith("train.lora.r", "eight"),
    "config key train.lora.r",
    '(got "eight")',
    "expected an integer in [1, 4096], got a string",
    "Fix: set train.lora.r to an integer in [1, 4096], e.g. 16",
  );
  expectUserError(() => validateWith("rollout.generation.enable_thinking", "yes"), "expected true or false");
  expectUserError(() => validateWith("train.lora.targets", "q"), "train.lora.targets", "expected a list");
  expectUserError(() => validateWith("model.path", null), "model.path", "got null");
  expectUserError(() => validateWith("model", 3), "config: model", "expected a mapping");
});

Deno.test("an out-of-range value names the key, the value, the allowed range and the fix", () => {
  expectUserError(
    () => validateWith("rollout.generation.top_p", 1.5),
    "config key rollout.generation.top_p (got 1.5)",
    "allowed in (0, 1]",
    "Fix: set rollout.generation.top_p to a value in (0, 1]",
  );
  expectUserError(() => validateWith("rollout.generation.temperature", 0), "temperature (got 0)", "(0, 10]");
  expectUserError(() => validateWith("rollout.generation.temperature", -1), "temperature (got -1)");
  expectUserError(() => validateWith("rollout.environment.max_turns", 51), "max_turns", "[1, 50]");
  expectUserError(() => validateWith("train.loss.eps_low", 1), "eps_low (got 1)", "[0, 1)");
  expectUserError(() => validateWith("train.lora.alpha", 0), "alpha (got 0)", "> 0");
  expectUserError(() => validateWith("train.lora.r", 0), "train.lora.r (got 0)");
  expectUserError(() => validateWith("train.lora.dropout", 0.1), "dropout", "equal to 0");
  expectUserError(() => validateWith("train.optimizer.betas", [0.9]), "betas", "exactly 2");
});

Deno.test("choices list the valid values and suggest the closest", () => {
  expectUserError(
    () => validateWith("model.ep", "gpu"),
    "model.ep",
    "cpu, webgpu, cuda",
    "did you mean cpu?",
  );
  expectUserError(() => validateWith("train.lora.targets", ["q", "q"]), "listed twice");
  expectUserError(
    () => validateWith("score.rewards", { gsm8k: 1, fromat: 1 }),
    "score.rewards.fromat",
    "format",
  );
  expectUserError(() => validateWith("score.rewards", {}), "score.rewards", "at least 1");
});

/** `WEBGPU_DEFAULTS` spelled as `model.webgpu`'s keys. */
const WEBGPU_DEFAULTS_BY_KEY = {
  storage_buffer_cache_mode: WEBGPU_DEFAULTS.storageBufferCacheMode,
  uniform_buffer_cache_mode: WEBGPU_DEFAULTS.uniformBufferCacheMode,
  query_resolve_buffer_cache_mode: WEBGPU_DEFAULTS.queryResolveBufferCacheMode,
  default_buffer_cache_mode: WEBGPU_DEFAULTS.defaultBufferCacheMode,
  validation_mode: WEBGPU_DEFAULTS.validationMode,
  decode_graph: true,
  graph_capture: false,
  forward_session: true,
};

Deno.test("model.webgpu: a value onnxruntime does not take is refused with the valid choices", () => {
  expectUserError(
    () => validateWith("model.webgpu.storage_buffer_cache_mode", "lazy_release"),
    'model.webgpu.storage_buffer_cache_mode (got "lazy_release")',
    "disabled, lazyRelease, simple, bucket",
    "did you mean lazyRelease?",
  );
  expectUserError(
    () => validateWith("model.webgpu.validation_mode", "none"),
    "model.webgpu.validation_mode",
    "disabled, wgpuOnly, basic, full",
  );
  expectUserError(
    () => applyOverrides(defaultConfig(), [["model.webgpu.enable_int64", "true"]]),
    "unknown key model.webgpu.enable_int64",
    "storage_buffer_cache_mode",
  );
});

Deno.test("model.merge_adapter takes auto, or true and false as YAML writes them, in a file or an override", async () => {
  assert.equal(defaultConfig().model.merge_adapter, "auto");
  assert.equal(validateWith("model.merge_adapter", true).model.merge_adapter, "true");
  assert.equal(validateWith("model.merge_adapter", false).model.merge_adapter, "false");
  const { config } = await loadConfig({ text: "model:\n  merge_adapter: false\n" });
  assert.equal(config.model.merge_adapter, "false");
  assert.equal(
    applyOverrides(defaultConfig(), [["model.merge_adapter", "true"]]).model.merge_adapter,
    "true",
  );
  expectUserError(
    () => validateWith("model.merge_adapter", "yes"),
    "model.merge_adapter",
    "valid: auto, true, false",
  );
});

Deno.test("model.webgpu set away from its defaults needs model.ep webgpu; at its defaults any provider passes", () => {
  const storage = WEBGPU_BUFFER_CACHE_MODES.find((m) => m !== WEBGPU_DEFAULTS.storageBufferCacheMode)!;
  const validation = WEBGPU_VALIDATION_MODES.find((m) => m !== WEBGPU_DEFAULTS.validationMode)!;
  const webgpu = { storage_buffer_cache_mode: storage, validation_mode: validation };
  const gpu = validateConfig({ model: { ep: "webgpu", webgpu } });
  assert.deepEqual([gpu.model.webgpu.storage_buffer_cache_mode, gpu.model.webgpu.validation_mode], [
    storage,
    validation,
  ]);
  for (const ep of ["cpu", "cuda"]) {
    expectUserError(
      () => validateConfig({ model: { ep, webgpu } }),
      `config key model.webgpu.storage_buffer_cache_mode (got "${storage}")`,
      `model.ep is ${ep}`,
      "Fix: set model.ep to webgpu, or model.webgpu.storage_buffer_cache_mode back to " +
        WEBGPU_DEFAULTS.storageBufferCacheMode,
    );
  }
  expectUserError(
    () => validateConfig({ model: { webgpu: { validation_mode: validation } } }),
    "model.webgpu.validation_mode",
    `back to ${WEBGPU_DEFAULTS.validationMode}`,
  );
  validateConfig({ model: { ep: "cpu", webgpu: { ...WEBGPU_DEFAULTS_BY_KEY } } });
});

Deno.test("model.webgpu becomes onnxruntime's WebGPU provider options, by its keys, on webgpu only", () => {
  const defaults = defaultConfig().model;
  assert.deepEqual(defaults.webgpu, WEBGPU_DEFAULTS_BY_KEY);
  assert.deepEqual(webgpuProviderOptions(defaults.webgpu), WEBGPU_DEFAULTS);
  const model = validateConfig({
    model: {
      ep: "webgpu",
      webgpu: {
        storage_buffer_cache_mode: "simple",
        uniform_buffer_cache_mode: "lazyRelease",
        query_resolve_buffer_cache_mode: "bucket",
        default_buffer_cache_mode: "simple",
        validation_mode: "wgpuOnly",
      },
    },
  }).model;
  assert.deepEqual(providerOptionsOf(model), {
    storageBufferCacheMode: "simple",
    uniformBufferCacheMode: "lazyRelease",
    queryResolveBufferCacheMode: "bucket",
    defaultBufferCacheMode: "simple",
    validationMode: "wgpuOnly",
  });
  assert.deepEqual(providerOptionsOf(defaults), {}, "cpu: none");
  assert.deepEqual(providerOptionsOf({ ...defaults, ep: "cuda" }), {}, "cuda: none");
});

Deno.test("model.webgpu.graph_capture: off by default, refused off webgpu, never a provider option", () => {
  assert.equal(defaultConfig().model.webgpu.graph_capture, false);
  expectUserError(
    () => validateConfig({ model: { ep: "cpu", webgpu: { graph_capture: true } } }),
    "config key model.webgpu.graph_capture",
    "model.ep is cpu",
    "Fix: set model.ep to webgpu, or model.webgpu.graph_capture back to false",
  );
  const config = validateConfig({ model: { ep: "webgpu", webgpu: { graph_capture: true } } });
  assert.deepEqual(
    Object.keys(providerOptionsOf(config.model)),
    Object.keys(WEBGPU_DEFAULTS),
    "not on every session",
  );
  assert.equal(policyOptionsOf(config).graphCapture, true);
  assert.equal(policyOptionsOf(defaultConfig()).graphCapture, false);
});

Deno.test("model.webgpu.decode_graph: on by default, refused off webgpu when turned off, needed by graph_capture", () => {
  assert.equal(defaultConfig().model.webgpu.decode_graph, true);
  expectUserError(
    () => validateConfig({ model: { ep: "cpu", webgpu: { decode_graph: false } } }),
    "config key model.webgpu.decode_graph",
    "model.ep is cpu",
    "Fix: set model.ep to webgpu, or model.webgpu.decode_graph back to true",
  );
  expectUserError(
    () => validateConfig({ model: { ep: "webgpu", webgpu: { decode_graph: false, graph_capture: true } } }),
    "config key model.webgpu.graph_capture",
    "model.webgpu.decode_graph is false",
    "Fix: set model.webgpu.decode_graph to true, or model.webgpu.graph_capture to false",
  );
  const config = validateConfig({ model: { ep: "webgpu", webgpu: { decode_graph: false } } });
  assert.equal(policyOptionsOf(config).decodeGraph, false);
  assert.equal(policyOptionsOf(defaultConfig()).decodeGraph, true);
});

Deno.test("an old config's train.loss.aggregation: sft is refused at load with the fix: objective sft", async () => {
  expectUserError(
    () => validateWith("train.loss.aggregation", "sft"),
    'train.loss.aggregation (got "sft")',
    "no longer a choice",
    "train.loss.objective: sft",
  );
  await assert.rejects(
    () => loadConfig({ text: "train:\n  loss:\n    aggregation: sft\n" }),
    (e) => e instanceof UserError && /objective: sft/.test(e.message) && !e.message.includes("\n"),
  );
  await assert.rejects(
    () => loadConfig({ text: "", overrides: [["train.loss.aggregation", "sft"]] }),
    (e) => e instanceof UserError && /objective: sft/.test(e.message),
  );
  const sft = validateConfig({ train: { loss: { objective: "sft" } } });
  assert.deepEqual([sft.train.loss.objective, sft.train.loss.aggregation], ["sft", "token_mean"]);
});

Deno.test("mask.estimator gae (PPO) is refused with the sft objective or GRPO's num_iterations", () => {
  const gae = (train: Record<string, unknown>) => () => validateConfig({ mask: { estimator: "gae" }, train });
  expectUserError(gae({ loss: { objective: "sft" } }), 'train.loss.objective (got "sft")', "clipped");
  expectUserError(gae({ num_iterations: 2 }), "train.num_iterations (got 2)", "train.ppo_epochs to 2");
  const ok = validateConfig({ mask: { estimator: "gae" }, train: { ppo_epochs: 2, value: { clip: 0.2 } } });
  assert.deepEqual([ok.train.ppo_epochs, ok.train.value.clip, ok.train.value.lr], [2, 0.2, 1e-4]);
});

Deno.test("loop.filter_groups (dynamic sampling) is refused with groups of one episode, naming both keys", () => {
  const filtered = { enable: true };
  expectUserError(
    () =>
      validateConfig({
        rollout: { group_size: 1 },
        mask: { estimator: "gae" },
        loop: { filter_groups: filtered },
      }),
    "rollout.group_size (got 1)",
    "loop.filter_groups.enable to false",
  );
  const ok = validateConfig({ loop: { filter_groups: filtered } }).loop.filter_groups;
  assert.deepEqual(ok, { enable: true, metric: "reward", max_num_gen_batches: 10 });
  expectUserError(
    () => validateWith("loop.filter_groups.metric", "acc"),
    "loop.filter_groups.metric",
    "correct",
  );
  expectUserError(
    () => validateWith("loop.filter_groups.max_num_gen_batches", 0),
    "max_num_gen_batches (got 0)",
  );
});

Deno.test("cross-field rules run before any model loads", () => {
  expectUserError(() => validateWith("rollout.group_size", 1), "rollout.group_size (got 1)", "grpo");
  assert.equal(
    validateConfig({ rollout: { group_size: 1 }, mask: { estimator: "gae" } }).rollout.group_size,
    1,
  );
  expectUserError(
    () => validateWith("rollout.generation.max_new_tokens", 2048),
    "max_new_tokens (got 2048)",
    "max_total_tokens (1024)",
  );
  const noSandbox = { sandbox: "none", enabled: ["calculator", "execute_code"] };
  expectUserError(() => validateConfig({ rollout: { tools: noSandbox } }), "sandbox", "unsafe_no_sandbox");
  validateConfig({ rollout: { tools: { ...noSandbox, unsafe_no_sandbox: true } } });
  expectUserError(() => validateWith("rollout.tools.enabled", ["read_file"]), "read_file_root");
  expectUserError(() => validateWith("data.source", "gsm8k"), "data.path", "gsm8k");
  // An agent is a module or a command line: the command alone, with another kind, would be ignored.
  const agent = (environment: Record<string, unknown>) => validateConfig({ rollout: { environment } });
  expectUserError(
    () => agent({ command: ["python3", "a.py"] }),
    "rollout.environment.command",
    "kind is tools",
  );
  expectUserError(
    () => agent({ kind: "agent", module: "a.ts", command: ["python3", "a.py"] }),
    "rollout.environment.command",
    "not both",
  );
  assert.deepEqual(agent({ kind: "agent", command: ["python3", "a.py"] }).rollout.environment.command, [
    "python3",
    "a.py",
  ]);
  // The generator reads no file: a data.path beside it was silently ignored (probe of 2026-11-28).
  expectUserError(() => validateWith("data.path", "tasks.jsonl"), 'data.path (got "tasks.jsonl")', "ignored");
  expectUserError(() => validateWith("data.arithmetic.min_operands", 5), "min_operands (got 5)");
  // Bounded time: a million synthetic tasks did not finish in minutes; 100,000 is the most.
  expectUserError(
    () => validateWith("data.arithmetic.num_tasks", 1_000_000),
    "num_tasks (got 1000000)",
    "100000",
  );
  assert.equal(validateWith("data.arithmetic.num_tasks", 100_000).data.arithmetic.num_tasks, 100_000);
  const guided = { generation: { guided_tool_calls: true } };
  assert.equal(validateConfig({ rollout: guided }).rollout.generation.guided_tool_calls, true);
  expectUserError(
    () =>
      validateConfig({ rollout: guided, model: { backend: "vllm", server: { urls: ["http://h:8000"] } } }),
    "guided_tool_calls",
    "model.backend vllm",
  );
});

Deno.test("loadConfig names the file in validation and YAML errors", async () => {
  const file = await Deno.makeTempFile({ suffix: ".yaml" });
  await Deno.writeTextFile(file, "model:\n  ep: tpu\n");
  await assertUserRejects(() => loadConfig({ file }), `${file}: config key model.ep`);
  await Deno.writeTextFile(file, "model:\n  ep: cpu\n  ep: cuda\n");
  await assertUserRejects(() => loadConfig({ file }), `config file ${file}:3:`, "invalid YAML", "line 3");
  await assertUserRejects(() => loadConfig({ file: `${file}.missing` }), "it does not exist");
  const partial = await loadConfig({ text: "train:\n  lora:\n    r: 4\n" });
  assert.equal(partial.config.train.lora.r, 4);
  assert.equal(partial.source, "<text>");
  assert.equal(partial.config.train.lora.alpha, 32, "missing keys take their defaults");
});

async function assertUserRejects(body: () => Promise<unknown>, ...fragments: string[]): Promise<void> {
  const error = await body().then(() => undefined, (e) => e);
  expectUserError(() => {
    if (error) throw error;
  }, ...fragments);
}

Deno.test("overrides set nested keys, lists, weights and null, checked against the schema", async () => {
  const base = defaultConfig();
  const config = applyOverrides(base, [
    ["train.lora.r", "8"],
    ["train.lora.targets", "[q,v]"],
    ["score.rewards.format", "0.2"],
    ["model.adapter", "runs/x/adapter"],
    ["model.path", "123"],
    ["data.shuffle_seed", "null"],
    ["rollout.generation.temperature", "0.7"],
  ]);
  assert.equal(config.train.lora.r, 8);
  assert.deepEqual(config.train.lora.targets, ["q", "v"]);
  assert.deepEqual(config.score.rewards, { gsm8k: 1, tool_use: 0.1, format: 0.2 });
  assert.equal(config.model.adapter, "runs/x/adapter");
  assert.equal(config.model.path, "123", "string keys keep the text");
  assert.equal(config.data.shuffle_seed, null);
  assert.equal(config.rollout.generation.temperature, 0.7);
  // A string key takes the text as typed: YAML would cut ` #…` as a comment and read a leading `#` as null.
  const texts = applyOverrides(base, [
    ["data.system_prompt", "Answer after #### then stop"],
    ["model.path", "models/my model #2"],
    ["model.adapter", "#1 adapter"],
  ]);
  assert.equal(texts.data.system_prompt, "Answer after #### then stop");
  assert.equal(texts.model.path, "models/my model #2");
  assert.equal(texts.model.adapter, "#1 adapter");
  const quotedOrNull = applyOverrides(base, [["model.path", "'quoted #x'"], ["model.adapter", "null"]]);
  assert.equal(quotedOrNull.model.path, "quoted #x", "a quoted value is YAML's string");
  assert.equal(quotedOrNull.model.adapter, null, "null for a nullable key");
  assert.equal(base.train.lora.r, 16, "the input is not changed");
  const loaded = await loadConfig({ overrides: [["mask.estimator", "rloo"]] });
  assert.equal(loaded.config.mask.estimator, "rloo");
});

Deno.test("bad overrides give one-line errors", async () => {
  const base = defaultConfig();
  expectUserError(
    () => applyOverrides(base, [["train.lora.r", "eight"]]),
    "train.lora.r",
    "expected an integer",
  );
  expectUserError(() => applyOverrides(base, [["train.lora.targets", "[q,x]"]]), "targets[1]", "gate");
  expectUserError(
    () => applyOverrides(base, [["train.lora.rank", "8"]]),
    "unknown key train.lora.rank",
    "r, alpha, dropout, targets, rslora",
  );
  expectUserError(() => applyOverrides(base, [["train.lora", "8"]]), "is a section", "train.lora.r");
  expectUserError(() => applyOverrides(base, [["train.lora.r.x", "8"]]), "no keys below it");
  expectUserError(() => applyOverrides(base, [["score.rewards.speed", "1"]]), "score.rewards.speed");
  expectUserError(() => applyOverrides(base, [["train.lora.targets", "[q"]]), "not a valid YAML value");
  await assertUserRejects(
    () => loadConfig({ overrides: [["rollout.group_size", "1"]] }),
    "rollout.group_size (got 1)",
  );
});

Deno.test("the hash ignores key order and changes with any value", () => {
  const a = validateConfig(parse("model:\n  ep: cpu\n  threads: 2\ntrain:\n  seed: 1\n"));
  const b = validateConfig(parse("train:\n  seed: 1\nmodel:\n  threads: 2\n  ep: cpu\n"));
  assert.equal(configHash(a), configHash(b));
  const c = applyOverrides(a, [["train.seed", "2"]]);
  assert.notEqual(configHash(a), configHash(c));
  assert.equal(configHash(defaultConfig()), configHash(defaultConfig()));
});

Deno.test("configHelp lists every key with its type, default and doc", () => {
  const help = configHelp();
  for (const path of schemaPaths()) assert.ok(help.includes(`  ${path} = `), path);
  assert.match(help, /rollout\.generation\.top_p = 1 {4}\(a number in \(0, 1\]\)\n {6}nucleus sampling/);
});

Deno.test("the Config type follows the schema", () => {
  const config = defaultConfig();
  const r: number = config.train.lora.r;
  const adapter: string | null = config.model.adapter;
  const aggregation: "token_mean" | "seq_mean_token_mean" | "seq_mean_token_sum_norm" =
    config.train.loss.aggregation;
  const weight: number | undefined = config.score.rewards.code_exec;
  assert.deepEqual([r, adapter, aggregation, weight], [16, null, "token_mean", undefined]);
});

Deno.test("the demo section, the calculator's operation limit and the task order are checked like every key", async () => {
  expectUserError(
    () => validateConfig({ demo: { modle: {} } }),
    "unknown key demo.modle",
    "did you mean model?",
  );
  expectUserError(() => validateWith("demo.model.hidden", 4), "demo.model.hidden (got 4)", "[8, 8192]");
  expectUserError(() => validateWith("demo.model.seed", -1), "demo.model.seed (got -1)");
  expectUserError(
    () => validateWith("demo.warm_start.direct_fraction", 1),
    "direct_fraction (got 1)",
    "[0, 1)",
  );
  expectUserError(() => validateWith("demo.warm_start.copy_accuracy", 1.5), "copy_accuracy (got 1.5)");
  expectUserError(() => validateWith("demo.warm_start.lr", 0), "demo.warm_start.lr (got 0)", "(0, 1]");
  expectUserError(() => validateWith("demo.warm_start.probe_every", "often"), "probe_every", "an integer");
  expectUserError(() => validateWith("demo.model.kv_heads", 3), "demo.model.kv_heads (got 3)", "multiple");
  expectUserError(
    () => validateWith("demo.model.head_dim", 40),
    "demo.model.head_dim (got 40)",
    "multiple of 16",
  );
  expectUserError(
    () => validateWith("rollout.tools.calculator.max_operations", 0),
    "rollout.tools.calculator.max_operations (got 0)",
  );
  expectUserError(
    () => validateWith("data.arithmetic.order", "ltr"),
    "data.arithmetic.order",
    "left_to_right",
  );
  // A seed left null follows train.seed; set, it is kept.
  const { config } = await loadConfig({
    overrides: [["train.seed", "5"], ["demo.warm_start.seed", "9"]],
  });
  assert.equal(demoSettings(config).model.seed, 5);
  assert.equal(demoSettings(config).warmStart.seed, 9);
});

Deno.test("a run's snapshot loads as a config without its identity section; any other identity key is refused", async () => {
  const snapshot = "loop:\n  steps: 7\nidentity:\n  model.path: /m\n  train.lora: '{}'\n";
  assert.equal((await loadConfig({ text: snapshot })).config.loop.steps, 7);
  for (const text of ["identity: 3\n", "identity:\n  steps: 7\n"]) {
    await assert.rejects(
      () => loadConfig({ text }),
      (e) => e instanceof UserError && e.message.includes("unknown key identity"),
      text,
    );
  }
});

Deno.test("Object.prototype's names are unknown keys: in a file, in an MCP entry, and as overrides", async () => {
  const refused = async (opts: Parameters<typeof loadConfig>[0], key: string) => {
    const error = await loadConfig(opts).then(() => null, (e) => e);
    assert.ok(error instanceof UserError, `${key}: ${error}`);
    assert.match(error.message, new RegExp(`: unknown key ${key.replace(/[.[\]]/g, "\\$&")}:`));
  };
  await refused({ text: "model:\n  __proto__:\n    x: 1\n" }, "model.__proto__");
  await refused({ text: "constructor: 1\n" }, "constructor");
  await refused({ text: "rollout:\n  toString: 1\n" }, "rollout.toString");
  const mcp = "rollout:\n  tools:\n    mcp:\n      - name: a\n        command: x\n        constructor: 1\n";
  await refused({ text: mcp }, "rollout.tools.mcp[0].constructor");
  await refused({ text: "", overrides: [["__proto__.polluted", "1"]] }, "__proto__");
  await refused({ text: "", overrides: [["rollout.toString", "1"]] }, "rollout.toString");
  assert.equal(({} as Record<string, unknown>).polluted, undefined, "Object.prototype is untouched");
});

Deno.test("a NaN or infinite number is refused as such, with the value shown", async () => {
  const cases: Array<[string, RegExp]> = [
    [".nan", /\(got NaN\): wrong type: expected .*, got NaN\./],
    [".inf", /\(got Infinity\): wrong type: expected .*, got an infinite number\./],
    ["-.inf", /\(got -Infinity\): wrong type: expected .*, got an infinite number\./],
  ];
  for (const [text, message] of cases) {
    const error = await loadConfig({ text: "", overrides: [["rollout.generation.temperature", text]] })
      .then(() => null, (e) => e);
    assert.ok(error instanceof UserError, `${text}: ${error}`);
    assert.match(error.message, message);
  }
  const huge = await loadConfig({ text: "", overrides: [["train.optimizer.lr", "1e400"]] }).then(
    () => null,
    (e) => e,
  );
  assert.match(String(huge?.message), /\(got Infinity\): .*got an infinite number/);
});

Deno.test("model.webgpu.forward_session: on by default, refused off webgpu when turned off, never a provider option", () => {
  assert.equal(defaultConfig().model.webgpu.forward_session, true);
  expectUserError(
    () => validateConfig({ model: { ep: "cpu", webgpu: { forward_session: false } } }),
    "config key model.webgpu.forward_session",
    "model.ep is cpu",
    "Fix: set model.ep to webgpu, or model.webgpu.forward_session back to true",
  );
  const config = validateConfig({ model: { ep: "webgpu", webgpu: { forward_session: false } } });
  assert.equal(config.model.webgpu.forward_session, false);
  assert.deepEqual(Object.keys(providerOptionsOf(config.model)), Object.keys(WEBGPU_DEFAULTS));
});
