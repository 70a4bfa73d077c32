/**
 * `deno task serve` over loopback HTTP with the tiny model: `ServerPolicy` against it reproduces
 * `LocalPolicy` (tokens, log-probs within 1e-5, with and without a hot-loaded adapter), bad requests
 * get 4xx with a message and the server stays up, 64 concurrent clients all get answers, and requests that
 * reach the engine together share its decode steps.
 */
import nodeAssert from "node:assert/strict";
import { join } from "node:path";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import { writePeftAdapter } from "../../lib/model/peft.ts";
import { UserError } from "../../lib/errors.ts";
import { type RunningServer, startServer } from "../../lib/serve/serve.ts";
import { ServerPolicy } from "../../lib/engine/remote/server_policy.ts";
import { assistantMessage } from "../../lib/serve/chat_reply.ts";
import { loadPolicy } from "../../lib/engine/worker_policy.ts";
import { decodeStepsReached, isAbort } from "../helpers/decode_steps.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const assert: (ok: unknown, message?: string) => asserts ok = nodeAssert.ok;
const assertEquals = (actual: unknown, expected: unknown, message?: string) =>
  nodeAssert.deepStrictEqual(actual, expected, message);

const SPEC = { r: 4, alpha: 8, targets: ["q", "v", "down"] as ("q" | "v" | "down")[], rslora: false };

/** Serves a fresh LocalPolicy of the tiny model; `fn` gets the server, its policy and the adapter root. */
async function withServer(
  fn: (server: RunningServer, served: Policy, root: string) => Promise<void>,
  options: { apiKey?: string; maxBodyBytes?: number } = {},
): Promise<void> {
  const modelDir = await makeTinyModel();
  const root = await Deno.makeTempDir({ prefix: "serve-root-" });
  const served = await LocalPolicy.load(modelDir, { maxSequences: 8 });
  const server = await startServer(served, {
    modelDir,
    port: 0,
    adapterRoot: root,
    maxModelLen: 256,
    ...options,
  });
  try {
    await fn(server, served, root);
  } finally {
    await server.close();
    await served.close();
    await Deno.remove(root, { recursive: true });
  }
}

