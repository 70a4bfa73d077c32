/**
 * The adapter merged into the Linears (lib/engine/merged_weights.ts): each merged stack is `W + scale·B·A`
 * in the member's rows and W itself elsewhere; a policy fed the merged Linears gives the log-probs of the
 * float64 reference applying the adapter unmerged (PEFT's form, tests/reference), on the CPU and on
 * WebGPU in float32 and float16; setting another adapter merges again, and no adapter is the base model.
 * The unmerged graph (per-group adapter inputs, the CPU's default) gives the merged one's log-probs, and
 * `model.merge_adapter: auto` picks unmerged on the CPU and merged on WebGPU.
 *
 * Tiny random models with a 512-token vocabulary (no tokenizer).
 */

import assert from "node:assert/strict";
import { MergedWeights } from "../../lib/engine/merged_weights.ts";
import { InferenceEngine } from "../../lib/engine/engine.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { policyOptionsOf } from "../../lib/engine/policy_options.ts";
import { applyOverrides, defaultConfig } from "../../lib/config/mod.ts";
import { type ComputeDtype, PARITY_TOLERANCE } from "../../lib/model/graph/forms.ts";
import { type Adapter, loraScale, type LoraSpec, peftKey, type QwenLinear } from "../../lib/model/lora.ts";
import { linearShape, openModelDir, QWEN3_LINEAR_GROUPS } from "../../lib/model/model_dir.ts";
import { loadLinearStacks, sharedTensorData, stackedWeightName } from "../../lib/model/shared_weights.ts";
import type { ExecutionProvider } from "../../lib/ort/providers.ts";
import { randomAdapter, referenceLoraOf } from "../helpers/adapters.ts";
import { loadReference } from "../helpers/reference_model.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { webgpuTest } from "../helpers/webgpu.ts";
import { mulberry32 } from "../reference/weights.ts";

const ALL: LoraSpec = { r: 4, alpha: 8, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
const SOME: LoraSpec = { r: 2, alpha: 3, rslora: true, targets: ["k", "down"] };

function sequences(seed: number): number[][] {
  const rand = mulberry32(seed);
  return [12, 40].map((n) => Array.from({ length: n }, () => Math.floor(rand() * 500)));
}

/** Largest |a - b| over entries where both are numbers (entry 0 of a sequence is NaN). */
function maxError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    if (!Number.isNaN(a[i]) || !Number.isNaN(b[i])) max = Math.max(max, Math.abs(a[i] - b[i]));
  }
  return max;
}

Deno.test("a merged stack is W + scale·B·A in each adapted member's rows and W elsewhere", async () => {
  const model = await openModelDir(await makeTinyModel({ vocab: 512, tokenizer: false, seed: 3 }));
  const adapter = randomAdapter(model.config, SOME, 8, 0.3);
  const merge = await MergedWeights.create(model, SOME, "float32", null);
  try {
    const merged = await merge.merged(adapter.weights, loraScale(SOME));
    const base = await loadLinearStacks(model);
    const scale = loraScale(SOME);
    for (const t of base.tensors) {
      const w = sharedTensorData(base, t);
      const m = merged.get(t.name)!.data as Float32Array;
      const layer = Number(t.name.split(".")[2]);
      const group = QWEN3_LINEAR_GROUPS.find((grp) => stackedWeightName(layer, grp) === t.name)!;
      let row = 0;
      for (const linear of group) {
        const expected = expectedRows(w, row, linear, layer, adapter, scale, t.dims[1]);
        const got = m.subarray(row * t.dims[1], row * t.dims[1] + expected.length);
        assert.ok(maxError(got, expected) <= 1e-6, `${t.name}: ${linear}'s rows`);
        row += linearShape(model.config, linear)[0];
      }
    }
    const none = await merge.merged(null, 0);
    for (const t of base.tensors) {
      assert.deepEqual(none.get(t.name)!.data, sharedTensorData(base, t), `${t.name}: no adapter is W`);
    }
  } finally {
    await merge.close();
  }

  /** A member's rows of the merged stack, in float64: W, plus scale·B·A where it has an adapter. */
  function expectedRows(
    w: Float32Array,
    row: number,
    linear: QwenLinear,
    layer: number,
    adapter: Adapter,
    scale: number,
    inDim: number,
  ): Float64Array {
    const outDim = linearShape(model.config, linear)[0];
    const rows = Float64Array.from(w.subarray(row * inDim, (row + outDim) * inDim));
    const a = adapter.weights.get(peftKey(layer, linear, "A")); // [r, in]
    const b = adapter.weights.get(peftKey(layer, linear, "B")); // [out, r]
    if (!a || !b) return rows;
    const r = a.length / inDim;
    for (let i = 0; i < outDim; i++) {
      for (let j = 0; j < inDim; j++) {
        let s = 0;
        for (let k = 0; k < r; k++) s += b[i * r + k] * a[k * inDim + j];
        rows[i * inDim + j] += scale * s;
      }
    }
    return rows;
  }
});

