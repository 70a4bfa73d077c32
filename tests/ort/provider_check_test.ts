/**
 * What a user sees where a GPU provider cannot start, before any model loads: `deno task doctor` on a
 * machine without a Vulkan driver (simulated by pointing the Vulkan loader at no driver) and a command
 * with `model.ep: cuda` without onnxruntime's CUDA libraries each give one line naming what is missing
 * and the fix, exit 2 and write nothing; float16 compute on the CPU provider is refused the same way.
 * These run on every machine (they need no GPU).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { providerProblem, softwareDeviceNote } from "../../lib/ort/provider_check.ts";
import { vulkanDevices } from "../../lib/ort/vulkan_devices.ts";
import { assertRefused, command, exists, stage } from "../helpers/commands.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

/** The Vulkan loader finds no driver (older loaders read the first name, newer ones the second). */
const NO_VULKAN = { VK_ICD_FILENAMES: "/nonexistent/icd.json", VK_DRIVER_FILES: "/nonexistent/icd.json" };

Deno.test("deno task doctor without a Vulkan driver: webgpu is listed as missing with its fix; asked for, one line and exit 2", async () => {
  const listed = await command("scripts/doctor.ts", [], { env: NO_VULKAN });
  assert.equal(listed.code, 0, `model.ep cpu needs no GPU: ${listed.stderr}`);
  const webgpu = listed.stdout.split("\n").find((l) => l.startsWith("webgpu"));
  assert.match(
    webgpu ?? "",
    /MISSING .*WebGPU adapter.*disables model\.ep=webgpu.*Fix: install a Vulkan driver/,
  );
  assert.match(listed.stdout, /^onnxruntime +ok +1\.30\.0/m);
  assert.match(listed.stdout, /^cpu +ok/m);

  const asked = await command("scripts/doctor.ts", ["--model.ep=webgpu"], { env: NO_VULKAN });
  assertRefused(
    asked,
    /^error: config key model\.ep webgpu: .*WebGPU adapter.*Fix: install a Vulkan driver.*model\.ep=cpu/,
  );
});

// Reported as ignored (not as passed) where the CUDA provider starts: there is nothing to refuse there.
Deno.test(
  "model.ep cuda without onnxruntime's CUDA libraries: one line naming them and the fix, exit 2, nothing written",
  {
    ignore: providerProblem("cuda") === null,
  },
  async (t) => {
    const dir = await Deno.makeTempDir({ prefix: "cuda-refused-" });
    const out = join(dir, "rollouts.arrow");
    const fix = /Fix: .*allowScripts.*ONNXRUNTIME_NODE_INSTALL=cuda12 .*model\.ep=cpu/;
    await t.step("a stage refuses before the model loads", async () => {
      const r = await stage("rollout", [
        `--model.path=${await makeTinyModel()}`,
        "--model.ep=cuda",
        "--out",
        out,
      ]);
      assertRefused(
        r,
        new RegExp(`^error: model\\.ep cuda: .*(libonnxruntime_providers_cuda\\.so|libcud).*${fix.source}`),
      );
      assert.equal(await exists(out), false, "nothing written");
    });
    await t.step("deno task doctor names the same", async () => {
      const r = await command("scripts/doctor.ts", ["--model.ep=cuda"]);
      assertRefused(r, new RegExp(`^error: config key model\\.ep cuda: .*${fix.source}`));
    });
    await Deno.remove(dir, { recursive: true });
  },
);

Deno.test("model.compute_dtype float16 on the cpu provider is refused in one line", async () => {
  const r = await stage("rollout", ["--model.compute_dtype=float16", "--out", "/nonexistent/never.arrow"]);
  assertRefused(
    r,
    /^error: config key model\.compute_dtype \(got "?float16"?\): .*GPU provider.*Fix: set model\.ep to webgpu or cuda/,
  );
});

Deno.test("softwareDeviceNote: webgpu on only CPU Vulkan devices (lavapipe) is noted; a GPU, an unknown list or another provider is not", () => {
  const lavapipe = { name: "llvmpipe (LLVM 15.0.6, 256 bits)", cpu: true };
  const gpu = { name: "NVIDIA H100 80GB HBM3", cpu: false };
  assert.match(
    softwareDeviceNote("webgpu", [lavapipe]) ?? "",
    /^note: model\.ep webgpu runs on a software Vulkan device \(llvmpipe \(LLVM 15\.0\.6, 256 bits\)\), on the CPU: GPU timings of this run mean nothing/,
  );
  assert.equal(softwareDeviceNote("webgpu", [gpu, lavapipe]), null, "Dawn prefers the GPU");
  assert.equal(softwareDeviceNote("webgpu", null), null);
  assert.equal(softwareDeviceNote("webgpu", []), null);
  assert.equal(softwareDeviceNote("cpu", [lavapipe]), null);
});

const devices = vulkanDevices();
Deno.test(
  "a stage with model.ep webgpu on lavapipe says once, on stderr, that the device is software",
  { ignore: devices === null || devices.length === 0 || !devices.every((d) => d.cpu) },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "webgpu-software-" });
    // The note comes after the provider check and before the output check, which refuses /dev/null.
    const r = await stage("rollout", ["--model.ep=webgpu", "--out", "/dev/null"], { cwd: dir });
    assert.equal(r.code, 2, r.stderr);
    const notes = r.stderr.split("\n").filter((l) => l.includes("software Vulkan device"));
    assert.equal(notes.length, 1, r.stderr);
    assert.match(notes[0], /^note: model\.ep webgpu runs on a software Vulkan device \(llvmpipe/);
    assert.match(r.stderr, /--out \/dev\/null: it is a character device/);
  },
);
