/**
 * The `read_file` tool: reads one text file of the task's own files, and nothing else.
 *
 * The jail of a task (docs/sandbox.md):
 * - `task.meta.files` ({relative path → content}): the files are those strings; nothing touches the
 *   disk, so no symlink can lead out.
 * - otherwise the directory `rollout.tools.read_file_root`/`task.meta.files_dir`, or the root itself
 *   when the task names no `files_dir`. `files_dir` passes the same text checks as a path, and the
 *   jail is its real path, which must lie inside the root's real path (a symlinked `files_dir` pointing
 *   out of the root is refused).
 *
 * Every path is checked twice: as text (no NUL, not absolute, no `..`, at most MAX_PATH_CHARS), and on
 * disk after resolving symlinks (the real path must lie inside the jail's real path), and the file read
 * is the resolved one. Each rejection has its own message, shown to the model as a `tool_error`.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import { isAncestorOrSelf } from "../fs/output.ts";
import type { Tool, ToolResult } from "./types.ts";

/** Longest path accepted. */
export const MAX_PATH_CHARS = 1024;
/** Bytes read at most; the rest is cut (and marked). */
export const MAX_READ_BYTES = 1024 ** 2;

/** The tool over a root directory (null when only `task.meta.files` is used). */
export function readFileTool(root: string | null): Tool {
  return {
    name: "read_file",
    description: "Read a text file that comes with the task, by its relative path (e.g. data/input.txt).",
    parameters: {
      type: "object",
      properties: { path: { type: "string", description: "path relative to the task's files" } },
      required: ["path"],
      additionalProperties: false,
    },
    async run(args, ctx): Promise<ToolResult> {
      const path = String(args.path);
      const refusal = checkPathText(path);
      if (refusal !== undefined) return fail(refusal);
      const files = inlineFiles(ctx.task);
      if (files !== undefined) return readInline(files, path);
      const jail = await jailDirectory(root, ctx.task);
      if (typeof jail !== "string") return fail(jail.error);
      return await readInJail(jail, path);
    },
  };
}

function fail(message: string): ToolResult {
  return { status: "tool_error", output: `Error: ${message}` };
}

/** The text checks, each with its own message; undefined when the path may be looked up. */
export function checkPathText(path: string): string | undefined {
  if (path.length > MAX_PATH_CHARS) {
    return `path is ${path.length} characters long; the limit is ${MAX_PATH_CHARS}`;
  }
  if (path.includes("\0")) return "path contains a NUL character";
  if (path.trim() === "") return "path is empty; give a relative path such as notes.txt";
  if (path.startsWith("/") || path.startsWith("\\") || /^[A-Za-z]:/.test(path) || path.startsWith("~")) {
    return `absolute path "${path}" is not allowed; give a path relative to the task's files`;
  }
  if (path.split(/[/\\]/).includes("..")) {
    return `path "${path}" contains ".."; it may not leave the task's files`;
  }
  return undefined;
}

/** `a//b/./c` → `a/b/c`. */
function normalize(path: string): string {
  return path.split("/").filter((part) => part !== "" && part !== ".").join("/");
}

function inlineFiles(task: Task): Record<string, string> | undefined {
  const files = task.meta?.files;
  if (files === null || typeof files !== "object" || Array.isArray(files)) return undefined;
  return files as Record<string, string>;
}

function readInline(files: Record<string, string>, path: string): ToolResult {
  const wanted = normalize(path);
  for (const [name, content] of Object.entries(files)) {
    if (normalize(name) === wanted && typeof content === "string") return { status: "ok", output: content };
  }
  return fail(`no file "${path}" in this task; its files are: ${listing(Object.keys(files))}`);
}

function listing(names: string[]): string {
  if (names.length === 0) return "(none)";
  const shown = names.slice(0, 20).join(", ");
  return names.length > 20 ? `${shown} and ${names.length - 20} more` : shown;
}

/**
 * The real path of the task's directory, or why the task has none. The directory is the real path of
 * `root`/`files_dir` and must lie inside the real path of the root: a `files_dir` that is (or passes
 * through) a symlink pointing out of the root is refused before anything is read.
 */
async function jailDirectory(root: string | null, task: Task): Promise<string | { error: string }> {
  if (root === null) return { error: "this task has no files to read" };
  const dir = task.meta?.files_dir;
  const refusal = dir === undefined
    ? undefined
    : typeof dir !== "string"
    ? "not a string"
    : checkPathText(dir);
  if (refusal !== undefined) {
    return { error: `this task's files_dir ${JSON.stringify(dir)} is refused: ${refusal}` };
  }
  const sub = typeof dir === "string" ? normalize(dir) : "";
  let realRoot: string;
  let realJail: string;
  try {
    realRoot = await Deno.realPath(root);
    realJail = await Deno.realPath(`${root}/${sub}`);
  } catch {
    return { error: "this task has no files to read" };
  }
  if (!isAncestorOrSelf(realRoot, realJail)) {
    return {
      error: `this task's files_dir ${JSON.stringify(dir)} resolves outside the files root (through a ` +
        "symlink); nothing is read from it",
    };
  }
  return realJail;
}

/** Reads `path` inside the jail (a real path); the file read is the resolved one, checked again. */
async function readInJail(realJail: string, path: string): Promise<ToolResult> {
  let real: string;
  try {
    real = await Deno.realPath(`${realJail}/${normalize(path)}`);
  } catch {
    return fail(`no file "${path}" in this task`);
  }
  if (!isAncestorOrSelf(realJail, real)) {
    return fail(`path "${path}" resolves outside the task's files (through a symlink); it is not allowed`);
  }
  const info = await Deno.stat(real);
  if (info.isDirectory) return fail(`"${path}" is a directory; its files are: ${await listDir(real)}`);
  if (!info.isFile) return fail(`"${path}" is not a regular file`);
  return await readCapped(real, info.size);
}

async function listDir(dir: string): Promise<string> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.isDirectory ? `${entry.name}/` : entry.name);
  return listing(names.sort());
}

/** At most MAX_READ_BYTES, decoded with replacement characters for invalid UTF-8. */
async function readCapped(path: string, size: number): Promise<ToolResult> {
  using file = await Deno.open(path, { read: true });
  const bytes = new Uint8Array(Math.min(size, MAX_READ_BYTES));
  let filled = 0;
  while (filled < bytes.length) {
    const n = await file.read(bytes.subarray(filled));
    if (n === null) break;
    filled += n;
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes.subarray(0, filled));
  if (size <= MAX_READ_BYTES) return { status: "ok", output: text };
  return { status: "output_truncated", output: `${text}\n[file cut at ${MAX_READ_BYTES} of ${size} bytes]` };
}
