/**
 * The repository's module graph as Deno resolves it, and the checks run on it: import cycles between
 * files, imports from the library up into the commands and tests above it, and cycles between the
 * library's folders.
 *
 * The graph comes from `deno info --json` (never from a hand-kept list): one throwaway root module imports
 * every file asked about, so a single `deno info` call resolves them all with the project's import map.
 * Every dependency counts as an edge: value imports, `import type`, re-exports and literal dynamic
 * imports, because a cycle through a type-only import still ties the files' meaning together. Only local
 * TypeScript/JavaScript files are nodes; npm, `node:` and JSON modules are leaves and are dropped.
 *
 * @module
 */

import { join, relative } from "node:path";

/** File → the files it imports, all as paths relative to the graph's root directory. */
export type ImportGraph = Map<string, Set<string>>;

/** What counts as a source file. */
const SOURCE = /\.(ts|tsx|mts|js|mjs)$/;

/** Folders of the repository that hold no source of its own: dependencies, outputs, scratch. */
const NOT_SOURCE = new Set(["node_modules", "runs", "out", "tmp"]);

/**
 * Every TypeScript or JavaScript file under `root` (relative paths, sorted), outside `NOT_SOURCE` and
 * hidden folders.
 */
export async function sourceFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  async function walk(dir: string): Promise<void> {
    for await (const entry of Deno.readDir(join(root, dir))) {
      const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory && !entry.name.startsWith(".") && !NOT_SOURCE.has(entry.name)) await walk(path);
      else if (entry.isFile && SOURCE.test(entry.name)) out.push(path);
    }
  }
  await walk("");
  return out.sort();
}

interface InfoDependency {
  code?: { specifier?: string };
  type?: { specifier?: string };
}

interface InfoModule {
  specifier: string;
  dependencies?: InfoDependency[];
  /** Set where the module could not be loaded (e.g. an import of a missing file). */
  error?: string;
}

/**
 * Reads the graph of `files` (paths relative to `root`) with `deno info --json`. `config` is the deno.json
 * whose import map resolves bare specifiers; without it, `deno info` runs with `--no-config`.
 */
export async function readImportGraph(root: string, files: string[], config?: string): Promise<ImportGraph> {
  const tmp = await Deno.makeTempDir({ prefix: "import_graph_" });
  try {
    const entry = join(tmp, "all.ts");
    const lines = files.map((f) => `import ${JSON.stringify(toFileUrl(join(root, f)))};`);
    await Deno.writeTextFile(entry, lines.join("\n") + "\n");
    const configArgs = config ? ["--config", config] : ["--no-config"];
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", ...configArgs, entry],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) throw new Error(`deno info failed: ${new TextDecoder().decode(out.stderr)}`);
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { modules: InfoModule[] };
    return graphOf(root, entry, info.modules);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

function toFileUrl(path: string): string {
  return new URL(`file://${path}`).href;
}

function localPath(root: string, specifier: string | undefined): string | null {
  if (!specifier?.startsWith("file://")) return null;
  const path = decodeURIComponent(new URL(specifier).pathname);
  if (!SOURCE.test(path)) return null;
  const rel = relative(root, path);
  return rel.startsWith("..") ? null : rel;
}

function graphOf(root: string, entry: string, modules: InfoModule[]): ImportGraph {
  const broken = modules.filter((m) => m.error !== undefined).map((m) => m.error);
  if (broken.length > 0) throw new Error(`deno info could not load every module: ${broken.join("; ")}`);
  const graph: ImportGraph = new Map();
  const entryUrl = toFileUrl(entry);
  for (const m of modules) {
    const from = m.specifier === entryUrl ? null : localPath(root, m.specifier);
    if (from === null) continue;
    const to = graph.get(from) ?? new Set<string>();
    graph.set(from, to);
    for (const dep of m.dependencies ?? []) {
      for (const target of [dep.code?.specifier, dep.type?.specifier]) {
        const path = localPath(root, target);
        if (path !== null) to.add(path);
      }
    }
  }
  return graph;
}

/**
 * The strongly connected components of `graph` that hold a cycle (two or more nodes, or one node that
 * imports itself), each sorted, in sorted order. Tarjan's algorithm, written iteratively.
 */
export function stronglyConnected(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let next = 0;
  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    const work: Array<{ node: string; edges: string[]; i: number }> = [];
    const open = (node: string) => {
      index.set(node, next);
      low.set(node, next++);
      stack.push(node);
      onStack.add(node);
      work.push({ node, edges: [...(graph.get(node) ?? [])].sort(), i: 0 });
    };
    open(start);
    while (work.length > 0) {
      const top = work[work.length - 1];
      if (top.i < top.edges.length) {
        const w = top.edges[top.i++];
        if (!index.has(w)) open(w);
        else if (onStack.has(w)) low.set(top.node, Math.min(low.get(top.node)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) !== index.get(top.node)) continue;
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== top.node);
      if (component.length > 1 || graph.get(top.node)?.has(top.node)) found.push(component.sort());
    }
  }
  return found.sort((a, b) => a[0].localeCompare(b[0]));
}

/** One concrete cycle through the first node of `component`, as a chain `a → b → … → a`. */
export function cycleChain(graph: ImportGraph, component: string[]): string[] {
  const members = new Set(component);
  const start = component[0];
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of [...(graph.get(node) ?? [])].sort()) {
      if (!members.has(next)) continue;
      if (next === start) {
        const chain = [start];
        for (let at: string | undefined = node; at !== undefined && at !== start; at = cameFrom.get(at)) {
          chain.push(at);
        }
        return [...chain, start].reverse();
      }
      if (!cameFrom.has(next)) {
        cameFrom.set(next, node);
        queue.push(next);
      }
    }
  }
  return component;
}

