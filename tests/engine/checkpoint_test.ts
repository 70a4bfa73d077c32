/**
 * The engine reads weights in place from any checkpoint layout Hugging Face produces: a sharded bf16
 * checkpoint, reached through a Hugging Face cache snapshot (`snapshots/<rev>/x -> ../../blobs/<hash>`).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { loadReference } from "../helpers/reference_model.ts";

/** A Hugging Face cache layout for `model`: every file a blob, linked from a snapshot directory. */
async function hfCacheSnapshot(model: string): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "hf-cache-" });
  const blobs = join(root, "models--test--tiny", "blobs");
  const snapshot = join(root, "models--test--tiny", "snapshots", "abc123");
  await Deno.mkdir(blobs, { recursive: true });
  await Deno.mkdir(snapshot, { recursive: true });
  let n = 0;
  for await (const entry of Deno.readDir(model)) {
    const blob = join(blobs, `blob${n++}`);
    await Deno.copyFile(join(model, entry.name), blob);
    await Deno.symlink(join("..", "..", "blobs", `blob${n - 1}`), join(snapshot, entry.name));
  }
  return snapshot;
}

Deno.test("a sharded bf16 checkpoint behind Hugging Face cache symlinks scores like the reference", async () => {
  const model = await makeTinyModel({ dtype: "bfloat16", shards: 3, seed: 9, tiedHead: false });
  const snapshot = await hfCacheSnapshot(model);
  const [policy, ref] = [await LocalPolicy.load(snapshot), await loadReference(model)];
  try {
    const seq = Array.from({ length: 30 }, (_, t) => (t * 7919) % 151000);
    const [lp] = await policy.logprobs([seq]);
    const expected = ref.logprobs(seq);
    for (let t = 1; t < seq.length; t++) assert.ok(Math.abs(lp[t] - expected[t]) < 2e-3, `token ${t}`);
  } finally {
    await policy.close();
  }
});
