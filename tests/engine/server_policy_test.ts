/**
 * The inference-server client: parsing of recorded-shape vLLM and SGLang answers (no server), and
 * `ServerPolicy` against a fake server on loopback (retries, errors, stickiness, adapters, the
 * log-prob semantics check). Against our own engine over HTTP: tests/serve/serve_test.ts.
 */
import nodeAssert from "node:assert/strict";
import { ServerClient, ServerError } from "../../lib/engine/remote/http.ts";
import { parseModels, parsePromptLogprobs, parseTurn } from "../../lib/engine/remote/vllm.ts";
import { parseSglangPromptLogprobs, parseSglangTurn } from "../../lib/engine/remote/sglang.ts";
import { ServerPolicy } from "../../lib/engine/remote/server_policy.ts";
import { UserError } from "../../lib/errors.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import * as fx from "../fixtures/vllm_responses.ts";

const assert: (ok: unknown, message?: string) => asserts ok = nodeAssert.ok;
const assertEquals = (actual: unknown, expected: unknown, message?: string) =>
  nodeAssert.deepStrictEqual(actual, expected, message);

/** Awaits `fn`'s rejection with a `Class` whose message includes `includes`; returns the error. */
async function assertRejects<E extends Error>(
  fn: () => Promise<unknown>,
  Class: new (...args: never[]) => E,
  includes = "",
): Promise<E> {
  try {
    await fn();
  } catch (e) {
    assert(e instanceof Class, `expected ${Class.name}, got ${e}`);
    assert(e.message.includes(includes), `"${e.message}" lacks "${includes}"`);
    return e;
  }
  throw new Error(`expected a rejection with ${Class.name}`);
}

function assertThrows(fn: () => unknown, Class: new (...args: never[]) => Error, includes: string): void {
  nodeAssert.throws(fn, (e: Error) => e instanceof Class && e.message.includes(includes));
}

const client = new ServerClient("http://fake:1", { requestTimeoutS: 1, retries: 0, backoffS: 0 });

Deno.test("vLLM turn: ids from token_ids, log-probs looked up by id, stop reason mapped", () => {
  const g = parseTurn(client, fx.vllmCompletionStop);
  assertEquals(g, { tokens: [9707, 0, 151645], logprobs: [-0.25, -1.5, -0.0625], finishReason: "stop" });
});

Deno.test("vLLM turn: ids from token_id:N strings, -9999 becomes -Infinity, length mapped", () => {
  const g = parseTurn(client, fx.vllmCompletionLength);
  assertEquals(g, { tokens: [42, 7], logprobs: [-Infinity, -0.75], finishReason: "length" });
});

Deno.test("vLLM turn: an aborted request or a missing log-prob is an error naming the server", () => {
  assertThrows(() => parseTurn(client, fx.vllmCompletionAbort), Error, "http://fake:1");
  const wrong = structuredClone(fx.vllmCompletionStop);
  wrong.choices[0].token_ids = [9707, 5, 151645]; // id 5 has no log-prob listed
  assertThrows(() => parseTurn(client, wrong), Error, "no log-prob for token 5");
});

Deno.test("vLLM prompt_logprobs are read by token id, not by rank", () => {
  const lp = parsePromptLogprobs(client, fx.vllmPromptLogprobs, [785, 6722, 315]);
  assert(Number.isNaN(lp[0]));
  assertEquals([lp[1], lp[2]], [-3.25, -Infinity]);
  assertThrows(() => parsePromptLogprobs(client, fx.vllmPromptLogprobs, [785, 9, 315]), Error, "token 9");
});

Deno.test("vLLM /v1/models: the base model is the entry without a parent", () => {
  assertEquals(parseModels(client, fx.vllmModels), "Qwen/Qwen3-0.6B");
});

Deno.test("SGLang turns and prompt log-probs come from meta_info triples matched by id", () => {
  assertEquals(parseSglangTurn(client, fx.sglangGenerateStop), {
    tokens: [9707, 0, 151645],
    logprobs: [-0.25, -1.5, -0.0625],
    finishReason: "stop",
  });
  assertEquals(parseSglangTurn(client, fx.sglangGenerateLength).logprobs, [-Infinity]);
  assertThrows(() => parseSglangTurn(client, fx.sglangAbort), Error, "abort");
  const lp = parseSglangPromptLogprobs(client, fx.sglangScore, [785, 6722, 315]);
  assertEquals([lp[1], lp[2]], [-3.25, -0.125]);
  assertThrows(() => parseSglangPromptLogprobs(client, fx.sglangScore, [785, 6722, 316]), Error, "316");
});