async function post(
  server: RunningServer,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const response = await fetch(server.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch { /* plain text answer */ }
  // deno-lint-ignore no-explicit-any
  return { status: response.status, json: json as Record<string, any> };
}

/** Two turns with an appended piece between them, as an episode runs them. */
async function episode(policy: Policy, seed: number) {
  const seq = await policy.openSequence([11, 22, 33, 44], { seed, capacity: 64 });
  try {
    const a = await seq.generate({ maxNewTokens: 6, temperature: 0.8, topK: 50 });
    await seq.append([5, 6, 7]);
    const b = await seq.generate({ maxNewTokens: 5, temperature: 0.8, topK: 50 });
    return { turns: [a, b], tokens: await seq.tokens() };
  } finally {
    await seq.close();
  }
}

function assertSameEpisode(
  got: Awaited<ReturnType<typeof episode>>,
  want: Awaited<ReturnType<typeof episode>>,
): void {
  assertEquals(got.tokens, want.tokens);
  got.turns.forEach((turn, t) => {
    assertEquals(turn.tokens, want.turns[t].tokens);
    assertEquals(turn.finishReason, want.turns[t].finishReason);
    turn.logprobs.forEach((lp, i) =>
      assert(Math.abs(lp - want.turns[t].logprobs[i]) < 1e-5, `turn ${t} token ${i}`)
    );
  });
}

Deno.test("ServerPolicy against deno task serve gives the local policy's tokens and log-probs", async () => {
  const modelDir = await makeTinyModel();
  const local = await LocalPolicy.load(modelDir, { maxSequences: 4 });
  await withServer(async (server) => {
    const remote = await ServerPolicy.connect({ backend: "vllm", urls: [server.url], modelDir });
    assertEquals(remote.logprobCheck?.verdict, "processed");
    for (const seed of [1, 2]) assertSameEpisode(await episode(remote, seed), await episode(local, seed));
    const seq = [11, 22, 33, 44, 55, 66];
    const [want] = await local.logprobs([seq], { temperature: 0.8 });
    const [got] = await remote.logprobs([seq], { temperature: 0.8 });
    for (let t = 1; t < seq.length; t++) assert(Math.abs(got[t] - want[t]) < 1e-5, `position ${t}`);
    await remote.close();
  });
  await local.close();
});

Deno.test("a hot-loaded adapter matches the local policy with it; after unloading its name is refused", async () => {
  const modelDir = await makeTinyModel();
  const local = await LocalPolicy.load(modelDir, { maxSequences: 4 });
  await withServer(async (server, _served, root) => {
    const dir = join(root, "step-1");
    await writePeftAdapter(dir, randomAdapter(local.config, SPEC, 3, 0.2), local.config, modelDir);
    const remote = await ServerPolicy.connect({
      backend: "vllm",
      urls: [server.url],
      modelDir,
      checkLogprobs: false,
    });
    const base = await episode(remote, 9);
    await remote.setAdapter(dir);
    await local.setAdapter(dir);
    assertEquals(await remote.adapterId(), await local.adapterId());
    const tuned = await episode(remote, 9);
    assertSameEpisode(tuned, await episode(local, 9));
    assert(
      JSON.stringify(tuned.tokens) !== JSON.stringify(base.tokens),
      "the adapter changes what is sampled",
    );
    const name = remote.adapterName!;
    await remote.setAdapter(null);
    const refused = await post(server, "/v1/completions", { model: name, prompt: [1, 2], max_tokens: 2 });
    assertEquals(refused.status, 404);
    assert(refused.json.error.message.includes(name));
    await remote.close();
  });
  await local.close();
});

Deno.test("bad requests get a 4xx with a message and the server stays up", async () => {
  await withServer(async (server, _served, root) => {
    const ok = { prompt: [1, 2, 3], max_tokens: 2 };
    const cases: [string, string, unknown, number, string][] = [
      ["malformed JSON", "/v1/completions", '{"prompt": [1,', 400, "not valid JSON"],
      [
        "10 MB body",
        "/v1/completions",
        JSON.stringify({ prompt: [1], pad: "x".repeat(10_000_000) }),
        413,
        "larger",
      ],
      ["out-of-vocabulary id", "/v1/completions", { prompt: [1, 10_000_000] }, 400, "not a token id"],
      ["negative id", "/v1/completions", { prompt: [-1] }, 400, "not a token id"],
      [
        "over the context",
        "/v1/completions",
        { prompt: [1], max_tokens: 1000 },
        400,
        "maximum context length",
      ],
      [
        "adapter outside the root",
        "/v1/load_lora_adapter",
        { lora_name: "x", lora_path: "/etc" },
        404,
        "not below",
      ],
      [
        "missing adapter",
        "/v1/load_lora_adapter",
        { lora_name: "x", lora_path: "nope" },
        400,
        "does not exist below",
      ],
      ["unknown model", "/v1/completions", { ...ok, model: "nope" }, 404, "does not exist"],
      ["unsupported penalty", "/v1/completions", { ...ok, repetition_penalty: 1.2 }, 400, "not supported"],
      [
        "load_inplace",
        "/v1/load_lora_adapter",
        { lora_name: "x", lora_path: root, load_inplace: true },
        400,
        "inplace",
      ],
    ];
    for (const [what, path, body, status, message] of cases) {
      const answer = await post(server, path, body);
      assertEquals(answer.status, status, what);
      assert(
        String(answer.json?.error?.message).includes(message),
        `${what}: ${JSON.stringify(answer.json)}`,
      );
      assertEquals((await fetch(server.url + "/health")).status, 200, `${what}: still up`);
    }
    assertEquals((await post(server, "/v1/completions", ok)).status, 200);
  }, {});
});

Deno.test("an API key is required when set; a non-loopback host without one is refused", async () => {
  await withServer(async (server) => {
    const body = { prompt: [1, 2], max_tokens: 1 };
    const missing = await post(server, "/v1/completions", body);
    assertEquals(missing.status, 401);
    assert(missing.json.error.message.includes("Bearer"));
    assertEquals(
      (await post(server, "/v1/completions", body, { authorization: "Bearer wrong" })).status,
      401,
    );
    assertEquals((await post(server, "/v1/completions", body, { authorization: "Bearer k1" })).status, 200);
    assertEquals((await fetch(server.url + "/health")).status, 200);
  }, { apiKey: "k1" });
  const served = await LocalPolicy.load(await makeTinyModel());
  await nodeAssert.rejects(
    () => startServer(served, { modelDir: ".", host: "0.0.0.0", port: 0 }),
    (e: Error) => e instanceof UserError && e.message.includes("--api-key"),
  );
  await served.close();
});

Deno.test("chat completions render the template and return Hermes tool calls as OpenAI tool_calls", async () => {
  const text =
    '<think>\nadd them\n</think>\n\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n' +
    "</tool_call><|im_end|>";
  const { message, called } = assistantMessage(text, { parseTools: true, thinking: true });
  assertEquals(called, true);
  assertEquals(message.reasoning, "\nadd them\n");
  assertEquals(message.content, "\n\n");
  const [call] = message.tool_calls as { type: string; function: { name: string; arguments: string } }[];
  assertEquals([call.type, call.function.name, JSON.parse(call.function.arguments)], [
    "function",
    "calculator",
    { expression: "2+3" },
  ]);
  await withServer(async (server) => {
    const answer = await post(server, "/v1/chat/completions", {
      messages: [{ role: "user", content: "What is 2+3?" }],
      tools: [{ type: "function", function: { name: "calculator", parameters: { type: "object" } } }],
      max_tokens: 4,
      seed: 1,
    });
    assertEquals(answer.status, 200);
    assertEquals(answer.json.choices[0].message.role, "assistant");
    assert(answer.json.usage.prompt_tokens > 10, "the template rendered the tools");
  });
});

Deno.test("64 concurrent clients for 3 s all get answers, with no errors", async () => {
  // Not that they share decode steps: on the HTTP thread they mostly do not (docs/serving.md, "Where the
  // engine runs"); the next test shows the sharing of requests that reach the engine together.
  await withServer(async (server) => {
    const until = Date.now() + 3000;
    let done = 0;
    const client = async (c: number) => {
      for (let i = 0; Date.now() < until; i++) {
        const answer = await post(server, "/v1/completions", {
          prompt: [1 + c, 2, 3],
          max_tokens: 4,
          seed: i,
        });
        assertEquals(answer.status, 200, JSON.stringify(answer.json));
        assertEquals(answer.json.choices[0].finish_reason, "length");
        done += 1;
      }
    };
    await Promise.all(Array.from({ length: 64 }, (_, c) => client(c)));
    assert(done >= 64, `${done} requests`);
  });
});

/**
 * `policy`, whose `openSequence` holds every caller until `n` have called (or `release` is called): the
 * requests then reach the engine together, however the HTTP stack interleaved them before.
 */
function openingTogether(policy: Policy, n: number): { policy: Policy; release: () => void } {
  let arrived = 0;
  let release = () => {};
  const together = new Promise<void>((resolve) => (release = resolve));
  const held = new Proxy(policy, {
    get(target, key) {
      if (key === "openSequence") {
        return async (...args: Parameters<Policy["openSequence"]>) => {
          if (++arrived === n) release();
          await together;
          return await target.openSequence(...args);
        };
      }
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { policy: held, release };
}

Deno.test("concurrent requests that reach the engine together share its decode steps", async () => {
  // Each request is a sequence of the policy's one scheduler, not a batch of its own: 16 requests of 4
  // tokens asked for before the engine's first step take 4 decode steps, not 64. A server that served each
  // request apart (its own batch, or one request at a time) fails here, or never lets the 16 through.
  const modelDir = await makeTinyModel();
  const root = await Deno.makeTempDir({ prefix: "serve-root-" });
  const local = await LocalPolicy.load(modelDir, { maxSequences: 16 });
  const held = openingTogether(local, 16);
  const server = await startServer(held.policy, {
    modelDir,
    port: 0,
    adapterRoot: root,
    maxModelLen: 256,
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const before = await local.sequenceStats();
    const answers = Promise.all(
      Array.from(
        { length: 16 },
        (_, c) =>
          post(server, "/v1/completions", {
            prompt: [1 + c, 2, 3],
            max_tokens: 4,
            ignore_eos: true,
            seed: c,
          }),
      ),
    );
    const hung = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error("16 concurrent requests did not all reach the engine")),
        60_000,
      );
    });
    for (const answer of await Promise.race([answers, hung])) assertEquals(answer.status, 200);
    const after = await local.sequenceStats();
    assertEquals(after.decodeTokens - before.decodeTokens, 16 * 4);
    assertEquals(after.decodeSteps - before.decodeSteps, 4, "16 requests of 4 tokens decoded together");
  } finally {
    clearTimeout(timer);
    held.release(); // after a failure: the requests held finish, so that the server can shut down
    await server.close();
    await local.close();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("requests whose clients hung up stop decoding and free their slots for the next request", async () => {
  // As `deno task serve` runs: the policy in a Worker, every slot taken by a 1000-token request.
  const modelDir = await makeTinyModel();
  const root = await Deno.makeTempDir({ prefix: "serve-root-" });
  const served = await loadPolicy(modelDir, { maxSequences: 4 });
  const server = await startServer(served, { modelDir, port: 0, adapterRoot: root, maxModelLen: 1024 });
  try {
    const clients = Array.from({ length: 4 }, () => new AbortController());
    const long = clients.slice(1).map((client, i) =>
      fetch(server.url + "/v1/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: [1 + i, 2, 3], max_tokens: 1000, ignore_eos: true, seed: i }),
        signal: client.signal,
      }).then((r) => r.status, (e) => e)
    );
    // The fourth client is ServerPolicy, as the loop against a server runs a turn.
    const remote = await ServerPolicy.connect({
      backend: "vllm",
      urls: [server.url],
      modelDir,
      checkLogprobs: false,
    });
    const seq = await remote.openSequence([9, 8, 7], { seed: 4, capacity: 1024, signal: clients[0].signal });
    long.push(seq.generate({ maxNewTokens: 1000 }).then(() => 200, (e) => e));
    await decodeStepsReached(served, 2);
    clients.forEach((client) => client.abort());
    for (const answer of long) assert(isAbort(await answer), `the client gave up: ${await answer}`);
    await seq.close();
    const next = await post(server, "/v1/completions", {
      prompt: [5, 6, 7],
      max_tokens: 4,
      ignore_eos: true,
    });
    assertEquals(next.status, 200, JSON.stringify(next.json));
    assertEquals(next.json.usage.completion_tokens, 4);
    // The next request needed a free slot: had the abandoned requests decoded on, 4 × 1000 tokens first.
    const { decodeTokens } = await served.sequenceStats();
    assert(decodeTokens < 1000, `${decodeTokens} tokens decoded in all`);
  } finally {
    await server.close();
    await served.close();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("adapter paths outside adapter_root get one 404 whether they exist or not, links resolved", async () => {
  await withServer(async (server, served, root) => {
    const outside = await Deno.makeTempDir({ prefix: "serve-outside-" });
    try {
      await Deno.mkdir(join(outside, "adapter"));
      await Deno.symlink(outside, join(root, "link"));
      await Deno.symlink(join(outside, "gone"), join(root, "dangling"));
      const load = (path: string) =>
        post(server, "/v1/load_lora_adapter", { lora_name: "x", lora_path: path });
      // The same answer for each pair, one path existing and one not: nothing tells them apart.
      const pairs = [
        [join(outside, "adapter"), join(outside, "missing")],
        ["/etc", "/no-such-directory/x"],
        ["../..", "../../no-such-directory"],
        ["link/adapter", "link/missing"],
        ["dangling", "dangling/deeper"],
      ];
      for (const [existing, missing] of pairs) {
        const [a, b] = [await load(existing), await load(missing)];
        const shape = (
          answer: typeof a,
          path: string,
        ) => [answer.status, String(answer.json?.error?.message).replace(JSON.stringify(path), "PATH")];
        assertEquals(shape(a, existing), shape(b, missing), `${existing} vs ${missing}`);
        assertEquals(a.status, 404, existing);
        assert(a.json.error.message.includes("not below serve.adapter_root"), a.json.error.message);
      }
      // ServerPolicy (the loop against this server) gets the fix for it.
      const modelDir = await makeTinyModel();
      await writePeftAdapter(
        join(outside, "adapter"),
        randomAdapter(served.config, SPEC, 3, 0.2),
        served.config,
        modelDir,
      );
      const remote = await ServerPolicy.connect({
        backend: "vllm",
        urls: [server.url],
        modelDir,
        checkLogprobs: false,
      });
      await nodeAssert.rejects(
        () => remote.setAdapter(join(outside, "adapter")),
        (e: Error) => e instanceof UserError && e.parts.fix.includes("below the server's serve.adapter_root"),
      );
      // Below the root (the server's own directory) a missing adapter may say so.
      const missing = await load("nope");
      assertEquals(missing.status, 400);
      assert(missing.json.error.message.includes("does not exist below"), missing.json.error.message);
    } finally {
      await Deno.remove(outside, { recursive: true });
    }
  });
});
