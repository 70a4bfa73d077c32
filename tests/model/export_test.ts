/**
 * `exportForTransformersJs` on tiny random Qwen3 models (float32 tied, bf16, untied and sharded):
 * the exported `onnx/model.onnx` run directly with onnxruntime-node against the float64 reference
 * (whole prompts, prefix + rest through `past_key_values`, left-padded batches), transformers.js'
 * own greedy `generate` against the reference's greedy tokens, a merged LoRA adapter against the
 * reference with the adapter unmerged, and the directory's files and refusals.
 *
 * Dimension legend: B batch, T new tokens, S total columns (past + new), V vocab, nKV KV heads, D head dim.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { UserError } from "../../lib/errors.ts";
import { measureTransformersJsDecode, StepStamps } from "../../bench/peer_transformersjs.ts";
import { exportForTransformersJs, type MergeAdapter, mergeAdapterOf } from "../../lib/model/export.ts";
import { LORA_TARGET_NAMES } from "../../lib/model/lora.ts";
import { randomAdapter, referenceLoraOf } from "../helpers/adapters.ts";
import { DATA_ALIGNMENT, mergeInto, planWeights, transpose } from "../../lib/model/export_weights.ts";
import type { Qwen3Config } from "../../lib/model/hf_config.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { randomQwen3Config, type RandomQwen3Options, TINY_PRESET } from "../../lib/model/random_model.ts";
import { loadReference } from "../helpers/reference_model.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { logSoftmax } from "../reference/ops.ts";
import type { LoraSpec, Qwen3Reference } from "../reference/qwen3_f64.ts";
import { modulePath } from "../reference/weights.ts";

const TOL = 1e-4; // max |Δ log-prob| against the float64 reference
const PAD = 151643; // Qwen3's pad token (<|endoftext|>); masked out, so any id would do
const VARIANTS: Record<string, Partial<RandomQwen3Options>> = {
  f32: {},
  bf16: { dtype: "bfloat16", seed: 3, kvHeads: 1 }, // 4 query heads per KV head
  untied: { tiedHead: false, seed: 5, shards: 2, kvHeads: 4 }, // no grouping
};
const PROMPTS = [[9707, 11, 1879, 0, 151644, 42, 7], [314, 2, 88888]];

let root: Promise<string> | null = null;
let rootPath: string | null = null;
const exportsMade = new Map<string, Promise<string>>();
// Exports are ~70 MB each: remove them when the test process ends.
globalThis.addEventListener("unload", () => {
  if (rootPath) Deno.removeSync(rootPath, { recursive: true });
});

/** The export of a tiny model variant (made once per test process), and the model directory. */
async function exported(variant: string, adapter?: MergeAdapter, tag = ""): Promise<[string, string]> {
  const model = await makeTinyModel(VARIANTS[variant]);
  root ??= Deno.makeTempDir({ prefix: "export-test-" }).then((dir) => (rootPath = dir));
  const key = `${variant}${tag}`;
  let dir = exportsMade.get(key);
  if (!dir) {
    const out = join(await root, key);
    dir = exportForTransformersJs(model, out, { adapter }).then(() => out);
    exportsMade.set(key, dir);
  }
  return [await dir, model];
}

interface Feeds {
  ids: number[][]; // [B, T]
  mask: number[][]; // [B, S]
}

/** Left-pads `seqs` to one length: ids [B, T] and attention mask [B, T]. */
function leftPad(seqs: number[][]): Feeds {
  const T = Math.max(...seqs.map((s) => s.length));
  return {
    ids: seqs.map((s) => [...Array(T - s.length).fill(PAD), ...s]),
    mask: seqs.map((s) => [...Array(T - s.length).fill(0), ...s.map(() => 1)]),
  };
}

/** transformers.js' rule: cumsum(mask) - 1, 1 where masked; the last `T` columns. */
function positionIds(mask: number[][], T: number): number[][] {
  return mask.map((row) => {
    let sum = 0;
    const pos = row.map((m) => (m ? sum++ : 1));
    return pos.slice(pos.length - T);
  });
}

function i64(rows: number[][]): ort.Tensor {
  return new ort.Tensor("int64", BigInt64Array.from(rows.flat(), BigInt), [rows.length, rows[0].length]);
}

