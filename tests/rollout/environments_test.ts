/**
 * A custom environment from a module (`rollout.environment.kind: module`): examples/custom_environment.ts
 * loaded by path, answering a scripted test double's guesses with hints until the right one; a module that
 * exports no factory is one line naming the fix.
 */

import assert from "node:assert/strict";
import { loadConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { environmentFactory } from "../../lib/rollout/environments.ts";
import { Limiter } from "../../lib/rollout/limiter.ts";
import { openSession, rollout } from "../../lib/pipeline/mod.ts";
import { ScriptedPolicy } from "../helpers/scripted_policy.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

Deno.test("examples/custom_environment.ts: hints as user turns until the guess is right", async () => {
  const { config } = await loadConfig({
    overrides: [
      ["rollout.environment.kind", "module"],
      ["rollout.environment.module", "examples/custom_environment.ts"],
      ["rollout.environment.max_turns", "10"],
      ["rollout.group_size", "2"],
    ],
  });
  const session = openSession(
    {
      ...config,
      model: { ...config.model, path: await makeTinyModel() },
      data: { ...config.data, system_prompt: null },
    },
    "test",
    { showProgress: false },
  );
  const tokenizer = await session.tokenizer();
  const guesses = ["10", "30", "I think 20"];
  const policy = new ScriptedPolicy(tokenizer, (_, turn) => guesses[turn - 1] ?? "0"); // TEST DOUBLE
  const task = {
    id: "g",
    source: "generic" as const,
    prompt: "I picked a number from 1 to 50.",
    answer: "20",
  };
  const out = await rollout(session, [task], { step: 0, policy });
  // The loop below proves nothing about an empty list: group_size 2 gives two episodes.
  assert.equal(out.episodes.length, 2);
  for (const e of out.episodes) {
    assert.equal(e.numTurns, 3);
    assert.equal(e.finishReason, "env_done");
    assert.deepEqual(e.messages.filter((m) => m.role === "user").map((m) => m.content).slice(1), [
      "Higher.",
      "Lower.",
    ]);
  }
});

Deno.test("an environment module without a factory is refused in one line", async () => {
  const { config } = await loadConfig({
    overrides: [["rollout.environment.kind", "module"], [
      "rollout.environment.module",
      "examples/custom_reward.ts",
    ]],
  });
  await assert.rejects(
    () => environmentFactory(config, new Map(), new Limiter(1)),
    (e: Error) => e instanceof UserError && /createEnvironment/.test(e.message) && !e.message.includes("\n"),
  );
});