/** A fake server: answers from `route`, recording every request. */
function fakeServer(route: (path: string, body: Record<string, unknown>) => Response | unknown) {
  const seen: { path: string; body: Record<string, unknown> }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    const body = req.method === "POST" ? await req.json().catch(() => ({})) : {};
    seen.push({ path, body });
    const out = route(path, body);
    return out instanceof Response ? out : Response.json(out);
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, seen, close: () => server.shutdown() };
}

const json = (status: number, body: unknown) => Response.json(body, { status });

Deno.test("4xx and 5xx bodies become one-line errors naming the server and the fix; 5xx is retried", async () => {
  let calls = 0;
  const fake = fakeServer((path) => {
    if (path === "/flaky") return ++calls < 3 ? json(503, { detail: "busy" }) : { ok: true };
    if (path === "/long") return json(400, fx.vllmErrorNested);
    return json(404, fx.vllmErrorFlat);
  });
  try {
    const c = new ServerClient(fake.url, { requestTimeoutS: 5, retries: 3, backoffS: 0.01 });
    assertEquals(await c.post("/flaky", {}), { ok: true });
    assertEquals(calls, 3);
    const long = await assertRejects(() => c.post("/long", {}), ServerError);
    assertEquals(long.status, 400);
    assert(long.message.includes(fake.url) && long.message.includes("--max-model-len"), long.message);
    assert(!long.message.includes("\n"));
    const missing = await assertRejects(() => c.post("/v1/completions", {}), ServerError, "does not exist");
    assert(missing.message.includes("load the adapter first"), missing.message);
    assertEquals(fake.seen.filter((s) => s.path === "/long").length, 1, "a 400 is not retried");
    const down = new ServerClient("http://127.0.0.1:9", { requestTimeoutS: 1, retries: 1, backoffS: 0.01 });
    const e = await assertRejects(() => down.get("/v1/models"), ServerError, "no answer");
    assert(e instanceof UserError && e.message.includes("server is up"), e.message);
  } finally {
    await fake.close();
  }
});

/** A fake vLLM: turns of `[7, 8]` with log-probs `sampled`; scoring gives `score(T)` at each position. */
function fakeVllm(sampled: number, score: (t: number) => number) {
  return fakeServer((path, body) => {
    if (path === "/health") return new Response("ok");
    if (path === "/inference/v1/generate") return json(404, { detail: "Not Found" });
    if (path === "/v1/models") return fx.vllmModels;
    if (path.endsWith("_lora_adapter")) {
      return body.lora_name === "policy@dup" ? json(400, fx.vllmLoraAlreadyLoaded) : new Response("Success");
    }
    const prompt = body.prompt as number[];
    if (body.prompt_logprobs) {
      const entries = prompt.map((id, t) =>
        t === 0 ? null : { [String(id)]: { logprob: score(body.temperature as number) } }
      );
      return { choices: [{ finish_reason: "length", token_ids: [1], prompt_logprobs: entries }] };
    }
    const n = Math.min(2, body.max_tokens as number);
    const ids = [7, 8].slice(0, n);
    return {
      choices: [{
        finish_reason: "length",
        token_ids: ids,
        logprobs: { tokens: ids.map((i) => `token_id:${i}`), token_logprobs: ids.map(() => sampled) },
      }],
    };
  });
}

Deno.test("ServerPolicy sends whole sequences with neutral sampling, sticks each sequence to one server", async () => {
  const a = fakeVllm(-1, (t) => -2 / t);
  const b = fakeVllm(-1, (t) => -2 / t);
  const policy = await ServerPolicy.connect({
    backend: "vllm",
    urls: [a.url, b.url],
    modelDir: await makeTinyModel(),
    checkLogprobs: false,
  });
  try {
    const s1 = await policy.openSequence([1, 2, 3], { seed: 5, capacity: 16 });
    const s2 = await policy.openSequence([4], { seed: 6, capacity: 16 });
    await s1.generate({ maxNewTokens: 4, temperature: 0.5, stopTokens: [9] });
    await s1.append([10, 11]);
    await s1.generate({ maxNewTokens: 4, temperature: 0.5 });
    await s2.generate({ maxNewTokens: 4 });
    assertEquals(await s1.tokens(), [1, 2, 3, 7, 8, 10, 11, 7, 8]);
    const turnsA = a.seen.filter((s) => s.path === "/v1/completions").map((s) => s.body);
    const turnsB = b.seen.filter((s) => s.path === "/v1/completions").map((s) => s.body);
    assertEquals(turnsA.map((t) => t.prompt), [[1, 2, 3], [1, 2, 3, 7, 8, 10, 11]]);
    assertEquals(turnsB.map((t) => t.prompt), [[4]]);
    const first = turnsA[0];
    assertEquals([first.model, first.seed, first.stop_token_ids, first.top_k, first.min_p], [
      "Qwen/Qwen3-0.6B",
      5,
      [9],
      -1,
      0,
    ]);
    assertEquals([first.repetition_penalty, first.logprobs, first.ignore_eos, first.skip_special_tokens], [
      1,
      0,
      true,
      false,
    ]);
    assertEquals([first.return_token_ids, first.return_tokens_as_token_ids], [true, true]);
    await s1.close();
    await s2.close();
  } finally {
    await policy.close();
    await a.close();
    await b.close();
  }
});

