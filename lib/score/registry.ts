/**
 * The built-in rewards by name, and custom reward modules loaded by path.
 *
 * A custom module default-exports a `RewardFn` (or exports it as `reward`): a snake_case `name`
 * that is not a built-in's, a `doc` line, and `score(episode, ctx)`. See examples/custom_reward.ts
 * and docs/rewards.md.
 *
 * @module
 */

import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { UserError } from "../errors.ts";
import type { RewardName } from "../config/schema.ts";
import { agent } from "./agent.ts";
import { codeExec } from "./code_exec.ts";
import { exactMatch } from "./exact_match.ts";
import { format } from "./format.ts";
import { gsm8k } from "./gsm8k.ts";
import { judge } from "./judge/judge.ts";
import { overlong } from "./overlong.ts";
import { toolUse } from "./tool_use.ts";
import type { RewardFn } from "./types.ts";

/** Every built-in reward, by its config name. */
export const REWARDS: Readonly<Record<RewardName, RewardFn>> = {
  gsm8k,
  code_exec: codeExec,
  exact_match: exactMatch,
  format,
  tool_use: toolUse,
  judge,
  agent,
  overlong,
};

const SNAKE = /^[a-z0-9]+(?:_[a-z0-9]+)*$/;

/** Loads one custom reward module and checks its shape; bad modules are a UserError naming the path. */
export async function loadRewardModule(path: string): Promise<RewardFn> {
  const url = pathToFileURL(isAbsolute(path) ? path : resolve(path));
  let mod: Record<string, unknown>;
  try {
    mod = await import(url.href);
  } catch (e) {
    throw new UserError(`config key score.modules: ${path}`, {
      why: `the module could not be loaded (${(e as Error).message.split("\n")[0]})`,
      fix: "check the path (relative to the current directory) and that the module compiles",
    });
  }
  const fn = (mod.default ?? mod.reward) as RewardFn | undefined;
  const bad = (why: string) =>
    new UserError(`config key score.modules: ${path}`, {
      why,
      fix: "default-export { name, doc, score(episode, ctx) } (see examples/custom_reward.ts)",
    });
  if (!fn || typeof fn !== "object" || typeof fn.score !== "function") {
    throw bad("it exports no reward (a default export or `reward` with a score function)");
  }
  if (typeof fn.name !== "string" || !SNAKE.test(fn.name)) {
    throw bad(`its name ${JSON.stringify(fn.name)} is not snake_case`);
  }
  if (fn.name in REWARDS) throw bad(`its name "${fn.name}" is a built-in reward's`);
  return fn;
}