/** One call of the exported graph; `past` empty ([B, nKV, 0, D]) when not given. */
async function runExport(
  session: ort.InferenceSession,
  cfg: Qwen3Config,
  f: Feeds,
  past?: Record<string, ort.Tensor>,
): Promise<{ logits: Float32Array; present: Record<string, ort.Tensor> }> {
  const B = f.ids.length, T = f.ids[0].length;
  const feeds: Record<string, ort.Tensor> = {
    input_ids: i64(f.ids),
    attention_mask: i64(f.mask),
    position_ids: i64(positionIds(f.mask, T)),
  };
  const empty = [B, cfg.num_key_value_heads, 0, cfg.head_dim];
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    for (const kv of ["key", "value"]) {
      feeds[`past_key_values.${n}.${kv}`] = past?.[`present.${n}.${kv}`] ??
        new ort.Tensor("float32", new Float32Array(0), empty);
    }
  }
  const out = await session.run(feeds);
  assert.deepEqual(out.logits.dims, [B, T, cfg.vocab_size]);
  return { logits: out.logits.data as Float32Array, present: out };
}

/** Max |log_softmax(ours) - log_softmax(reference)| over `rows` pairs (our row index, reference row). */
function maxLogprobError(ours: Float32Array, ref: Float64Array[], rows: [number, number][], V: number) {
  let worst = 0;
  for (const [r, t] of rows) {
    const a = logSoftmax(Float64Array.from(ours.subarray(r * V, (r + 1) * V)), 0, V, 1);
    const b = logSoftmax(ref[t], 0, V, 1);
    for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(a[v] - b[v]));
  }
  return worst;
}

async function withSession<T>(dir: string, use: (s: ort.InferenceSession) => Promise<T>): Promise<T> {
  const session = await ort.InferenceSession.create(join(dir, "onnx", "model.onnx"));
  try {
    return await use(session);
  } finally {
    await session.release();
  }
}

for (const variant of Object.keys(VARIANTS)) {
  Deno.test(`export (${variant}): logits of a whole prompt match the float64 reference`, async () => {
    const [dir, model] = await exported(variant);
    const cfg = (await openModelDir(model)).config;
    const ref = await loadReference(model);
    const seq = PROMPTS[0];
    const { logits } = await withSession(dir, (s) => runExport(s, cfg, leftPad([seq])));
    const err = maxLogprobError(logits, ref.logits(seq), seq.map((_, t) => [t, t]), cfg.vocab_size);
    assert.ok(err <= TOL, `max |Δ log-prob| ${err}`);
  });

  Deno.test(`export (${variant}): a left-padded batch, then more tokens through past_key_values, match the reference`, async () => {
    const [dir, model] = await exported(variant);
    const cfg = (await openModelDir(model)).config;
    const ref = await loadReference(model);
    const more = [[5, 6, 77], [1000, 151645, 3]];
    const first = leftPad(PROMPTS);
    const T1 = first.ids[0].length, V = cfg.vocab_size;
    await withSession(dir, async (s) => {
      const a = await runExport(s, cfg, first);
      const second = { ids: more, mask: first.mask.map((m) => [...m, 1, 1, 1]) };
      const b = await runExport(s, cfg, second, a.present);
      assert.deepEqual(b.present["present.0.key"].dims, [2, cfg.num_key_value_heads, T1 + 3, cfg.head_dim]);
      PROMPTS.forEach((prompt, i) => {
        const full = ref.logits([...prompt, ...more[i]]);
        const pad = T1 - prompt.length;
        const rowsA = prompt.map((_, t): [number, number] => [i * T1 + pad + t, t]);
        const rowsB = more[i].map((_, t): [number, number] => [i * 3 + t, prompt.length + t]);
        const errA = maxLogprobError(a.logits, full, rowsA, V);
        const errB = maxLogprobError(b.logits, full, rowsB, V);
        assert.ok(errA <= TOL && errB <= TOL, `sequence ${i}: prompt ${errA}, with past ${errB}`);
      });
    });
  });

  Deno.test(`export (${variant}): transformers.js greedy generate equals the reference's greedy tokens`, async () => {
    const [dir, model] = await exported(variant);
    const ref = await loadReference(model);
    const n = 8;
    const single = await transformersJsGreedy(dir, [PROMPTS[0]], n);
    assert.deepEqual(single, [ref.greedy(PROMPTS[0], n)]);
    const batch = await transformersJsGreedy(dir, PROMPTS, n);
    assert.deepEqual(batch, PROMPTS.map((p) => ref.greedy(p, n)));
  });
}

