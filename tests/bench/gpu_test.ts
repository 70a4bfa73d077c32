/**
 * `deno task bench --only gpu` at a tiny size on WebGPU (CI: lavapipe): the command a GPU machine runs,
 * end to end — our train step at two sizes and decode at the configured batches on the provider, the
 * PyTorch peer (reported unavailable where torch, transformers or peft are missing), the device's name, the
 * Markdown tables, and the diagnosis read from onnxruntime's profile (kernels of one decode step and one
 * train micro-batch run, in the table and the JSON), decode again with every step on the main graph
 * (WebGPU's `model.webgpu.decode_graph` false) and under graph capture (`model.webgpu.graph_capture`) beside
 * it, once more in a long cache (`bench.gpu_long_cache`), and each Linear's GEMM forms timed
 * (bench/gemm_forms.ts); the results files are saved after each part, so a run stopped for time keeps what it
 * measured. Runs where WebGPU starts, like tests/engine/webgpu_test.ts; its output goes to a temporary --out
 * folder. The defaults (train at 512 and
 * 8,192 tokens, decode up to batch 64) are checked against the configuration, not run here.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { gpuTables } from "../../bench/gpu.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { command } from "../helpers/commands.ts";
import { webgpuTest } from "../helpers/webgpu.ts";

const TRAIN_TOKENS = [16, 32];
const BATCHES = [1, 2];

Deno.test("bench.gpu_train_tokens and bench.gpu_batches default to 512 and 8,192 tokens and batches 1 to 64, and the long cache to 8,192 positions", async () => {
  const { config } = await loadConfig({});
  assert.deepEqual(config.bench.gpu_train_tokens, [512, 8192]);
  assert.deepEqual(config.bench.gpu_batches, [1, 8, 32, 64]);
  assert.equal(config.bench.gpu_long_cache, 8192);
  assert.deepEqual(config.bench.batches, [1, 8, 32], "the CPU sections keep their own batches");
});

Deno.test("the decode table keeps its rows where the main graph or graph capture failed or was not measured, and says which", () => {
  const result = (decodeMainGraph: unknown, decodeCaptured: unknown) => ({
    device: { name: "GPU", peakTflops: null },
    settings: { ep: "webgpu", compute: "float16" },
    ours: {
      params: 1000,
      train: [],
      decode: [{ batch: 1, decode_tok_per_s: 50, decode_tflops_2n: 0.001 }],
      decode_main_graph: decodeMainGraph,
      decode_captured: decodeCaptured,
      profile: null,
    },
    peer: { error: "no torch" },
  });
  const decodeRow = (md: string) => rows(md, /^1$/)[0];
  const failed = gpuTables("m", result({ error: "no session" }, { error: "capture refused" })).join("\n");
  assert.match(failed, /^main-graph decode failed: no session$/m);
  assert.match(failed, /^graph-captured decode failed: capture refused$/m);
  assert.deepEqual(decodeRow(failed).slice(0, 7), ["1", "50.0", "0.001", "–", "–", "–", "–"]);
  const cuda = gpuTables("m", result(null, null)).join("\n");
  assert.doesNotMatch(cuda, /failed/);
  assert.deepEqual(decodeRow(cuda).slice(3, 7), ["–", "–", "–", "–"]);
  const all = gpuTables(
    "m",
    result([{ batch: 1, decode_tok_per_s: 40 }], [{ batch: 1, decode_tok_per_s: 75 }]),
  )
    .join("\n");
  assert.deepEqual(decodeRow(all).slice(3, 7), ["40.0", "1.25×", "75.0", "1.50×"]);
  assert.doesNotMatch(all, /long cache|-position cache/, "no long-cache line where it was not measured");
});

Deno.test("the long-cache decode row reads as a sentence beside the tight cache's rate, or says it failed", () => {
  const tables = (long: unknown) =>
    gpuTables("m", {
      device: { name: "GPU", peakTflops: null },
      settings: { ep: "webgpu", compute: "float16" },
      ours: { params: 1000, train: [], decode: [], decode_long_cache: long, profile: null },
      peer: { error: "no torch" },
    }).join("\n");
  const long = { batch: 8, capacity: 8192, decode_tok_per_s: 150, tight_decode_tok_per_s: 200 };
  assert.match(
    tables(long),
    /^Decode at batch 8 in a 8,192-position cache .*: 150\.0 tok\/s, 0\.75× the tight cache's\.$/m,
  );
  assert.match(tables({ error: "out of memory" }), /^Decode in a long cache failed: out of memory$/m);
});

/** The Markdown rows of a table whose first cell matches `first`. */
function rows(md: string, first: RegExp): string[][] {
  return md.split("\n").filter((l) => l.startsWith("| ")).map((l) => l.slice(2, -2).split(" | "))
    .filter((cells) => first.test(cells[0]));
}