/** Each cycle of `graph`, written as its members and one chain through them, for a failure message. */
export function describeCycles(graph: ImportGraph): string[] {
  return stronglyConnected(graph).map((component) =>
    `${component.length} files: ${cycleChain(graph, component).join(" → ")}` +
    (component.length > 2 ? ` (all: ${component.join(", ")})` : "")
  );
}

/** Imports from a file under `lower` into a file under any of `upper` (folder prefixes), as `a → b`. */
export function upwardImports(graph: ImportGraph, lower: string, upper: string[]): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    if (!from.startsWith(`${lower}/`)) continue;
    for (const to of targets) {
      if (upper.some((u) => to.startsWith(`${u}/`))) found.push(`${from} → ${to}`);
    }
  }
  return found.sort();
}

/**
 * The graph between the folders directly under `top` (`lib/onnx`, `lib/engine`, … with subfolders folded
 * into their parent; a file directly in `top` is its own node): an edge from folder A to folder B when a
 * file of A imports a file of B. `witnesses` keeps, per folder edge, the file imports that make it.
 */
export function folderGraph(graph: ImportGraph, top: string): {
  folders: ImportGraph;
  witnesses: Map<string, string[]>;
} {
  const folderOf = (file: string): string | null => {
    if (!file.startsWith(`${top}/`)) return null;
    const parts = file.slice(top.length + 1).split("/");
    return parts.length === 1 ? file : `${top}/${parts[0]}`;
  };
  const folders: ImportGraph = new Map();
  const witnesses = new Map<string, string[]>();
  for (const [from, targets] of graph) {
    const a = folderOf(from);
    if (a === null) continue;
    const edges = folders.get(a) ?? new Set<string>();
    folders.set(a, edges);
    for (const to of targets) {
      const b = folderOf(to);
      if (b === null || b === a) continue;
      edges.add(b);
      const key = `${a} → ${b}`;
      witnesses.set(key, [...(witnesses.get(key) ?? []), `${from} → ${to}`]);
    }
  }
  return { folders, witnesses };
}

/** Each folder cycle, as a chain of folders followed by the file imports behind each of its edges. */
export function describeFolderCycles(graph: ImportGraph, top: string): string[] {
  const { folders, witnesses } = folderGraph(graph, top);
  return stronglyConnected(folders).map((component) => {
    const chain = cycleChain(folders, component);
    const why = chain.slice(1).map((to, i) => `[${shortList(witnesses.get(`${chain[i]} → ${to}`)!)}]`);
    return `${chain.join(" → ")}: ${why.join(" ")}` +
      (component.length > chain.length - 1 ? ` (all: ${component.join(", ")})` : "");
  });
}

/** The first few entries of `list`, and how many more there are. */
function shortList(list: string[], keep = 3): string {
  const more = list.length - keep;
  return list.slice(0, keep).join("; ") + (more > 0 ? `; and ${more} more` : "");
}

/**
 * The layers of docs/DESIGN.md's "Layers" table (its first code block after the heading), top first: for
 * each `lib/` unit it names (`lib/run/` → `lib/run`, `errors.ts` → `lib/errors.ts`), its row's index. A
 * line that starts with a space continues the row above.
 */
export function designLayers(design: string): Map<string, number> {
  const section = design.slice(design.indexOf("\n## Layers"));
  const block = /```\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  const layers = new Map<string, number>();
  let row = -1;
  for (const line of block.split("\n")) {
    if (line.trim() === "") continue;
    if (!line.startsWith(" ")) row++;
    for (const [unit] of line.matchAll(/lib\/[a-z_]+\/|\b[a-z_]+\.ts\b/g)) {
      const name = unit.startsWith("lib/") ? unit.slice(0, -1) : `lib/${unit}`;
      if (!layers.has(name)) layers.set(name, row);
    }
  }
  return layers;
}

/**
 * What breaks the layers: each import from a `lib/` unit into one of a higher row (`a → b`), and each
 * `lib/` unit the table does not place (`unplaced: lib/x`).
 */
export function layerViolations(graph: ImportGraph, layers: Map<string, number>): string[] {
  const unitOf = (file: string) => file.split("/").slice(0, 2).join("/");
  const found = new Set<string>();
  for (const [from, targets] of graph) {
    if (!from.startsWith("lib/")) continue;
    const a = unitOf(from);
    if (!layers.has(a)) found.add(`unplaced: ${a}`);
    for (const to of targets) {
      const b = unitOf(to);
      if (!to.startsWith("lib/") || a === b) continue;
      if (!layers.has(b)) found.add(`unplaced: ${b}`);
      else if (layers.has(a) && layers.get(b)! < layers.get(a)!) found.add(`${from} → ${to}`);
    }
  }
  return [...found].sort();
}
