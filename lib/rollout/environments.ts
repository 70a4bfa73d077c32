/**
 * The environment of `rollout.environment.kind`, made once per rollout and then once per episode.
 *
 * @module
 */

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Config } from "../config/schema.ts";
import type { Task } from "../data/task.ts";
import { UserError } from "../errors.ts";
import type { Tool } from "../tools/types.ts";
import type { CustomEnvironmentFactory, Environment, EnvironmentFactory } from "./environment.ts";
import type { Limiter } from "./limiter.ts";
import { ScriptedEnvironment } from "./scripted_env.ts";
import { ToolEnvironment, type ToolEnvOptions } from "./tool_env.ts";

/** What the environments need from the config. */
export type EnvironmentConfig = Pick<Config, "rollout"> & { data: Pick<Config["data"], "system_prompt"> };

/** The per-episode environment maker for `config.rollout.environment`. */
export async function environmentFactory(
  config: EnvironmentConfig,
  tools: ReadonlyMap<string, Tool>,
  limiter: Limiter,
): Promise<EnvironmentFactory> {
  const { tools: t, environment: e } = config.rollout;
  const toolOptions: ToolEnvOptions = {
    tools,
    limiter,
    systemPrompt: config.data.system_prompt,
    maxCallsPerTurn: t.max_calls_per_turn,
    maxCallsPerEpisode: t.max_calls_per_episode,
    timeoutMs: t.timeout_s * 1000,
    maxOutputChars: t.max_output_chars,
    stopOnFinalAnswer: e.stop_on_final_answer,
    continuePrompt: e.continue_prompt,
  };
  const toolEnv = (task: Task) => new ToolEnvironment(task, toolOptions);
  switch (e.kind) {
    case "tools":
      return toolEnv;
    case "scripted":
      return (task) =>
        new ScriptedEnvironment(task, { tools: toolEnv(task), continuePrompt: e.continue_prompt });
    case "module": {
      const create = await loadEnvironmentModule(e.module);
      return (task) => {
        const tools = toolEnv(task);
        const env = create(task, { systemPrompt: config.data.system_prompt, tools, maxTurns: e.max_turns });
        return closingToo(env, tools);
      };
    }
    case "agent":
      // The agent drives its episodes (lib/pipeline/agent_rollout.ts); no environment answers its turns.
      throw new Error("rollout: environment kind agent has no per-turn environment (agentRollout runs it)");
  }
}

/**
 * `env` with a `close` that also closes the tool environment it was given: a custom environment need not
 * know that its tools hold anything per episode.
 */
function closingToo(env: Environment, tools: ToolEnvironment): Environment {
  return {
    reset: () => env.reset(),
    step: (turn) => env.step(turn),
    close: async () => {
      try {
        await env.close?.();
      } finally {
        await tools.close();
      }
    },
  };
}

/** Imports a custom environment module and returns its factory. */
async function loadEnvironmentModule(path: string | null): Promise<CustomEnvironmentFactory> {
  const mod = await importEnvironmentModule(path, "module", "examples/custom_environment.ts");
  const create = mod.createEnvironment ?? mod.default;
  if (typeof create !== "function") {
    throw new UserError(`rollout.environment.module ${path}`, {
      why: "it exports neither createEnvironment nor a default function",
      fix: "export function createEnvironment(task, context) returning { reset, step }",
    });
  }
  return create as CustomEnvironmentFactory;
}

/** Imports `rollout.environment.module` for `kind` (module, agent); refuses a missing or broken one. */
export async function importEnvironmentModule(
  path: string | null,
  kind: string,
  example: string,
): Promise<Record<string, unknown>> {
  if (!path) {
    throw new UserError("rollout.environment.module", {
      value: path,
      why: `rollout.environment.kind is ${kind}, which needs the module to load`,
      fix: `set rollout.environment.module to a .ts file (see ${example})`,
    });
  }
  try {
    return await import(pathToFileURL(resolve(path)).href);
  } catch (error) {
    throw new UserError(`rollout.environment.module ${path}`, {
      why: `it could not be imported: ${(error as Error).message.split("\n")[0]}`,
      fix: "check the path and that the module type-checks (deno check FILE)",
    });
  }
}
