/**
 * Guided tool calls (lib/engine/call_grammar.ts, tool_call_guide.ts, lib/rollout/guided_calls.ts): the
 * grammar accepts the calls Qwen3's template writes and refuses the broken ones the demo's policy wrote;
 * with the real Qwen3 tokenizer, every token of a well-formed call is allowed at its step and
 * `</tool_call>` only at the end, from the first sampled token when the prompt opened the call (serve's
 * forced `tool_choice`); and a random model sampling with the guide writes calls that the
 * rollout's own parser accepts, where without it the same model writes none.
 */

import assert from "node:assert/strict";
import { CallGrammar, type GuidedTool, STRING_BIDI_CONTROLS } from "../../lib/engine/call_grammar.ts";
import { guidedTokenIds } from "../../lib/engine/tool_call_guide.ts";
import { rowConstraints } from "../../lib/engine/constraints.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { guidedTool, toolCallGuide } from "../../lib/rollout/guided_calls.ts";
import { BIDI_CONTROLS } from "../../lib/rollout/sanitize.ts";
import { parseToolCalls } from "../../lib/rollout/tool_calls.ts";
import { makeCalculatorTool } from "../../lib/tools/calculator.ts";
import { toolSpecs } from "../../lib/tools/registry.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const CALCULATOR = toolSpecs([makeCalculatorTool({ maxOperations: 1 })]);
const PICK: GuidedTool = {
  name: "pick",
  params: [
    { name: "color", type: "string", required: true, enum: ["red", "green"] },
    { name: "count", type: "integer", required: false },
    { name: "ratio", type: "number", required: false },
    { name: "flag", type: "boolean", required: true },
  ],
};

function accepts(g: CallGrammar, body: string): "complete" | "prefix" | "no" {
  const state = g.advance(g.start(), body);
  if (state.length === 0) return "no";
  return g.complete(state) ? "complete" : "prefix";
}

Deno.test("the call grammar: the template's calls, their prefixes, and the demo's broken calls", () => {
  const g = new CallGrammar([guidedTool(CALCULATOR[0]), PICK]);
  const call = '\n{"name": "calculator", "arguments": {"expression": "45 * 9"}}\n';
  assert.equal(accepts(g, call), "complete");
  for (let n = 0; n < call.length; n++) {
    assert.equal(accepts(g, call.slice(0, n)), "prefix", call.slice(0, n));
  }
  assert.equal(
    accepts(g, '\n{"name": "calculator", "arguments": {"expression": "a \\"q\\" \\u00e9\\n"}}\n'),
    "complete",
  );
  // Seen from the demo's policy after GRPO (BENCH.md): a newline in the expression, a bare string for the
  // arguments, a piece of the call written into it (a <tool_call> token inside it: the next test).
  assert.equal(accepts(g, '\n{"name": "calculator", "arguments": {"expression": "4\n'), "no");
  assert.equal(accepts(g, '\n{"name": "calculator", "arguments": "2 - 2 - 1"'), "no");
  assert.equal(accepts(g, '\n{"name": "calculator", "arguments": {"expression": "3\n{" 9"}}'), "no");
  assert.equal(accepts(g, '\n{"name": "calc", "arguments": {}}\n'), "no");
  // A string holds no character the strict parser refuses: control and bidirectional-control characters.
  assert.deepEqual([...STRING_BIDI_CONTROLS].sort(), [...BIDI_CONTROLS].sort());
  for (const ch of ["\u0001", "\u007f", ...[...BIDI_CONTROLS].map((c) => String.fromCodePoint(c))]) {
    const body = `\n{"name": "calculator", "arguments": {"expression": "1${ch}`;
    assert.equal(accepts(g, body), "no", `U+${ch.codePointAt(0)!.toString(16)}`);
  }
  assert.equal(accepts(g, '\n{"name": "calculator", "arguments": {}}\n'), "no", "expression is required");
  // Optional properties may be left out; present ones keep the schema's order and types.
  assert.equal(accepts(g, '\n{"name": "pick", "arguments": {"color": "red", "flag": true}}\n'), "complete");
  assert.equal(
    accepts(
      g,
      '\n{"name": "pick", "arguments": {"color": "green", "count": 12, "ratio": -0.5e+3, "flag": false}}\n',
    ),
    "complete",
  );
  assert.equal(accepts(g, '\n{"name": "pick", "arguments": {"color": "blue"'), "no");
  assert.equal(
    accepts(g, '\n{"name": "pick", "arguments": {"color": "red", "count": 1.5'),
    "no",
    "an integer",
  );
  assert.equal(accepts(g, '\n{"name": "pick", "arguments": {"color": "red", "count": 01'), "no");
  assert.equal(accepts(g, '\n{"name": "pick", "arguments": {"flag": true, "color": "red"'), "no", "order");
  assert.equal(accepts(g, '\n{"name": "pick", "arguments": {"color": "red", "flag": true, "x": 1'), "no");
  // A tool with a property the grammar does not type is guided up to its name only.
  const free = new CallGrammar([{ name: "free", params: null }]);
  const state = free.advance(free.start(), '\n{"name": "free", "arguments": ');
  assert.ok(free.free(state) && free.complete(state));
  assert.equal(accepts(free, '\n{"name": "fre3'), "no");
});

