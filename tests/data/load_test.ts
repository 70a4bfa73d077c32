/**
 * Datasets: the sample files load through the GSM8K and MBPP loaders, Parquet written here gives the
 * same tasks as JSON Lines, bad records fail with the file and line, the arithmetic generator is
 * deterministic and right, and `loadTasks` shuffles and truncates reproducibly.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { parquetWriteBuffer } from "hyparquet-writer";
import { UserError } from "../../lib/errors.ts";
import {
  extractGsm8kAnswer,
  generateArithmeticTasks,
  loadGeneric,
  loadGsm8k,
  loadMbpp,
  loadTasks,
  mulberry32,
  readRows,
  type Task,
} from "../../lib/data/mod.ts";
import { main as makeArithmetic } from "../../data/make_arithmetic.ts";
import { PROMPT_MAX_BYTES } from "../../lib/data/prompt_size.ts";

const GSM8K_SAMPLE = fileURLToPath(new URL("../../data/gsm8k_sample.jsonl", import.meta.url));
const MBPP_SAMPLE = fileURLToPath(new URL("../../data/mbpp_sample.jsonl", import.meta.url));
const NUMBER = /^-?\d+(\.\d+)?$/;

/** A fresh temp dir, removed after `body`. */
async function withTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "data_test_" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Asserts that `promise` rejects with a UserError whose message contains every `parts` string. */
async function assertUserError(promise: Promise<unknown>, ...parts: string[]): Promise<UserError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof UserError, `expected a UserError, got ${err}`);
  for (const part of parts) {
    assert.ok(err.message.includes(part), `"${err.message}" should mention "${part}"`);
  }
  assert.ok(!err.message.includes("\n"), "one line");
  return err;
}

async function writeJsonl(path: string, rows: unknown[]): Promise<void> {
  await Deno.writeTextFile(path, rows.map((r) => JSON.stringify(r) + "\n").join(""));
}

// ---------------------------------------------------------------------------------------------- GSM8K

Deno.test("loadGsm8k reads the sample: 50 tasks with numeric answers and the question as prompt", async () => {
  const tasks = await loadGsm8k(GSM8K_SAMPLE);
  assert.equal(tasks.length, 50);
  assert.equal(new Set(tasks.map((t) => t.id)).size, 50);
  for (const task of tasks) {
    assert.equal(task.source, "gsm8k");
    assert.ok(task.prompt.endsWith("?"), task.prompt);
    assert.match(task.answer ?? "", NUMBER);
    assert.ok(Number.isFinite(Number(task.answer)));
    assert.equal(typeof task.meta?.solution, "string");
  }
  assert.equal(tasks[0].id, "gsm8k-0");
  assert.equal(tasks[0].answer, "26");
});

Deno.test("gsm8k sample: every <<a=b>> annotation is right and the last one is the #### answer", async () => {
  for (const row of await readRows(GSM8K_SAMPLE)) {
    const text = row.values.answer as string;
    const notes = [...text.matchAll(/<<([^=]+)=([^>]+)>>/g)];
    assert.ok(notes.length > 0, row.where);
    for (const [, expr, result] of notes) {
      assert.match(expr, /^[\d.+\-*/() ]+$/, `${row.where}: ${expr}`);
      const value = new Function(`return (${expr});`)() as number;
      assert.ok(Math.abs(value - Number(result)) < 1e-9, `${row.where}: ${expr} = ${value}, not ${result}`);
    }
    assert.equal(Number(notes.at(-1)![2]), Number(extractGsm8kAnswer(text)), row.where);
  }
});

Deno.test("extractGsm8kAnswer strips thousands separators and keeps sign and decimals", () => {
  assert.equal(extractGsm8kAnswer("so 1,234 in all\n#### 1,234"), "1234");
  assert.equal(extractGsm8kAnswer("#### -3.5"), "-3.5");
  assert.equal(extractGsm8kAnswer("#### +7"), "7");
  assert.equal(extractGsm8kAnswer("no marker 42"), undefined);
  assert.equal(extractGsm8kAnswer("#### forty"), undefined);
});

