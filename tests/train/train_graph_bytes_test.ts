/**
 * The train graphs' bytes, pinned: docs/DESIGN.md says the graphs of the algorithms without a value head
 * did not change when PPO's head came, and the `clipped` graph did not change when `sft` came. A sha256 of
 * each graph (on the tiny model, its weights' folder written as `<model>` so the machine's temporary
 * directory does not count) holds both from now on: a change to either graph fails here, and whoever makes
 * it on purpose updates the pin and says why in the commit.
 */

import assert from "node:assert/strict";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import type { LoraSpec } from "../../lib/model/lora.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { buildTrainModel, type TrainGraphSpec } from "../../lib/train/train_graph.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const LORA: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };

/** sha256 of the graph's bytes with its external-weights folder replaced by a fixed name. */
async function graphSha256(spec: Omit<TrainGraphSpec, "lora">): Promise<string> {
  const built = buildTrainModel(await openModelDir(await makeTinyModel()), { lora: LORA, ...spec });
  const text = new TextDecoder("latin1").decode(built.bytes).replaceAll(built.externalFolder, "<model>");
  return await sha256Hex(Uint8Array.from(text, (c) => c.charCodeAt(0)));
}

Deno.test("the clipped train graphs (without and with the KL reference) keep their bytes", async () => {
  assert.equal(
    await graphSha256({ objective: "clipped", withReference: false }),
    "8ab7f96fef33f7a79d2966d162c3620228e18ca6db1930895676a536b05283d3",
  );
  assert.equal(
    await graphSha256({ objective: "clipped", withReference: true }),
    "52dd917df1df80ce0aa3bc5dfc18c6a5d8cd22c8dac0e7dc5f955052e2ecf7a5",
  );
  // The value head is an addition: its graph differs, the ones above do not.
  assert.notEqual(
    await graphSha256({ objective: "clipped", withReference: false, valueLoss: "squared" }),
    "8ab7f96fef33f7a79d2966d162c3620228e18ca6db1930895676a536b05283d3",
  );
});
