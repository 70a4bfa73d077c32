/**
 * The plain decode steps' own session (lib/engine/decode_session.ts) over the If-free decode graph, on
 * onnxruntime's WebGPU provider, uncaptured (`model.webgpu.decode_graph`, the default there) and under graph
 * capture (`model.webgpu.graph_capture`), against the same engine running every step on its main graph
 * (`decode_graph` false): the same tokens and log-probs, greedy and sampled, float32 and float16, with an
 * adapter, through a second turn under another adapter (set after the first steps were bound, or captured)
 * whose continuation runs on the main graph on the same cache; every decode step went through the decode
 * session; steps called at once on two caches each get their own cache's token; a sequence's bits do not
 * depend on the other sequences in flight, which set the attention's span; prompts staged into a cache's
 * later rows leave its decode binding (and so its captured graph) as it was, past the cache pool's limit
 * too, where a continuation runs after the staging grew. And what capture needs from
 * onnxruntime 1.30 itself: several captured graphs in one session, picked by `gpu_graph_id`, -1 running
 * uncaptured; a graph with an If refused with onnxruntime's message.
 *
 * Runs where WebGPU starts (CI: lavapipe) and is skipped elsewhere (helpers/webgpu.ts).
 */

import assert from "node:assert/strict";
import { InferenceEngine } from "../../lib/engine/engine.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { attentionSpan, CAPTURE_SPAN_MIN, captureRefusal } from "../../lib/engine/decode_session.ts";
import { UserError } from "../../lib/errors.ts";
import { GenerationBatch } from "../../lib/engine/generate.ts";
import { POOLED_CACHES } from "../../lib/engine/cache_pool.ts";
import { type Generation, TurnScheduler } from "../../lib/engine/scheduler.ts";
import { loraScale } from "../../lib/model/lora.ts";
import type { LoraSpec } from "../../lib/model/lora.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import type { ComputeDtype } from "../../lib/model/graph/forms.ts";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import { OPS } from "../../lib/onnx/ops.ts";
import { OrtError } from "../../lib/ort/api.ts";
import { OrtSession } from "../../lib/ort/session.ts";
import { OrtTensor } from "../../lib/ort/value.ts";
import { RunOptions } from "../../lib/ort/run_options.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { webgpuTest } from "../helpers/webgpu.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
/**
 * Log-prob tolerance: the decode graph runs the main graph's kernels on the same weights, and capture
 * replays them on the same buffers, so the bits match (0 seen).
 */
const TOLERANCE = 1e-3;

/** Where an engine runs its plain decode steps. */
type DecodeMode = "main graph" | "decode graph" | "captured";

/** An engine on WebGPU computing in `compute` with a random adapter, running decode steps as `mode` says. */
async function engine(compute: ComputeDtype, mode: DecodeMode): Promise<InferenceEngine> {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11, dtype: "bfloat16" });
  const model = await openModelDir(dir);
  // Entries in ±0.5, not the default ±0.05: an adapter that moves the log-probs well past TOLERANCE, so
  // a captured graph that misses it (fed the base weights, say) fails.
  const adapter = randomAdapter(model.config, SPEC, 5, 0.5);
  const e = await InferenceEngine.create(model, SPEC, {
    ep: "webgpu",
    compute,
    decodeGraph: mode !== "main graph",
    graphCapture: mode === "captured",
  });
  await e.setLoraWeights(adapter.weights, loraScale(SPEC));
  return e;
}

/**
 * Two turns of three sequences (greedy, then sampled after a user turn, under a second adapter set between
 * the turns: the decode session's bound weights, and a captured graph replayed, must read it); the tokens and
 * the decode steps.
 */
