/**
 * Every command line the user is shown runs as written, in order, on a fresh copy of the repository: the
 * README's `sh` blocks after its first command (the demo), and each command's `--help` examples. The test
 * appends only overrides that make runs small (see smallOverrides); lines that are not `deno task` commands
 * (vLLM, SGLang: GPU servers in Python), the test command itself, the set-up alias of `deno`, and lines naming an
 * execution provider that does not start on this machine (`--model.ep=cuda` without CUDA; `webgpu` without a
 * Vulkan driver — CI installs lavapipe, so there they run) are listed as skipped, with the reason. The
 * README's TypeScript example of the engine runs too, as a script in the copy, after the commands.
 * (tests/repo/readme_commands_test.ts checks, faster, that every shown override passes the config loader.)
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  denoTask,
  type Example,
  freshCopy,
  helpExamples,
  readmeLines,
  ROOT,
  type ServerStop,
  startServer,
  taskOf,
} from "../helpers/examples.ts";
import { providerProblem } from "../../lib/ort/provider_check.ts";

/** Overrides appended per command so that each run is small (the last override of a key wins). */
const SMALL: Record<string, string[]> = {
  demo: [
    "--loop.steps=2",
    "--rollout.tasks_per_step=2",
    "--eval.num_tasks=8",
    "--data.arithmetic.num_tasks=200",
    "--demo.warm_start.traces=8",
    "--demo.warm_start.copy_max_steps=4",
    "--demo.warm_start.probe_every=2",
    "--demo.warm_start.probe_tasks=2",
    "--demo.warm_start.mix_steps=2",
  ],
  // Every width, dtype, vocabulary and shard count as shown, at two layers: the 0.6B shape's 28 would take
  // ~30 s more to write and load and exercise no other code.
  "make-model": ["--layers", "2"],
  rollout: ["--rollout.tasks_per_step=1", "--rollout.group_size=2", "--rollout.generation.max_new_tokens=8"],
  loop: [
    "--rollout.tasks_per_step=1",
    "--rollout.group_size=2",
    "--rollout.generation.max_new_tokens=8",
    "--eval.num_tasks=4",
  ],
  eval: ["--eval.num_tasks=4", "--rollout.generation.max_new_tokens=8"],
};

/**
 * What is appended to `task args`: SMALL's overrides, and for a loop that names no step count (so runs the
 * config's 20) and resumes nothing, two steps — on lavapipe a WebGPU step takes ~4 s. A line that names its
 * steps keeps them: later lines read what it wrote (runs/try/adapters/step-0020).
 */
function smallOverrides(task: string, args: string[]): string[] {
  const named = args.some((a) => /^--(loop\.steps|resume)\b/.test(a));
  return [...(SMALL[task] ?? []), ...(task === "loop" && !named ? ["--loop.steps=2"] : [])];
}

/** Lines shown but not run here, and why. */
function skipReason(task: string | undefined, line: string): string | null {
  if (task === "test") return "the test command itself";
  if (/^alias deno=/.test(line)) return "the set-up alias (here `deno` is already the pinned Deno on PATH)";
  if (!task) return "not a deno task command (a GPU inference server in Python)";
  const ep = /--model\.ep[ =](\w+)/.exec(line)?.[1];
  const problem = ep === "cuda" || ep === "webgpu" ? providerProblem(ep) : null;
  if (problem) return `model.ep ${ep} does not start here: ${problem.why}`;
  return null;
}

/** What the servers that ended on their own said, for a failure's message ("" when none did). */
function serversEnded(ended: string[]): string {
  return ended.map((e) => `\n${e}`).join("");
}

/** Runs `examples` in order in `dir`; returns what was skipped. */
async function runInOrder(dir: string, examples: Example[]): Promise<string[]> {
  const skipped: string[] = [];
  const servers = new Map<string, ServerStop>(); // by port: a new server replaces the old one
  const ended: string[] = []; // servers that had exited on their own when stopped
  const stop = async (server: ServerStop | undefined) => {
    const early = await server?.();
    if (early) ended.push(early);
  };
  try {
    for (const { where, line } of examples) {
      const parsed = taskOf(line);
      const reason = skipReason(parsed?.[0], line);
      if (reason || !parsed) {
        skipped.push(`${where}: ${line} (${reason})`);
        continue;
      }
      const [task, args] = parsed;
      if (task === "serve") {
        const port = /--port[ =](\d+)/.exec(args.join(" "))?.[1] ?? "8000";
        await stop(servers.get(port));
        servers.set(port, await startServer(dir, args));
        continue;
      }
      const out = await denoTask(dir, [task, ...args, ...smallOverrides(task, args)]);
      if (out.code !== 0) { // stop the servers now, so the message says whether one had died
        for (const server of servers.values()) await stop(server);
        servers.clear();
      }
      assert.equal(
        out.code,
        0,
        `${where}: '${line}' exited ${out.code}:\n${out.stderr}${serversEnded(ended)}`,
      );
    }
  } finally {
    for (const server of servers.values()) await stop(server);
  }
  assert.equal(
    ended.length,
    0,
    `a server the README starts ended before it was stopped:${serversEnded(ended)}`,
  );
  return skipped;
}

/** The README's TypeScript blocks that import the toolkit, run as scripts in `dir`. */
async function runTypeScriptBlocks(dir: string, markdown: string): Promise<number> {
  const blocks = [...markdown.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1])
    .filter((b) => b.includes('from "./mod.ts"'));
  for (const [i, code] of blocks.entries()) {
    const file = join(dir, `readme_example_${i}.ts`);
    await Deno.writeTextFile(file, code);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", file],
      cwd: dir,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, `README TypeScript block ${i + 1}:\n${new TextDecoder().decode(out.stderr)}`);
  }
  return blocks.length;
}

Deno.test("README's commands run as written, in order, on a fresh copy after the demo", async () => {
  const markdown = await Deno.readTextFile(join(ROOT, "README.md"));
  const dir = await freshCopy("readme-examples-");
  const lines = readmeLines(markdown);
  assert.match(lines[0].line, /task demo\b/, "the README's first command is the demo");
  const skipped = await runInOrder(dir, lines);
  assert.ok(
    skipped.every((s) =>
      /vllm serve|sglang|task test|alias deno=|model\.ep (cuda|webgpu) does not start here/.test(s)
    ),
    skipped.join("\n"),
  );
  assert.ok(await runTypeScriptBlocks(dir, markdown) >= 2, "the engine and notebook examples ran");
  for (const path of [...markdown.matchAll(/"(runs\/[^"]+\.arrow)"/g)].map((m) => m[1])) {
    assert.ok(
      await Deno.stat(join(dir, path)).then(() => true, () => false),
      `README reads ${path}: it exists`,
    );
  }
  await Deno.remove(dir, { recursive: true });
});

Deno.test("each command's --help examples run as written, in order, on a fresh copy", async () => {
  const dir = await freshCopy("help-examples-");
  const order = [
    "demo",
    "make-model",
    "rollout",
    "score",
    "mask",
    "train",
    "eval",
    "loop",
    "report",
    "serve",
  ];
  const examples: Example[] = [];
  for (const task of order) examples.push(...await helpExamples(dir, task));
  for (const task of order) {
    assert.ok(
      examples.some((e) => e.where.includes(`task ${task} `)),
      `deno task ${task} --help shows examples`,
    );
  }
  const skipped = await runInOrder(dir, examples);
  assert.deepEqual(skipped, []);
  await Deno.remove(dir, { recursive: true });
});
