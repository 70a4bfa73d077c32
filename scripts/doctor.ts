/**
 * `deno task doctor`: which execution providers start on this machine (and on which adapter or device),
 * the onnxruntime version, bubblewrap and Chromium, with what each missing piece disables and its fix, on
 * one screen. Exits 2 with one line when the configuration needs something the machine lacks (model.ep's
 * provider, bubblewrap for a bwrap sandbox); lib/cli/doctor.ts has the checks.
 *
 *   deno task doctor
 *   deno task doctor --model.ep=webgpu
 *
 * @module
 */

import { runStageMain, type StageSpec } from "../lib/cli/cli.ts";
import { doctorLines, formatDoctor, unmetNeed } from "../lib/cli/doctor.ts";

export const DOCTOR: StageSpec = {
  name: "doctor",
  summary:
    "Reports what this machine can run: onnxruntime, each execution provider (cpu, webgpu, cuda) with " +
    "its adapter or device, bubblewrap and Chromium, and for each missing piece what it disables and the " +
    "fix. Exits 2 with one line when the configuration (model.ep, the tool sandbox) needs a missing piece.",
  examples: ["deno task doctor", "deno task doctor --model.ep=webgpu"],
  async run(args) {
    const lines = await doctorLines();
    console.log(formatDoctor(lines));
    const unmet = unmetNeed(args.config, lines);
    if (unmet) throw unmet;
  },
};

if (import.meta.main) await runStageMain(DOCTOR);