async function rollout(e: InferenceEngine) {
  const prompts = [[1, 2, 3, 4, 5], [7, 8, 9], [20, 30, 40, 50, 60, 70, 80]];
  const batch = new GenerationBatch(e, prompts, 40, [3, 4, 5]);
  try {
    const first = await batch.generate({ maxNewTokens: 8, temperature: 0 });
    batch.append(0, [11, 12, 13]); // a continuation: uncaptured, on the rows the captured graph reads
    await e.setLoraWeights(randomAdapter(e.config, SPEC, 6, 0.5).weights, loraScale(SPEC));
    const second = await batch.generate({ maxNewTokens: 8, temperature: 1 });
    return { turns: [first, second], decodeSteps: batch.stats.decodeSteps };
  } finally {
    batch.release();
  }
}

for (const compute of ["float32", "float16"] as const) {
  webgpuTest(
    `${compute}: the decode graph, uncaptured and captured, gives the main graph's tokens and log-probs, greedy and sampled`,
    async () => {
      const plain = await engine(compute, "main graph");
      const expected = await rollout(plain).finally(() => plain.close());
      assert.equal(plain.decodeGraphSteps, 0, "decode_graph false: every step on the main graph");
      for (const mode of ["decode graph", "captured"] as const) {
        const e = await engine(compute, mode);
        const got = await rollout(e).finally(() => e.close());
        assert.ok(got.decodeSteps > 0);
        assert.equal(
          e.decodeGraphSteps,
          got.decodeSteps,
          `${mode}: every decode step ran on the decode graph`,
        );
        assert.equal(
          e.capturedDecodeSteps,
          mode === "captured" ? got.decodeSteps : 0,
          `${mode}: captured steps`,
        );
        expected.turns.forEach((turn, t) =>
          turn.forEach((want, i) => {
            const have = got.turns[t][i];
            assert.deepEqual(have.tokens, want.tokens, `${mode}, turn ${t}, sequence ${i}: tokens`);
            const worst = Math.max(...want.logprobs.map((lp, j) => Math.abs(lp - have.logprobs[j])));
            assert.ok(
              worst <= TOLERANCE,
              `${mode}, turn ${t}, sequence ${i}: worst log-prob difference ${worst}`,
            );
          })
        );
      }
    },
  );
}

webgpuTest(
  "sequences growing past a captured graph's attention span continue in a second graph, with the main graph's tokens and log-probs",
  async () => {
    // The longest prompt caches 252 positions, so its decode steps write at 252, 253, …: the first ones
    // attend over CAPTURE_SPAN_MIN = 256 positions, the later ones over 512. A graph replayed past its span
    // would leave the last positions out of the attention.
    const prompts = [253, 240, 250].map((n, i) => Array.from({ length: n }, (_, j) => (j * 7 + i) % VOCAB));
    const generate = async (mode: DecodeMode) => {
      const e = await engine("float32", mode);
      const batch = new GenerationBatch(e, prompts, 600, [3, 4, 5]);
      try {
        const turn = await batch.generate({ maxNewTokens: 12, temperature: 1 });
        return {
          turn,
          graphs: e.capturedDecodeGraphs,
          steps: e.decodeGraphSteps,
          decodeSteps: batch.stats.decodeSteps,
        };
      } finally {
        batch.release();
        await e.close();
      }
    };
    const expected = await generate("main graph");
    for (const mode of ["decode graph", "captured"] as const) {
      const got = await generate(mode);
      assert.equal(got.steps, got.decodeSteps, `${mode}: every decode step on the decode graph`);
      assert.equal(got.graphs, mode === "captured" ? 2 : 0, `${mode}: graphs captured (spans 256 and 512)`);
      expected.turn.forEach((want, i) => {
        const have = got.turn[i];
        assert.deepEqual(have.tokens, want.tokens, `${mode}, sequence ${i}: tokens`);
        const worst = Math.max(...want.logprobs.map((lp, j) => Math.abs(lp - have.logprobs[j])));
        assert.ok(worst <= TOLERANCE, `${mode}, sequence ${i}: worst log-prob difference ${worst}`);
      });
    }
  },
);

