/**
 * notebooks/explore.ipynb runs: its code cells, in order, as one module (as the Deno kernel runs
 * them, sharing top-level names) on a fixture run directory passed through RUN_DIR. The notebook's
 * relative imports (`../mod.ts`) are pointed at the repository so the module can live in a temp dir.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath as fromFileUrl } from "node:url";
import { makeRunDir } from "../fixtures/run_dir.ts";

const REPO = new URL("../../", import.meta.url);
const NOTEBOOK = fromFileUrl(new URL("notebooks/explore.ipynb", REPO));

interface Cell {
  cell_type: string;
  source: string[] | string;
}

/** The notebook's code cells joined into one module, `../` imports resolved against the repository. */
async function notebookModule(path: string): Promise<string> {
  const nb = JSON.parse(await Deno.readTextFile(path)) as { cells: Cell[] };
  const code = nb.cells.filter((c) => c.cell_type === "code").map((c) =>
    Array.isArray(c.source) ? c.source.join("") : c.source
  );
  assert.ok(code.length >= 3, "the notebook has code cells");
  return code.join("\n\n").replaceAll(/from "\.\.\/([^"]+)"/g, (_, p) => `from "${new URL(p, REPO).href}"`);
}

Deno.test("the explore notebook's code runs on a run directory and prints its metrics and eval", async () => {
  const run = await makeRunDir({ steps: 3 });
  const module = join(await Deno.makeTempDir(), "explore.ts");
  await Deno.writeTextFile(module, await notebookModule(NOTEBOOK));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--config", fromFileUrl(new URL("deno.json", REPO)), module],
    env: { RUN_DIR: run, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.match(stdout, /^3 steps; columns: step, reward_mean/m);
  assert.match(stdout, /last step 3: reward_mean 0\.875, accuracy 0\.875/);
  assert.match(stdout, /step.*accuracy.*toolUse/, "the eval table");
  assert.match(stdout, /s3-g1-e3/, "the last step's episodes are listed");
});

Deno.test("the explore notebook is valid nbformat 4 for the Deno kernel", async () => {
  const nb = JSON.parse(await Deno.readTextFile(NOTEBOOK));
  assert.equal(nb.nbformat, 4);
  assert.equal(nb.metadata.kernelspec.name, "deno");
  for (const cell of nb.cells) {
    if (cell.cell_type === "code") assert.deepEqual(cell.outputs, [], "committed without outputs");
  }
});