Deno.test("loadGsm8k: a row without #### is a UserError naming file, line and field", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/bad.jsonl`;
    await writeJsonl(path, [{ question: "q1?", answer: "#### 1" }, { question: "q2?", answer: "it is 2" }]);
    await assertUserError(loadGsm8k(path), `${path}:2`, '"answer"', "####");
  });
});

Deno.test("loadGsm8k: a non-number after #### and a missing field are UserErrors", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/bad.jsonl`;
    await writeJsonl(path, [{ question: "q?", answer: "#### about 3" }]);
    await assertUserError(loadGsm8k(path), `${path}:1`, "not a number");
    await writeJsonl(path, [{ question: "q?", answer: "#### 3" }, { prompt: "q?", answer: "#### 3" }]);
    await assertUserError(loadGsm8k(path), `${path}:2`, '"question"', "missing");
  });
});

// ---------------------------------------------------------------------------------------------- JSONL

Deno.test("readRows: a bad JSONL line is a UserError naming file:line; blank lines are allowed", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/rows.jsonl`;
    await Deno.writeTextFile(path, '{"a": 1}\n\n{"a": 2}\n{"a": 3,\n');
    await assertUserError(readRows(path), `${path}:4`, "not valid JSON");
    await Deno.writeTextFile(path, '{"a": 1}\n[1, 2]\n');
    await assertUserError(readRows(path), `${path}:2`, "not a JSON object");
    await Deno.writeTextFile(path, '{"a": 1}\n\n{"a": 2}\n');
    const rows = await readRows(path);
    assert.deepEqual(rows.map((r) => [r.index, r.where]), [[0, `${path}:1`], [1, `${path}:3`]]);
  });
});

Deno.test("readRows: .json arrays load; unknown extensions and missing files are UserErrors", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/a.json`, '[{"x": 1}, {"x": 2}]');
    assert.deepEqual((await readRows(`${dir}/a.json`)).map((r) => r.values.x), [1, 2]);
    await Deno.writeTextFile(`${dir}/a.csv`, "x\n1\n");
    await assertUserError(readRows(`${dir}/a.csv`), `${dir}/a.csv`, ".jsonl");
    await assertUserError(readRows(`${dir}/none.jsonl`), `${dir}/none.jsonl`, "does not exist");
    await Deno.writeTextFile(`${dir}/junk.parquet`, "not parquet at all");
    await assertUserError(readRows(`${dir}/junk.parquet`), `${dir}/junk.parquet`, "Parquet");
  });
});

// -------------------------------------------------------------------------------------------- Parquet

/** Writes GSM8K rows as Parquet (string columns), as Hugging Face ships them. */
async function writeGsm8kParquet(path: string, rows: Array<Record<string, unknown>>): Promise<void> {
  const buffer = parquetWriteBuffer({
    columnData: [
      { name: "question", data: rows.map((r) => r.question as string), type: "STRING" },
      { name: "answer", data: rows.map((r) => r.answer as string), type: "STRING" },
    ],
  });
  await Deno.writeFile(path, new Uint8Array(buffer));
}

Deno.test("a Parquet file gives the same tasks as the JSONL through loadGsm8k and loadGeneric", async () => {
  await withTempDir(async (dir) => {
    const rows = (await readRows(GSM8K_SAMPLE)).map((r) => r.values);
    await writeJsonl(`${dir}/gsm.jsonl`, rows);
    await writeGsm8kParquet(`${dir}/gsm.parquet`, rows);

    const fromParquet = await loadGsm8k(`${dir}/gsm.parquet`);
    assert.equal(fromParquet.length, 50);
    assert.deepEqual(fromParquet, await loadGsm8k(`${dir}/gsm.jsonl`));
    assert.deepEqual(fromParquet, await loadGsm8k(GSM8K_SAMPLE));

    const fields = { prompt: "question", answer: "answer" };
    const generic = await loadGeneric(`${dir}/gsm.parquet`, { fields });
    assert.deepEqual(generic, await loadGeneric(`${dir}/gsm.jsonl`, { fields }));
    assert.equal(generic[3].id, "gsm-3");
    assert.equal(generic[3].source, "generic");
    assert.equal(generic[3].prompt, fromParquet[3].prompt);
  });
});

