/**
 * The train graphs' bytes, pinned: docs/DESIGN.md says the graphs of the algorithms without a value head
 * did not change when PPO's head came, and the `clipped` graph did not change when `sft` came. A sha256 of
 * each graph (on the tiny model, its weights' folder written as `<model>` so the machine's temporary
 * directory does not count) holds both from now on: a change to either graph fails here, and whoever makes
 * it on purpose updates the pin and says why in the commit. The model's path has one fixed length whatever
 * the machine's temporary directory and the test process's other models: the path is a protobuf string, so
 * its length is in the bytes even where its text is replaced.
 */

import assert from "node:assert/strict";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import type { LoraSpec } from "../../lib/model/lora.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { buildTrainModel, type TrainGraphSpec } from "../../lib/train/train_graph.ts";
import { join } from "node:path";
import { TINY_PRESET, writeRandomQwen3 } from "../../lib/model/random_model.ts";

const LORA: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };

/** Characters of the tiny model's path, whatever the temporary directory's (see the module doc). */
const MODEL_PATH_LENGTH = 160;

let model: Promise<string> | null = null;

/** The tiny model (TINY_PRESET), written once under a path of MODEL_PATH_LENGTH characters. */
async function tinyModelAtFixedLength(): Promise<string> {
  const base = await Deno.makeTempDir({ prefix: "graph-bytes-" });
  const pad = MODEL_PATH_LENGTH - base.length - 1;
  if (pad < 1) {
    throw new Error(`the temporary directory ${base} is longer than ${MODEL_PATH_LENGTH - 2} characters`);
  }
  return (await writeRandomQwen3(join(base, "m".repeat(pad)), TINY_PRESET)).dir;
}

/** sha256 of the graph's bytes with its external-weights folder replaced by a fixed name. */
async function graphSha256(spec: Omit<TrainGraphSpec, "lora">): Promise<string> {
  model ??= tinyModelAtFixedLength();
  const built = buildTrainModel(await openModelDir(await model), { lora: LORA, ...spec });
  const text = new TextDecoder("latin1").decode(built.bytes).replaceAll(built.externalFolder, "<model>");
  return await sha256Hex(Uint8Array.from(text, (c) => c.charCodeAt(0)));
}

Deno.test("the clipped train graphs (without and with the KL reference) keep their bytes", async () => {
  assert.equal(
    await graphSha256({ objective: "clipped", withReference: false }),
    "a61b26600781db80a11223a2b22e1c7319506639936452eab40cdf47d701b039",
  );
  assert.equal(
    await graphSha256({ objective: "clipped", withReference: true }),
    "7d40f239827286784e223c8adeb45c99088c95d42275f6c01696f9162c44de03",
  );
  // The value head is an addition: its graph differs, the ones above do not.
  assert.notEqual(
    await graphSha256({ objective: "clipped", withReference: false, valueLoss: "squared" }),
    "a61b26600781db80a11223a2b22e1c7319506639936452eab40cdf47d701b039",
  );
});
