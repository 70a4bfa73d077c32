/**
 * Writes the synthetic calculator task set as JSON Lines, one `Task` object per line:
 *
 *   deno run --allow-read --allow-write data/make_arithmetic.ts --n 200 --seed 0 --out data/arithmetic.jsonl
 *
 * Load the result with `data.source: jsonl` and `data.fields: {id: id, prompt: prompt, answer: answer}`,
 * or skip the file and use `data.source: arithmetic`, which generates the same tasks in memory.
 * Without `--out` the lines go to stdout. Bad flags print one line and exit 2.
 */
import { parseArgs } from "@std/cli";
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
    if (typeof values.out === "string") await writeAtomic(values.out, text);
    else await Deno.stdout.write(new TextEncoder().encode(text));
    return 0;
  } catch (err) {
    // parseArgs throws TypeError for unknown flags; both are bad input, shown as one line.
    if (!(err instanceof UserError || err instanceof TypeError)) throw err;
    console.error(`make_arithmetic: ${err.message}`);
    return 2;
  }
}

/** Writes through a temp file and a rename, so an interrupted run leaves the old file or none. */
async function writeAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${Deno.pid}`;
  await Deno.writeTextFile(tmp, text);
  await Deno.rename(tmp, path);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
