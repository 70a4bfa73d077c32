/**
 * The tool-call scanner: Hermes blocks in an assistant turn, where calls count (after `</think>`), and
 * the parsing faults of docs/tool_calls.md (truncation, `</tool_call>` in strings, duplicate keys,
 * `__proto__`, unsafe characters, huge payloads).
 */
import assert from "node:assert/strict";
import {
  callRegion,
  finalAnswerText,
  type ParsedToolCall,
  parseToolCalls,
} from "../../lib/rollout/tool_calls.ts";
import { parseStrictJson } from "../../lib/rollout/strict_json.ts";

/** A Hermes block as Qwen3 writes it. */
function block(json: string): string {
  return `<tool_call>\n${json}\n</tool_call>`;
}

function onlyCall(text: string): ParsedToolCall {
  const calls = parseToolCalls(text);
  assert.equal(calls.length, 1, `one call in ${JSON.stringify(text)}`);
  return calls[0];
}

function expectInvalid(text: string, fragment: string): void {
  const call = onlyCall(text);
  assert.equal(call.ok, false, `invalid: ${text.slice(0, 80)}`);
  if (!call.ok) {
    assert.equal(call.status, "invalid_tool_call");
    assert.ok(call.error.includes(fragment), `"${fragment}" in: ${call.error}`);
  }
}

function expectOk(text: string): Extract<ParsedToolCall, { ok: true }> {
  const call = onlyCall(text);
  assert.ok(call.ok, `ok: ${call.ok ? "" : call.error}`);
  return call;
}

Deno.test("parseToolCalls() reads a call after the reasoning and some text", () => {
  const text = `<think>\nI should add.\n</think>\n\nLet me compute.\n${
    block('{"name": "calculator", "arguments": {"expression": "2+2"}}')
  }<|im_end|>`;
  const call = expectOk(text);
  assert.equal(call.name, "calculator");
  assert.deepEqual({ ...call.arguments }, { expression: "2+2" });
  assert.equal(call.argumentsText, '{"expression": "2+2"}');
  assert.ok(call.raw.startsWith("<tool_call>") && call.raw.endsWith("</tool_call>"));
});

Deno.test("parseToolCalls() returns several calls of one turn in order", () => {
  const text = [1, 2, 3].map((n) => block(`{"name": "t${n}", "arguments": {}}`)).join("\n");
  assert.deepEqual(parseToolCalls(text).map((c) => c.ok && c.name), ["t1", "t2", "t3"]);
});

Deno.test("parseToolCalls() finds no call in a turn without one", () => {
  assert.deepEqual(parseToolCalls("<think>x</think>\n\nThe answer is 4.<|im_end|>"), []);
});

Deno.test("a <tool_call> inside <think> is reasoning, not a call; an unclosed <think> has no calls", () => {
  const inside = `<think>maybe ${block('{"name": "a", "arguments": {}}')}</think>\n\nDone.`;
  assert.deepEqual(parseToolCalls(inside), []);
  const unclosed = `<think>still thinking ${block('{"name": "a", "arguments": {}}')}`;
  assert.deepEqual(parseToolCalls(unclosed), []);
  assert.equal(callRegion("<think>a</think>b<think>c"), "b");
  // Thinking off: the template put the think block in the prompt; the whole sampled text counts.
  assert.equal(expectOk(block('{"name": "a", "arguments": {}}')).name, "a");
});

// docs/RELIABILITY.md item 14
Deno.test("truncated JSON is invalid_tool_call; an unclosed <tool_call> with complete JSON is a call", () => {
  expectInvalid('<tool_call>\n{"name": "calculator", "arguments": {"expr', "not complete");
  expectInvalid("text <tool_call>", "not complete");
  // As vLLM's Hermes parser: the JSON is complete and only the closing tag is missing.
  assert.equal(
    expectOk('<tool_call>\n{"name": "calculator", "arguments": {}}\n<|im_end|>').name,
    "calculator",
  );
  expectInvalid("<tool_call>\ncalculator(2+2)\n</tool_call>", "expected a JSON object");
  expectInvalid(block('{"name": "a", "arguments": {}} trailing'), "unexpected text");
});

Deno.test("a bad block does not swallow the next good one", () => {
  const calls = parseToolCalls(block("{oops}") + block('{"name": "b", "arguments": {}}'));
  assert.deepEqual(calls.map((c) => c.ok), [false, true]);
  // A brace missing: the object is still open at </tool_call>, which ends the block all the same.
  const unclosed = parseToolCalls(
    block('{"name": "a", "arguments": {"expression": "2+2"}') + block('{"name": "b", "arguments": {}}'),
  );
  assert.deepEqual(unclosed.map((c) => c.ok), [false, true]);
  assert.match((unclosed[0] as { error: string }).error, /not closed before <\/tool_call>/);
});

// docs/RELIABILITY.md item 15
Deno.test("</tool_call> inside a JSON string argument is parsed as part of the string", () => {
  const code = 'print("</tool_call>")\nprint("\\"}")';
  const json = JSON.stringify({ name: "execute_code", arguments: { code } });
  const call = expectOk(block(json) + "\nafter");
  assert.equal(call.arguments.code, code);
});

