/**
 * Finds and opens `libonnxruntime.so.1`, the onnxruntime build that the onnxruntime-node npm package
 * ships next to its Node binding, and hands out its C API table (`OrtApi`, see api.ts).
 *
 * The library exports one symbol we need, `OrtGetApiBase`, which returns
 * `struct OrtApiBase { const OrtApi* (*GetApi)(uint32_t version); const char* (*GetVersionString)(void); }`.
 * `GetApi` returns null for a version newer than the library knows. Only linux-x64 is supported: other
 * platforms throw a `UserError` whose fix is to use the Node binding (the engine then falls back to it).
 *
 * Permissions: `--allow-ffi` (dlopen) and `--allow-read` (to find the package directory); every deno
 * task that runs the engine (rollout, train, eval, loop, demo, bench, test) already grants both.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UserError } from "../errors.ts";

/** The onnxruntime version the npm dependency pins (deno.json); the API table is checked against it. */
export const ORT_VERSION = "1.30.0";

/**
 * The `OrtApi` version requested from `GetApi`. Every member api.ts calls exists since version 13 (the
 * table is append-only), and onnxruntime 1.30 serves versions up to 30 — 23 is what we ask for.
 */
export const ORT_API_VERSION = 23;

/** Where the npm package keeps its native files, relative to the package root. */
const LIBRARY_PATH = ["bin", "napi-v6", "linux", "x64", "libonnxruntime.so.1"];

/** The opened library: the `OrtApi` table pointer and the version the library reports. */
export interface OrtLibrary {
  path: string;
  version: string;
  /** `const OrtApi*`: a table of function pointers (api.ts reads it). */
  api: Deno.PointerObject;
}

let opened: OrtLibrary | undefined;

/** Opens the library once per thread (a Worker opens its own handle on the same loaded library). */
export function openOrtLibrary(): OrtLibrary {
  opened ??= open();
  return opened;
}

function open(): OrtLibrary {
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    throw new UserError("onnxruntime through FFI", {
      value: `${Deno.build.os}-${Deno.build.arch}`,
      why: "only linux-x64 is supported (the library path and calling convention are fixed for it)",
      fix: "use the onnxruntime-node binding on this platform (the engine falls back to it by itself)",
    });
  }
  const path = libraryPath();
  const lib = Deno.dlopen(path, { OrtGetApiBase: { parameters: [], result: "pointer" } });
  const base = lib.symbols.OrtGetApiBase();
  if (!base) throw new Error(`onnxruntime: OrtGetApiBase() returned null in ${path}`);
  const view = new Deno.UnsafePointerView(base);
  const getApi = new Deno.UnsafeFnPointer(view.getPointer(0)!, { parameters: ["u32"], result: "pointer" });
  const getVersion = new Deno.UnsafeFnPointer(view.getPointer(8)!, { parameters: [], result: "pointer" });
  const version = Deno.UnsafePointerView.getCString(getVersion.call()!);
  if (version !== ORT_VERSION) {
    throw new UserError(`onnxruntime library ${path}`, {
      value: version,
      why: `the FFI layer was written and checked against onnxruntime ${ORT_VERSION}`,
      fix:
        `install onnxruntime-node@${ORT_VERSION} (deno.json pins it), or re-check lib/ort/api.ts for this version`,
    });
  }
  const api = getApi.call(ORT_API_VERSION);
  if (!api) {
    throw new UserError(`onnxruntime ${version} C API`, {
      value: ORT_API_VERSION,
      why: "GetApi returned null: the library does not serve this API version",
      fix: "use a newer onnxruntime-node, or lower ORT_API_VERSION in lib/ort/library.ts",
    });
  }
  return { path, version, api };
}

/** The library file inside the installed onnxruntime-node package. */
export function libraryPath(): string {
  let entry: string;
  try {
    entry = fileURLToPath(import.meta.resolve("onnxruntime-node"));
  } catch (e) {
    throw new UserError("onnxruntime-node package", {
      value: (e as Error).message,
      why: "it could not be resolved from deno.json's imports",
      fix: 'run `deno install` (deno.json maps "onnxruntime-node" to the npm package)',
    });
  }
  const path = join(packageRoot(entry), ...LIBRARY_PATH);
  try {
    Deno.statSync(path);
  } catch {
    throw new UserError("onnxruntime shared library", {
      value: path,
      why: "the onnxruntime-node package has no linux-x64 libonnxruntime.so.1 there",
      fix: "reinstall onnxruntime-node (`deno install --reload`), or use the binding on this platform",
    });
  }
  return path;
}

/** Walks up from a file of the package to the folder whose package.json names onnxruntime-node. */
function packageRoot(file: string): string {
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(Deno.readTextFileSync(join(dir, "package.json")));
      if (pkg.name === "onnxruntime-node") return dir;
    } catch {
      // no package.json here: keep walking up
    }
  }
  throw new UserError("onnxruntime-node package", {
    value: file,
    why: "no package.json naming onnxruntime-node above its entry point",
    fix: "reinstall onnxruntime-node (`deno install --reload`)",
  });
}
