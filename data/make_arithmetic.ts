/**
 * Writes the synthetic calculator task set as JSON Lines, one `Task` object per line:
 *
 *   deno run --allow-read --allow-write data/make_arithmetic.ts --n 200 --seed 0 --out data/arithmetic.jsonl
 *
 * Load the result with `data.source: jsonl` and `data.fields: {id: id, prompt: prompt, answer: answer}`,
 * or skip the file and use `data.source: arithmetic`, which generates the same tasks in memory.
 * Without `--out` the lines go to stdout. Bad flags print one line and exit 2.
 */
import { dirname, resolve } from "node:path";
import { parseArgs } from "@std/cli";
import { writeTextAtomic } from "../lib/fs/atomic.ts";
import { specialKind } from "../lib/fs/output.ts";
import { statOrNull } from "../lib/fs/stat.ts";
import { UserError } from "../lib/errors.ts";
import { type ArithmeticOptions, generateArithmeticTasks } from "../lib/data/arithmetic.ts";
import type { Task } from "../lib/data/task.ts";

const HELP = `deno run --allow-read --allow-write data/make_arithmetic.ts [--n N] [--seed S] [--out FILE]
Writes N arithmetic tasks that need the calculator tool as JSON Lines.
  --n N               number of tasks (default 200)
  --seed S            PRNG seed; the same seed writes the same file (default 0)
  --min-operands K    fewest operands per expression (default 2)
  --max-operands K    most operands per expression (default 4)
  --max-value V       largest operand (default 9999)
  --out FILE          output file (default: stdout)
  --help              this text`;

const NUMBER_FLAGS = { n: 200, seed: 0, "min-operands": 2, "max-operands": 4, "max-value": 9999 };

/** Tasks as JSON Lines, newline-terminated. */
export function toJsonl(tasks: Task[]): string {
  return tasks.map((task) => JSON.stringify(task) + "\n").join("");
}

/** Parses the flags into generator options (a `UserError` for a value that is not an integer). */
export function optionsFromFlags(values: Record<string, string | boolean | undefined>): ArithmeticOptions {
  const get = (name: keyof typeof NUMBER_FLAGS): number => {
    const raw = values[name];
    if (raw === undefined) return NUMBER_FLAGS[name];
    if (typeof raw === "string" && /^-?\d+$/.test(raw)) return Number(raw);
    throw new UserError(`--${name}`, { value: raw, why: "it is not an integer", fix: `pass --${name} N` });
  };
  return {
    numTasks: get("n"),
    seed: get("seed"),
    minOperands: get("min-operands"),
    maxOperands: get("max-operands"),
    maxValue: get("max-value"),
  };
}

/** Runs the CLI on `argv`; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  try {
    const { values } = parseArgs(argv, { string: [...Object.keys(NUMBER_FLAGS), "out"], boolean: ["help"] });
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    const text = toJsonl(generateArithmeticTasks(optionsFromFlags(values)));
    if (typeof values.out === "string") await writeOutput(values.out, text);
    else await Deno.stdout.write(new TextEncoder().encode(text));
    return 0;
  } catch (err) {
    // parseArgs throws TypeError for unknown flags; both are bad input, shown as one line.
    if (!(err instanceof UserError || err instanceof TypeError)) throw err;
    console.error(`make_arithmetic: ${err.message}`);
    return 2;
  }
}

/**
 * Writes `text` to `path` through the toolkit's atomic writer (an interrupted run leaves the old file or
 * none, and no temporary file), after refusing in one line what is not a regular file or a new name in an
 * existing directory: a directory, a device, /proc or /sys, a symlink loop, an over-long name.
 */
async function writeOutput(path: string, text: string): Promise<void> {
  const what = `--out ${path}`;
  const info = await statOrNull(path, what);
  if (info && !info.isFile) {
    throw new UserError(what, {
      why: `it is ${specialKind(info) ?? "a directory"}, not a file, so the tasks cannot be written there`,
      fix: "pass --out a .jsonl file name (an existing file is replaced)",
    });
  }
  const parent = dirname(resolve(path));
  if (!(await statOrNull(parent, what))?.isDirectory) {
    throw new UserError(what, {
      why: `its directory ${parent} does not exist`,
      fix: `create it first (mkdir -p ${parent}) or pass --out a file in an existing directory`,
    });
  }
  await writeTextAtomic(path, text);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
