/**
 * read_file's jail when the task's directory itself is the way out: a `meta.files_dir` that is a symlink
 * (or a chain of them) to /etc or to a directory beside the root is refused before anything is read, and
 * a `files_dir` that is not a plain relative path is refused as text.
 */
import assert from "node:assert/strict";
import type { Task } from "../../lib/data/task.ts";
import { readFileTool } from "../../lib/tools/read_file.ts";
import type { ToolContext, ToolResult } from "../../lib/tools/types.ts";

function context(meta: Record<string, unknown>): ToolContext {
  const task: Task = { id: "t1", source: "generic", prompt: "p", meta };
  return { task, signal: new AbortController().signal, timeoutMs: 5000, maxOutputChars: 2000 };
}

/**
 * `base/root` is the read_file root: `task1` is a real task directory, `etc` a symlink to /etc,
 * `sibling` a symlink to `base/outside` (beside the root, holding a secret), `chain` → `hop` → /etc,
 * `chain_out` → `hop_out` → ../outside, and `alias` → task1 (a symlink that stays inside).
 */
async function fixture(): Promise<{ base: string; root: string }> {
  const base = await Deno.makeTempDir({ prefix: "read-file-jail-" });
  const root = `${base}/root`;
  await Deno.mkdir(`${root}/task1`, { recursive: true });
  await Deno.mkdir(`${base}/outside`);
  await Deno.writeTextFile(`${root}/task1/input.txt`, "hello");
  await Deno.writeTextFile(`${base}/outside/secret.txt`, "SECRET");
  await Deno.symlink("/etc", `${root}/etc`);
  await Deno.symlink(`${base}/outside`, `${root}/sibling`);
  await Deno.symlink("/etc", `${root}/hop`);
  await Deno.symlink("hop", `${root}/chain`);
  await Deno.symlink("../outside", `${root}/hop_out`);
  await Deno.symlink("hop_out", `${root}/chain_out`);
  await Deno.symlink("task1", `${root}/alias`);
  return { base, root };
}

async function read(root: string, filesDir: unknown, path: string): Promise<ToolResult> {
  return await readFileTool(root).run({ path }, context({ files_dir: filesDir })) as ToolResult;
}

function assertNothingRead(result: ToolResult, label: string): void {
  assert.equal(result.status, "tool_error", label);
  for (const leak of ["root:", "SECRET", "shadow", "secret.txt"]) {
    assert.ok(!result.output.includes(leak), `${label}: ${result.output}`);
  }
}

Deno.test("read_file refuses a files_dir symlinked to /etc, beside the root, or through a chain", async () => {
  const { base, root } = await fixture();
  const escapes: [string, string][] = [
    ["etc", "passwd"],
    ["etc", "shadow"],
    ["etc", "."],
    ["sibling", "secret.txt"],
    ["chain", "passwd"],
    ["chain_out", "secret.txt"],
    ["./etc/", "hostname"],
    ["etc/ssl", "."],
  ];
  for (const [filesDir, path] of escapes) {
    const result = await read(root, filesDir, path);
    const label = `${filesDir} ${path}`;
    assertNothingRead(result, label);
    assert.match(result.output, /^Error: this task's files_dir ".*" resolves outside the files root/, label);
  }
  // A symlink that stays inside the root is followed; the root itself may be a symlink.
  assert.deepEqual(await read(root, "alias", "input.txt"), { status: "ok", output: "hello" });
  await Deno.symlink(root, `${base}/root_link`);
  assert.deepEqual(await read(`${base}/root_link`, "task1", "input.txt"), { status: "ok", output: "hello" });
  assertNothingRead(await read(`${base}/root_link`, "etc", "passwd"), "root through a link");
  await Deno.remove(base, { recursive: true });
});

Deno.test("read_file refuses a files_dir that is not a plain relative path, each with its reason", async () => {
  const { base, root } = await fixture();
  const refusals: [unknown, RegExp][] = [
    ["..", /is refused: path "\.\." contains "\.\."/],
    ["task1/../../outside", /contains "\.\."/],
    ["/etc", /is refused: absolute path "\/etc" is not allowed/],
    ["~root", /absolute path/],
    ["task1\0", /is refused: path contains a NUL character/],
    ["", /is refused: path is empty/],
    ["a/".repeat(600), /is refused: path is 1200 characters long; the limit is 1024/],
    [42, /^Error: this task's files_dir 42 is refused: not a string$/],
  ];
  for (const [filesDir, message] of refusals) {
    const result = await read(root, filesDir, "passwd");
    assertNothingRead(result, String(filesDir));
    assert.match(result.output, message, String(filesDir));
  }
  await Deno.remove(base, { recursive: true });
});