webgpuTest(
  "a sequence decodes the same bits alone and beside a longer one, whose length sets the attention span",
  async () => {
    // Exact batching (scheduler.ts) promises log-probs that do not depend on what else is in flight; the
    // decode session's span is the longest sequence's length (or its captured bucket), so here B moves A's
    // span from 17 to 316 positions (from the 256 graph to the 512 one, captured).
    const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 });
    const [a, b] = [[11, 22, 33, 44], Array.from({ length: 300 }, (_, i) => (i * 13) % VOCAB)];
    for (const graphCapture of [false, true]) {
      const policy = await LocalPolicy.load(dir, { ep: "webgpu", maxSequences: 4, graphCapture });
      try {
        const decodeA = async (beside: boolean) => {
          const first = await policy.openSequence(a, { seed: 1, capacity: 1024 });
          const other = beside ? await policy.openSequence(b, { seed: 2, capacity: 1024 }) : null;
          const turn = { maxNewTokens: 16, temperature: 1 };
          const [got] = await Promise.all([first.generate(turn), other?.generate(turn)]);
          await first.close();
          await other?.close();
          return { tokens: got.tokens, logprobs: got.logprobs };
        };
        const alone = await decodeA(false);
        assert.deepEqual(await decodeA(true), alone, `graph_capture ${graphCapture}`);
      } finally {
        await policy.close();
      }
    }
  },
);

Deno.test("a decode step attends over its longest sequence; a captured one over the span of the series that holds it", () => {
  assert.equal(attentionSpan([2, 40, 7], 16_384, false), 41);
  assert.equal(attentionSpan([2, 40, 7], 16_384, true), CAPTURE_SPAN_MIN);
  assert.equal(attentionSpan([CAPTURE_SPAN_MIN - 1], 16_384, true), CAPTURE_SPAN_MIN);
  assert.equal(attentionSpan([CAPTURE_SPAN_MIN], 16_384, true), 2 * CAPTURE_SPAN_MIN);
  assert.equal(attentionSpan([5000], 16_384, true), 8192);
  assert.equal(attentionSpan([5000], 6000, true), 6000, "at most the capacity");
  assert.equal(attentionSpan([30], 40, true), 40, "a cache smaller than the series' first span");
  assert.throws(() => attentionSpan([40], 40, false), /reaches position 40 of a 40-position cache/);
});

webgpuTest(
  "without FFI (onnxruntime-node's binding, no device bindings) a WebGPU engine decodes on its main graph, with its adapter merged",
  async () => {
    const plain = await engine("float32", "main graph");
    const expected = await rollout(plain).finally(() => plain.close());
    Deno.env.set("DENO_RL_ORT_FFI", "0"); // read by lib/engine/session.ts at each session it opens
    try {
      // The merge reads the Linear stacks from a SharedArrayBuffer, which the binding takes only as a copy.
      const e = await engine("float32", "decode graph");
      assert.ok(e.adapterMerged);
      const got = await rollout(e).finally(() => e.close());
      assert.ok(got.decodeSteps > 0);
      assert.equal(e.decodeGraphSteps, 0, "no decode session without device bindings");
      expected.turns.forEach((turn, t) =>
        turn.forEach((want, i) =>
          assert.deepEqual(got.turns[t][i].tokens, want.tokens, `turn ${t}, sequence ${i}`)
        )
      );
    } finally {
      Deno.env.delete("DENO_RL_ORT_FFI");
    }
  },
);

webgpuTest(
  "uncaptured decode steps on many batches do not hold the memory of the caches released",
  async () => {
    const model = await openModelDir(await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 }));
    const e = await InferenceEngine.create(model, null, { ep: "webgpu", decodeGraph: true });
    try {
      const [rows, capacity, batches] = [8, 4000, 20];
      const probe = e.createCache(rows, capacity);
      const cacheBytes = probe.bytes; // 16 MB: device memory is host memory on lavapipe
      probe.release();
      const generate = async () => {
        const prompts = Array.from({ length: rows }, (_, i) => [1, 2, 3 + i]);
        const batch = new GenerationBatch(e, prompts, capacity, Array(rows).fill(3));
        await batch.generate({ maxNewTokens: 3, temperature: 0 });
        batch.release();
      };
      await generate(); // warm-up: sessions, kernels, the first cache
      const before = Deno.memoryUsage().rss;
      for (let i = 0; i < batches; i++) await generate();
      const grown = Deno.memoryUsage().rss - before;
      assert.ok(e.decodeGraphSteps > 0, "the steps ran in the decode session");
      // Held, the caches would add batches × cacheBytes (320 MB; measured 16 MB a batch before the fix).
      assert.ok(
        grown < (batches * cacheBytes) / 4,
        `RSS grew ${(grown / 2 ** 20).toFixed(0)} MB over ${batches} batches of ${
          (cacheBytes / 2 ** 20).toFixed(0)
        } MB caches`,
      );
    } finally {
      await e.close();
    }
  },
);

