/**
 * The built-in tools over their context (execute_code through the sandbox, read_file's jail) and the
 * registry: enabled built-ins, user tool modules and their one-line errors, specs for the template.
 */
import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/mod.ts";
import type { Task } from "../../lib/data/task.ts";
import { UserError } from "../../lib/errors.ts";
import { executeCodeTool } from "../../lib/tools/execute_code.ts";
import { readFileTool } from "../../lib/tools/read_file.ts";
import { loadTools, type RolloutToolsConfig, toolSpecs } from "../../lib/tools/registry.ts";
import { openSandbox } from "../../lib/tools/sandbox.ts";
import { findExecutable } from "../../lib/tools/sandbox_command.ts";
import type { ToolContext, ToolResult } from "../../lib/tools/types.ts";

const HAVE_BWRAP = (await findExecutable("bwrap")) !== undefined;
const ignoreBwrap = !HAVE_BWRAP && Deno.env.get("CI") === undefined;

function context(task: Partial<Task> = {}, timeoutMs = 5000): ToolContext {
  return {
    task: { id: "t1", source: "generic", prompt: "p", ...task },
    signal: new AbortController().signal,
    timeoutMs,
    maxOutputChars: 2000,
  };
}

function toolsSection(patch: Partial<RolloutToolsConfig>): RolloutToolsConfig {
  return { ...defaultConfig().rollout.tools, ...patch };
}

Deno.test({
  name: "execute_code shows stdout, labelled stderr and how the run ended",
  ignore: ignoreBwrap,
  async fn() {
    assert.ok(HAVE_BWRAP, "bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
    const tool = executeCodeTool(await openSandbox({ kind: "bwrap", unsafeNoSandbox: false }));
    const run = (language: string, code: string, timeoutMs = 5000) =>
      tool.run({ language, code }, context({}, timeoutMs)) as Promise<ToolResult>;
    assert.deepEqual(await run("python", "print(6 * 7)"), { status: "ok", output: "42" });
    assert.deepEqual(await run("javascript", "console.log('hi'); console.error('careful')"), {
      status: "ok",
      output: "hi\nstderr:\ncareful",
    });
    const failed = await run("python", "raise ValueError('bad')");
    assert.equal(failed.status, "tool_error");
    assert.match(failed.output, /^stderr:\nTraceback[\s\S]*ValueError: bad\n\[exit code 1\]$/);
    assert.deepEqual(await run("python", "while True: pass", 500), {
      status: "timeout",
      output: "[stopped: time limit of 0.5 s reached]",
    });
    assert.deepEqual(await run("python", "pass"), { status: "ok", output: "(no output)" });
  },
});

Deno.test("execute_code is refused without a sandbox unless unsafe_no_sandbox is true", async () => {
  const section = toolsSection({ enabled: ["execute_code"], sandbox: "none", unsafe_no_sandbox: false });
  await assert.rejects(
    () => loadTools(section),
    (e) => e instanceof UserError && /unsafe_no_sandbox/.test(e.message),
  );
  const unsafe = await loadTools({ ...section, unsafe_no_sandbox: true });
  const result = await unsafe.get("execute_code")!.run({ language: "python", code: "print(1)" }, context());
  assert.deepEqual(result, { status: "ok", output: "1" });
});

/** A read_file root with one task directory, a secret beside it, and symlinks made by code. */
async function jailFixture(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "read-file-test-" });
  await Deno.mkdir(`${root}/task1/data`, { recursive: true });
  await Deno.writeTextFile(`${root}/task1/data/input.txt`, "hello");
  await Deno.writeTextFile(`${root}/secret.txt`, "SECRET");
  await Deno.symlink("/etc/passwd", `${root}/task1/passwd`);
  await Deno.symlink(`${root}/secret.txt`, `${root}/task1/escape.txt`);
  await Deno.symlink("data/input.txt", `${root}/task1/inside.txt`);
  await Deno.writeFile(`${root}/task1/binary.bin`, new Uint8Array([0x61, 0xff, 0x62]));
  return root;
}

