/**
 * Golden loss masks on rollouts built with the real Qwen3 chat template: tool results, the headers
 * the environment appended, a truncated episode, a malformed tool call and earlier `<think>` turns;
 * the role state machine agrees with `sampled` on all of them.
 */
import assert from "node:assert/strict";
import { mask } from "../../lib/pipeline/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { zeroVarianceWarning } from "../../lib/mask/mask_table.ts";
import { testSession } from "../helpers/session.ts";
import { defaultConfig, type MaskConfig } from "../../lib/config/mod.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { bundledQwen3TokenizerDir } from "../../lib/model/bundled_tokenizer.ts";
import { QWEN3_ROLE_TOKENS } from "../../lib/mask/roles.ts";
import { buildTable, listFromArrays } from "../../lib/arrow/mod.ts";
import { type EpisodeSpec, qwen3Pieces, rolloutColumns } from "../fixtures/rollouts.ts";

const tok = await loadTokenizer(bundledQwen3TokenizerDir());
const config = (o: Partial<MaskConfig>): MaskConfig => ({ ...defaultConfig().mask, ...o });

const CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>';
const EPISODES: Array<EpisodeSpec & { trained: string }> = [
  {
    group: 0,
    turns: [
      { text: `<think>\nI should compute.\n</think>\n\n${CALL}`, calls: [{ status: "ok", output: "4" }] },
      { text: "<think>\nThe tool said 4.\n</think>\n\n#### 4" },
    ],
    trained:
      `<think>\nI should compute.\n</think>\n\n${CALL}<|im_end|><think>\nThe tool said 4.\n</think>\n\n#### 4<|im_end|>`,
  },
  {
    group: 0,
    turns: [
      {
        text: '<tool_call>\n{"name": "calculator", "argu',
        calls: [{ status: "invalid_tool_call", output: "Error: bad" }],
      },
      { text: "#### 4" },
    ],
    trained: '<tool_call>\n{"name": "calculator", "argu<|im_end|>#### 4<|im_end|>',
  },
  {
    group: 1,
    finish: "length",
    turns: [{ text: "<think>\nLet me think for a very long", stopped: false }],
    trained: "<think>\nLet me think for a very long",
  },
  {
    group: 1,
    thinking: false,
    turns: [
      { text: CALL, calls: [{ status: "ok", output: "4" }] },
      { text: "#### 4", user: "Are you sure?" },
      {
        text: "Yes. #### 4",
      },
    ],
    trained: `${CALL}<|im_end|>#### 4<|im_end|>Yes. #### 4<|im_end|>`,
  },
];

function scoredOf(specs: EpisodeSpec[], reward = Float32Array.from(specs, (_, i) => i % 2)) {
  const columns = rolloutColumns(specs, qwen3Pieces(tok));
  return buildTable("fixture", "scored", {
    ...columns,
    reward,
    correct: specs.map(() => false),
    turn_rewards: listFromArrays(specs.map((s) => new Float32Array(s.turns.length))),
  }, {
    config_hash: "x",
    input_hashes: {},
    model: "m",
    adapter: "",
    tokenizer_hash: "t",
    chat_template_hash: "c",
    sampling: {},
    seed: 0,
  });
}

function masks(table: ReturnType<typeof mask>["table"]) {
  const lm = table.getChild("loss_mask")!;
  const tokens = table.getChild("tokens")!;
  return Array.from({ length: table.numRows }, (_, i) => ({
    mask: lm.get(i)!.toArray() as Uint8Array,
    tokens: tokens.get(i)!.toArray() as Int32Array,
  }));
}

const trainedText = (m: { mask: Uint8Array; tokens: Int32Array }) =>
  tok.decode(Array.from(m.tokens).filter((_, t) => m.mask[t] === 1));
const untrainedText = (m: { mask: Uint8Array; tokens: Int32Array }) =>
  tok.decode(Array.from(m.tokens).filter((_, t) => m.mask[t] === 0));

