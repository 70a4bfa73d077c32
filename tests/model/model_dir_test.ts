/**
 * A model directory made by the project loads: config fields, checkpoint tensors, the real Qwen3
 * tokenizer and chat template, and the token pieces an environment appends (derived from the template).
 */
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { UserError } from "../../lib/errors.ts";
import { type ChatMessage, type ChatTokenizer, type ToolSpec } from "../../lib/model/chat.ts";
import { parseQwen3Config, qwen3ConfigJson, readQwen3Config } from "../../lib/model/hf_config.ts";
import { openModelDir, qwen3Weights } from "../../lib/model/model_dir.ts";
import { randomQwen3Config, randomValues, TINY_PRESET } from "../../lib/model/random_model.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { Rng, streamSeed } from "../../lib/model/prng.ts";
import { readTensor } from "../../lib/safetensors/mod.ts";
import { main as makeModelMain } from "../../scripts/make_model.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

let tokenizer: Promise<ChatTokenizer> | null = null;
function tiny(): Promise<ChatTokenizer> {
  tokenizer ??= makeTinyModel().then(loadTokenizer);
  return tokenizer;
}

async function expectUserError(body: () => Promise<unknown>, ...fragments: string[]): Promise<string> {
  const caught = await body().then(() => undefined, (e: unknown) => e);
  assert.ok(caught instanceof UserError, `expected a UserError, got ${caught}`);
  assert.ok(!caught.message.includes("\n"), "one line");
  for (const f of fragments) assert.ok(caught.message.includes(f), `message lacks "${f}": ${caught.message}`);
  return caught.message;
}

const TOOLS: ToolSpec[] = [{
  type: "function",
  function: {
    name: "calculator",
    description: "Evaluates an arithmetic expression.",
    parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
  },
}];

Deno.test("a tiny model directory has the Qwen3 config and every tensor in HF names and shapes", async () => {
  const dir = await makeTinyModel();
  const model = await openModelDir(dir);
  const c = model.config;
  assert.deepEqual(
    [c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim],
    [2, 64, 4, 2, 16],
  );
  assert.equal(c.intermediate_size, 128);
  assert.equal(c.vocab_size, 151936);
  assert.equal(c.tie_word_embeddings, true);
  assert.equal(c.torch_dtype, "float32");
  assert.equal(c.eos_token_id, 151645);
  assert.equal(model.checkpoint.tensors.size, qwen3Weights(c).length);
  assert.ok(!model.checkpoint.tensors.has("lm_head.weight"));
  assert.deepEqual(model.checkpoint.tensors.get("model.layers.1.self_attn.q_proj.weight")!.shape, [64, 64]);
  assert.deepEqual(model.checkpoint.tensors.get("model.layers.0.self_attn.k_proj.weight")!.shape, [32, 64]);
  assert.deepEqual(model.checkpoint.tensors.get("model.layers.0.mlp.down_proj.weight")!.shape, [64, 128]);
  assert.deepEqual(model.checkpoint.tensors.get("model.layers.0.self_attn.q_norm.weight")!.shape, [16]);
  const gen = JSON.parse(await Deno.readTextFile(join(dir, "generation_config.json")));
  assert.deepEqual(gen.eos_token_id, [151645, 151643]);
});

Deno.test("random init is seeded: norms near 1 but not 1, matrices small, embeddings larger", async () => {
  const dir = await makeTinyModel();
  const model = await openModelDir(dir);
  const read = async (name: string) => {
    const loc = model.checkpoint.tensors.get(name)!;
    return (await readTensor(model.checkpoint.headers.get(loc.file)!, name)).data as Float32Array;
  };
  const std = (x: Float32Array, mean = 0) => Math.sqrt(x.reduce((s, v) => s + (v - mean) ** 2, 0) / x.length);
  const norm = await read("model.layers.0.input_layernorm.weight");
  assert.ok(norm.every((v) => v > 0.5 && v < 1.5) && norm.some((v) => Math.abs(v - 1) > 0.05));
  assert.ok(Math.abs(std(await read("model.layers.0.mlp.up_proj.weight")) - 0.02) < 0.002);
  assert.ok(Math.abs(std((await read("model.embed_tokens.weight")).subarray(0, 64 * 5000)) - 0.125) < 0.005);
  const spec = qwen3Weights(model.config).find((w) => w.name === "model.norm.weight")!;
  assert.deepEqual(await read("model.norm.weight"), randomValues(spec, model.config, 0), "deterministic");
});