/** Each batch's generations have the expected tokens and log-probs (within TOLERANCE). */
function assertSameTurns(got: readonly Generation[][], expected: readonly Generation[][]): void {
  expected.forEach((turn, t) =>
    turn.forEach((want, i) => {
      const have = got[t][i];
      assert.deepEqual(have.tokens, want.tokens, `batch ${t}, sequence ${i}: tokens`);
      const worst = Math.max(...want.logprobs.map((lp, j) => Math.abs(lp - have.logprobs[j])));
      assert.ok(worst <= TOLERANCE, `batch ${t}, sequence ${i}: worst log-prob difference ${worst}`);
    })
  );
}

webgpuTest(
  "under graph capture, batches of one size and capacity reuse one cache: no new graphs or memory per batch, and each decodes as on a fresh cache",
  async () => {
    const model = await openModelDir(await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 }));
    const [rows, capacity, batches] = [8, 4000, 12];
    // Batch i's prompts are shorter than batch i-1's, so a cache given again holds the last batch's keys and
    // values past the new sequences' lengths, which nothing may read.
    const prompts = (i: number) =>
      Array.from(
        { length: rows },
        (_, r) => Array.from({ length: 3 + batches - i + (r % 3) }, (_, t) => (t * 31 + r * 7 + i) % VOCAB),
      );
    const run = async (graphCapture: boolean) => {
      const e = await InferenceEngine.create(model, null, { ep: "webgpu", decodeGraph: true, graphCapture });
      try {
        const probe = e.createCache(rows, capacity);
        const cacheBytes = probe.bytes; // 16 MB: device memory is host memory on lavapipe
        probe.release();
        const turns = [];
        let before = 0;
        for (let i = 0; i < batches; i++) {
          if (i === 1) before = Deno.memoryUsage().rss; // after the first batch: sessions, kernels, a cache
          const batch = new GenerationBatch(e, prompts(i), capacity, Array(rows).fill(i + 1));
          turns.push(await batch.generate({ maxNewTokens: 4, temperature: 1 }));
          batch.release();
        }
        const grown = Deno.memoryUsage().rss - before;
        return { turns, grown, cacheBytes, graphs: e.capturedDecodeGraphs, steps: e.capturedDecodeSteps };
      } finally {
        await e.close();
      }
    };
    const fresh = await run(false);
    const reused = await run(true);
    assert.ok(reused.steps > 0, "the steps ran captured");
    // One graph per decode width at most (8 rows, every sequence shorter than the first span); a cache per
    // batch would capture at least one graph per batch.
    assert.ok(reused.graphs <= rows, `${reused.graphs} graphs captured over ${batches} batches`);
    assert.ok(
      reused.grown < ((batches - 1) * reused.cacheBytes) / 4,
      `RSS grew ${(reused.grown / 2 ** 20).toFixed(0)} MB over ${batches - 1} batches of ${
        (reused.cacheBytes / 2 ** 20).toFixed(0)
      } MB caches`,
    );
    assertSameTurns(reused.turns, fresh.turns);
  },
);

