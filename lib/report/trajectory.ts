/**
 * One episode rendered as a chat: the prompt's messages, then the generated part split into the
 * policy's turns (every sampled token its own span, its background coloured by its advantage: blue
 * for positive, red for negative, white for 0) and what the environment added (tool responses), then
 * the tool calls with their status and output. Without a tokenizer the episode's `messages` text is
 * shown instead, each assistant message tinted by the episode's mean advantage.
 *
 * All text is escaped: it is model output.
 *
 * @module
 */

import type { StageFile } from "../arrow/stage_file.ts";
import { escapeHtml, formatNumber } from "./html.ts";

/** Token ids to text. */
export type Decode = (ids: number[]) => string;

/** One tool call as the rollouts' `tool_calls` column holds it. */
interface ToolCallRow {
  turn: number;
  name: string;
  arguments: string;
  status: string;
  output: string;
  ms: number;
}

interface Message {
  role: string;
  content?: string;
  /** An assistant turn's reasoning, split off its content (lib/rollout/assistant_message.ts). */
  reasoning_content?: string;
  tool_calls?: unknown[];
}

/** Beyond this many generated tokens, pieces are decoded one token at a time (linear, not quadratic). */
const INCREMENTAL_LIMIT = 2048;

/** The HTML of episode `row` of `file` (a rollouts, scored or batch file), under `title`. */
export function renderTrajectory(file: StageFile, row: number, title: string, decode: Decode | null): string {
  const advantages = file.has("advantages") ? file.listAt<Float32Array>("advantages", row) : null;
  const facts = [
    `episode ${file.column("episode_id")[row]}`,
    file.has("reward") ? `reward ${formatNumber(Number(file.column("reward")[row]))}` : "",
    file.has("correct") ? (file.column("correct")[row] ? "correct" : "wrong") : "",
    `status ${file.column("status")[row]}`,
    `${file.column("num_turns")[row]} turns`,
  ].filter(Boolean);
  const prompt = parseMessages(file, "prompt_messages", row);
  const body = decode
    ? generatedFromTokens(file, row, advantages, decode)
    : generatedFromMessages(parseMessages(file, "messages", row).slice(prompt.length), advantages);
  return `<section class="trajectory" data-episode="${escapeHtml(file.column("episode_id")[row])}">` +
    `<h3>${escapeHtml(title)}</h3><p class="facts">${escapeHtml(facts.join(" · "))}</p>` +
    `<div class="chat">${prompt.map((m) => messageBubble(m)).join("")}${body}</div>` +
    toolCallTable(file.column("tool_calls")[row] as ToolCallRow[]) + `</section>`;
}

/** Background colour of a token with advantage `a`, relative to the largest magnitude `scale`. */
export function advantageColor(a: number, scale: number): string {
  if (!Number.isFinite(a) || a === 0 || scale <= 0) return "transparent";
  const x = Math.min(1, Math.abs(a) / scale);
  const alpha = (0.12 + 0.58 * x).toFixed(2);
  return a > 0 ? `rgba(0, 90, 255, ${alpha})` : `rgba(220, 40, 40, ${alpha})`;
}

function parseMessages(file: StageFile, column: string, row: number): Message[] {
  try {
    const value = JSON.parse(String(file.column(column)[row]));
    return Array.isArray(value) ? value : [];
  } catch {
    return [];
  }
}

function messageBubble(m: Message, background = "transparent"): string {
  const calls = m.tool_calls?.length
    ? `<pre class="calls">${escapeHtml(JSON.stringify(m.tool_calls))}</pre>`
    : "";
  const reasoning = m.reasoning_content
    ? `<pre class="reasoning">${escapeHtml(m.reasoning_content)}</pre>`
    : "";
  return `<div class="msg ${roleClass(m.role)}"><div class="role">${escapeHtml(m.role)}</div>${reasoning}` +
    `<pre style="background:${background}">${escapeHtml(m.content ?? "")}</pre>${calls}</div>`;
}