Deno.test("guidedTokenIds with Qwen3's tokenizer: each token of a call allowed, </tool_call> only at its end", async () => {
  const tokenizer = await loadTokenizer(await makeTinyModel());
  const guide = toolCallGuide(tokenizer, CALCULATOR, 151936);
  const call = tokenizer.encode(
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "45 * 9"}}\n</tool_call>',
  );
  const before = tokenizer.encode("Let me compute. ");
  assert.equal(guidedTokenIds(guide, before), null, "outside a call nothing is guided");
  const tokens = [...before, ...call];
  for (let i = before.length + 1; i < tokens.length; i++) {
    const allowed = guidedTokenIds(guide, tokens.slice(0, i))!;
    assert.ok(allowed.includes(tokens[i]), `token ${i} (${JSON.stringify(tokenizer.decode([tokens[i]]))})`);
    assert.equal(allowed.includes(guide.close), i === tokens.length - 1, `</tool_call> at ${i}`);
    assert.ok(!allowed.includes(tokenizer.eosTokenId), "a call cannot end the turn");
    assert.ok(!allowed.includes(guide.open), "nor open another inside it");
  }
  assert.equal(guidedTokenIds(guide, tokens), null, "after </tool_call> nothing is guided");
  const inThink = tokenizer.encode("<think>\n<tool_call>\n{");
  assert.equal(guidedTokenIds(guide, inThink), null, "a <tool_call> while thinking is not a call");
  assert.ok(guidedTokenIds(guide, tokenizer.encode("<think>\n</think>\n\n<tool_call>\n{")) !== null);
});

Deno.test("a guide whose call the prompt opened (opened) guides from the first sampled token, until </tool_call>", async () => {
  const tokenizer = await loadTokenizer(await makeTinyModel());
  const guide = {
    ...toolCallGuide(tokenizer, CALCULATOR, 151936),
    opened: '\n{"name": "calculator", "arguments": ',
  };
  const rest = tokenizer.encode('{"expression": "45 * 9"}}\n</tool_call>');
  for (let i = 0; i < rest.length; i++) {
    const allowed = guidedTokenIds(guide, rest.slice(0, i));
    assert.ok(allowed?.includes(rest[i]), `token ${i} (${JSON.stringify(tokenizer.decode([rest[i]]))})`);
    assert.equal(allowed!.includes(guide.close), i === rest.length - 1, `</tool_call> at ${i}`);
  }
  assert.ok(!guidedTokenIds(guide, [])!.includes(tokenizer.encode("Sure")[0]), "prose cannot start the body");
  assert.equal(guidedTokenIds(guide, rest), null, "after </tool_call> nothing is guided");
  const { opened: _, ...plain } = guide;
  assert.equal(guidedTokenIds(plain, []), null, "without opened, a turn starts outside any call");
  // An allowed list with no id of the call's grammar: the call's ids, not a row with none (read as any id).
  const prose = tokenizer.encode("Sure thing");
  const row = rowConstraints({ toolCalls: guide, allowedTokenIds: prose }, rest.slice(0, 2));
  assert.ok(row?.onlyListed && row.ids.length > 0, "a row that still lists ids");
  assert.deepEqual(row!.ids, [...new Set(guidedTokenIds(guide, rest.slice(0, 2)))]);
});

Deno.test("a random model writes parseable calls with the guide, and broken ones without it", async () => {
  const dir = await makeTinyModel();
  const [policy, tokenizer] = [await LocalPolicy.load(dir, { maxSequences: 2 }), await loadTokenizer(dir)];
  // Enums and booleans only: a random model repeats a digit for as long as it may (a number never ends).
  const tool: GuidedTool = {
    name: "pick",
    params: PICK.params!.filter((p) => p.enum || p.type === "boolean"),
  };
  const specs = [{ type: "function" as const, function: { name: "pick", parameters: schemaOf(tool) } }];
  const guide = toolCallGuide(tokenizer, specs, policy.config.vocab_size);
  const open = tokenizer.special.toolCall;
  const sample = async (guided: boolean, seed: number) => {
    const seq = await policy.openSequence(tokenizer.encode("<|im_start|>assistant\n"), {
      seed,
      capacity: 512,
    });
    try {
      // <tool_call> made near certain wherever the model may write it: calls follow each other.
      const constraints = {
        logitBias: [[open, 100]] as [number, number][],
        ...(guided ? { toolCalls: guide } : {}),
      };
      const g = await seq.generate({ maxNewTokens: 200, temperature: 1, constraints });
      return parseToolCalls(tokenizer.decode(g.tokens));
    } finally {
      await seq.close();
    }
  };
  for (const seed of [1, 2, 3]) {
    const calls = await sample(true, seed);
    const closed = calls.filter((c) => c.raw.endsWith("</tool_call>"));
    assert.ok(closed.length >= 2, `seed ${seed}: ${closed.length} closed calls: ${calls.map((c) => c.raw)}`);
    for (const c of closed) {
      assert.ok(c.ok, `seed ${seed}: ${c.raw}`);
      assert.equal(c.name, "pick");
      assert.ok(
        ["red", "green"].includes(c.arguments.color as string) && typeof c.arguments.flag === "boolean",
      );
    }
    const free = await sample(false, seed);
    assert.ok(
      free.length > 0 && free.every((c) => !c.ok),
      `seed ${seed} unguided: ${free.map((c) => c.raw)}`,
    );
  }
  await policy.close();
});

function schemaOf(tool: GuidedTool): Record<string, unknown> {
  const properties = Object.fromEntries(
    tool.params!.map((p) => [p.name, p.enum ? { type: p.type, enum: p.enum } : { type: p.type }]),
  );
  return { type: "object", properties, required: tool.params!.filter((p) => p.required).map((p) => p.name) };
}