/** Max |Δ log-prob| of a merged policy against the float64 reference with the adapter unmerged. */
async function mergedError(ep: ExecutionProvider, compute: ComputeDtype, layers: number): Promise<number> {
  const dir = await makeTinyModel({ layers, vocab: 512, tokenizer: false, seed: 11 });
  const cfg = (await openModelDir(dir)).config;
  const adapter = randomAdapter(cfg, ALL, 5, 0.2);
  const ref = await loadReference(dir, referenceLoraOf(cfg, adapter));
  const base = await loadReference(dir);
  const seqs = sequences(9);
  const policy = await LocalPolicy.load(dir, { adapter, ep, compute, mergeAdapter: true });
  try {
    const lps = await policy.logprobs(seqs);
    seqs.forEach((s, i) => {
      assert.ok(maxError(lps[i], base.logprobs(s)) > 0.05, "the adapter changes the log-probs");
    });
    return Math.max(...seqs.map((s, i) => maxError(lps[i], ref.logprobs(s))));
  } finally {
    await policy.close();
  }
}

Deno.test("a policy with its adapter merged gives the unmerged float64 reference's log-probs (CPU)", async () => {
  for (const layers of [2, 28]) {
    const error = await mergedError("cpu", "float32", layers);
    assert.ok(error <= PARITY_TOLERANCE.float32.logprob, `${layers} layers: max |Δ log-prob| ${error}`);
  }
});

webgpuTest("a merged policy on WebGPU stays within the parity tolerance of the reference", async () => {
  for (const compute of ["float32", "float16"] as const) {
    const error = await mergedError("webgpu", compute, 2);
    assert.ok(error <= PARITY_TOLERANCE[compute].logprob, `${compute}: max |Δ log-prob| ${error}`);
  }
});

Deno.test("setting another adapter merges it again; no adapter gives the base model (merged and not)", async () => {
  const dir = await makeTinyModel({ vocab: 512, tokenizer: false, seed: 4 });
  const cfg = (await openModelDir(dir)).config;
  const [first, second] = [6, 7].map((seed) => randomAdapter(cfg, ALL, seed, 0.2));
  const seqs = sequences(2);
  const plain = await LocalPolicy.load(dir);
  try {
    for (const mergeAdapter of [true, false]) {
      const policy = await LocalPolicy.load(dir, { adapter: first, mergeAdapter });
      try {
        await policy.setAdapter(second);
        const ref = await loadReference(dir, referenceLoraOf(cfg, second));
        const lps = await policy.logprobs(seqs);
        seqs.forEach((s, i) =>
          assert.ok(maxError(lps[i], ref.logprobs(s)) < 1e-4, `${mergeAdapter}: second`)
        );
        await policy.setAdapter(null);
        const [off, base] = [await policy.logprobs(seqs), await plain.logprobs(seqs)];
        seqs.forEach((_, i) => assert.ok(maxError(off[i], base[i]) < 1e-5, `${mergeAdapter}: no adapter`));
      } finally {
        await policy.close();
      }
    }
  } finally {
    await plain.close();
  }
});

Deno.test("the unmerged graph gives the merged graph's log-probs (CPU float32, 2 and 28 layers)", async () => {
  for (const layers of [2, 28]) {
    const dir = await makeTinyModel({ layers, vocab: 512, tokenizer: false, seed: 12 });
    const adapter = randomAdapter((await openModelDir(dir)).config, ALL, 5, 0.2);
    const seqs = sequences(3);
    const [merged, unmerged] = await Promise.all(
      [true, false].map((mergeAdapter) => LocalPolicy.load(dir, { adapter, mergeAdapter })),
    );
    try {
      const [a, b] = [await merged.logprobs(seqs), await unmerged.logprobs(seqs)];
      const base = await loadReference(dir);
      seqs.forEach((s, i) => {
        assert.ok(maxError(b[i], base.logprobs(s)) > 0.05, `${layers} layers: the unmerged adapter applies`);
        const error = maxError(a[i], b[i]);
        assert.ok(error <= PARITY_TOLERANCE.float32.logprob, `${layers} layers: max |Δ log-prob| ${error}`);
      });
    } finally {
      await Promise.all([merged.close(), unmerged.close()]);
    }
  }
});

/** Whether an engine for adapters of `ALL`'s shape on `ep` merges them, given `mergeAdapter`. */
async function engineMerges(ep: ExecutionProvider, mergeAdapter: boolean | undefined): Promise<boolean> {
  const model = await openModelDir(await makeTinyModel({ vocab: 512, tokenizer: false, seed: 4 }));
  const engine = await InferenceEngine.create(model, ALL, { ep, mergeAdapter });
  try {
    return engine.adapterMerged;
  } finally {
    await engine.close();
  }
}

/** `PolicyOptions.mergeAdapter` from a configuration with `model.merge_adapter` overridden to `text`. */
function configured(text: string): boolean | undefined {
  return policyOptionsOf(applyOverrides(defaultConfig(), [["model.merge_adapter", text]])).mergeAdapter;
}

Deno.test("model.merge_adapter: auto leaves it to the provider, true and false force it (CPU)", async () => {
  assert.deepEqual(["auto", "true", "false"].map(configured), [undefined, true, false]);
  assert.equal(policyOptionsOf(defaultConfig()).mergeAdapter, undefined, "auto is the default");
  assert.equal(await engineMerges("cpu", undefined), false, "auto: unmerged on the CPU");
  assert.equal(await engineMerges("cpu", true), true, "true: merged on the CPU");
});

webgpuTest("model.merge_adapter: auto merges on WebGPU, false does not", async () => {
  assert.equal(await engineMerges("webgpu", undefined), true, "auto: merged on WebGPU");
  assert.equal(await engineMerges("webgpu", false), false, "false: unmerged on WebGPU");
});
