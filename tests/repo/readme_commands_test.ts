/**
 * Every command line the user is shown must pass the config loader: the `deno task …` lines of
 * README.md's `sh` blocks and of each command's `--help` "Examples", and every `--section.key=value`
 * override written anywhere in README.md or in a `--help` text. README.md and the help texts are read
 * at test time (others edit them), so a new example is checked the day it is written.
 *
 * Stage lines run as the user would type them, plus `--print-config` (parse the flags, load the
 * configuration, exit; no files read or written), so stages that are still stubs are checked too.
 * make-model lines go through its flag parser in-process.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../../lib/config/load.ts";
import { optionsFromArgs } from "../../scripts/make_model.ts";
import { denoRunArgs } from "../helpers/commands.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Tasks whose lines are not stage command lines (the test runner, the linters, the benchmarks). */
const NOT_CHECKED = new Set(["test", "check", "bench"]);
/** Placeholders in usage text, not real keys. */
const PLACEHOLDER_KEYS = new Set(["a.b", "section.key", "train.k"]);

/** Script of each `deno task` name, from deno.json (the last word of the task's command). */
async function taskScripts(): Promise<Map<string, string>> {
  const tasks = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json"))).tasks as Record<string, string>;
  return new Map(Object.entries(tasks).map(([name, cmd]) => [name, cmd.trim().split(/\s+/).at(-1)!]));
}

/** The lines of every ```sh block of `markdown`, comments removed. */
function shellLines(markdown: string): string[] {
  const blocks = [...markdown.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```/gm)].map((m) => m[1]);
  return blocks.flatMap((b) => b.replace(/\\\n/g, " ").split("\n")).map((l) => l.replace(/\s#.*$/, "").trim())
    .filter((l) => l !== "");
}

/** `deno task NAME args…` (also through `npx deno@x task`) → [NAME, args]; optional `[--x …]` brackets dropped. */
function taskCommand(line: string): [string, string[]] | null {
  const m = /(?:^|\s)(?:deno|npx -y deno@\S+)\s+task\s+(\S+)(.*)$/.exec(line);
  if (!m) return null;
  const args: string[] = [];
  let optional = false;
  for (let a of m[2].trim().split(/\s+/).filter((a) => a !== "" && a !== "..." && a !== "…")) {
    if (a.startsWith("[--")) [a, optional] = [a.slice(1), true];
    const unbalanced = (a.match(/\]/g) ?? []).length > (a.match(/\[/g) ?? []).length;
    if (optional && unbalanced) [a, optional] = [a.slice(0, -1), false];
    args.push(a);
  }
  return [m[1], args];
}

/** `--a.b=value` tokens in `text` (backticks and trailing punctuation removed), placeholders skipped. */
function overridesIn(text: string): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (const m of text.matchAll(/--([a-z_][\w]*(?:\.[\w]+)+)=(\[[^\]\s]*\]|[^\s`'",)\]]+)/g)) {
    const [key, value] = [m[1], m[2].replace(/[.;:]$/, "")];
    if (PLACEHOLDER_KEYS.has(key) || /^[A-Z]+$/.test(value)) continue;
    found.push([key, value]);
  }
  return found;
}

async function run(script: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs(script), ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** Checks one shown command line: exit 0 with --print-config, or make-model's parser accepts it. */
async function checkCommand(scripts: Map<string, string>, where: string, line: string): Promise<boolean> {
  const parsed = taskCommand(line);
  if (!parsed || NOT_CHECKED.has(parsed[0])) return false;
  const [task, args] = parsed;
  const script = scripts.get(task);
  assert.ok(script, `${where}: '${line}' names no task in deno.json`);
  if (task === "make-model") {
    assert.doesNotThrow(() => optionsFromArgs(args), `${where}: '${line}'`);
    return true;
  }
  const r = await run(script, [...args, "--print-config"]);
  assert.equal(r.code, 0, `${where}: '${line}' was rejected: ${r.stderr}`);
  return true;
}

/** Every task's `--help` text (tasks that are not checked excluded). */
async function helpTexts(scripts: Map<string, string>): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  for (const [task, script] of scripts) {
    if (NOT_CHECKED.has(task)) continue;
    const r = await run(script, ["--help"]);
    assert.equal(r.code, 0, `deno task ${task} --help: ${r.stderr}`);
    texts.set(task, r.stdout);
  }
  return texts;
}

