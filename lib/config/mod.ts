/**
 * The configuration: one schema (schema.ts), one loader (load.ts). Stages call `loadConfig`, take
 * their own section of `config`, and write `hash` into their outputs' metadata.
 *
 * ```ts
 * import { loadConfig } from "./mod.ts";
 * const { config, hash } = await loadConfig({ overrides: [["train.lora.r", "8"]] });
 * console.log(config.train.lora.r, hash.slice(0, 8));
 * ```
 */
export { DEFAULT_CONFIG_FILE, loadConfig, type LoadedConfig, type LoadOptions } from "./load.ts";
export { defaultConfig, schemaPaths, validateConfig } from "./validate.ts";
export { applyOverrides } from "./overrides.ts";
export { canonicalJson, configHash } from "./hash.ts";
export { configHelp } from "./help.ts";
export * from "./schema.ts";