Deno.test("ServerPolicy caps a turn at the sequence's capacity", async () => {
  const a = fakeVllm(-1, (t) => -2 / t);
  const policy = await ServerPolicy.connect({
    backend: "vllm",
    urls: [a.url],
    modelDir: await makeTinyModel(),
    checkLogprobs: false,
  });
  try {
    const s = await policy.openSequence([1, 2, 3], { seed: 0, capacity: 4 });
    assertEquals((await s.generate({ maxNewTokens: 8 })).tokens, [7]);
    assertEquals((await s.generate({ maxNewTokens: 8 })).tokens, []);
    assertEquals(a.seen.filter((x) => x.path === "/v1/completions").length, 1);
  } finally {
    await a.close();
  }
});

Deno.test("the start-up check accepts processed log-probs and refuses raw ones with the fix", async () => {
  const processed = fakeVllm(-1, (t) => -2 / t); // sampled at T=2 equals the scoring at T=2
  const raw = fakeVllm(-2, (t) => -2 / t); // sampled at T=2 equals the scoring at T=1
  const modelDir = await makeTinyModel();
  try {
    const ok = await ServerPolicy.connect({ backend: "vllm", urls: [processed.url], modelDir });
    assertEquals(ok.logprobCheck?.verdict, "processed");
    const e = await assertRejects(
      () => ServerPolicy.connect({ backend: "vllm", urls: [raw.url], modelDir }),
      UserError,
      "--logprobs-mode processed_logprobs",
    );
    assert(e.message.includes(raw.url), e.message);
  } finally {
    await processed.close();
    await raw.close();
  }
});

Deno.test("setAdapter loads a versioned name on every server, names it in requests, unloads the previous", async () => {
  const a = fakeVllm(-1, (t) => -2 / t);
  const b = fakeVllm(-1, (t) => -2 / t);
  const modelDir = await makeTinyModel();
  const policy = await ServerPolicy.connect({
    backend: "vllm",
    urls: [a.url, b.url],
    modelDir,
    checkLogprobs: false,
  });
  const { randomAdapter } = await import("../helpers/adapters.ts");
  const spec = { r: 2, alpha: 4, targets: ["q", "v"] as ("q" | "v")[], rslora: false };
  try {
    await policy.setAdapter(randomAdapter(policy.config, spec, 1));
    const first = policy.adapterName!;
    assert(/^policy@[0-9a-f]{12}$/.test(first), first);
    assert((await policy.adapterId()).startsWith("lora:"));
    await policy.generate([[1, 2]], { maxNewTokens: 2 });
    await policy.setAdapter(randomAdapter(policy.config, spec, 2));
    const second = policy.adapterName!;
    for (const server of [a, b]) {
      const calls = server.seen.filter((s) => s.path.endsWith("_lora_adapter"));
      assertEquals(calls.map((c) => [c.path, c.body.lora_name]), [
        ["/v1/load_lora_adapter", first],
        ["/v1/load_lora_adapter", second],
        ["/v1/unload_lora_adapter", first],
      ]);
      assert(calls.every((c) => !("load_inplace" in c.body)));
    }
    const turn = a.seen.find((s) => s.path === "/v1/completions")!;
    assertEquals(turn.body.model, first);
    const open = await policy.openSequence([1], { seed: 0, capacity: 8 });
    await assertRejects(() => policy.setAdapter(null), Error, "close the open");
    await open.close();
    await policy.setAdapter(null);
    assertEquals(await policy.adapterId(), "base");
  } finally {
    await policy.close();
    await a.close();
    await b.close();
  }
});
