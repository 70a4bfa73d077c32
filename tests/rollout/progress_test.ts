/**
 * Rollout progress (lib/rollout/progress.ts): while no episode finishes, a slow rollout still prints that it
 * is sampling (issue 32: a 0.6B rollout printed nothing for 7 minutes), and stops once closed.
 */

import assert from "node:assert/strict";
import { Progress } from "../../lib/progress.ts";
import { RolloutProgress } from "../../lib/rollout/progress.ts";

/** A progress reporter off a terminal whose lines land in `lines`. */
function captured(lines: string[]): Progress {
  return new Progress({
    write: (text) => lines.push(...text.split("\n").filter(Boolean)),
    isTerminal: false,
  });
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("a rollout with no finished episode says it is still sampling, and says nothing more once closed", async () => {
  const lines: string[] = [];
  const bar = new RolloutProgress(4, true, 20, captured(lines));
  try {
    await pause(2_200); // past the plain lines' 2 s interval, so the heartbeat's line may print
    assert.ok(
      lines.some((l) =>
        /^rollout 0\/4 still sampling after \d+ s \(no episode finished for \d+ s\)$/.test(l)
      ),
      lines.join("\n"),
    );
  } finally {
    bar.close();
  }
  const printed = lines.length;
  await pause(2_200);
  assert.equal(lines.length, printed, "no line after close");
});

Deno.test("a rollout that is not shown starts no heartbeat", async () => {
  const lines: string[] = [];
  new RolloutProgress(4, false, 5, captured(lines)); // no close: the test's timer check fails if it set one
  await pause(30);
  assert.deepEqual(lines, []);
});
