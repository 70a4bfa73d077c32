/**
 * Sampling constraints and alternatives in the engine (lib/engine/constraints.ts, lib/model/graph/head.ts):
 * a turn without constraints samples bit-identical tokens and log-probs beside constrained ones; a logit
 * bias, an allowed set, a minimum length and bad words change what is sampled as vLLM defines them; the
 * alternatives of sampled and scored positions equal the float64 reference's most likely tokens; a
 * token listener sees every token and can end the turn, on this thread and across the Worker.
 */

import assert from "node:assert/strict";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { loadPolicy } from "../../lib/engine/worker_policy.ts";
import type { GenerateOptions, Policy } from "../../lib/engine/policy.ts";
import { rowConstraints } from "../../lib/engine/constraints.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { loadReference } from "../helpers/reference_model.ts";

const PROMPT = [11, 22, 33, 44];

async function turn(policy: Policy, options: GenerateOptions, seed = 3, prompt = PROMPT) {
  const seq = await policy.openSequence(prompt, { seed, capacity: 128 });
  try {
    return await seq.generate(options);
  } finally {
    await seq.close();
  }
}

Deno.test("an unconstrained turn is bit-identical whether or not constrained turns share its batch", async () => {
  const policy = await LocalPolicy.load(await makeTinyModel(), { maxSequences: 4 });
  try {
    const plain = { maxNewTokens: 12, temperature: 0.9 };
    const alone = await turn(policy, plain);
    const [together] = await Promise.all([
      turn(policy, plain),
      turn(policy, { ...plain, constraints: { logitBias: [[5, 30]], badWords: [[9]] } }, 4),
      turn(policy, { ...plain, constraints: { allowedTokenIds: [100, 200, 300] }, topLogprobs: 3 }, 5),
    ]);
    assert.deepEqual(together.tokens, alone.tokens);
    assert.deepEqual(together.logprobs, alone.logprobs, "log-probs bit for bit");
  } finally {
    await policy.close();
  }
});

Deno.test("logit bias, allowed ids, min tokens and bad words change what is sampled", async () => {
  const policy = await LocalPolicy.load(await makeTinyModel(), { maxSequences: 4 });
  try {
    const base = { maxNewTokens: 8, temperature: 1 };
    const free = await turn(policy, base);
    const forced = await turn(policy, { ...base, constraints: { logitBias: [[777, 100]] } });
    assert.deepEqual(forced.tokens, new Array(8).fill(777), "+100 on one id");
    assert.ok(forced.logprobs.every((lp) => lp > -1e-3), "its log-prob in the biased distribution is ~0");
    const banned = free.tokens[0];
    const without = await turn(policy, { ...base, constraints: { logitBias: [[banned, -Infinity]] } });
    assert.ok(!without.tokens.includes(banned), "-inf bans an id");
    const allowed = [10, 20, 30];
    const only = await turn(policy, {
      ...base,
      maxNewTokens: 30,
      topLogprobs: 4,
      constraints: { allowedTokenIds: allowed },
    });
    assert.ok(only.tokens.every((t) => allowed.includes(t)), `only ${allowed}: ${only.tokens}`);
    for (const top of only.top!) { // the whole distribution sits on the allowed ids
      assert.deepEqual([...top.ids.slice(0, 3)].sort((a, b) => a - b), allowed);
      assert.equal(top.logprobs[3], -Infinity);
      assert.ok(Math.abs(top.logprobs.slice(0, 3).reduce((a, lp) => a + Math.exp(lp), 0) - 1) < 1e-4);
    }
    // 10 ends the turn and is made likely: without min tokens the turn stops at once; with 6, not before.
    const ending = { ...base, maxNewTokens: 30, stopTokens: [10] };
    const likely10 = { allowedTokenIds: [10, 20], logitBias: [[10, 5]] as [number, number][] };
    const early = await turn(policy, { ...ending, constraints: likely10 });
    assert.ok(early.tokens.length < 6, `stopped after ${early.tokens.length}`);
    const late = await turn(policy, {
      ...ending,
      constraints: { ...likely10, minTokens: 6, minTokensBlocked: [10] },
    });
    assert.ok(late.tokens.length > 6, `min tokens: ${late.tokens}`);
    assert.ok(late.tokens.slice(0, 6).every((t) => t === 20), `min tokens: ${late.tokens}`);
    // 20 made likely (the tiny model repeats itself): 20 20 appears, unless it is a bad word.
    const likely20 = { allowedTokenIds: [10, 20], logitBias: [[20, 8]] as [number, number][] };
    const pairs = (tokens: number[]) => tokens.filter((t, i) => t === 20 && tokens[i - 1] === 20).length;
    assert.ok(pairs((await turn(policy, { ...base, maxNewTokens: 20, constraints: likely20 })).tokens) > 0);
    const bad = await turn(policy, {
      ...base,
      maxNewTokens: 20,
      constraints: { ...likely20, badWords: [[20, 20]] },
    });
    assert.equal(pairs(bad.tokens), 0, `no 20 20: ${bad.tokens}`);
  } finally {
    await policy.close();
  }
});

