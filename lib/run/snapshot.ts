/**
 * The run's identity: the resolved config snapshot (`config.yaml`) and, on `--resume`, the check that
 * the new config would not corrupt the run. Changing the base model, the tokenizer or the LoRA shape
 * would make the saved adapters and optimizer state mean something else: refused, naming every differing
 * field. Anything else (steps, logging, eval cadence, learning rate…) may change between sessions.
 *
 * @module
 */

import { join } from "node:path";
import { parse, stringify } from "@std/yaml";
import { writeTextAtomic } from "../fs/atomic.ts";
import type { Config } from "../config/schema.ts";
import { RUN_IDENTITY_SECTION } from "../config/load.ts";
import { UserError } from "../errors.ts";
import { sha256Hex } from "../fs/sha256.ts";
import type { RunLayout } from "./layout.ts";

/** What must not change across a resume, as recorded in the snapshot's `identity` section. */
interface RunIdentity {
  "model.path": string;
  "model.config_sha256": string;
  "model.tokenizer_sha256": string;
  "train.lora": string;
  "rollout.generation.enable_thinking": boolean;
}

async function identityOf(config: Config): Promise<RunIdentity> {
  const file = (name: string) => Deno.readFile(join(config.model.path, name)).then(sha256Hex);
  const { r, alpha, rslora, targets } = config.train.lora;
  return {
    "model.path": config.model.path,
    "model.config_sha256": await file("config.json"),
    "model.tokenizer_sha256": await file("tokenizer.json"),
    "train.lora": JSON.stringify({ r, alpha, rslora, targets: [...targets].sort() }),
    "rollout.generation.enable_thinking": config.rollout.generation.enable_thinking,
  };
}

/** Writes the snapshot (the resolved config plus the run identity), atomically. */
export async function writeSnapshot(layout: RunLayout, config: Config): Promise<void> {
  const text =
    `# The resolved configuration of this run (deno task loop); identity: what --resume checks.\n` +
    stringify({ ...config, [RUN_IDENTITY_SECTION]: await identityOf(config) });
  await writeTextAtomic(layout.config, text);
}

/** Refuses to resume when the run's identity differs from `config`'s. */
export async function checkResumable(layout: RunLayout, config: Config): Promise<void> {
  const snapshot = parse(await Deno.readTextFile(layout.config)) as Record<string, RunIdentity | undefined>;
  const saved = snapshot[RUN_IDENTITY_SECTION];
  if (!saved) {
    throw new UserError(`loop --resume: ${layout.config}`, {
      why: "it has no identity section, so the run cannot be checked",
      fix: "start a new run (another loop.run_dir) or pass --overwrite",
    });
  }
  const now = await identityOf(config);
  const differing = (Object.keys(now) as (keyof RunIdentity)[]).filter((k) => saved[k] !== now[k]);
  if (differing.length > 0) {
    throw new UserError(`loop --resume: ${layout.dir}`, {
      value: differing.map((k) => `${k}: ${saved[k]} -> ${now[k]}`).join("; "),
      why: "the run was made with another model, tokenizer or LoRA shape; its adapters would not fit",
      fix: `resume with the run's own settings (--config ${layout.config}), or start a new run`,
    });
  }
}
