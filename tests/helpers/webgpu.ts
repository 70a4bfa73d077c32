/**
 * Tests that need onnxruntime's WebGPU provider: they run where it starts (a GPU, or Mesa's lavapipe as
 * CI installs it) and are skipped elsewhere with the reason printed once. Where the environment sets
 * DENO_RL_REQUIRE_WEBGPU=1 (.ci/run does) a provider that cannot start fails every such test instead, so
 * CI cannot pass by skipping them.
 *
 * @module
 */

import { providerProblem } from "../../lib/ort/provider_check.ts";

const problem = providerProblem("webgpu");
const required = Deno.env.get("DENO_RL_REQUIRE_WEBGPU") === "1";
let told = false;

/** `Deno.test` for a WebGPU test (see the module comment). */
export function webgpuTest(name: string, fn: () => Promise<void>): void {
  if (problem && !required && !told) {
    told = true;
    console.log(
      `WebGPU tests skipped: the provider does not start here (${problem.why}). Fix: ${problem.fix}`,
    );
  }
  Deno.test({
    name,
    ignore: problem !== null && !required,
    sanitizeResources: false, // a WebGPU context lives for the process (onnxruntime keeps it)
    fn: async () => {
      if (problem) {
        throw new Error(
          `DENO_RL_REQUIRE_WEBGPU=1 but WebGPU cannot start: ${problem.why}. Fix: ${problem.fix}`,
        );
      }
      await fn();
    },
  });
}
