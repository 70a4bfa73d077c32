/**
 * The loss mask from the chat structure, for files made elsewhere that carry no `sampled` column
 * meaning (`mask.loss_mask: roles`): a state machine over `<|im_start|>role … <|im_end|>`.
 *
 * - After `<|im_start|>assistant\n` (the header, mask 0) every token is the assistant's (mask 1) up
 *   to and including its `<|im_end|>` (or `<|endoftext|>`), or to the end of the sequence when the
 *   turn was cut.
 * - An empty think block right after the header (`<think>\n\n</think>\n\n`, what Qwen3's template
 *   adds with thinking disabled) belongs to the header: mask 0.
 * - Every other role's turn (system, user, which holds tool results in Qwen3) and the text between
 *   turns: mask 0. The prompt (`t < prompt_len`) is always 0, even an assistant turn inside it.
 *
 * On rollouts this toolkit makes, this agrees with `sampled` token for token (tests/mask/mask_table_test.ts),
 * with one known exception: a policy that itself samples exactly an empty think block right after
 * the header gets 0 here and 1 from `sampled`. A policy that samples `<|im_start|>` inside a turn
 * also confuses the state machine; `sampled` has neither problem, which is why it is the default.
 *
 * @module
 */

/** The token ids the state machine needs. */
export interface RoleTokens {
  imStart: number;
  /** Tokens that end a turn: `<|im_end|>`, and `<|endoftext|>`. */
  turnEnds: number[];
  /** The tokens after `<|im_start|>` that open an assistant turn: `assistant`, `\n`. */
  assistantHeader: number[];
  /** The empty think block the template adds with thinking disabled. */
  emptyThink: number[];
}

/**
 * Qwen3's ids (every Qwen3 size shares the tokenizer; tests/mask/mask_table_test.ts checks them against the real
 * tokenizer.json): `<|im_start|>` 151644, `<|im_end|>` 151645, `<|endoftext|>` 151643,
 * `assistant` 77091, `\n` 198, `<think>` 151667, `\n\n` 271, `</think>` 151668.
 */
export const QWEN3_ROLE_TOKENS: RoleTokens = {
  imStart: 151644,
  turnEnds: [151645, 151643],
  assistantHeader: [77091, 198],
  emptyThink: [151667, 271, 151668, 271],
};

function matchesAt(tokens: Int32Array, at: number, end: number, seq: number[]): boolean {
  if (at + seq.length > end) return false;
  for (let k = 0; k < seq.length; k++) if (tokens[at + k] !== seq[k]) return false;
  return true;
}

/** Writes one episode's role mask for `tokens[start, end)` into `out[start, end)`. */
export function roleMaskInto(
  tokens: Int32Array,
  start: number,
  end: number,
  promptLen: number,
  ids: RoleTokens,
  out: Uint8Array,
): void {
  let inAssistant = false;
  for (let t = start; t < end; t++) {
    const tok = tokens[t];
    if (tok === ids.imStart) {
      out[t] = 0;
      inAssistant = matchesAt(tokens, t + 1, end, ids.assistantHeader);
      if (!inAssistant) continue;
      t += ids.assistantHeader.length; // header tokens stay 0
      if (matchesAt(tokens, t + 1, end, ids.emptyThink)) t += ids.emptyThink.length;
      continue;
    }
    out[t] = inAssistant && t - start >= promptLen ? 1 : 0;
    if (inAssistant && ids.turnEnds.includes(tok)) inAssistant = false;
  }
}
