/**
 * Bidirectional formatting controls: ALM, LRM, RLM, the embeddings / overrides (U+202A–U+202E) and the
 * isolates (U+2066–U+2069). Text that displays them lies about its order ("Trojan Source"): the rollout's
 * strict parser refuses them in a tool call's strings (lib/rollout/sanitize.ts) and guided tool calls
 * never write them (lib/engine/call_grammar.ts). At the library's root because both folders read it.
 *
 * @module
 */

export const BIDI_CONTROLS: ReadonlySet<number> = new Set([
  0x061c,
  0x200e,
  0x200f,
  0x202a,
  0x202b,
  0x202c,
  0x202d,
  0x202e,
  0x2066,
  0x2067,
  0x2068,
  0x2069,
]);
