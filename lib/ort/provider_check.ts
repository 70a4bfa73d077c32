/**
 * Whether an execution provider starts on this machine, and if not, what is missing and how to get it:
 * one line, before any model loads (lib/cli checks `model.ep` with it; `deno task doctor` lists every
 * provider with it).
 *
 * - webgpu ships inside onnxruntime-node's library; it starts where Dawn finds a Vulkan driver it accepts
 *   (a GPU's, or Mesa's lavapipe from Mesa 23 on: Debian 12's own Mesa 22.3 is refused;
 *   docs/ENGINE_FACTS.md).
 * - cuda needs two libraries that onnxruntime-node's install script downloads (our machines deny that
 *   script), and the CUDA 12 and cuDNN 9 libraries they load.
 *
 * The check opens a one-node session on the provider: the same call the engine makes, so a provider that
 * passes here starts there.
 *
 * @module
 */

import { dirname } from "node:path";
import { UserError } from "../errors.ts";
import { GraphBuilder } from "../onnx/builder.ts";
import { libraryPath } from "./library.ts";
import type { ExecutionProvider } from "./providers.ts";
import { OrtSession } from "./session.ts";
import { withStderrSilenced } from "./quiet.ts";
import { type VulkanDevice, vulkanDevices } from "./vulkan_devices.ts";
import { progress } from "../progress.ts";

/** Files onnxruntime-node's install script puts next to `libonnxruntime.so.1` for the CUDA provider. */
export const CUDA_PROVIDER_FILES = ["libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"];

/**
 * The CUDA libraries onnxruntime 1.30's CUDA provider loads (CUDA 12, cuDNN 9; from onnxruntime's
 * install requirements, not verified here: no CUDA machine was available), plus the driver.
 */
export const CUDA_RUNTIME_LIBRARIES = [
  "libcuda.so.1",
  "libcudart.so.12",
  "libcublas.so.12",
  "libcublasLt.so.12",
  "libcufft.so.11",
  "libcurand.so.10",
  "libcudnn.so.9",
];

/** The command that installs the CUDA provider's libraries, once deno.json allows the script (README, "GPU"). */
export const CUDA_INSTALL_COMMAND =
  "ONNXRUNTIME_NODE_INSTALL=cuda12 deno install --allow-scripts=npm:onnxruntime-node";

/** What a provider needs that this machine lacks: null when it starts. */
export interface ProviderProblem {
  /** What is wrong, in a few words (onnxruntime's own message where it gave one). */
  why: string;
  fix: string;
}

const verdicts = new Map<ExecutionProvider, ProviderProblem | null>();

/** Null when `ep` starts here; otherwise why not and the fix (checked once per process). */
export function providerProblem(ep: ExecutionProvider): ProviderProblem | null {
  if (ep === "cpu") return null;
  if (!verdicts.has(ep)) verdicts.set(ep, ep === "cuda" ? cudaProblem() : sessionProblem(ep));
  return verdicts.get(ep)!;
}

/** Throws the one-line UserError for `model.ep` when the provider does not start. */
export function checkProviderStarts(ep: ExecutionProvider, key = "model.ep"): void {
  const problem = providerProblem(ep);
  if (problem) throw new UserError(`${key} ${ep}`, problem);
}

/** The UserError for a provider that failed while opening a session (after `checkProviderStarts`). */
export function providerFailure(ep: ExecutionProvider, message: string): UserError {
  return new UserError(`model.ep ${ep}`, {
    why: `onnxruntime could not start a session on it (no silent fallback to CPU): ${firstLine(message)}`,
    fix: fixFor(ep),
  });
}

function fixFor(ep: ExecutionProvider): string {
  return ep === "cuda"
    ? "with CUDA 12 and cuDNN 9 installed, allow onnxruntime-node's install script in deno.json (allowScripts) " +
      `and run \`${CUDA_INSTALL_COMMAND}\` (README, "GPU"), or use model.ep=cpu`
    : "install a Vulkan driver Dawn accepts (a GPU's, or Mesa 23+ lavapipe: apt-get install -t bookworm-backports " +
      "mesa-vulkan-drivers libvulkan1 on Debian 12), or use model.ep=cpu; `deno task doctor` shows this machine";
}