Deno.test("rowConstraints: penalties, bad-word prefixes and min tokens per step", () => {
  assert.equal(rowConstraints(undefined, []), null);
  assert.equal(rowConstraints({}, [1]), null);
  const row = rowConstraints({ presencePenalty: 0.5, frequencyPenalty: 0.25 }, [7, 7, 8])!;
  assert.deepEqual(Object.fromEntries(row.ids.map((id, i) => [id, row.bias[i]])), { 7: -1, 8: -0.75 });
  const words = { badWords: [[1, 2, 3]] };
  assert.equal(rowConstraints(words, [1]), null);
  assert.deepEqual(rowConstraints(words, [5, 1, 2])?.ids, [3]);
  const min = { minTokens: 2, minTokensBlocked: [9] };
  assert.deepEqual(rowConstraints(min, [4])?.bias, [-Infinity]);
  assert.equal(rowConstraints(min, [4, 4]), null);
});

Deno.test("alternatives of sampled and scored positions are the reference's most likely tokens", async () => {
  const dir = await makeTinyModel();
  const [policy, ref] = [await LocalPolicy.load(dir), await loadReference(dir)];
  try {
    const g = await turn(policy, { maxNewTokens: 5, temperature: 0.8, topLogprobs: 4 });
    assert.equal(g.top!.length, 5);
    const seq = [...PROMPT, ...g.tokens];
    g.top!.forEach((top, i) => {
      const at = PROMPT.length + i; // the position of sampled token i
      const want = referenceTop(ref.nextLogprobsAll(seq.slice(0, at), 0.8), 4);
      assert.deepEqual(top.ids, want.ids, `position ${at}`);
      top.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - want.logprobs[j]) < 1e-4, `position ${at}`));
      const own = top.ids.indexOf(g.tokens[i]);
      if (own >= 0) {
        assert.equal(top.logprobs[own], g.logprobs[i], "the sampled token's entry is its log-prob");
      }
    });
    const [scored] = await policy.scoreWithAlternatives([seq], { temperature: 0.8, k: 3 });
    const [plain] = await policy.logprobs([seq], { temperature: 0.8 });
    assert.deepEqual(Array.from(scored.logprobs), Array.from(plain), "the same log-probs as logprobs()");
    assert.equal(scored.top[0], null);
    for (let t = 1; t < seq.length; t++) {
      const want = referenceTop(ref.nextLogprobsAll(seq.slice(0, t), 0.8), 3);
      assert.deepEqual(scored.top[t]!.ids, want.ids, `scored position ${t}`);
      scored.top[t]!.logprobs.forEach((lp, j) =>
        assert.ok(Math.abs(lp - want.logprobs[j]) < 1e-4, `at ${t}`)
      );
    }
  } finally {
    await policy.close();
  }
});

Deno.test("a token listener sees every token and ends the turn, here and across the Worker", async () => {
  const dir = await makeTinyModel();
  for (const policy of [await LocalPolicy.load(dir), await loadPolicy(dir)]) {
    try {
      const options = { maxNewTokens: 40, temperature: 1 };
      const full = await turn(policy, options);
      const seen: number[] = [];
      const cut = await turn(policy, {
        ...options,
        onToken: (e) => {
          assert.equal(e.index, seen.length);
          seen.push(e.token);
          return e.index === 4;
        },
      });
      assert.deepEqual(cut.tokens, seen, "every token was heard, in order");
      assert.deepEqual(cut.tokens, full.tokens.slice(0, cut.tokens.length), "the same tokens");
      assert.ok(cut.tokens.length >= 5 && cut.tokens.length < 40, `ended after ${cut.tokens.length}`);
      assert.equal(cut.finishReason, "stop");
    } finally {
      await policy.close();
    }
  }
});

/** The k most likely ids of a float64 log-prob vector, with their log-probs. */
function referenceTop(logprobs: Float64Array, k: number) {
  const ids = Array.from(logprobs.keys()).sort((a, b) => logprobs[b] - logprobs[a]).slice(0, k);
  return { ids, logprobs: ids.map((i) => logprobs[i]) };
}
