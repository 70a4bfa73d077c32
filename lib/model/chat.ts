/**
 * `ChatTokenizer`: encode / decode, special-token ids, and chat rendering with the model's own template
 * (`tools`, `enable_thinking`), plus the token pieces an environment appends during a multi-turn rollout,
 * derived from the template itself (docs/DESIGN.md "Token in, token out", rule 3).
 *
 * @module
 */

import { UserError } from "../errors.ts";

/** A tool call as OpenAI / Hugging Face chat messages carry it. */
export interface ToolCall {
  type?: "function";
  function: { name: string; arguments: Record<string, unknown> | string };
}

/** One chat message. Qwen3 renders `tool` messages as a user turn holding `<tool_response>`. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** Assistant reasoning (rendered inside `<think>` where the template keeps it). */
  reasoning_content?: string;
  tool_calls?: ToolCall[];
  /** Tool name of a `tool` message (Qwen3's template ignores it). */
  name?: string;
}

/** A tool offered to the model (JSON schema of its parameters). */
export interface ToolSpec {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** How to render a conversation. */
export interface RenderOptions {
  tools?: ToolSpec[];
  /** Qwen3 thinking mode; `false` renders an empty `<think>\n\n</think>\n\n` after the generation prompt. */
  enableThinking?: boolean;
  /** End with `<|im_start|>assistant\n` (default false). */
  addGenerationPrompt?: boolean;
}

/** Options of the appended pieces (tool results, user turns). */
export interface PieceOptions {
  /** Thinking mode of the next assistant turn's generation prompt (default true, the template's default). */
  enableThinking?: boolean;
  /**
   * Start with the end-of-turn token that closes the assistant turn (default true). Pass false when the
   * policy already sampled it as its stop token.
   */
  includeTurnEnd?: boolean;
}

/** The part of a transformers.js `PreTrainedTokenizer` this module uses. */
export interface HfTokenizer {
  chat_template: string | Record<string, string> | null;
  eos_token: string | null;
  encode(text: string, options: { add_special_tokens: boolean }): number[];
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
  convert_tokens_to_ids(token: string): number | undefined;
  apply_chat_template(messages: unknown[], options: Record<string, unknown>): unknown;
}

/** Where the tokenizer came from, for stage-file metadata. */
export interface TokenizerInfo {
  dir: string;
  /** sha256 of `tokenizer.json`. */
  tokenizerSha256: string;
  /** sha256 of the chat template text. */
  chatTemplateSha256: string;
}

/** Ids of the Qwen3 special tokens the toolkit relies on. */
export interface SpecialTokens {
  imStart: number; // <|im_start|>
  imEnd: number; // <|im_end|>
  endOfText: number; // <|endoftext|>
  think: number; // <think>
  thinkEnd: number; // </think>
  toolCall: number; // <tool_call>
  toolCallEnd: number; // </tool_call>
  toolResponse: number; // <tool_response>
  toolResponseEnd: number; // </tool_response>
}

const SPECIAL_TEXT: Record<keyof SpecialTokens, string> = {
  imStart: "<|im_start|>",
  imEnd: "<|im_end|>",
  endOfText: "<|endoftext|>",
  think: "<think>",
  thinkEnd: "</think>",
  toolCall: "<tool_call>",
  toolCallEnd: "</tool_call>",
  toolResponse: "<tool_response>",
  toolResponseEnd: "</tool_response>",
};

/** Special strings environment text may not contain verbatim (`<|…|>` covers every Qwen3 control token). */
const SPECIAL_STRINGS = [...Object.values(SPECIAL_TEXT), "<|"];

/** Marks the end of an assistant body in probe renders; never produced by a template. */
const SENTINEL = "\u2063<<assistant-body-end>>\u2063";

/** A tokenizer plus chat template, loaded by `loadTokenizer(dir)`. */
export class ChatTokenizer {
  readonly info: TokenizerInfo;
  readonly special: SpecialTokens;
  /** The end-of-turn token (`eos_token` of tokenizer_config, `<|im_end|>` for Qwen3). */
  readonly eosToken: string;
  readonly eosTokenId: number;
  readonly #hf: HfTokenizer;

  constructor(hf: HfTokenizer, info: TokenizerInfo) {
    this.#hf = hf;
    this.info = info;
    const special = {} as SpecialTokens;
    for (const [key, text] of Object.entries(SPECIAL_TEXT)) {
      special[key as keyof SpecialTokens] = this.tokenId(text);
    }
    this.special = special;
    this.eosToken = hf.eos_token ?? SPECIAL_TEXT.imEnd;
    this.eosTokenId = this.tokenId(this.eosToken);
  }