Deno.test("bf16, untied and sharded variants load with lm_head", async () => {
  const dir = await makeTinyModel({ dtype: "bfloat16", tiedHead: false, shards: 3, seed: 7 });
  const model = await openModelDir(dir);
  assert.equal(model.config.torch_dtype, "bfloat16");
  assert.equal(model.checkpoint.files.length, 3);
  const head = model.checkpoint.tensors.get("lm_head.weight")!;
  assert.equal(head.dtype, "BF16");
  assert.deepEqual(head.shape, [151936, 64]);
});

Deno.test("make-model CLI writes a model and rejects bad flags with exit code 2", async () => {
  const out = join(await Deno.makeTempDir(), "m");
  assert.equal(await makeModelMain(["--out", out, "--layers", "1", "--hidden", "32", "--untied"]), 0);
  const cfg = await readQwen3Config(out);
  assert.equal(cfg.num_hidden_layers, 1);
  assert.equal(cfg.tie_word_embeddings, false);
  assert.equal(await makeModelMain(["--out", out, "--dtype", "int4"]), 2);
  assert.equal(await makeModelMain(["--out", out, "--preset", "huge"]), 2);
  assert.equal(await makeModelMain(["--layers", "2"]), 2);
  assert.equal(await makeModelMain(["--out", out, "--bogus"]), 2);
});

Deno.test("another architecture's config.json is rejected clearly", async () => {
  const dir = await Deno.makeTempDir();
  const llama = { architectures: ["LlamaForCausalLM"], model_type: "llama", hidden_size: 64 };
  await Deno.writeTextFile(join(dir, "config.json"), JSON.stringify(llama));
  await expectUserError(() => readQwen3Config(dir), "config.json", "model_type", '"llama"', "Qwen3");
  const base = JSON.parse(await Deno.readTextFile(join(await makeTinyModel(), "config.json")));
  assert.throws(() => parseQwen3Config({ ...base, architectures: ["Qwen3MoeForCausalLM"] }), /architectures/);
  assert.throws(
    () => parseQwen3Config({ ...base, rope_scaling: { rope_type: "yarn", factor: 4 } }),
    /rope_scaling/,
  );
  assert.throws(() => parseQwen3Config({ ...base, num_key_value_heads: 3 }), /num_key_value_heads/);
  assert.equal(parseQwen3Config({ ...base, rope_scaling: null }).rope_theta, 1_000_000);
  await expectUserError(() => readQwen3Config(join(dir, "none")), "does not exist");
});

Deno.test("config.json and checkpoint that disagree name the tensor", async () => {
  const dir = await makeTinyModel();
  const copy = await Deno.makeTempDir();
  for (const f of ["model.safetensors", "tokenizer.json", "tokenizer_config.json"]) {
    await Deno.copyFile(join(dir, f), join(copy, f));
  }
  const cfg = randomQwen3Config({ ...TINY_PRESET, hidden: 32 });
  await Deno.writeTextFile(join(copy, "config.json"), JSON.stringify(qwen3ConfigJson(cfg)));
  await expectUserError(() => openModelDir(copy), "model.embed_tokens.weight", "[151936,32]");
});

Deno.test("the tokenizer round-trips text, unicode included", async () => {
  const tok = await tiny();
  for (
    const text of ["Hello, world!", "héllo wörld — ünïcödé", "数学 123 + 456 = 579 🙂", "  spaces\n\ttabs  "]
  ) {
    assert.equal(tok.decode(tok.encode(text)), text);
  }
  assert.equal(tok.encode("Hello").length, 1, "no BOS/EOS added");
});

Deno.test("special tokens have Qwen3's ids", async () => {
  const tok = await tiny();
  assert.deepEqual(tok.special, {
    imStart: 151644,
    imEnd: 151645,
    endOfText: 151643,
    think: 151667,
    thinkEnd: 151668,
    toolCall: 151657,
    toolCallEnd: 151658,
    toolResponse: 151665,
    toolResponseEnd: 151666,
  });
  assert.equal(tok.eosTokenId, 151645);
  assert.deepEqual(tok.encode("<|im_start|>"), [151644]);
  assert.match(tok.info.tokenizerSha256, /^[0-9a-f]{64}$/);
  assert.match(tok.info.chatTemplateSha256, /^[0-9a-f]{64}$/);
  assert.throws(
    () => tok.tokenId("<|not_a_token|>"),
    (e) => e instanceof UserError && /not in the vocabulary/.test(e.message),
  );
});