Deno.test("every deno task line in README.md's sh blocks passes the config loader", async () => {
  const scripts = await taskScripts();
  const readme = await Deno.readTextFile(join(ROOT, "README.md"));
  let checked = 0;
  for (const line of shellLines(readme)) {
    if (await checkCommand(scripts, "README.md", line)) checked++;
  }
  assert.ok(checked >= 5, `only ${checked} README command lines found`);
});

Deno.test("every example in each command's --help passes the config loader", async () => {
  const scripts = await taskScripts();
  let checked = 0;
  for (const [task, text] of await helpTexts(scripts)) {
    const examples = text.split("Examples:")[1]?.split("\n\n")[0] ?? "";
    for (const line of examples.split("\n").map((l) => l.trim()).filter((l) => l.startsWith("deno task"))) {
      if (await checkCommand(scripts, `deno task ${task} --help`, line)) checked++;
    }
  }
  assert.ok(checked >= 3, `only ${checked} --help examples found`);
});

Deno.test("every --section.key=value written in README.md or a --help text is a valid override", async () => {
  const scripts = await taskScripts();
  const sources = new Map([["README.md", await Deno.readTextFile(join(ROOT, "README.md"))]]);
  for (const [task, text] of await helpTexts(scripts)) sources.set(`deno task ${task} --help`, text);
  let checked = 0;
  for (const [where, text] of sources) {
    for (const [key, value] of overridesIn(text)) {
      await assert.doesNotReject(
        () => loadConfig({ overrides: [[key, value]] }),
        `${where}: --${key}=${value} is rejected by the config loader`,
      );
      checked++;
    }
  }
  assert.ok(checked >= 3, `only ${checked} overrides found`);
});

Deno.test("README says, before its first plain `deno task` example, the one line that makes them work after the npx set-up", async () => {
  const text = await Deno.readTextFile(join(ROOT, "README.md"));
  const pinned = /npx -y (deno@[\d.]+) task/.exec(text)?.[1];
  assert.ok(pinned, "no npx set-up line");
  // The alias names the binary npx fetched, not npx itself: a SIGTERM then reaches `deno task` (issue 32).
  const line = `alias deno="$(npx -y ${pinned} eval 'console.log(Deno.execPath())')"`;
  const alias = text.indexOf(line);
  const firstPlain = text.search(/^deno task /m);
  assert.ok(alias >= 0, `no ${line} line`);
  assert.ok(alias < firstPlain, "the alias line comes after the first plain deno task example");
});

Deno.test("README's alias line names the pinned Deno binary itself, so no npm process stands above `deno task`", async () => {
  const text = await Deno.readTextFile(join(ROOT, "README.md"));
  const line = /^alias deno="(.*)"$/m.exec(text)?.[1];
  assert.ok(line, "no alias line");
  // What the shell substitutes when the user pastes the line: run it as the user's shell would.
  const out = await new Deno.Command("bash", { args: ["-c", `printf %s "${line}"`], stderr: "inherit" })
    .output();
  const binary = new TextDecoder().decode(out.stdout);
  assert.ok(
    binary.startsWith("/") && !/npx|npm-exec/.test(binary.split("/").at(-1)!),
    `alias names ${binary}`,
  );
  const version = await new Deno.Command(binary, { args: ["--version"] }).output();
  const pinned = /npx -y deno@([\d.]+) task/.exec(text)![1];
  assert.match(
    new TextDecoder().decode(version.stdout),
    new RegExp(`^deno ${pinned.replaceAll(".", "\\.")} `),
  );
});
