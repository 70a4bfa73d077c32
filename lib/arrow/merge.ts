/**
 * Several stage files read as one: how rollout shards (`deno task rollout --shard i/n` on several
 * machines) meet at one trainer. `score`, `mask` and `train` take `--in` more than once (or a glob) and
 * read their inputs through `readStageFiles`.
 *
 * The files are concatenated in the order given (a glob's matches in name order), rows unchanged.
 * They must be parts of one step of one run, so these must agree, each checked against the first file
 * and refused in one line naming both files and the field:
 * - the kind (each file is also checked in full by `readStageFile`);
 * - the metadata that says where the episodes come from: `config_hash`, `model`, `adapter`,
 *   `tokenizer_hash`, `chat_template_hash`, `sampling`, `seed`;
 * - the policy that sampled them: the `policy_version` column's values;
 * - the columns (names and types), e.g. the same reward components in scored files.
 * `created_at` and `input_hashes` may differ. The same file given twice (equal sha256) is refused: read as
 * one it would count every episode twice; so are parts that share an episode or a group id (a shard
 * written twice, or the same shard of two steps). The merged file's `sha256` lists its parts' hashes
 * comma-separated in order, so the next file's `input_hashes` names every shard it was made from, and
 * its `input_hashes` joins the parts' distinct values per key the same way.
 *
 * @module
 */

import type { Table } from "apache-arrow";
import { UserError } from "../errors.ts";
import type { StageKind } from "./kinds.ts";
import type { StageMetadata } from "./metadata.ts";
import { readStageFile } from "./read.ts";
import { StageFile } from "./stage_file.ts";
import { typeName } from "./types.ts";

/** Metadata keys that must be equal in every part. */
const SAME_METADATA = [
  "config_hash",
  "model",
  "adapter",
  "tokenizer_hash",
  "chat_template_hash",
  "sampling",
  "seed",
] as const;

/** Reads each of `paths` as a `kind` stage file and returns them as one (the file itself when one). */
export async function readStageFiles(paths: readonly string[], kind: StageKind): Promise<StageFile> {
  if (paths.length === 0) throw new RangeError("readStageFiles: no paths");
  const files: StageFile[] = [];
  for (const path of paths) files.push(await readStageFile(path, kind));
  return mergeStageFiles(files);
}

/** Concatenates checked stage files of one kind, in order, after checking they belong together. */
export function mergeStageFiles(files: readonly StageFile[]): StageFile {
  if (files.length === 0) throw new RangeError("mergeStageFiles: no files");
  if (files.length === 1) return files[0];
  const [first, ...rest] = files;
  for (const file of rest) checkSameSource(first, file);
  refuseRepeats(files); // after: parts that differ are named by the field they differ in
  refuseSharedRows(files);
  const table: Table = first.table.concat(...rest.map((f) => f.table));
  const metadata: StageMetadata = { ...first.metadata, input_hashes: joinedInputHashes(files) };
  return new StageFile(
    files.map((f) => f.path).join(", "),
    first.kind,
    table,
    metadata,
    files.map((f) => f.sha256).join(","),
  );
}

/** Refuses two parts with the same bytes (the same file, or a copy of it). */
function refuseRepeats(files: readonly StageFile[]): void {
  const seen = new Map<string, StageFile>();
  for (const file of files) {
    const earlier = seen.get(file.sha256);
    if (earlier) {
      throw new UserError(`merging ${earlier.path} and ${file.path}`, {
        why: "they are the same file (the same sha256), so every episode would be read twice",
        fix: "pass each file once",
      });
    }
    seen.set(file.sha256, file);
  }
}

/**
 * Refuses two parts that hold one episode, or one group: the same shard written twice (its bytes differ by
 * `created_at`), or the same shard of two steps, whose group ids coincide, so the mask stage would pool two
 * tasks' episodes as one group. Shards of one step hold disjoint groups (lib/rollout/tasks.ts).
 */
function refuseSharedRows(files: readonly StageFile[]): void {
  for (const column of ["episode_id", "group_id"] as const) {
    const owner = new Map<unknown, StageFile>();
    for (const file of files) {
      if (!file.has(column)) continue;
      for (const value of new Set(file.column(column))) {
        const earlier = owner.get(value);
        if (earlier) {
          throw new UserError(`merging ${earlier.path} and ${file.path}`, {
            value: `${column} ${value}`,
            why: `both hold it, so they are not disjoint shards of one step (a shard written twice, or the ` +
              "same shard of two steps)",
            fix: "pass each shard of the step once",
          });
        }
        owner.set(value, file);
      }
    }
  }
}

/** Refuses `b` unless it has `a`'s kind, provenance metadata, policy versions and columns. */
function checkSameSource(a: StageFile, b: StageFile): void {
  if (a.kind !== b.kind) refuse(a, b, "kind", a.kind, b.kind);
  for (const key of SAME_METADATA) {
    const [x, y] = [stable(a.metadata[key]), stable(b.metadata[key])];
    if (x !== y) refuse(a, b, `metadata ${key}`, x, y);
  }
  if (a.has("policy_version") || b.has("policy_version")) {
    const [x, y] = [policyVersions(a), policyVersions(b)];
    if (x !== y) refuse(a, b, "policy_version", x, y);
  }
  const [x, y] = [columnsOf(a), columnsOf(b)];
  if (x !== y) refuse(a, b, "columns", x, y);
}

function refuse(a: StageFile, b: StageFile, field: string, x: string, y: string): never {
  const short = (s: string) => (s.length > 60 ? `${s.slice(0, 57)}...` : s);
  throw new UserError(`merging ${a.path} and ${b.path}`, {
    why: `they differ in ${field} (${short(x)} vs ${short(y)}), so they are not parts of one step of one run`,
    fix:
      "pass only files written from the same policy version and configuration (e.g. the shards of one step)",
  });
}

/** The distinct `policy_version` values, sorted, as one string. */
function policyVersions(file: StageFile): string {
  if (!file.has("policy_version")) return "(no policy_version column)";
  return [...new Set(file.column("policy_version") as string[])].sort().join(",");
}

function columnsOf(file: StageFile): string {
  return file.table.schema.fields.map((f) => `${f.name}:${typeName(f.type)}`).join(",");
}

/** JSON with object keys sorted, so equal metadata compares equal whatever its key order. */
function stable(value: unknown): string {
  if (value === undefined) return "(absent)";
  return JSON.stringify(
    value,
    (_key, v) =>
      v && typeof v === "object" && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([p], [q]) => p.localeCompare(q)))
        : v,
  );
}

/** Per key, the parts' distinct input hashes joined by commas, in file order. */
function joinedInputHashes(files: readonly StageFile[]): Record<string, string> {
  const out: Record<string, string[]> = {};
  for (const f of files) {
    for (const [key, hash] of Object.entries(f.metadata.input_hashes ?? {})) {
      const list = (out[key] ??= []);
      if (!list.includes(hash)) list.push(hash);
    }
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.join(",")]));
}
