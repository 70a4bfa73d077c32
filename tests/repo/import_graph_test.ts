/**
 * The repository's layering, read from `deno info --json` over every source file (no hand-kept list):
 * no import cycle anywhere (type-only imports count), nothing in `lib/` imports the commands, scripts,
 * benchmarks or tests above it, `lib/`'s folders do not import each other in a circle, and every `lib/` import
 * points along or down docs/DESIGN.md's layer table, which places every `lib/` folder and file. A self-test
 * plants each fault in a throwaway tree and checks that the same code reports it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT } from "../helpers/commands.ts";
import {
  describeCycles,
  describeFolderCycles,
  designLayers,
  type ImportGraph,
  layerViolations,
  readImportGraph,
  sourceFiles,
  upwardImports,
} from "../helpers/import_graph.ts";

/** Where library files may not import from. */
const ABOVE_LIB = ["stages", "scripts", "bench", "tests"];

let repo: Promise<{ files: string[]; graph: ImportGraph }> | null = null;

/** The repository's graph, read once for all tests of this file. */
function repoGraph(): Promise<{ files: string[]; graph: ImportGraph }> {
  repo ??= (async () => {
    const files = await sourceFiles(ROOT);
    return { files, graph: await readImportGraph(ROOT, files, join(ROOT, "deno.json")) };
  })();
  return repo;
}

function noneFound(found: string[], what: string): void {
  assert.equal(found.length, 0, `${found.length} ${what}:\n  ${found.join("\n  ")}`);
}

Deno.test("the import graph holds every source file, and each stage imports the library", async () => {
  const { files, graph } = await repoGraph();
  assert.ok(files.includes("mod.ts") && files.some((f) => f.startsWith("lib/onnx/")), "source files found");
  const missing = files.filter((f) => !graph.has(f));
  assert.deepEqual(missing, [], "files deno info did not report");
  for (const stage of files.filter((f) => f.startsWith("stages/"))) {
    assert.ok(
      [...graph.get(stage)!].some((to) => to.startsWith("lib/")),
      `${stage} imports nothing from lib/`,
    );
  }
});

Deno.test("no source file imports itself around a circle (type-only imports included)", async () => {
  const { graph } = await repoGraph();
  noneFound(describeCycles(graph), "import cycles");
});

Deno.test("no file under lib/ imports stages/, scripts/, bench/ or tests/", async () => {
  const { graph } = await repoGraph();
  noneFound(upwardImports(graph, "lib", ABOVE_LIB), "upward imports from lib/");
});

Deno.test("lib/'s folders import each other in no circle", async () => {
  const { graph } = await repoGraph();
  noneFound(describeFolderCycles(graph, "lib"), "folder cycles in lib/");
});

Deno.test("every lib/ import points along or down docs/DESIGN.md's layer table, which places every lib/ unit", async () => {
  const { graph } = await repoGraph();
  const layers = designLayers(await Deno.readTextFile(join(ROOT, "docs/DESIGN.md")));
  assert.ok(layers.get("lib/run")! < layers.get("lib/onnx")!, "the table is read, top first");
  noneFound(layerViolations(graph, layers), "imports against docs/DESIGN.md's layers");
});

Deno.test("the layer check reports a planted upward import and an unplaced folder", () => {
  const layers = designLayers(
    "# D\n\n## Layers\n\n```\ntop   lib/a/  x.ts\n      lib/b/\nlow   lib/c/\n```\n",
  );
  assert.deepEqual([...layers], [["lib/a", 0], ["lib/x.ts", 0], ["lib/b", 0], ["lib/c", 1]]);
  const graph: ImportGraph = new Map([
    ["lib/a/one.ts", new Set(["lib/b/two.ts", "lib/c/three.ts"])],
    ["lib/c/three.ts", new Set(["lib/x.ts", "lib/d/four.ts"])],
  ]);
  assert.deepEqual(layerViolations(graph, layers), ["lib/c/three.ts → lib/x.ts", "unplaced: lib/d"]);
});

/** Writes `files` (relative path → source) under a fresh temp dir and returns its import graph. */
async function plantedGraph(files: Record<string, string>): Promise<ImportGraph> {
  const dir = await Deno.makeTempDir({ prefix: "import_graph_test_" });
  try {
    for (const [path, text] of Object.entries(files)) {
      await Deno.mkdir(join(dir, path, ".."), { recursive: true });
      await Deno.writeTextFile(join(dir, path), text);
    }
    return await readImportGraph(dir, await sourceFiles(dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("the checks report a planted cycle (through import type), upward import and folder cycle", async () => {
  const graph = await plantedGraph({
    "a.ts": `import { b } from "./b.ts";\nexport interface A { n: number }\nexport const a = b + 1;\n`,
    "b.ts": `import type { A } from "./a.ts";\nexport const b = 1;\nexport type B = A;\n`,
    "lib/x/one.ts": `import { two } from "../y/two.ts";\nexport const one = two;\n`,
    "lib/y/two.ts": `import { three } from "../x/three.ts";\nexport const two = three;\n`,
    "lib/x/three.ts": `import { s } from "../../stages/s.ts";\nexport const three = s;\n`,
    "stages/s.ts": `export const s = 3;\n`,
  });
  assert.deepEqual(describeCycles(graph), ["2 files: a.ts → b.ts → a.ts"]);
  assert.deepEqual(upwardImports(graph, "lib", ABOVE_LIB), ["lib/x/three.ts → stages/s.ts"]);
  assert.deepEqual(describeFolderCycles(graph, "lib"), [
    "lib/x → lib/y → lib/x: [lib/x/one.ts → lib/y/two.ts] [lib/y/two.ts → lib/x/three.ts]",
  ]);
});

Deno.test("the checks name every file of a longer cycle and accept a tree without one", async () => {
  const cyclic = await plantedGraph({
    "p.ts": `import "./q.ts";\n`,
    "q.ts": `export * from "./r.ts";\n`,
    "r.ts": `import "./p.ts";\nexport const r = 1;\n`,
  });
  assert.deepEqual(describeCycles(cyclic), ["3 files: p.ts → q.ts → r.ts → p.ts (all: p.ts, q.ts, r.ts)"]);
  const acyclic = await plantedGraph({
    "p.ts": `import "./q.ts";\nimport "./r.ts";\n`,
    "q.ts": `import "./r.ts";\n`,
    "r.ts": `export const r = 1;\n`,
  });
  assert.deepEqual(describeCycles(acyclic), []);
  assert.deepEqual([...acyclic.get("p.ts")!].sort(), ["q.ts", "r.ts"]);
});