Deno.test("the role state machine's token ids are Qwen3's", () => {
  assert.equal(QWEN3_ROLE_TOKENS.imStart, tok.special.imStart);
  assert.deepEqual(QWEN3_ROLE_TOKENS.turnEnds, [tok.special.imEnd, tok.special.endOfText]);
  assert.deepEqual(QWEN3_ROLE_TOKENS.assistantHeader, tok.encode("assistant\n"));
  assert.deepEqual(QWEN3_ROLE_TOKENS.emptyThink, tok.encode("<think>\n\n</think>\n\n"));
});

Deno.test("loss_mask trains exactly the sampled text: tool results, appended headers and prompts are 0", () => {
  const { table } = mask(testSession({ mask: config({}) }), scoredOf(EPISODES));
  masks(table).forEach((m, i) => assert.equal(trainedText(m), EPISODES[i].trained, `episode ${i}`));
  const [withTool, malformed, , noThinking] = masks(table);
  assert.match(
    untrainedText(withTool),
    /<tool_response>\n4\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/,
  );
  assert.match(untrainedText(malformed), /<tool_response>\nError: bad\n<\/tool_response>/);
  // Thinking off: the empty think blocks the environment appended after each header are not trained.
  assert.match(
    untrainedText(noThinking),
    /Are you sure\?<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/,
  );
});

Deno.test("mask_truncated zeroes an episode cut by a token limit, and only it", () => {
  const { table, summary } = mask(
    testSession({ mask: config({ mask_truncated: true }) }),
    scoredOf(EPISODES),
  );
  const m = masks(table);
  assert.equal(m[2].mask.reduce((s, v) => s + v, 0), 0);
  assert.equal(trainedText(m[0]), EPISODES[0].trained);
  assert.equal(summary.truncated_masked, 1);
});

Deno.test("the role state machine agrees with sampled on rollouts laid out by the rollout stage", () => {
  const bySampled = masks(
    mask(testSession({ mask: config({ loss_mask: "sampled" }) }), scoredOf(EPISODES)).table,
  );
  const byRoles = masks(
    mask(testSession({ mask: config({ loss_mask: "roles" }) }), scoredOf(EPISODES)).table,
  );
  bySampled.forEach((m, i) => assert.deepEqual(byRoles[i].mask, m.mask, `episode ${i}`));
});

Deno.test("advantages are 0 wherever the loss mask is 0", () => {
  const { table } = mask(testSession({ mask: config({}) }), scoredOf(EPISODES));
  const adv = table.getChild("advantages")!;
  masks(table).forEach((m, i) => {
    const a = adv.get(i)!.toArray() as Float32Array;
    a.forEach((v, t) => m.mask[t] === 0 && assert.equal(v, 0));
    assert.ok(a.some((v) => v !== 0), `episode ${i} has trained tokens with an advantage`);
  });
});

Deno.test("a NaN or infinite reward is refused naming the column and row, not turned into NaN advantages", () => {
  for (const bad of [NaN, Infinity, -Infinity]) {
    const reward = Float32Array.from([1, bad, 0, 1]);
    assert.throws(() => mask(testSession({ mask: config({}) }), scoredOf(EPISODES, reward)), (e) => {
      assert.ok(e instanceof UserError, String(e));
      assert.match(
        e.message,
        new RegExp(`column "reward" at row 1 \\(got ${bad}\\): a reward must be a finite`),
      );
      return true;
    });
  }
});

Deno.test("a step whose groups all have equal rewards says so, with the numbers and the likely cause", () => {
  const equal = Float32Array.from([0, 0, 0, 0]);
  const { summary } = mask(testSession({ mask: config({}) }), scoredOf(EPISODES, equal));
  assert.equal(summary.metrics.frac_zero_std_groups, 1);
  const warning = zeroVarianceWarning(summary, equal);
  assert.match(
    warning ?? "",
    /in all 2 groups the episodes have equal rewards \(rewards 0; frac_zero_std_groups/,
  );
  assert.match(warning ?? "", /trains nothing\. Likely cause: the tasks are all too hard or all too easy/);
  const mixed = Float32Array.from([0, 1, 0, 0]);
  const half = mask(testSession({ mask: config({}) }), scoredOf(EPISODES, mixed)).summary;
  assert.equal(zeroVarianceWarning(half, mixed), null, "one group with different rewards trains");
});
