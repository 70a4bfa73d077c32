/**
 * Continuous batching (lib/engine/scheduler.ts through `Policy.openSequence`): sequences opened one by
 * one and generated turn by turn sample exactly what they sample alone; more sequences than slots wait
 * for a slot; a sequence that is not generating (waiting on a tool) does not stop the others. At the
 * edges: aborts, a close refused mid-turn, a token listener that throws, a policy closed under a turn.
 */

import assert from "node:assert/strict";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { loadPolicy } from "../../lib/engine/worker_policy.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import { command } from "../helpers/commands.ts";
import { decodeStepsReached, isAbort } from "../helpers/decode_steps.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const PROMPTS = [[11, 22, 33, 44], [5, 6, 7], [900, 901, 902, 903, 904, 905], [42, 43]];
const TURN = { maxNewTokens: 12, temperature: 1, stopTokens: [7] };
const APPENDED = [100, 101, 102];

/** Two turns with an append between them, for one sequence alone in its own batch. */
async function alone(policy: Policy, prompt: number[], seed: number): Promise<number[]> {
  const batch = await policy.startBatch([prompt], { seeds: [seed], capacity: 64 });
  try {
    await batch.generate(TURN);
    await batch.append(0, APPENDED);
    await batch.generate(TURN);
    return await batch.tokens(0);
  } finally {
    await batch.close();
  }
}

/** The same two turns through `openSequence`, started at staggered times, all sequences at once. */
async function together(policy: Policy, stagger: boolean): Promise<number[][]> {
  return await Promise.all(PROMPTS.map(async (prompt, i) => {
    if (stagger) await new Promise((r) => setTimeout(r, 3 * i));
    const seq = await policy.openSequence(prompt, { seed: 10 + i, capacity: 64 });
    try {
      await seq.generate(TURN);
      if (stagger) await new Promise((r) => setTimeout(r, 5 * (PROMPTS.length - i)));
      await seq.append(APPENDED);
      await seq.generate(TURN);
      return await seq.tokens();
    } finally {
      await seq.close();
    }
  }));
}

Deno.test("openSequence: staggered sequences sample exactly what each samples alone", async () => {
  const dir = await makeTinyModel();
  for (const maxSequences of [8, 2]) { // 2 < 4 sequences: later ones wait for a slot
    const policy = await LocalPolicy.load(dir, { maxSequences });
    try {
      const expected = await Promise.all(PROMPTS.map((p, i) => alone(policy, p, 10 + i)));
      assert.deepEqual(await together(policy, true), expected, `maxSequences ${maxSequences}, staggered`);
      assert.deepEqual(await together(policy, false), expected, `maxSequences ${maxSequences}, together`);
    } finally {
      await policy.close();
    }
  }
});

Deno.test("openSequence: sampled log-probs equal policy.logprobs at the sampling temperature", async () => {
  const policy = await LocalPolicy.load(await makeTinyModel());
  try {
    const seq = await policy.openSequence(PROMPTS[0], { seed: 3, capacity: 64 });
    const g = await seq.generate({ maxNewTokens: 16, temperature: 0.8 });
    const tokens = await seq.tokens();
    await seq.close();
    const [lp] = await policy.logprobs([tokens], { temperature: 0.8 });
    g.logprobs.forEach((v, j) => {
      const t = PROMPTS[0].length + j;
      assert.ok(Math.abs(v - lp[t]) < 1e-4, `token ${t}: ${v} vs ${lp[t]}`);
    });
  } finally {
    await policy.close();
  }
});

Deno.test("openSequence in a Worker: a sequence waiting between turns does not stop the others", async () => {
  const policy = await loadPolicy(await makeTinyModel(), { maxSequences: 4 });
  try {
    const waiter = await policy.openSequence(PROMPTS[0], { seed: 1, capacity: 256 });
    await waiter.generate({ maxNewTokens: 2 }); // then it "calls a tool" and generates nothing
    const before = await policy.sequenceStats();
    const others = await Promise.all(
      PROMPTS.slice(1).map(async (p, i) => {
        const seq = await policy.openSequence(p, { seed: 20 + i, capacity: 256 });
        const g = await seq.generate({ maxNewTokens: 40 });
        await seq.close();
        return g;
      }),
    );
    const after = await policy.sequenceStats();
    assert.ok(others.every((g) => g.tokens.length === 40));
    // The three decoded together (about 40 steps), never waiting for the idle sequence.
    assert.ok(after.decodeSteps - before.decodeSteps < 50, `${after.decodeSteps - before.decodeSteps} steps`);
    assert.equal(after.decodeTokens - before.decodeTokens, 3 * 40); // every sampled token comes from a decode step
    await waiter.close();
  } finally {
    await policy.close();
  }
});