/** New tokens of transformers.js' greedy `generate` on left-padded `prompts` (no stop token). */
async function transformersJsGreedy(dir: string, prompts: number[][], n: number): Promise<number[][]> {
  const { AutoModelForCausalLM, env, Tensor } = await import("@huggingface/transformers");
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.useFSCache = false;
  env.useBrowserCache = false;
  const model = await AutoModelForCausalLM.from_pretrained(dir, {
    local_files_only: true,
    dtype: "fp32",
    device: "cpu",
  });
  try {
    const f = leftPad(prompts);
    const T = f.ids[0].length;
    const tensor = (rows: number[][]) =>
      new Tensor("int64", BigInt64Array.from(rows.flat(), BigInt), [rows.length, T]);
    const args = {
      input_ids: tensor(f.ids),
      attention_mask: tensor(f.mask),
      max_new_tokens: n,
      do_sample: false,
      eos_token_id: null, // no stop: exactly n tokens
    };
    const out = await model.generate(args as unknown as Parameters<typeof model.generate>[0]);
    const rows = (out as { tolist(): bigint[][] }).tolist();
    return rows.map((r) => r.slice(T).map(Number));
  } finally {
    await model.dispose();
  }
}

/** A random PEFT adapter on every Linear (rank 2, alpha 4): in the exporter's form and the reference's. */
function randomMergeAdapter(cfg: Qwen3Config, seed: number): [MergeAdapter, LoraSpec] {
  const spec = { r: 2, alpha: 4, rslora: false, targets: [...LORA_TARGET_NAMES] };
  const adapter = randomAdapter(cfg, spec, seed, 0.1);
  return [mergeAdapterOf(adapter, cfg), referenceLoraOf(cfg, adapter)];
}

Deno.test("export with a merged LoRA adapter equals the reference with the adapter unmerged", async () => {
  const model = await makeTinyModel(VARIANTS.untied);
  const cfg = (await openModelDir(model)).config;
  const [adapter, lora] = randomMergeAdapter(cfg, 17);
  const [dir] = await exported("untied", adapter, "+lora");
  const seq = PROMPTS[0], V = cfg.vocab_size;
  const { logits } = await withSession(dir, (s) => runExport(s, cfg, leftPad([seq])));
  const rows = seq.map((_, t): [number, number] => [t, t]);
  const withLora = await loadReference(model, lora);
  const err = maxLogprobError(logits, withLora.logits(seq), rows, V);
  assert.ok(err <= TOL, `max |Δ log-prob| with the adapter ${err}`);
  const base: Qwen3Reference = await loadReference(model);
  assert.ok(maxLogprobError(logits, base.logits(seq), rows, V) > 1e-2, "the adapter changes the outputs");
});

Deno.test("the export directory holds the config, tokenizer, graph and external data transformers.js loads", async () => {
  const [dir, model] = await exported("f32");
  const config = JSON.parse(await Deno.readTextFile(join(dir, "config.json")));
  assert.equal(config.model_type, "qwen3");
  assert.deepEqual(config["transformers.js_config"], {
    dtype: "fp32",
    use_external_data_format: { "model.onnx": 1 },
  });
  for (const name of ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]) {
    assert.equal(await Deno.readTextFile(join(dir, name)), await Deno.readTextFile(join(model, name)), name);
  }
  const graph = (await Deno.stat(join(dir, "onnx", "model.onnx"))).size;
  const data = (await Deno.stat(join(dir, "onnx", "model.onnx_data"))).size;
  const cfg = (await openModelDir(model)).config;
  assert.ok(graph < 200_000, `graph ${graph} bytes: weights must not be inline`);
  assert.ok(data >= cfg.vocab_size * cfg.hidden_size * 4, `data ${data} bytes`);
  const names = [];
  for await (const e of Deno.readDir(join(dir, ".."))) names.push(e.name);
  assert.ok(!names.some((n) => n.includes(".tmp-")), `temporary directories left: ${names}`);
});