webgpuTest(
  "under graph capture, batches of more shapes than the cache pool keeps decode on the main graph and free their caches; a lasting scheduler's steps are still captured",
  async () => {
    const model = await openModelDir(await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 }));
    const rows = 8;
    const shapes = POOLED_CACHES + 4; // each batch a capacity of its own
    const prompts = (i: number) => Array.from({ length: rows }, (_, r) => [1 + r, 2 + i, 3, 4 + (r % 3)]);
    const run = async (graphCapture: boolean) => {
      const e = await InferenceEngine.create(model, null, { ep: "webgpu", decodeGraph: true, graphCapture });
      try {
        const turns = [];
        const graphs = [];
        const decodeSessionSteps = [];
        let before = 0;
        for (let i = 0; i < shapes; i++) {
          if (i === POOLED_CACHES) before = Deno.memoryUsage().rss; // the pool is full from here
          const batch = new GenerationBatch(e, prompts(i), 4000 + i, Array(rows).fill(i + 1));
          turns.push(await batch.generate({ maxNewTokens: 4, temperature: 1 }));
          batch.release();
          graphs.push(e.capturedDecodeGraphs);
          decodeSessionSteps.push(e.decodeGraphSteps);
        }
        const grown = Deno.memoryUsage().rss - before;
        // A policy's rollout scheduler keeps its cache for the policy's life (local_policy.ts): pooled and
        // captured even with the pool full.
        const lasting = new TurnScheduler(e, 2, 300, { lasting: true });
        const stepsBefore = e.capturedDecodeSteps;
        const slot = await lasting.openSequence([5, 6, 7], 9);
        turns.push([await lasting.generate(slot, { maxNewTokens: 4, temperature: 1 })]);
        lasting.close(slot);
        const rolloutCaptured = e.capturedDecodeSteps - stepsBefore;
        lasting.release();
        return { turns, graphs, decodeSessionSteps, grown, rolloutCaptured };
      } finally {
        await e.close();
      }
    };
    const fresh = await run(false);
    const bounded = await run(true);
    const cacheBytes = rows * 4000 * 2 * 64 * 4 * 2 * 2; // keys and values, 2 layers: 16 MB (tiny model)
    assert.ok(bounded.graphs[POOLED_CACHES - 1] > 0, "the pool's caches were captured");
    assert.equal(
      bounded.graphs.at(-1),
      bounded.graphs[POOLED_CACHES - 1],
      "no graph captured past the pool's limit",
    );
    assert.equal(
      bounded.decodeSessionSteps.at(-1),
      bounded.decodeSessionSteps[POOLED_CACHES - 1],
      "past the pool's limit the steps ran on the main graph",
    );
    assert.ok(bounded.rolloutCaptured > 0, "the lasting scheduler's steps ran captured");
    assert.ok(
      bounded.grown < ((shapes - POOLED_CACHES) * cacheBytes) / 4,
      `RSS grew ${(bounded.grown / 2 ** 20).toFixed(0)} MB over ${
        shapes - POOLED_CACHES
      } batches past the pool`,
    );
    assertSameTurns(bounded.turns, fresh.turns);
  },
);

webgpuTest(
  "decode steps called at once on two caches each give their own cache's token, uncaptured and captured",
  async () => {
    const model = await openModelDir(await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 }));
    for (const graphCapture of [false, true]) {
      const e = await InferenceEngine.create(model, null, { ep: "webgpu", decodeGraph: true, graphCapture });
      const sampling = { temperature: 0, topK: 0, topP: 1 };
      const prompts = [[1, 2, 3], [400, 300, 200]];
      /** Two caches holding the prompts; then one decode step on each, called at once or one after the other. */
      const decode = async (atOnce: boolean) => {
        const caches = prompts.map(() => e.createCache(1, 64));
        try {
          for (const [i, ids] of prompts.entries()) {
            const cache = caches[i].range(0, 1);
            await e.step({
              ids,
              batch: 1,
              width: 3,
              seqlens: [2],
              sampleAt: [2],
              uniforms: [0.5],
              sampling,
              cache,
            });
          }
          const step = (i: number) =>
            e.step({
              ids: [prompts[i][0]],
              batch: 1,
              width: 1,
              seqlens: [3],
              sampleAt: [0],
              uniforms: [0.5],
              sampling,
              cache: caches[i].range(0, 1),
            });
          return atOnce ? await Promise.all([step(0), step(1)]) : [await step(0), await step(1)];
        } finally {
          caches.forEach((c) => c.release());
        }
      };
      try {
        const alone = await decode(false);
        assert.notDeepEqual(alone[0], alone[1], "the two caches' steps differ, so a swap would show");
        assert.deepEqual(await decode(true), alone, `graph_capture ${graphCapture}`);
        assert.ok(e.decodeGraphSteps >= 4, "the steps ran in the decode session");
      } finally {
        await e.close();
      }
    }
  },
);

