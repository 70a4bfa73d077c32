/**
 * The code examples in the library's doc comments (```ts blocks in `mod.ts` and `lib/`) type-check, as
 * `deno check --doc` checks them, so an example cannot drift from the API it shows. Type-check only: the
 * examples need a model, run directories and files a test does not have.
 *
 * Deno imports every export of an example's module into the example, and the project's
 * `noUnusedLocals`/`noUnusedParameters` would flag each one the example does not use; so the check runs
 * under a copy of deno.json without those two options (its imports made absolute, npm packages from Deno's
 * cache), written to a temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { ROOT } from "../helpers/commands.ts";

const EXAMPLE = /^ \* ```(ts|typescript)$/gm;

/** The repository's .ts files with a ```ts example in a doc comment: `mod.ts` and `lib/`'s. */
async function filesWithExamples(): Promise<{ file: string; examples: number }[]> {
  const out: { file: string; examples: number }[] = [];
  const visit = async (path: string) => {
    const info = await Deno.stat(path);
    if (info.isDirectory) {
      for await (const entry of Deno.readDir(path)) await visit(join(path, entry.name));
      return;
    }
    if (!path.endsWith(".ts")) return;
    const examples = (await Deno.readTextFile(path)).match(EXAMPLE)?.length ?? 0;
    if (examples > 0) out.push({ file: relative(ROOT, path), examples });
  };
  await visit(join(ROOT, "mod.ts"));
  await visit(join(ROOT, "lib"));
  return out.sort((a, b) => a.file.localeCompare(b.file));
}

/** deno.json for the examples: the project's, without the unused-name options (see the module comment). */
async function exampleConfig(dir: string): Promise<string> {
  const project = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json")));
  const imports: Record<string, string> = {};
  for (const [name, target] of Object.entries(project.imports as Record<string, string>)) {
    imports[name] = target.startsWith("./") ? new URL(target, `file://${ROOT}/`).href : target;
  }
  const compilerOptions = { ...project.compilerOptions };
  delete compilerOptions.noUnusedLocals;
  delete compilerOptions.noUnusedParameters;
  const path = join(dir, "deno.json");
  await Deno.writeTextFile(
    path,
    JSON.stringify({ imports, compilerOptions, unstable: project.unstable, nodeModulesDir: "none" }),
  );
  return path;
}

/** `deno check --doc` of `files` under `config`; the exit code and what it printed. */
async function checkDoc(config: string, files: string[]): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--doc", "--no-lock", "--config", config, ...files],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, output: text };
}

/** A module whose one example assigns a number to a string: `deno check --doc` must refuse it. */
function brokenExample(): string {
  const arrow = new URL("lib/arrow/mod.ts", `file://${ROOT}/`).href;
  return [
    "/**",
    " * ```ts",
    ` * import { readStageFile } from "${arrow}";`,
    ' * const rows: string = (await readStageFile("x.arrow", "rollouts")).rows;',
    " * ```",
    " *",
    " * @module",
    " */",
    "export {};",
    "",
  ].join("\n");
}

Deno.test("the doc-comment examples of mod.ts and lib/ type-check (deno check --doc)", async () => {
  const found = await filesWithExamples();
  assert.ok(found.some((f) => f.file === "mod.ts"), "mod.ts's example is found");
  const dir = await Deno.makeTempDir({ prefix: "doc-examples-" });
  try {
    const config = await exampleConfig(dir);
    const { code, output } = await checkDoc(config, found.map((f) => f.file));
    assert.equal(code, 0, output);
    // The same check fails on an example that does not type-check: it reads the examples, not only the
    // modules. (Deno prints its "Check file#lines" lines only when the result is not cached, so they
    // cannot be counted: a second run on the same machine prints none.)
    const broken = join(dir, "broken_example.ts");
    await Deno.writeTextFile(broken, brokenExample());
    const planted = await checkDoc(config, [broken]);
    assert.notEqual(planted.code, 0, `an example with a type error passed:\n${planted.output}`);
    assert.match(planted.output, /TS2322/, planted.output);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
