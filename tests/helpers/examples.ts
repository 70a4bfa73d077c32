/**
 * Running the command lines the user is shown, as written, in a fresh copy of the repository: the
 * `deno task` lines of README.md's `sh` blocks and of each command's `--help` "Examples". The test only
 * appends overrides that make a run small (`--rollout.group_size=2` after the example's own value: the
 * last override wins), never edits the example. `deno task serve` lines start a server that the lines
 * after them may use; it is stopped at the end.
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** One command line as shown, and where. */
export interface Example {
  where: string;
  line: string;
}

/** A fresh copy of the repository's tracked files (as `git clone` would give), node_modules linked. */
export async function freshCopy(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  // A clone's directory is readable by others (umask 022); makeTempDir's 0700 would keep the sandbox user
  // out of the files an example binds into bubblewrap (examples/mcp_files).
  await Deno.chmod(dir, 0o755);
  const listed = await new Deno.Command("git", { args: ["ls-files", "-z"], cwd: ROOT, stdout: "piped" })
    .output();
  for (const file of new TextDecoder().decode(listed.stdout).split("\0").filter(Boolean)) {
    await Deno.mkdir(join(dir, dirname(file)), { recursive: true });
    await Deno.copyFile(join(ROOT, file), join(dir, file)).catch(() => {}); // a file deleted, not committed
  }
  await Deno.symlink(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** The lines of README.md's `sh` blocks, in order (continuations joined, comments removed). */
export function readmeLines(markdown: string): Example[] {
  const blocks = [...markdown.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```/gm)].map((m) => m[1]);
  return blocks.flatMap((b) => b.replace(/\\\n/g, " ").split("\n"))
    .map((l) => l.replace(/\s#.*$/, "").trim())
    .filter((l) => l !== "")
    .map((line) => ({ where: "README.md", line }));
}

/** The "Examples:" lines of a command's `--help`. */
export async function helpExamples(dir: string, task: string): Promise<Example[]> {
  const out = await denoTask(dir, [task, "--help"]);
  assert.equal(out.code, 0, `${task} --help: ${out.stderr}`);
  const examples = out.stdout.split(/\nExamples:\n/)[1]?.split(/\n\n/)[0] ?? "";
  return examples.split("\n").map((l) => l.trim()).filter((l) => l.startsWith("deno task"))
    .map((line) => ({ where: `deno task ${task} --help`, line }));
}

/** `deno task NAME args…` (also through `npx -y deno@x task`) → [NAME, args]; null for other lines. */
export function taskOf(line: string): [string, string[]] | null {
  const m = /^(?:deno|npx -y deno@\S+)\s+task\s+(\S+)(.*)$/.exec(line);
  return m ? [m[1], m[2].trim().split(/\s+/).filter((a) => a !== "")] : null;
}

/** Runs `deno task …` in `dir` with the same Deno as the tests. */
export async function denoTask(dir: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", ...args],
    cwd: dir,
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

/**
 * What stopping a server found: null where it was still running, else how it had ended on its own (its exit
 * code and the end of its stderr), which the commands after it may have failed on.
 */
export type ServerStop = () => Promise<string | null>;

/** A `deno task serve …` started in `dir`, answering /health. */
export async function startServer(dir: string, args: string[]): Promise<ServerStop> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "serve", ...args],
    cwd: dir,
    env: { NO_COLOR: "1" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let exited: Deno.CommandStatus | null = null;
  const status = child.status.then((s) => (exited = s));
  const stderr = new Response(child.stderr).text(); // read as it runs, so a full pipe never blocks the server
  const stderrTail = async () => (await stderr).trim().split("\n").slice(-5).join("\n");
  const port = Number(/--port[ =](\d+)/.exec(args.join(" "))?.[1] ?? 8000);
  for (let i = 0; i < 600 && !exited; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false);
    if (up) {
      return async () => {
        const early = exited as Deno.CommandStatus | null;
        if (!early) child.kill("SIGTERM"); // killing an exited child throws, and would hide why it exited
        await status;
        await stderr; // the pipe drained before the process is forgotten
        return early
          ? `deno task serve ${
            args.join(" ")
          } had exited on its own (code ${early.code}):\n${await stderrTail()}`
          : null;
      };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!exited) child.kill("SIGKILL");
  await status;
  throw new Error(
    `deno task serve ${args.join(" ")} did not answer /health within 60 s` +
      (exited ? ` (it exited: ${await stderrTail()})` : ""),
  );
}