/**
 * Steps on a 4-row cache as a rollout makes them: a prefill of every row, a decode step, prompts prefilled
 * into row 1 and then rows 2–3 (staged rows: the second grows the staging cache), a continuation on row 1
 * (through the grown staging), and a decode step again. Each step's tokens and log-probs, and the graphs
 * the engine had captured after each decode step.
 */
async function stagedRows(e: InferenceEngine, cache: ReturnType<InferenceEngine["createCache"]>) {
  const sampling = { temperature: 0, topK: 0, topP: 1 };
  const steps: Awaited<ReturnType<InferenceEngine["step"]>>[] = [];
  const graphs: number[] = [];
  const step = async (from: number, to: number, ids: number[], width: number, seqlens: number[]) => {
    const batch = to - from;
    const out = await e.step({
      ids,
      batch,
      width,
      seqlens,
      sampleAt: Array(batch).fill(width - 1),
      uniforms: Array(batch).fill(0.5),
      sampling,
      cache: cache.range(from, to),
    });
    steps.push(out);
    return out.tokens;
  };
  const first = await step(0, 4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 3, [2, 2, 2, 2]);
  const second = await step(0, 4, first, 1, [3, 3, 3, 3]);
  graphs.push(e.capturedDecodeGraphs);
  const row1 = await step(1, 2, [40, 41, 42], 3, [2]);
  const rows23 = await step(2, 4, [50, 51, 52, 60, 61, 62], 3, [2, 2]);
  const [row1Next] = await step(1, 2, [row1[0], 43], 2, [4]);
  await step(0, 4, [second[0], row1Next, ...rows23], 1, [4, 5, 3, 3]);
  graphs.push(e.capturedDecodeGraphs);
  return { steps, graphs };
}

webgpuTest(
  "under graph capture, prompts staged into later rows keep the cache's decode binding (its graph replayed), and past the cache pool's limit a continuation runs after the staging grew",
  async () => {
    const model = await openModelDir(await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 }));
    const run = async (graphCapture: boolean, poolFull: boolean) => {
      const e = await InferenceEngine.create(model, null, { ep: "webgpu", decodeGraph: true, graphCapture });
      try {
        if (poolFull) { for (let i = 0; i < POOLED_CACHES; i++) e.createCache(4, 100 + i).release(); }
        const cache = e.createCache(4, 64);
        try {
          return await stagedRows(e, cache);
        } finally {
          cache.release();
        }
      } finally {
        await e.close();
      }
    };
    const plain = await run(false, false);
    const captured = await run(true, false);
    assert.ok(captured.graphs[0] > 0, "the first decode step was captured");
    assert.equal(
      captured.graphs[1],
      captured.graphs[0],
      "the second decode step replayed the first one's graph: the rows staged since kept its binding",
    );
    const pastLimit = await run(true, true);
    for (const got of [captured, pastLimit]) {
      got.steps.forEach((s, i) => {
        assert.deepEqual(s.tokens, plain.steps[i].tokens, `step ${i}: tokens`);
        s.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - plain.steps[i].logprobs[j]) <= TOLERANCE));
      });
    }
  },
);

