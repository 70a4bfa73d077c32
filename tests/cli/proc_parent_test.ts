/**
 * Another process's parent pid, read from /proc through libc (lib/cli/proc_parent.ts): what lets a stage
 * started through npx stop when npx is killed (tests/stages/serve_test.ts runs that end to end).
 */

import assert from "node:assert/strict";
import { parentFromStat, parentPidOf } from "../../lib/cli/proc_parent.ts";

Deno.test("parentFromStat reads the ppid after the last ')', whatever the command name holds", () => {
  assert.equal(parentFromStat("4242 (deno) S 4241 4242 4200 0 -1"), 4241);
  assert.equal(parentFromStat("7 (a) b (c) R 1 7 7 0 -1"), 1, "a name with spaces and parentheses");
  assert.equal(parentFromStat("garbage"), null);
});

Deno.test("parentPidOf: this process's parent is Deno.ppid, a child's parent is this process, a gone pid is null", async () => {
  assert.equal(parentPidOf(Deno.pid), Deno.ppid);
  const child = new Deno.Command("sleep", { args: ["30"] }).spawn();
  try {
    assert.equal(parentPidOf(child.pid), Deno.pid);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
  assert.equal(parentPidOf(child.pid), null, "reaped: no /proc entry");
});