Deno.test("openSequence in a Worker: turns requested while another decodes join it at once", async () => {
  // The Worker's loop alternates blocking onnxruntime calls with yields; parent messages must still get in
  // (lib/engine/yield.ts): seven turns asked for just after the first starts decode beside it, so the eight
  // take about as many steps as one (measured with channel-only yields: about twice as many).
  const policy = await loadPolicy(await makeTinyModel(), { maxSequences: 8 });
  try {
    const prompts = Array.from({ length: 8 }, (_, i) => PROMPTS[i % PROMPTS.length]);
    const seqs = await Promise.all(prompts.map((p, i) => policy.openSequence(p, { seed: i, capacity: 512 })));
    const before = (await policy.sequenceStats()).decodeSteps;
    const first = seqs[0].generate({ maxNewTokens: 64 });
    await new Promise((r) => setTimeout(r, 5));
    await Promise.all([first, ...seqs.slice(1).map((s) => s.generate({ maxNewTokens: 64 }))]);
    const steps = (await policy.sequenceStats()).decodeSteps - before;
    assert.ok(steps < 90, `${steps} decode steps for 8 turns of 64 tokens`);
    for (const s of seqs) await s.close();
  } finally {
    await policy.close();
  }
});

Deno.test("openSequence: an aborted turn stops within one decode step and its slot goes to the next", async () => {
  const policy = await LocalPolicy.load(await makeTinyModel(), { maxSequences: 1 });
  try {
    const controller = new AbortController();
    const seq = await policy.openSequence(PROMPTS[0], { seed: 1, capacity: 1024, signal: controller.signal });
    const turn = seq.generate({ maxNewTokens: 1000 });
    const next = policy.openSequence(PROMPTS[1], { seed: 2, capacity: 1024 }); // waits: one slot
    const atAbort = await decodeStepsReached(policy, 3);
    controller.abort();
    await assert.rejects(turn, isAbort);
    // The step in flight when the signal fired may finish; no further one is spent on the turn.
    assert.ok((await policy.sequenceStats()).decodeSteps <= atAbort + 1);
    await assert.rejects(seq.generate({ maxNewTokens: 4 }), isAbort, "later turns are refused");
    await seq.close();
    const other = await next;
    assert.equal((await other.generate({ maxNewTokens: 4 })).tokens.length, 4);
    await other.close();
  } finally {
    await policy.close();
  }
});

Deno.test("openSequence in a Worker: an aborted wait for a slot and an aborted turn both end", async () => {
  const policy = await loadPolicy(await makeTinyModel(), { maxSequences: 1 });
  try {
    const controller = new AbortController();
    const seq = await policy.openSequence(PROMPTS[0], { seed: 1, capacity: 1024, signal: controller.signal });
    const turn = seq.generate({ maxNewTokens: 1000 });
    const waiting = new AbortController();
    const queued = policy.openSequence(PROMPTS[1], { seed: 2, capacity: 1024, signal: waiting.signal })
      .then(() => "opened", (e) => e); // settles early: handled from the start
    const atAbort = await decodeStepsReached(policy, 3);
    waiting.abort();
    controller.abort();
    await assert.rejects(turn, isAbort);
    const steps = (await policy.sequenceStats()).decodeSteps - atAbort;
    assert.ok(steps < 100, `${steps} decode steps after the abort of a 1000-token turn`);
    await seq.close(); // frees the slot: a wait that ignored its signal would take it now
    assert.ok(isAbort(await queued), "the wait for a slot ended");
    const other = await policy.openSequence(PROMPTS[2], { seed: 3, capacity: 1024 });
    assert.equal((await other.generate({ maxNewTokens: 4 })).tokens.length, 4);
    await other.close();
  } finally {
    await policy.close();
  }
});

/** `promise`, or a rejection naming `what` if it has not settled within `ms`. */
async function settlesWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("openSequence: a close refused while its turn generates leaves the sequence open; closed after the turn, its slot goes to the next", async () => {
  const policy = await LocalPolicy.load(await makeTinyModel(), { maxSequences: 1 });
  try {
    const seq = await policy.openSequence(PROMPTS[0], { seed: 1, capacity: 1024 });
    const turn = seq.generate({ maxNewTokens: 30 });
    await assert.rejects(seq.close(), /closed while its turn is generating/);
    await turn;
    await seq.close();
    const next = await settlesWithin(
      policy.openSequence(PROMPTS[1], { seed: 2, capacity: 1024 }),
      10_000,
      "a sequence waiting for the one slot",
    );
    await next.close();
  } finally {
    await policy.close();
  }
});

