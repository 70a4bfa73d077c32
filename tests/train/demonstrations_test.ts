/**
 * Demonstrations as batch.arrow (lib/train/demonstrations.ts): a complete batch file whose tokens are
 * the template's prompt plus the response and end-of-turn token, trained on the response only.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/mod.ts";
import { generateArithmeticTasks } from "../../lib/data/mod.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { writeDemonstrationBatch } from "../../lib/train/demonstrations.ts";
import { episodesOf } from "../../lib/train/episodes.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

Deno.test("demonstrations make a batch file: template prompt, response + <|im_end|>, loss on the response", async () => {
  const model = await makeTinyModel();
  const tokenizer = await loadTokenizer(model);
  const tasks = generateArithmeticTasks({
    numTasks: 3,
    seed: 1,
    minOperands: 2,
    maxOperands: 3,
    maxValue: 99,
  });
  const path = join(await Deno.makeTempDir(), "batch.arrow");
  const demos = tasks.map((task) => ({ task, response: `Final answer: ${task.answer}` }));
  await writeDemonstrationBatch(path, demos, tokenizer, {
    systemPrompt: "Be brief.",
    enableThinking: false,
    configHash: "h",
    model,
  });
  const batch = await readStageFile(path, "batch");
  assert.equal(batch.rows, 3);
  const [episode] = episodesOf(batch);
  const prompt = tokenizer.renderChatTokens(
    [{ role: "system", content: "Be brief." }, { role: "user", content: tasks[0].prompt }],
    { addGenerationPrompt: true, enableThinking: false },
  );
  const tokens = Array.from(episode.tokens);
  assert.deepEqual(tokens.slice(0, prompt.length), prompt);
  assert.equal(tokens.at(-1), tokenizer.special.imEnd);
  assert.equal(tokenizer.decode(tokens.slice(prompt.length, -1)), `Final answer: ${tasks[0].answer}`);
  assert.deepEqual(Array.from(episode.lossMask), tokens.map((_, t) => (t >= prompt.length ? 1 : 0)));
  assert.equal(batch.column("prompt_len")[0], prompt.length);
});