Deno.test("a Parquet row without #### is a UserError naming file and row", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/bad.parquet`;
    await writeGsm8kParquet(path, [{ question: "a?", answer: "#### 1" }, { question: "b?", answer: "two" }]);
    await assertUserError(loadGsm8k(path), `${path} row 1`, '"answer"');
  });
});

Deno.test("MBPP from Parquet (INT64 ids, list columns) equals MBPP from JSONL", async () => {
  await withTempDir(async (dir) => {
    const rows = (await readRows(MBPP_SAMPLE)).map((r) => r.values);
    const column = (name: string) => rows.map((r) => r[name]);
    const buffer = parquetWriteBuffer({
      columnData: [
        { name: "task_id", data: rows.map((r) => BigInt(r.task_id as number)), type: "INT64" },
        { name: "text", data: column("text"), type: "STRING" },
        { name: "code", data: column("code"), type: "STRING" },
        { name: "test_list", data: column("test_list") },
        { name: "test_setup_code", data: column("test_setup_code"), type: "STRING" },
      ],
    });
    await Deno.writeFile(`${dir}/mbpp.parquet`, new Uint8Array(buffer));
    assert.deepEqual(await loadMbpp(`${dir}/mbpp.parquet`), await loadMbpp(MBPP_SAMPLE));
  });
});

// ----------------------------------------------------------------------------------------------- MBPP

Deno.test("loadMbpp reads the sample: 20 tasks, 3 tests each, the first test in the prompt", async () => {
  const tasks = await loadMbpp(MBPP_SAMPLE, { variant: "full" });
  assert.equal(tasks.length, 20);
  assert.equal(new Set(tasks.map((t) => t.id)).size, 20);
  for (const task of tasks) {
    assert.equal(task.source, "mbpp");
    assert.match(task.id, /^mbpp-10\d\d$/);
    assert.equal(task.tests?.length, 3);
    assert.ok(task.prompt.startsWith("Write a "), task.prompt);
    assert.ok(task.prompt.endsWith(`Your code should pass this test:\n${task.tests![0]}`), task.prompt);
    assert.equal(task.setup_code, "");
    assert.ok(task.reference_code?.startsWith("def "));
  }
});

/** python3, or null when this machine has none (the reference check is then skipped). */
const PYTHON = await (async () => {
  try {
    const out = await new Deno.Command("python3", { args: ["--version"], stdout: "null", stderr: "null" })
      .output();
    return out.success ? "python3" : null;
  } catch {
    return null;
  }
})();

Deno.test({
  name: "mbpp sample: every reference solution passes its tests (python3)",
  ignore: PYTHON === null,
  async fn() {
    for (const task of await loadMbpp(MBPP_SAMPLE)) {
      const program = [task.setup_code, task.reference_code, ...task.tests!].join("\n");
      const out = await new Deno.Command(PYTHON!, { args: ["-c", program], stderr: "piped" }).output();
      assert.ok(out.success, `${task.id}: ${new TextDecoder().decode(out.stderr)}`);
    }
  },
});

Deno.test("loadMbpp sanitized: prompt and test_imports fields", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/sanitized.jsonl`;
    await writeJsonl(path, [{
      source_file: "made up",
      task_id: 7,
      prompt: "Write a function to add two numbers.",
      code: "def add(a, b):\n    return a + b",
      test_imports: ["import math"],
      test_list: ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
    }]);
    const [task] = await loadMbpp(path, { variant: "sanitized" });
    assert.deepEqual(task, {
      id: "mbpp-7",
      source: "mbpp",
      prompt: "Write a function to add two numbers.\nYour code should pass this test:\nassert add(1, 2) == 3",
      tests: ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
      test_imports: ["import math"],
      reference_code: "def add(a, b):\n    return a + b",
      meta: { source_file: "made up" },
    });
    // The same file is not valid in the full variant (no `text`): the error says which field.
    await assertUserError(loadMbpp(path, { variant: "full" }), `${path}:1`, '"text"');
    await writeJsonl(path, [{ task_id: 8, prompt: "p", code: "c", test_list: [] }]);
    await assertUserError(loadMbpp(path, { variant: "sanitized" }), `${path}:1`, '"test_list"', "empty");
  });
});

// ----------------------------------------------------------------------------------------- arithmetic