Deno.test("read_file reads the task's files and rejects each escape with its own message", async () => {
  const root = await jailFixture();
  const tool = readFileTool(root);
  const ctx = context({ meta: { files_dir: "task1" } });
  const read = async (path: string) => await tool.run({ path }, ctx) as ToolResult;
  assert.deepEqual(await read("data/input.txt"), { status: "ok", output: "hello" });
  assert.deepEqual(await read("./data//input.txt"), { status: "ok", output: "hello" });
  assert.deepEqual(await read("inside.txt"), { status: "ok", output: "hello" });
  assert.deepEqual(await read("binary.bin"), { status: "ok", output: "a\uFFFDb" });
  const refusals: [string, RegExp][] = [
    ["../../etc/passwd", /^Error: path "..\/..\/etc\/passwd" contains ".."/],
    ["../secret.txt", /contains "\.\."/],
    ["/etc/passwd", /^Error: absolute path "\/etc\/passwd" is not allowed/],
    ["data/input.txt\0.png", /^Error: path contains a NUL character$/],
    ["a/".repeat(5000), /^Error: path is 10000 characters long; the limit is 1024$/],
    ["passwd", /^Error: path "passwd" resolves outside the task's files \(through a symlink\)/],
    ["escape.txt", /resolves outside the task's files/],
    ["missing.txt", /^Error: no file "missing.txt" in this task$/],
    ["data", /^Error: "data" is a directory; its files are: input.txt$/],
  ];
  for (const [path, message] of refusals) {
    const result = await read(path);
    assert.equal(result.status, "tool_error", path);
    assert.match(result.output, message, path);
    assert.ok(!result.output.includes("SECRET") && !result.output.includes("root:"), path);
  }
  await Deno.remove(root, { recursive: true });
});

Deno.test("read_file serves task.meta.files from memory and names the files on a miss", async () => {
  const tool = readFileTool(null);
  const ctx = context({ meta: { files: { "notes.txt": "n1", "src/a.py": "print(1)" } } });
  assert.deepEqual(await tool.run({ path: "src/a.py" }, ctx), { status: "ok", output: "print(1)" });
  assert.deepEqual(await tool.run({ path: "x" }, ctx), {
    status: "tool_error",
    output: 'Error: no file "x" in this task; its files are: notes.txt, src/a.py',
  });
  const bare = await tool.run({ path: "a" }, context()) as ToolResult;
  assert.deepEqual(bare, { status: "tool_error", output: "Error: this task has no files to read" });
});

Deno.test("loadTools builds the enabled built-ins and the tools of a user module", async () => {
  const tools = await loadTools(
    toolsSection({ enabled: ["calculator"], modules: ["examples/user_tools.ts"] }),
  );
  assert.deepEqual([...tools.keys()], ["calculator", "unit_convert"]);
  const converted = await tools.get("unit_convert")!.run({ value: 2, from: "km", to: "m" }, context());
  assert.equal(converted, "2000 m");
  const specs = toolSpecs(tools.values());
  assert.deepEqual(specs.map((s) => [s.type, s.function.name]), [["function", "calculator"], [
    "function",
    "unit_convert",
  ]]);
  assert.equal(specs[0].function.parameters, tools.get("calculator")!.parameters);
});

/** A module file with the given source; returns its path. */
async function moduleFile(source: string): Promise<string> {
  const path = await Deno.makeTempFile({ prefix: "user-tools-", suffix: ".ts" });
  await Deno.writeTextFile(path, source);
  return path;
}

Deno.test("bad user modules fail with one-line errors naming the module and the tool", async () => {
  const run = "async run() { return 'x'; }";
  const schema = '{ type: "object", properties: {} }';
  const cases: [string, RegExp][] = [
    ["export const nothing = 1;", /exports no tools/],
    [
      `export const tools = [{ description: "d", parameters: ${schema}, ${run} }];`,
      /tool #1 in .*: its name/,
    ],
    [`export const tools = [{ name: "a b", description: "d", parameters: ${schema}, ${run} }];`, /its name/],
    [
      `export const tools = [{ name: "t", description: "d", parameters: { type: "array" }, ${run} }];`,
      /tool #1 "t" in .*: its parameters schema is invalid/,
    ],
    [`export const tools = [{ name: "t", description: "d", parameters: ${schema} }];`, /has no run function/],
    [
      `export default [{ name: "calculator", description: "d", parameters: ${schema}, ${run} }];`,
      /tool "calculator" in .*: its name is already taken/,
    ],
    ["throw new Error('broken module');", /failed to load: .*broken module/],
  ];
  for (const [source, message] of cases) {
    const path = await moduleFile(source);
    await assert.rejects(
      () => loadTools(toolsSection({ modules: [path] })),
      (e) => e instanceof UserError && message.test(e.message) && !e.message.includes("\n"),
      source,
    );
    await Deno.remove(path);
  }
  await assert.rejects(
    () => loadTools(toolsSection({ modules: ["no/such/module.ts"] })),
    (e) => e instanceof UserError && /module in no\/such\/module.ts: the file does not exist/.test(e.message),
  );
});