function roleClass(role: string): string {
  return ["system", "user", "assistant", "tool"].includes(role) ? role : "other";
}

/** The tokens after the prompt, in runs of policy tokens and environment tokens. */
function generatedFromTokens(file: StageFile, row: number, adv: Float32Array | null, decode: Decode): string {
  const tokens = Array.from(file.listAt<Int32Array>("tokens", row));
  const sampled = file.listAt<Uint8Array>("sampled", row);
  const start = Number(file.column("prompt_len")[row]);
  const scale = adv ? Math.max(0, ...Array.from(adv, Math.abs)) : 0;
  const out: string[] = [];
  let t = start;
  while (t < tokens.length) {
    const policy = sampled[t] === 1;
    let end = t;
    while (end < tokens.length && (sampled[end] === 1) === policy) end++;
    const ids = tokens.slice(t, end);
    if (policy) {
      const spans = pieces(ids, decode).map((text, k) => tokenSpan(text, ids[k], adv?.[t + k], scale));
      out.push(`<div class="msg assistant"><div class="role">policy</div><pre>${spans.join("")}</pre></div>`);
    } else {
      out.push(
        `<div class="msg env"><div class="role">environment</div><pre>${escapeHtml(decode(ids))}</pre></div>`,
      );
    }
    t = end;
  }
  return out.join("");
}

/**
 * The text each token adds. Decoding prefixes keeps multi-byte characters split across tokens whole
 * (the character appears on the token that completes it); very long runs decode token by token.
 */
function pieces(ids: number[], decode: Decode): string[] {
  if (ids.length > INCREMENTAL_LIMIT) return ids.map((id) => decode([id]));
  const out: string[] = [];
  let before = "";
  for (let k = 0; k < ids.length; k++) {
    const text = decode(ids.slice(0, k + 1));
    const stable = text.startsWith(before) && !text.endsWith("\ufffd");
    out.push(stable ? text.slice(before.length) : "");
    if (stable) before = text;
  }
  return out;
}

function tokenSpan(text: string, id: number, a: number | undefined, scale: number): string {
  const label = a === undefined ? `token ${id}` : `token ${id} · advantage ${formatNumber(a)}`;
  const color = a === undefined ? "transparent" : advantageColor(a, scale);
  return `<span class="tok" style="background:${color}" title="${escapeHtml(label)}">${
    escapeHtml(text)
  }</span>`;
}

/** Without a tokenizer: the generated messages, assistant ones tinted by the mean sampled advantage. */
function generatedFromMessages(messages: Message[], adv: Float32Array | null): string {
  const nonzero = adv ? Array.from(adv).filter((a) => a !== 0) : [];
  const mean = nonzero.length ? nonzero.reduce((x, y) => x + y, 0) / nonzero.length : 0;
  const note =
    `<p class="note">tokenizer not found: showing the messages text, each assistant turn tinted by ` +
    `the episode's mean advantage (${formatNumber(mean)})</p>`;
  const tint = advantageColor(mean, Math.abs(mean));
  const bubbles = messages.map((m) => messageBubble(m, m.role === "assistant" ? tint : undefined));
  return note + bubbles.join("");
}

function toolCallTable(calls: ToolCallRow[]): string {
  if (!calls?.length) return `<p class="note">no tool calls</p>`;
  const rows = calls.map((c) =>
    `<tr><td>${escapeHtml(c.turn)}</td><td>${escapeHtml(c.name)}</td><td><code>${escapeHtml(c.arguments)}` +
    `</code></td><td><span class="status ${c.status === "ok" ? "ok" : "bad"}">${
      escapeHtml(c.status)
    }</span>` +
    `</td><td><pre>${escapeHtml(c.output)}</pre></td><td>${formatNumber(Number(c.ms))}</td></tr>`
  );
  return `<table class="tool-calls"><thead><tr><th>turn</th><th>tool</th><th>arguments</th><th>status</th>` +
    `<th>output</th><th>ms</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}