/** Independent evaluation: tokens → BigInt with * and / before + and -, checking every / is exact. */
function evaluate(expression: string): bigint {
  const tokens = expression.split(" ");
  let sum = 0n;
  let term = BigInt(tokens[0]);
  for (let i = 1; i < tokens.length; i += 2) {
    const value = BigInt(tokens[i + 1]);
    const op = tokens[i];
    if (op === "*") term *= value;
    else if (op === "/") {
      assert.equal(term % value, 0n, `${expression}: inexact division`);
      term /= value;
    } else {
      sum += term;
      term = op === "+" ? value : -value;
    }
  }
  return sum + term;
}

Deno.test("evaluate (the test's own evaluator) respects precedence", () => {
  assert.equal(evaluate("4821 * 37 - 1290 / 5"), 4821n * 37n - 258n);
  assert.equal(evaluate("2 - 3 * 4 + 10 / 5 * 3"), -4n);
});

Deno.test("generateArithmeticTasks: answers are exact and operands respect the options", () => {
  const options = { numTasks: 300, seed: 11, minOperands: 2, maxOperands: 5, maxValue: 500 };
  const tasks = generateArithmeticTasks(options);
  assert.equal(tasks.length, 300);
  const ops = new Set<string>();
  for (const task of tasks) {
    const expression = task.meta!.expression as string;
    assert.equal(task.prompt, `Compute ${expression}. Use the calculator tool.`);
    assert.equal(task.answer, evaluate(expression).toString());
    const tokens = expression.split(" ");
    const operands = tokens.filter((_, i) => i % 2 === 0).map(Number);
    tokens.filter((_, i) => i % 2 === 1).forEach((op) => ops.add(op));
    assert.ok(operands.length >= 2 && operands.length <= 5, expression);
    assert.ok(operands.every((n) => Number.isInteger(n) && n >= 1 && n <= 500), expression);
    assert.ok(Math.abs(Number(task.answer)) < 2 ** 53);
  }
  assert.deepEqual([...ops].sort(), ["*", "+", "-", "/"]);
});

Deno.test("generateArithmeticTasks is deterministic per seed; other seeds differ", () => {
  const options = { numTasks: 20, seed: 5, minOperands: 2, maxOperands: 4, maxValue: 9999 };
  const a = generateArithmeticTasks(options);
  assert.deepEqual(a, generateArithmeticTasks(options));
  assert.deepEqual(generateArithmeticTasks({ ...options, numTasks: 5 }), a.slice(0, 5));
  const b = generateArithmeticTasks({ ...options, seed: 6 });
  assert.notDeepEqual(a.map((t) => t.prompt), b.map((t) => t.prompt));
  assert.equal(a[0].id, "arith-5-0");
});

Deno.test("generateArithmeticTasks rejects bad options with a UserError naming the option", () => {
  const good = { numTasks: 1, seed: 0, minOperands: 2, maxOperands: 3, maxValue: 10 };
  assert.throws(() => generateArithmeticTasks({ ...good, minOperands: 1 }), /minOperands/);
  assert.throws(() => generateArithmeticTasks({ ...good, maxOperands: 1 }), /maxOperands/);
  assert.throws(() => generateArithmeticTasks({ ...good, maxValue: 1 }), UserError);
});

Deno.test("make_arithmetic CLI writes JSONL that loads back as the same tasks", async () => {
  await withTempDir(async (dir) => {
    const out = `${dir}/arith.jsonl`;
    assert.equal(await makeArithmetic(["--n", "12", "--seed", "3", "--out", out]), 0);
    const loaded = await loadTasks({
      source: "jsonl",
      path: out,
      fields: { id: "id", prompt: "prompt", answer: "answer" },
    });
    const expected = generateArithmeticTasks({
      numTasks: 12,
      seed: 3,
      minOperands: 2,
      maxOperands: 4,
      maxValue: 9999,
    });
    assert.deepEqual(
      loaded.map((t) => [t.id, t.prompt, t.answer]),
      expected.map((t) => [t.id, t.prompt, t.answer]),
    );
    assert.equal(await makeArithmetic(["--n", "many", "--out", out]), 2);
  });
});

// ---------------------------------------------------------------------------------------------- loadTasks

const ids = (tasks: Task[]) => tasks.map((t) => t.id);

