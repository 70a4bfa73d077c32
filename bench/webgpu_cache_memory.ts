/**
 * Process memory of a WebGPU policy under each storage buffer cache mode, over prefills of many lengths:
 * `simple` keeps each freed buffer for reuse at its exact size until the session closes, so memory can grow
 * with the number of distinct shapes (docs/ENGINE_FACTS.md, "WebGPU provider options"). On lavapipe the
 * device's buffers are host memory, so the process's RSS shows them.
 *
 *   deno run -A bench/webgpu_cache_memory.ts --mode simple [--calls 40]
 *
 * One mode per process (what an earlier mode held would stay in the RSS): run it once per mode. Prints the
 * RSS in MB after every 8 calls (a 2-layer random model, hidden 256; one prefill of
 * 20–400 tokens and two sampled tokens per call; validation disabled).
 *
 * @module
 */

import { join } from "node:path";
import { parseArgs } from "@std/cli";
import { LocalPolicy } from "../lib/engine/local_policy.ts";
import { writeRandomQwen3 } from "../lib/model/random_model.ts";

const { values } = parseArgs(Deno.args, { string: ["mode", "calls"] });
const mode = String(values.mode ?? "simple");
const calls = Number(values.calls ?? 40);
const dir = join(await Deno.makeTempDir({ prefix: "cache-memory-" }), "model");
await writeRandomQwen3(dir, {
  layers: 2,
  hidden: 256,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  intermediate: 512,
  dtype: "float32",
  seed: 3,
  tiedHead: true,
  vocab: 512,
  tokenizer: false,
});
{
  const providerOptions = { storageBufferCacheMode: mode, validationMode: "disabled" };
  const policy = await LocalPolicy.load(dir, { ep: "webgpu", providerOptions });
  const rss: number[] = [];
  try {
    for (let i = 0; i < calls; i++) {
      const length = 20 + ((i * 37) % 400); // many distinct prompt lengths
      const prompt = Array.from({ length }, (_, j) => (j * 13 + i) % 500);
      await policy.generate([prompt], { maxNewTokens: 2, temperature: 1 });
      if (i % 8 === 7) rss.push(Math.round(Deno.memoryUsage().rss / 1e6));
    }
  } finally {
    await policy.close();
  }
  console.log(`${mode}: RSS MB every 8 calls: ${rss.join(" ")}`);
}
await Deno.remove(dir, { recursive: true });