Deno.test("export refuses a bad adapter, the source directory and an unrelated directory", async () => {
  const model = await makeTinyModel();
  const cfg = (await openModelDir(model)).config;
  const tmp = await Deno.makeTempDir({ prefix: "export-refuse-" });
  try {
    const [adapter] = randomMergeAdapter(cfg, 3);
    const pair = adapter.pairs.get(modulePath(0, "q_proj"))!;
    const unknown = { scale: 1, pairs: new Map([["model.layers.9.self_attn.q_proj", pair]]) };
    await assert.rejects(
      exportForTransformersJs(model, join(tmp, "a"), { adapter: unknown }),
      (e) => e instanceof UserError && /layers\.9.*names no Linear/.test(e.message),
    );
    const wrong = { scale: 1, pairs: new Map([[modulePath(0, "k_proj"), pair]]) };
    await assert.rejects(
      exportForTransformersJs(model, join(tmp, "a"), { adapter: wrong }),
      (e) => e instanceof UserError && /k_proj.*B \[32, r\]/.test(e.message),
    );
    await assert.rejects(
      exportForTransformersJs(model, model),
      (e) => e instanceof UserError && /source model directory/.test(e.message),
    );
    await Deno.writeTextFile(join(tmp, "notes.txt"), "keep me");
    await assert.rejects(
      exportForTransformersJs(model, tmp),
      (e) => e instanceof UserError && /not a previous export/.test(e.message),
    );
    assert.equal(await Deno.readTextFile(join(tmp, "notes.txt")), "keep me");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("exporting over a previous export replaces it", async () => {
  const model = await makeTinyModel();
  const tmp = await Deno.makeTempDir({ prefix: "export-replace-" });
  try {
    const out = join(tmp, "export");
    await exportForTransformersJs(model, out);
    await Deno.writeTextFile(join(out, "stale.txt"), "from before");
    await exportForTransformersJs(model, out);
    const names = [];
    for await (const e of Deno.readDir(out)) names.push(e.name);
    assert.ok(!names.includes("stale.txt"), "the old directory was replaced");
    assert.ok(names.includes("onnx"));
    const siblings = [];
    for await (const e of Deno.readDir(tmp)) siblings.push(e.name);
    assert.deepEqual(siblings, ["export"]);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("planWeights lays every weight out aligned, Linears transposed to [in, out], lm_head only when untied", () => {
  for (const tiedHead of [true, false]) {
    const cfg = randomQwen3Config({ ...TINY_PRESET, tiedHead });
    const plan = planWeights(cfg);
    assert.equal(plan.some((t) => t.name === "lm_head.weight"), !tiedHead);
    let end = 0;
    for (const t of plan) {
      assert.equal(t.offset % DATA_ALIGNMENT, 0, t.name);
      assert.ok(t.offset >= end, `${t.name} overlaps the tensor before it`);
      assert.equal(t.length, t.dims.reduce((a, b) => a * b, 1) * 4, t.name);
      end = t.offset + t.length;
    }
    const q = plan.find((t) => t.name === "model.layers.1.self_attn.q_proj.weight")!;
    const down = plan.find((t) => t.name === "model.layers.0.mlp.down_proj.weight")!;
    assert.deepEqual([q.dims, q.transposed, down.dims], [[64, 64], true, [128, 64]]);
  }
});

Deno.test("mergeInto adds scale · B · A and transpose swaps the axes", () => {
  const w = Float32Array.of(1, 2, 3, 4, 5, 6); // [2, 3]
  const pair = {
    a: Float32Array.of(1, 0, 2),
    aShape: [1, 3] as [number, number],
    b: Float32Array.of(1, -1),
    bShape: [2, 1] as [number, number],
  };
  mergeInto(w, 2, 3, pair, 0.5); // + 0.5 · [[1, 0, 2], [-1, 0, -2]]
  assert.deepEqual(Array.from(w), [1.5, 2, 4, 3.5, 5, 5]);
  assert.deepEqual(Array.from(transpose(w, 2, 3)), [1.5, 3.5, 2, 5, 4, 5]);
});

Deno.test("the transformers.js peer bench times prefill and decode on an export", async () => {
  const [dir] = await exported("untied");
  const r = await measureTransformersJsDecode({
    dir,
    batch: 2,
    promptLength: 5,
    newTokens: 4,
    repeats: 1,
    warmup: 0,
  });
  assert.equal(r.peer, "transformers.js");
  assert.equal(r.version, "4.3.1");
  assert.ok(r.prefillSeconds > 0 && r.decodeSeconds > 0, JSON.stringify(r));
  // Prefill and decode are spans of one call, stamped inside it.
  assert.ok(r.prefillSeconds + r.decodeSeconds <= r.totalSeconds, JSON.stringify(r));
  assert.equal(r.decodeTokensPerSecond, (2 * 3) / r.decodeSeconds);
});

Deno.test("the peer's step stamps split one call, and refuse a streamer called other than N + 1 times", () => {
  const stamps = new StepStamps();
  for (const ms of [1000, 1400, 1500, 1600]) stamps.ms.push(ms); // prompt, then 3 steps
  assert.deepEqual(stamps.split(990, 1610, 3), {
    totalSeconds: 0.62,
    prefillSeconds: 0.41,
    decodeSeconds: 0.2,
  });
  assert.throws(() => stamps.split(990, 1610, 4), /called the streamer 4 times for 4 new tokens/);
});