/** The CUDA provider's files and libraries, then a session. */
function cudaProblem(): ProviderProblem | null {
  const dir = dirname(libraryPath());
  const absent = CUDA_PROVIDER_FILES.filter((f) => !exists(`${dir}/${f}`));
  if (absent.length > 0) {
    return {
      why: `onnxruntime-node's CUDA provider is not installed (no ${
        absent.join(", ")
      } beside libonnxruntime.so.1)`,
      fix: fixFor("cuda"),
    };
  }
  const missing = missingLibraries(CUDA_RUNTIME_LIBRARIES);
  if (missing.length > 0) {
    return {
      why: `the CUDA libraries its provider loads are missing: ${missing.join(", ")}`,
      fix: "install the NVIDIA driver, CUDA 12 and cuDNN 9 and put their libraries on LD_LIBRARY_PATH, " +
        "or use model.ep=cpu",
    };
  }
  return sessionProblem("cuda");
}

/** The libraries of `names` that the dynamic loader cannot open. */
export function missingLibraries(names: readonly string[]): string[] {
  return names.filter((name) => {
    try {
      Deno.dlopen(name, {}).close();
      return false;
    } catch {
      return true;
    }
  });
}

/** Opens a one-node session on `ep`. */
function sessionProblem(ep: ExecutionProvider): ProviderProblem | null {
  const g = new GraphBuilder("provider_check");
  const x = g.input("x", "float32", [4]);
  g.output(g.op("Add", [x, x]), "y");
  try {
    // A provider that fails prints its native warnings (the Vulkan loader's, Dawn's) on stderr: silenced,
    // so that the one-line error is all the user sees.
    withStderrSilenced(() =>
      OrtSession.create(g.toModel(), { providers: [ep], logSeverity: "fatal" }).release()
    );
    return null;
  } catch (e) {
    return { why: `onnxruntime could not start it: ${ortReason((e as Error).message)}`, fix: fixFor(ep) };
  }
}

function exists(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** The first line of an error message, without onnxruntime's source-file prefixes, at most 300 characters. */
function firstLine(message: string): string {
  return message.split("\n")[0].replace(/\/onnxruntime_src\/\S+ /g, "").slice(0, 300);
}

/** onnxruntime's reason, without the call and the failed assertion before it ("… was false. <reason>"). */
function ortReason(message: string): string {
  const line = message.split("\n")[0];
  const after = line.lastIndexOf(" was false. ");
  return firstLine(after >= 0 ? line.slice(after + " was false. ".length) : line);
}

/**
 * The line to print when `ep` is webgpu and every Vulkan device is a CPU one (Mesa's lavapipe): the
 * provider then runs on the CPU, and its timings mean nothing for a GPU. Null otherwise, or where the
 * devices are unknown (`devices` null: no Vulkan loader or no FFI permission).
 */
export function softwareDeviceNote(ep: ExecutionProvider, devices: VulkanDevice[] | null): string | null {
  if (ep !== "webgpu" || devices === null || devices.length === 0 || !devices.every((d) => d.cpu)) {
    return null;
  }
  const names = [...new Set(devices.map((d) => d.name))].join(", ");
  return `note: model.ep webgpu runs on a software Vulkan device (${names}), on the CPU: ` +
    "GPU timings of this run mean nothing; use a machine with a GPU's Vulkan driver for them";
}

let softwareDeviceNoted = false;

/** Prints `softwareDeviceNote` for this machine once per process (stderr, through `progress`). */
export function noteSoftwareDevice(ep: ExecutionProvider): void {
  if (ep !== "webgpu" || softwareDeviceNoted) return;
  softwareDeviceNoted = true;
  const note = softwareDeviceNote(ep, vulkanDevices());
  if (note !== null) progress.log(note);
}
