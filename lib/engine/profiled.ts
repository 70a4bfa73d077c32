/**
 * `profiled(fn)`: runs `fn` with onnxruntime's profiling on for every session it opens (the
 * DENO_RL_ORT_PROFILE knob of session.ts, set to a temporary prefix) and returns what they wrote, one
 * trace per session, read by lib/ort/profile.ts. A session writes its profile when it closes, so `fn`
 * must close what it opens. Profiling slows runs: measure apart from the timed ones.
 *
 * @module
 */

import { join } from "node:path";
import { readTrace, type TraceEvent } from "../ort/profile.ts";

/** The environment knob lib/engine/session.ts reads when it opens a session. */
const PROFILE_ENV = "DENO_RL_ORT_PROFILE";

/** Runs `fn` with every session it opens profiled; returns their traces in the order the files sort. */
export async function profiled(fn: () => Promise<void>): Promise<TraceEvent[][]> {
  const dir = await Deno.makeTempDir({ prefix: "ort-profile-" });
  const before = Deno.env.get(PROFILE_ENV);
  Deno.env.set(PROFILE_ENV, join(dir, "profile"));
  try {
    await fn();
    const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    return await Promise.all(names.map((name) => readTrace(join(dir, name))));
  } finally {
    if (before === undefined) Deno.env.delete(PROFILE_ENV);
    else Deno.env.set(PROFILE_ENV, before);
    await Deno.remove(dir, { recursive: true });
  }
}