Deno.test("openSequence in a Worker: closing the policy settles a turn in flight, and later calls are refused, none left waiting", async () => {
  const policy = await loadPolicy(await makeTinyModel(), { maxSequences: 2 });
  const seq = await policy.openSequence(PROMPTS[0], { seed: 1, capacity: 1024 });
  const turn = seq.generate({ maxNewTokens: 1000 }).then(() => null, (e: unknown) => e);
  await decodeStepsReached(policy, 3);
  await policy.close();
  assert.ok((await settlesWithin(turn, 10_000, "the turn in flight")) instanceof Error);
  await assert.rejects(
    settlesWithin(policy.openSequence(PROMPTS[1], { seed: 2, capacity: 64 }), 10_000, "a call after close"),
    /it was closed; load the policy again/,
  );
  await settlesWithin(seq.close().catch(() => {}), 10_000, "the sequence's close");
  await policy.close(); // again: nothing left to close
});

for (const worker of [false, true]) {
  Deno.test(`openSequence${worker ? " in a Worker" : ""}: a turn whose token listener throws ends with that error; the turn beside it in the same steps goes on, and the sequence generates again`, async () => {
    const policy = await loadPolicy(await makeTinyModel(), { maxSequences: 4, worker });
    try {
      const open = (i: number) => policy.openSequence(PROMPTS[i], { seed: 10 + i, capacity: 64 });
      const [x, y] = await Promise.all([open(0), open(1)]);
      const turn = { maxNewTokens: 8, temperature: 1 };
      const failing = x.generate({
        ...turn,
        onToken: (e) => {
          if (e.index === 2) throw new Error("listener of x");
        },
      });
      const beside = y.generate(turn);
      await assert.rejects(failing, /listener of x/);
      const other = await beside;
      const alone = await loadPolicy(await makeTinyModel(), { maxSequences: 4, worker: false });
      try {
        const ref = await alone.openSequence(PROMPTS[1], { seed: 11, capacity: 64 });
        assert.deepEqual(other.tokens, (await ref.generate(turn)).tokens, "the turn beside it, as alone");
        await ref.close();
      } finally {
        await alone.close();
      }
      const again = await x.generate({ maxNewTokens: 2, temperature: 1 });
      assert.ok(again.tokens.length > 0, "the sequence whose listener threw generates again");
      await Promise.all([x.close(), y.close()]);
    } finally {
      await policy.close();
    }
  });
}

Deno.test("a turn asked for just after the last one ended still runs (the scheduler's loop restarts)", async () => {
  // The loop decides to stop when no turn is pending; a turn asked for in the microtasks between that
  // decision and the loop's end once found it still marked running and was never decoded: its promise
  // stayed pending (issue 29's engine bench, a one-token turn after an append). The test runner fails a
  // test whose promise is pending when the event loop runs dry.
  const policy = await LocalPolicy.load(await makeTinyModel());
  try {
    const batch = await policy.startBatch([PROMPTS[0]], { seeds: [1], capacity: 64 });
    for (let turn = 0; turn < 3; turn++) {
      assert.equal((await batch.generate({ maxNewTokens: 1 }))[0].tokens.length, 1, `batch turn ${turn}`);
      await batch.append(0, APPENDED);
    }
    await batch.close();
    const seq = await policy.openSequence(PROMPTS[1], { seed: 2, capacity: 64 });
    for (let turn = 0; turn < 3; turn++) {
      assert.equal((await seq.generate({ maxNewTokens: 1 })).tokens.length, 1, `sequence turn ${turn}`);
      await seq.append(APPENDED);
    }
    await seq.close();
  } finally {
    await policy.close();
  }
});

Deno.test("a process that generated and closed its policy ends on its own (no yield channel left open)", async () => {
  // The scheduler's loop yields through a MessageChannel (lib/engine/yield.ts), closed once no yield is
  // pending; one left open keeps the process alive: the child would run into the time limit.
  const out = await command("tests/fixtures/generate_then_end.ts", [await makeTinyModel()], {
    timeoutMs: 60_000,
  });
  assert.equal(out.code, 0, `exit code ${out.code} (a killed child: 143 or so); stderr: ${out.stderr}`);
  assert.match(out.stdout, /^done$/m);
});
