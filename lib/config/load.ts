/**
 * `loadConfig`: read the YAML file (the repository's `config.yaml` by default), validate it, apply
 * `--section.key=value` overrides, validate again (cross-field rules see the final values), and hash
 * the result. Every failure is a one-line `UserError` raised before any model loads.
 */
import { fileURLToPath } from "node:url";
import { parse } from "@std/yaml";
import { UserError } from "../errors.ts";
import { readInputFile } from "../fs/input.ts";
import type { Config } from "./schema.ts";
import { isMapping } from "./check.ts";
import { validateConfig } from "./validate.ts";
import { applyOverrides } from "./overrides.ts";
import { configHash } from "./hash.ts";

export { configHelp } from "./help.ts";

/**
 * The section a run's snapshot (`<run_dir>/config.yaml`, lib/run/snapshot.ts) adds to the resolved
 * configuration: what `--resume` checks. It is derived from the rest, so a snapshot passed as `--config`
 * loads without it: `deno task loop --config runs/x/config.yaml --resume` re-runs a run with its own
 * settings, as its resume errors suggest.
 */
export const RUN_IDENTITY_SECTION = "identity";

/** The repository's `config.yaml`, found relative to this module so any working directory works. */
export const DEFAULT_CONFIG_FILE: string = fileURLToPath(new URL("../../config.yaml", import.meta.url));

export interface LoadOptions {
  /** YAML file to read; default the repository's config.yaml. Ignored when `text` is given. */
  file?: string;
  /** YAML text to use instead of a file (tests, notebooks). */
  text?: string;
  /** `[dotted.key, value]` pairs, applied in order after the file. */
  overrides?: Array<[string, string]>;
}

export interface LoadedConfig {
  config: Config;
  /** sha256 hex of the resolved configuration's canonical JSON. */
  hash: string;
  /** Where the YAML came from: a file path, or `<text>`. */
  source: string;
}

/** Loads, validates, overrides and hashes a configuration. */
export async function loadConfig(opts: LoadOptions = {}): Promise<LoadedConfig> {
  const source = opts.text !== undefined ? "<text>" : opts.file ?? DEFAULT_CONFIG_FILE;
  const text = opts.text ?? await readConfigFile(source);
  const raw = withoutRunIdentity(parseYaml(text, source));
  const fromFile = withSource(source, () => validateConfig(raw));
  const overridden = applyOverrides(fromFile, opts.overrides ?? []);
  const config = validateConfig(overridden);
  return { config, hash: configHash(config), source };
}

/** The largest config file read (a config is a few KiB; anything near this is not one). */
const MAX_CONFIG_BYTES = 16 * 2 ** 20;

async function readConfigFile(path: string): Promise<string> {
  const bytes = await readInputFile(path, {
    what: `config file ${path}`,
    expect: "a YAML file",
    missingFix: "check the --config path, or leave --config out to use the repository's config.yaml",
    fix: "pass --config a .yaml file, or leave --config out to use the repository's config.yaml",
    maxBytes: MAX_CONFIG_BYTES,
  }).catch((error) => {
    if (error instanceof UserError) throw error;
    throw new UserError(`config file ${path}`, {
      why: `cannot be read (${(error as Error).message})`,
      fix: "check the file's permissions",
    });
  });
  return new TextDecoder().decode(bytes);
}

/** The configuration without a snapshot's identity section; anything else named `identity` stays, to be refused. */
function withoutRunIdentity(raw: unknown): unknown {
  const record = isMapping(raw) ? raw : {};
  const identity = record[RUN_IDENTITY_SECTION];
  if (!isMapping(identity) || !("model.path" in identity)) return raw;
  const { [RUN_IDENTITY_SECTION]: _derived, ...config } = record;
  return config;
}

/** Parses YAML; a syntax error names the file, line and column. */
function parseYaml(text: string, source: string): unknown {
  try {
    return parse(text);
  } catch (error) {
    const err = error as Error & { linePos?: Array<{ line: number; col: number }> };
    const at = err.linePos?.[0];
    const where = at ? `${source}:${at.line}:${at.col}` : source;
    throw new UserError(`config file ${where}`, {
      why: `invalid YAML: ${err.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "")}`,
      fix: `fix the YAML at line ${
        at?.line ?? "?"
      } of ${source} (indent with spaces; quote values holding ': ' or '#')`,
    });
  }
}

/** Prefixes a validation error with the file it came from, so the user knows which file to edit. */
function withSource<T>(source: string, body: () => T): T {
  try {
    return body();
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    throw new UserError(`${source}: ${error.what.replace(/^config: /, "")}`, error.parts);
  }
}