/** The GPU section of a results file, as saved while the bench runs. */
interface SavedGpu {
  ours?: unknown;
  peer?: { error?: string };
  gemm?: { error?: string } | null;
}

/** Reads `out`'s results JSON every 50 ms until `stop()`, which returns each distinct GPU section seen. */
function watchResults(out: string) {
  const seen = new Map<string, SavedGpu>();
  const timer = setInterval(() => {
    for (const entry of Deno.readDirSync(out)) {
      if (!/^results-.*\.json$/.test(entry.name)) continue;
      const gpu = JSON.parse(Deno.readTextFileSync(join(out, entry.name)))["gpu:tiny"];
      if (gpu) seen.set(JSON.stringify([!!gpu.ours, gpu.peer?.error, gpu.gemm?.error]), gpu);
    }
  }, 50);
  return {
    stop: () => {
      clearInterval(timer);
      return Promise.resolve([...seen.values()]);
    },
  };
}

const positiveInteger = (x: unknown) => typeof x === "number" && Number.isInteger(x) && x > 0;

webgpuTest(
  "deno task bench --only gpu runs at a tiny size: a train row per size, a decode row per batch (main-graph and graph-captured beside it), and kernels from the profile",
  async () => {
    const out = await Deno.makeTempDir({ prefix: "bench-gpu-" });
    const seen = watchResults(out);
    const r = await command("bench/bench.ts", [
      "--only",
      "gpu",
      "--models",
      "tiny",
      "--out",
      out,
      `--bench.gpu_batches=[${BATCHES}]`,
      "--bench.prompt_tokens=8",
      "--bench.decode_tokens=3",
      "--bench.repeats=1",
      `--bench.gpu_train_tokens=[${TRAIN_TOKENS}]`,
      "--bench.gpu_gemm_tokens=[3]",
      "--bench.gpu_long_cache=64",
    ], { timeoutMs: 900_000 });
    const partial = await seen.stop();
    assert.equal(r.code, 0, r.stderr);
    assert.ok(
      partial.some((g) => g.ours && g.peer?.error?.startsWith("not reached") && g.gemm?.error),
      `the results were saved with ours measured, before the peer and the GEMM forms; saved states (ours, ` +
        `peer, gemm): ${JSON.stringify(partial.map((g) => [!!g.ours, g.peer?.error, g.gemm?.error]))}`,
    );
    assert.match(r.stderr, /^saved gpu:tiny at \d+ s$/m, "each save says when, on stderr");
    assert.match(r.stdout, /### GPU, tiny: webgpu, float16, on \S/);
    const train = rows(r.stdout, /^tiny$/);
    assert.deepEqual(train.map((c) => Number(c[1])), TRAIN_TOKENS, `a train row per size:\n${r.stdout}`);
    assert.ok(train.every((c) => Number(c[3]) > 0), "tokens/s");
    assert.ok(
      train.every((c) => Number(c[6]) > 0),
      `the log-probs pass's seconds, forward alone:\n${r.stdout}`,
    );
    const decode = rows(r.stdout, /^\d+$/);
    assert.deepEqual(decode.map((c) => Number(c[0])), BATCHES, `a decode row per batch:\n${r.stdout}`);
    assert.ok(decode.every((c) => Number(c[1]) > 0), "decode tokens/s");
    assert.ok(
      decode.every((c) => Number(c[3]) > 0 && /^\d+\.\d+×$/.test(c[4])),
      `decode under graph capture beside it, and the quotient:\n${r.stdout}`,
    );
    assert.match(r.stdout, /PyTorch: (torch \S+, transformers|unavailable \()/);
    assert.match(
      r.stdout,
      /^Decode at batch 2 in a 64-position cache .*: \d+\.\d+ tok\/s, \d+\.\d+× the tight/m,
    );

    const profiled = rows(r.stdout, /^(decode step|train micro-batch)/);
    assert.deepEqual(profiled.map((c) => c[0]), ["decode step, batch 2", "train micro-batch, 32 tokens"]);
    assert.ok(profiled.every((c) => positiveInteger(Number(c[1]))), `kernels in the table:\n${r.stdout}`);

    const gemm = rows(r.stdout, /^(qkv|o|gate_up|down|head|lora) /);
    assert.equal(
      gemm.length,
      12,
      `two products per Linear group and the head, two LoRA factors:\n${r.stdout}`,
    );
    for (const [product, m, , byForm, fastest] of gemm) {
      assert.equal(m, "3", product);
      const rates = [...byForm.matchAll(/(\w+) (\d+\.\d+) \(([^)]+)\)/g)].map((
        [, form, tflops, programs],
      ) => ({
        form,
        tflops: Number(tflops),
        programs,
      }));
      assert.ok(
        rates.length >= 2 && rates.length === [...byForm.matchAll(/\d+\.\d+/g)].length &&
          rates.some((x) => x.form === fastest),
        `each form with its rate and programs: ${product}: ${byForm}, ${fastest}`,
      );
      // The programs are the form's own: a MatMul node dispatches MatMul's, a Gemm node Gemm's.
      for (const { form, programs } of rates) {
        assert.match(programs, form === "matmul" ? /MatMul/ : /Gemm/, `${product}: ${byForm}`);
      }
    }
    assert.match(r.stdout, /GEMM forms \(bench\/gemm_forms\.ts; float16, TFLOP\/s from GPU time/);

    const files = [...Deno.readDirSync(out)].map((e) => e.name);
    for (const tokens of TRAIN_TOKENS) {
      assert.ok(files.includes(`gpu-batch-tiny-${tokens}.json`), files.join());
    }
    const json = files.find((f) => /^results-.*\.json$/.test(f));
    assert.ok(json && files.includes(json.replace(/\.json$/, ".md")), files.join());
    const { ours } = JSON.parse(await Deno.readTextFile(join(out, json)))["gpu:tiny"];
    for (const key of ["decode_main_graph", "decode_captured"]) {
      assert.deepEqual(
        ours[key].map((d: { batch: number }) => d.batch),
        BATCHES,
        `${key}: a row per batch: ${JSON.stringify(ours[key])}`,
      );
    }
    const long = ours.decode_long_cache;
    assert.deepEqual([long.batch, long.capacity], [2, 64], JSON.stringify(long));
    assert.ok(long.decode_tok_per_s > 0 && long.tight_decode_tok_per_s > 0, JSON.stringify(long));
    assert.ok(
      ours.train.every((t: { forward_alone: boolean }) => t.forward_alone),
      "WebGPU's pass: the forward alone",
    );
    const { decode_step, train_run } = ours.profile;
    assert.ok(positiveInteger(decode_step.kernels), JSON.stringify(decode_step));
    assert.ok(positiveInteger(train_run.kernels), JSON.stringify(train_run));
    assert.ok(
      train_run.kernels > decode_step.kernels,
      "a train run (forward and backward) runs more kernels",
    );
    for (const p of [decode_step, train_run]) {
      assert.ok(p.host_ms > 0 && p.run_ms > 0 && p.top_ops.length > 0, JSON.stringify(p));
      assert.ok(p.gpu_ms === null || p.gpu_ms > 0, JSON.stringify(p));
    }
    await Deno.remove(out, { recursive: true });
  },
);