Deno.test("loadTasks: seeded shuffle + max_samples is deterministic, a permutation, and seed-dependent", async () => {
  const all = await loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE });
  const a = await loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE, shuffle_seed: 42, max_samples: 10 });
  const b = await loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE, shuffle_seed: 42, max_samples: 10 });
  const c = await loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE, shuffle_seed: 43, max_samples: 10 });
  assert.equal(a.length, 10);
  assert.deepEqual(ids(a), ids(b));
  assert.notDeepEqual(ids(a), ids(c));
  assert.notDeepEqual(ids(a), ids(all).slice(0, 10));
  const full = await loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE, shuffle_seed: 42 });
  assert.deepEqual(ids(full).slice(0, 10), ids(a));
  assert.deepEqual([...ids(full)].sort(), [...ids(all)].sort());
  const head = await loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE, max_samples: 5, shuffle_seed: null });
  assert.deepEqual(ids(head), ids(all).slice(0, 5));
});

Deno.test("loadTasks dispatches on source", async () => {
  assert.equal((await loadTasks({ source: "mbpp", path: MBPP_SAMPLE }))[0].source, "mbpp");
  const arith = await loadTasks({ source: "arithmetic", arithmetic: { num_tasks: 7, seed: 1 } });
  assert.equal(arith.length, 7);
  assert.equal(arith[0].source, "arithmetic");
});

Deno.test("mulberry32 is a fixed sequence (the documented PRNG)", () => {
  // First outputs of mulberry32(0), matching the reference C implementation.
  const rng = mulberry32(0);
  const first = [rng(), rng(), rng()].map((x) => Math.floor(x * 2 ** 32));
  assert.deepEqual(first, [1144304738, 1416247, 958946056]);
});

Deno.test("loadTasks: bad data config values are UserErrors naming the key", async () => {
  await assertUserError(loadTasks({ source: "gsm8k" }), "data.path");
  await assertUserError(loadTasks({ source: "jsonl", path: GSM8K_SAMPLE }), "data.fields.prompt");
  await assertUserError(
    loadTasks({ source: "parquet", path: GSM8K_SAMPLE, fields: { prompt: "question" } }),
    "data.path",
    ".parquet",
  );
  // @ts-expect-error: an unknown source from an unchecked config
  await assertUserError(loadTasks({ source: "csv", path: "x.csv" }), "data.source", "gsm8k");
  await withTempDir(async (dir) => {
    const path = `${dir}/dup.jsonl`;
    await writeJsonl(path, [{ id: "a", q: "1" }, { id: "a", q: "2" }]);
    await assertUserError(
      loadTasks({ source: "jsonl", path, fields: { id: "id", prompt: "q" } }),
      path,
      '"a"',
    );
  });
});

Deno.test("a 50 MB task prompt or a system prompt past 1 MiB is refused in one line naming the task, its size and the cap", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/huge.jsonl`;
    const huge = "x".repeat(50 * 1000 * 1000);
    await writeJsonl(path, [{ id: "small", q: "1 + 1?" }, { id: "huge", q: huge }]);
    await assertUserError(
      loadTasks({ source: "jsonl", path, fields: { id: "id", prompt: "q" } }),
      path,
      'task "huge": prompt',
      "50000000 bytes",
      `${PROMPT_MAX_BYTES} bytes`,
    );
    // At the cap (in UTF-8 bytes: "é" is two) a prompt loads; one byte more is refused.
    const atCap = "é".repeat(PROMPT_MAX_BYTES / 2);
    await writeJsonl(path, [{ id: "edge", q: atCap }]);
    const fields = { id: "id", prompt: "q" };
    assert.equal((await loadTasks({ source: "jsonl", path, fields }))[0].prompt, atCap);
    await writeJsonl(path, [{ id: "edge", q: atCap + "x" }]);
    await assertUserError(
      loadTasks({ source: "jsonl", path, fields }),
      'task "edge"',
      `${PROMPT_MAX_BYTES + 1} bytes`,
    );
  });
  await assertUserError(
    loadTasks({ source: "gsm8k", path: GSM8K_SAMPLE, system_prompt: "s".repeat(PROMPT_MAX_BYTES + 1) }),
    "data.system_prompt",
    `${PROMPT_MAX_BYTES + 1} bytes`,
  );
});
