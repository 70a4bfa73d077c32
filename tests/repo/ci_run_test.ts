/**
 * `.ci/run` takes Deno the way the README's fresh-machine route does, `npx -y deno@<pinned>`, and never
 * a `deno` that happens to be on PATH. Needs Node.js (npx); skipped without it locally, failing in CI.
 */
import assert from "node:assert/strict";
import { findExecutable } from "../../lib/tools/sandbox_command.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const HAVE_NPX = (await findExecutable("npx")) !== undefined;

Deno.test({
  name: ".ci/run uses the Deno that npx installs, at the README's version, and ignores a deno on PATH",
  ignore: !HAVE_NPX && Deno.env.get("CI") === undefined,
  async fn() {
    const readme = await Deno.readTextFile(`${ROOT}/README.md`);
    const pinned = /npx -y deno@(\S+) task test/.exec(readme)?.[1];
    assert.ok(pinned !== undefined, "README.md names no `npx -y deno@… task test` line");
    // A `deno` first on PATH that leaves a mark when anything runs it.
    const fake = await Deno.makeTempDir({ prefix: "ci-run-test-" });
    const mark = `${fake}/ran`;
    await Deno.writeTextFile(`${fake}/deno`, `#!/bin/sh\necho "$@" >> ${mark}\necho "deno 0.0.0"\nexit 3\n`);
    await Deno.chmod(`${fake}/deno`, 0o755);
    const path = `${fake}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`;
    const result = await new Deno.Command("bash", {
      args: [`${ROOT}/.ci/run`, "--print-deno"],
      env: { PATH: path },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(result.stdout).trim();
    const ranFake = await Deno.readTextFile(mark).catch(() => "");
    await Deno.remove(fake, { recursive: true });
    assert.equal(ranFake, "", "the deno on PATH was run");
    assert.equal(result.code, 0, new TextDecoder().decode(result.stderr) + out);
    const deno = out.split("\n").at(-1)!;
    assert.match(deno, /\/node_modules\/deno\/deno$/, "not the binary of the npm package deno");
    const version = await new Deno.Command(deno, { args: ["--version"], stdout: "piped" }).output();
    assert.match(
      new TextDecoder().decode(version.stdout),
      new RegExp(`^deno ${pinned.replaceAll(".", "\\.")} `),
    );
  },
});
