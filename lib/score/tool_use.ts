/**
 * `tool_use`: 1 when the episode made at least one tool call that ran without error (status `ok`).
 * Statuses: `used`, `failed` (calls were made, none succeeded), `no_call`.
 *
 * @module
 */

import { toolSucceeded } from "./tool_status.ts";
import type { RewardFn } from "./types.ts";

export const toolUse: RewardFn = {
  name: "tool_use",
  doc: "1 when a tool call ran without error",
  score({ toolCalls }) {
    if (toolCalls.length === 0) return { value: 0, status: "no_call" };
    const ok = toolCalls.some((c) => toolSucceeded(c.status));
    return { value: ok ? 1 : 0, status: ok ? "used" : "failed" };
  },
};