const CONVERSATION: ChatMessage[] = [
  { role: "user", content: "What is 12*7?" },
  {
    role: "assistant",
    content: "",
    tool_calls: [{ type: "function", function: { name: "calculator", arguments: { expression: "12*7" } } }],
  },
  { role: "tool", content: "84" },
];

Deno.test("a rendered conversation shows the tool result inside a user turn as <tool_response>", async () => {
  const tok = await tiny();
  const text = tok.renderChat(CONVERSATION, { tools: TOOLS, addGenerationPrompt: true });
  assert.ok(text.startsWith("<|im_start|>system\n# Tools"), "tools rendered into the system turn");
  assert.ok(text.includes('"name": "calculator"'));
  assert.ok(
    text.includes('<tool_call>\n{"name": "calculator", "arguments": {"expression": "12*7"}}\n</tool_call>'),
  );
  assert.ok(
    text.endsWith(
      "<|im_start|>user\n<tool_response>\n84\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    ),
  );
  assert.ok(!text.includes("<|im_start|>tool"));
  const ids = tok.renderChatTokens(CONVERSATION, { tools: TOOLS, addGenerationPrompt: true });
  assert.ok(ids.includes(151665) && ids.includes(151657));
  assert.equal(tok.decode(ids), text);
});

Deno.test("toolResultTokens equal what the template renders after the tool call", async () => {
  const tok = await tiny();
  const expected =
    "<|im_end|>\n<|im_start|>user\n<tool_response>\n84\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
  assert.equal(tok.toolResultText(["84"]), expected);
  assert.deepEqual(tok.toolResultTokens(["84"]), tok.encode(expected));
  // The same tokens close the rendered conversation: prefix ids + piece ids = full render ids.
  const before = tok.renderChatTokens(CONVERSATION.slice(0, 2), { tools: TOOLS });
  const full = tok.renderChatTokens(CONVERSATION, { tools: TOOLS, addGenerationPrompt: true });
  const cut = before.lastIndexOf(151645); // the assistant turn's <|im_end|>
  assert.deepEqual([...before.slice(0, cut), ...tok.toolResultTokens(["84"])].slice(-30), full.slice(-30));
  assert.deepEqual(tok.toolResultTokens(["84"], { includeTurnEnd: false }), tok.encode(expected).slice(1));
  const two = tok.toolResultText(["1", "2"]);
  assert.equal(
    two,
    "<|im_end|>\n<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>" +
      "<|im_end|>\n<|im_start|>assistant\n",
  );
  assert.ok(
    tok.toolResultText(["84"], { enableThinking: false }).endsWith("assistant\n<think>\n\n</think>\n\n"),
  );
});

Deno.test("userTurnTokens and the generation prompt follow the template, thinking on or off", async () => {
  const tok = await tiny();
  assert.equal(
    tok.userTurnText("Next?"),
    "<|im_end|>\n<|im_start|>user\nNext?<|im_end|>\n<|im_start|>assistant\n",
  );
  assert.deepEqual(tok.userTurnTokens("Next?"), tok.encode(tok.userTurnText("Next?")));
  assert.equal(tok.generationPrompt(), "<|im_start|>assistant\n");
  assert.equal(
    tok.generationPrompt({ enableThinking: false }),
    "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  const off = tok.renderChat([{ role: "user", content: "hi" }], {
    addGenerationPrompt: true,
    enableThinking: false,
  });
  assert.ok(off.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  assert.deepEqual(tok.generationPromptTokens({ enableThinking: false }), [
    151644,
    77091,
    198,
    151667,
    271,
    151668,
    271,
  ]);
});

Deno.test("loadTokenizer works from a relative path and names a missing tokenizer", async () => {
  const tok = await loadTokenizer(relative(Deno.cwd(), await makeTinyModel()));
  assert.equal(tok.special.imStart, 151644);
  const empty = await Deno.makeTempDir();
  await expectUserError(() => loadTokenizer(empty), "tokenizer.json", "does not exist");
});

Deno.test("the init PRNG stream is pinned (same seed, same weights on every platform and release)", () => {
  const r = new Rng(1);
  assert.deepEqual([r.nextU32(), r.nextU32()], [2442144158, 3238099751]);
  assert.equal(streamSeed(0, "model.norm.weight"), 3187971780);
  const x = new Rng(42).fillNormal(new Float32Array(3), 0, 1);
  assert.deepEqual(Array.from(x), [0.36039894819259644, -0.8372282385826111, -0.013506115414202213]);
});