  /** Token ids of `text`, with no BOS/EOS added (special-token strings in `text` map to their ids). */
  encode(text: string): number[] {
    return Array.from(this.#hf.encode(text, { add_special_tokens: false }));
  }

  /** Text of `ids`; special tokens are kept unless `skipSpecialTokens`. */
  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return ""; // transformers.js refuses an empty list (a turn that stopped at once)
    return this.#hf.decode([...ids], { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  /**
   * `text` with every special-token string (`<|im_end|>`, `</tool_response>`, `<think>`…) broken by a
   * zero-width space after its first character, so that it encodes to ordinary tokens. Environment text
   * (tool output, user turns) passes through this before it is rendered: a tool printing `<|im_end|>`
   * must not forge a turn boundary in the policy's context.
   */
  neutralizeSpecial(text: string): string {
    let out = text;
    for (const token of SPECIAL_STRINGS) out = out.replaceAll(token, `${token[0]}\u200b${token.slice(1)}`);
    return out;
  }

  /** The id of a single token string (e.g. `"<|im_end|>"`); throws if the vocabulary lacks it. */
  tokenId(token: string): number {
    const id = this.#hf.convert_tokens_to_ids(token);
    if (typeof id !== "number") {
      throw new UserError(`tokenizer in ${this.info.dir}: token ${JSON.stringify(token)}`, {
        why: "it is not in the vocabulary",
        fix: "use a Qwen3 tokenizer (tokenizer.json from a Qwen3 model)",
      });
    }
    return id;
  }

  /** The conversation rendered by the model's chat template. */
  renderChat(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    const kwargs: Record<string, unknown> = {
      tokenize: false,
      add_generation_prompt: options.addGenerationPrompt ?? false,
      tools: options.tools && options.tools.length > 0 ? options.tools : null,
    };
    // Left undefined, the template takes its own default (thinking on for Qwen3).
    if (options.enableThinking !== undefined) kwargs.enable_thinking = options.enableThinking;
    return this.#hf.apply_chat_template(messages.map((m) => ({ ...m })), kwargs) as string;
  }

  /** Token ids of `renderChat(messages, options)`. */
  renderChatTokens(messages: readonly ChatMessage[], options: RenderOptions = {}): number[] {
    return this.encode(this.renderChat(messages, options));
  }

  /** What the template appends for the next assistant turn (`<|im_start|>assistant\n`, + empty think when off). */
  generationPrompt(options: { enableThinking?: boolean } = {}): string {
    const msgs: ChatMessage[] = [{ role: "user", content: "Q" }];
    const base = this.renderChat(msgs);
    const full = this.renderChat(msgs, { addGenerationPrompt: true, enableThinking: options.enableThinking });
    if (!full.startsWith(base)) throw this.#unstable("the generation prompt");
    return full.slice(base.length);
  }

  /** Token ids of `generationPrompt(options)`. */
  generationPromptTokens(options: { enableThinking?: boolean } = {}): number[] {
    return this.encode(this.generationPrompt(options));
  }

  /**
   * Text the template renders after an assistant tool-call turn for these tool results, through the
   * next assistant generation prompt. For Qwen3:
   * `<|im_end|>\n<|im_start|>user\n<tool_response>\nR\n</tool_response><|im_end|>\n<|im_start|>assistant\n`.
   */
  toolResultText(results: readonly string[], options: PieceOptions = {}): string {
    const call: ChatMessage = {
      role: "assistant",
      content: "",
      tool_calls: [{ type: "function", function: { name: "tool", arguments: SENTINEL } }],
    };
    const tools = results.map((content): ChatMessage => ({ role: "tool", content }));
    return this.#piece(call, tools, options);
  }

  /** Token ids of `toolResultText` (the environment's tokens after a tool call). */
  toolResultTokens(results: readonly string[], options: PieceOptions = {}): number[] {
    return this.#pieceTokens(this.toolResultText(results, { ...options, includeTurnEnd: true }), options);
  }

  /** Text the template renders after a finished assistant turn for a new user message, through the next prompt. */
  userTurnText(text: string, options: PieceOptions = {}): string {
    const answer: ChatMessage = { role: "assistant", content: SENTINEL };
    return this.#piece(answer, [{ role: "user", content: text }], options);
  }

  /** Token ids of `userTurnText`. */
  userTurnTokens(text: string, options: PieceOptions = {}): number[] {
    return this.#pieceTokens(this.userTurnText(text, { ...options, includeTurnEnd: true }), options);
  }

  /**
   * Renders `[user, assistant]` (the assistant body ending in SENTINEL) alone and followed by `extra`
   * plus the generation prompt, and returns what follows the assistant body in the latter. Locating the
   * body by a sentinel (not by a common prefix) matters: Qwen3 renders the last assistant turn with a
   * `<think>` block that it drops once more messages follow.
   */
  #piece(assistant: ChatMessage, extra: ChatMessage[], options: PieceOptions): string {
    const head: ChatMessage[] = [{ role: "user", content: "Q" }, assistant];
    const alone = this.renderChat(head);
    const full = this.renderChat([...head, ...extra], {
      addGenerationPrompt: true,
      enableThinking: options.enableThinking,
    });
    // In `alone`, between the body and the final end-of-turn token: e.g. `}\n</tool_call>`.
    const bodyEnd = alone.indexOf(SENTINEL) + SENTINEL.length;
    const close = alone.slice(bodyEnd, alone.lastIndexOf(this.eosToken));
    const at = full.indexOf(SENTINEL) + SENTINEL.length;
    if (bodyEnd < SENTINEL.length || at < SENTINEL.length || !full.startsWith(close, at)) {
      throw this.#unstable("appended turns");
    }
    const piece = full.slice(at + close.length);
    if (!piece.startsWith(this.eosToken)) throw this.#unstable("appended turns");
    return options.includeTurnEnd === false ? piece.slice(this.eosToken.length) : piece;
  }

  /** Encodes a piece that starts with the end-of-turn token, dropping it unless `includeTurnEnd`. */
  #pieceTokens(text: string, options: PieceOptions): number[] {
    // The piece starts at a special token, so encoding it alone gives the same ids as in context.
    const ids = this.encode(text);
    if (ids[0] !== this.eosTokenId) throw this.#unstable("appended turns");
    return options.includeTurnEnd === false ? ids.slice(1) : ids;
  }

  #unstable(what: string): Error {
    return new UserError(`chat template of ${this.info.dir}`, {
      why:
        `${what} could not be derived: the template does not render earlier turns the same way once more follow`,
      fix: "use the model's original Qwen3 chat template",
    });
  }
}