// docs/RELIABILITY.md item 16
Deno.test("duplicate keys are an error naming the key, at any depth", () => {
  expectInvalid(block('{"name": "a", "name": "b", "arguments": {}}'), 'duplicate key "name"');
  expectInvalid(block('{"name": "a", "arguments": {"x": 1, "x": 2}}'), 'duplicate key "x"');
});

Deno.test("arguments given as a JSON string are decoded; a bad one is a clear error", () => {
  const call = expectOk(block('{"name": "calculator", "arguments": "{\\"expression\\": \\"1+1\\"}"}'));
  assert.equal(call.arguments.expression, "1+1");
  assert.equal(call.argumentsText, '{"expression": "1+1"}');
  expectInvalid(block('{"name": "a", "arguments": "1+1"}'), "not valid JSON");
  expectInvalid(block('{"name": "a", "arguments": "[1]"}'), "must hold a JSON object");
  expectInvalid(block('{"name": "a", "arguments": [1]}'), "must be a JSON object");
});

Deno.test("a call needs a name and arguments and has no other keys", () => {
  expectInvalid(block('{"arguments": {}}'), '"name" must be a non-empty string');
  expectInvalid(block('{"name": 3, "arguments": {}}'), '"name" must be');
  expectInvalid(block('{"name": "a", "arguments": {}, "id": 1}'), 'unexpected key "id"');
  expectInvalid(block('{"name": "now"}'), '"arguments" is missing');
  assert.deepEqual(Object.keys(expectOk(block('{"name": "now", "arguments": {}}')).arguments), []);
});

// docs/RELIABILITY.md item 17
Deno.test("__proto__ keys are plain data and change no prototype", () => {
  const call = expectOk(block('{"name": "a", "arguments": {"__proto__": {"polluted": true}, "x": 1}}'));
  assert.equal(Object.getPrototypeOf(call.arguments), null);
  assert.ok(Object.hasOwn(call.arguments, "__proto__"));
  assert.deepEqual({ ...(call.arguments.__proto__ as object) }, { polluted: true });
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(call.arguments.toString, undefined, "no inherited members");
});

// docs/RELIABILITY.md item 18 (the storage side is in dispatch_test.ts)
Deno.test("lone surrogates, NUL and bidi controls in arguments are rejected", () => {
  expectInvalid(block('{"name": "a", "arguments": {"s": "\\ud800"}}'), "lone surrogate");
  expectInvalid(block('{"name": "a", "arguments": {"s": "x\\u0000"}}'), "NUL");
  expectInvalid(block('{"name": "a", "arguments": {"s": "\\u202e"}}'), "bidirectional");
  expectInvalid(block('{"name": "a", "arguments": {"s": "raw \u2067 isolate"}}'), "bidirectional");
  expectInvalid(block('{"name": "a", "arguments": {"s": "line\nbreak"}}'), "raw control character");
  assert.equal(
    expectOk(block('{"name": "a", "arguments": {"s": "\\ud83d\\ude00 ok"}}')).arguments.s,
    "😀 ok",
  );
});

// docs/RELIABILITY.md item 20
Deno.test("a multi-MB payload is rejected before parsing, quickly, and the next call still parses", () => {
  const huge = block(`{"name": "a", "arguments": {"s": "${"x".repeat(5_000_000)}"}}`);
  const started = performance.now();
  const calls = parseToolCalls(huge + block('{"name": "b", "arguments": {}}'));
  const ms = performance.now() - started;
  assert.equal(calls.length, 2);
  assert.ok(!calls[0].ok && calls[0].error.includes("longer than 65536 characters"));
  assert.ok(calls[1].ok && calls[1].name === "b");
  assert.ok(ms < 1000, `took ${ms} ms`);
  const small = parseToolCalls(block('{"name": "a", "arguments": {"s": "0123456789"}}'), {
    maxPayloadChars: 20,
  });
  assert.ok(!small[0].ok && small[0].error.includes("longer than 20"));
});

Deno.test("deep nesting is an error, not a stack overflow", () => {
  const deep = `{"name": "a", "arguments": {"x": ${"[".repeat(10_000)}${"]".repeat(10_000)}}}`;
  expectInvalid(block(deep), "nest deeper than 64");
});

Deno.test("parseStrictJson() accepts what JSON.parse accepts, with positions in its errors", () => {
  for (const text of ['{"a": [1, -2.5e3, true, false, null, "\\u00e9\\n"]}', "[]", '"s"', "0", " 1 "]) {
    const parsed = parseStrictJson(text);
    assert.ok(parsed.ok, text);
    assert.equal(JSON.stringify(parsed.value), JSON.stringify(JSON.parse(text)));
  }
  for (const text of ["{'a': 1}", "[1,]", "01", "NaN", '{"a" 1}', '"\\x"', "1e999", "[1] 2", ""]) {
    const parsed = parseStrictJson(text);
    assert.ok(!parsed.ok, text);
    if (!parsed.ok) assert.match(parsed.error, /at character \d+/);
  }
});

Deno.test("finalAnswerText() is the text after the last </think> without calls or the turn end", () => {
  const text = `<think>a</think>\n\nFirst ${
    block('{"name": "a", "arguments": {"s": "</tool_call>"}}')
  } then 4.<|im_end|>`;
  assert.equal(finalAnswerText(text), "First  then 4.");
  assert.equal(finalAnswerText("<think>only reasoning"), "");
  assert.equal(finalAnswerText("The answer is 7."), "The answer is 7.");
});