/** y = x + x over n floats, with x and y bound in device memory. */
function addSession(options: Record<string, string>) {
  const g = new GraphBuilder("add");
  const x = g.input("x", "float32", ["n"]);
  g.output(OPS.Add.emit(g, x, x), "y", ["n"]); // [n]
  const session = OrtSession.create(g.toModel(), {
    providers: ["webgpu"],
    providerOptions: { webgpu: options },
  });
  const memory = session.deviceMemory("webgpu");
  /** A binding of n floats run under `graphId`: call it with a start value, get 2·(start + i). */
  const graph = (n: number, graphId: number) => {
    const [x, y] = [memory.tensor("float32", [n]), memory.tensor("float32", [n])];
    const binding = session.createBinding();
    binding.input("x", x);
    binding.output("y", y);
    const run = new RunOptions({ gpu_graph_id: String(graphId) });
    return (start: number) => {
      memory.upload([[
        new OrtTensor("float32", Float32Array.from({ length: n }, (_, i) => start + i), [n]),
        x,
      ]]);
      session.runBinding(binding, run);
      const out = new Float32Array(n);
      memory.download([[y, new OrtTensor("float32", out, [n])]]);
      return Array.from(out);
    };
  };
  return { graph, release: () => (memory.release(), session.release()) };
}

webgpuTest(
  "one session holds a captured graph per gpu_graph_id; -1 runs uncaptured; replays read new inputs",
  () => {
    const { graph, release } = addSession({ enableGraphCapture: "1" });
    try {
      const [a, b, plain] = [graph(3, 1), graph(5, 2), graph(3, -1)];
      assert.deepEqual(a(1), [2, 4, 6]); // captured
      assert.deepEqual(a(10), [20, 22, 24]); // replayed, on the new input
      assert.deepEqual(b(100), [200, 202, 204, 206, 208]); // a second graph, another shape
      assert.deepEqual(a(1000), [2000, 2002, 2004]); // the first again
      assert.deepEqual(plain(7), [14, 16, 18]);
    } finally {
      release();
    }
    return Promise.resolve();
  },
);

webgpuTest(
  "graph capture refuses a graph with an If, with onnxruntime's message, said as a config fix",
  () => {
    const g = new GraphBuilder("branch");
    const c = g.input("c", "bool", []);
    const x = g.input("x", "float32", [2]);
    const [y] = OPS.If.emit(g, c, (b) => [OPS.Add.emit(b, x, x)], (b) => [OPS.Mul.emit(b, x, x)], "branch");
    g.output(y, "y", [2]);
    let refused: unknown;
    assert.throws(
      () =>
        OrtSession.create(g.toModel(), {
          providers: ["webgpu"],
          providerOptions: { webgpu: { enableGraphCapture: "1" } },
          logSeverity: "fatal",
        }),
      (e: unknown) => {
        refused = e;
        return e instanceof OrtError && /graph capture.*control flow nodes/.test(e.ortMessage);
      },
    );
    const said = captureRefusal(refused);
    assert.ok(said instanceof UserError);
    assert.match(said.message, /^model\.webgpu\.graph_capture \(got true\): onnxruntime refused to capture/);
    assert.match(said.message, /control flow nodes/);
    assert.match(said.message, /Fix: set model\.webgpu\.graph_capture false/);
    // As the engine's session error words it: onnxruntime's sentence, then the provider check's fix.
    const wrapped = captureRefusal(
      new Error(
        "model.ep webgpu: onnxruntime could not start a session on it: This session cannot use the graph " +
          "capture feature as requested by the user as all compute graph nodes have not been partitioned to " +
          "the WebGpuExecutionProvider. Fix: install a Vulkan driver Dawn accepts",
      ),
    );
    assert.ok(wrapped instanceof UserError);
    assert.match(wrapped.message, /partitioned to the WebGpuExecutionProvider\. Fix: set model\.webgpu/);
    assert.doesNotMatch(wrapped.message, /Vulkan/);
    const other = new Error("something else");
    assert.equal(captureRefusal(other), other);
    return Promise.resolve();
  },
);

Deno.test("graph capture on another provider is refused before a session opens", async () => {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 });
  const model = await openModelDir(dir);
  await assert.rejects(
    () => InferenceEngine.create(model, null, { ep: "cpu", graphCapture: true }),
    /graph capture: model.ep is cpu; it needs webgpu/,
  );
});
