/**
 * `deno task doctor`: what this machine can run, on one screen — onnxruntime's version, each execution
 * provider (does a session start; on which adapter or device), bubblewrap and Chromium — and, for each
 * missing piece, what it disables and the fix. Then the configuration's own needs: the first one the
 * machine lacks (model.ep's provider, bubblewrap for a bwrap sandbox) is the command's one-line error,
 * exit 2. scripts/doctor.ts is the command line.
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import { openOrtLibrary, ORT_API_VERSION, ORT_VERSION } from "../ort/library.ts";
import { providerProblem } from "../ort/provider_check.ts";
import { EXECUTION_PROVIDERS, type ExecutionProvider } from "../ort/providers.ts";
import { DEFAULT_CHROMIUM } from "../report/chromium.ts";
import { findExecutable } from "../tools/sandbox_command.ts";

/** One line of the report. */
export interface DoctorLine {
  item: string;
  ok: boolean;
  /** What was found (ok), or why not (missing). */
  detail: string;
  /** Missing: what it disables, and the fix. */
  disables?: string;
  fix?: string;
}

/** What each provider is for. */
const PROVIDER_USE: Record<ExecutionProvider, string> = {
  cpu: "everything (the default)",
  webgpu: "model.ep=webgpu: rollouts, scoring and training on a GPU through Vulkan",
  cuda: "model.ep=cuda: rollouts, scoring and training on an NVIDIA GPU",
};

/** Every line of the report, in order. */
export async function doctorLines(): Promise<DoctorLine[]> {
  const lines: DoctorLine[] = [runtimeLine()];
  for (const ep of EXECUTION_PROVIDERS) lines.push(await providerLine(ep));
  lines.push(await bubblewrapLine(), await chromiumLine());
  return lines;
}

/** The report as text, one line per item. */
export function formatDoctor(lines: readonly DoctorLine[]): string {
  const width = Math.max(...lines.map((l) => l.item.length));
  return lines.map((l) => {
    const head = `${l.item.padEnd(width)}  ${l.ok ? "ok     " : "MISSING"}  `;
    if (l.ok) return head + l.detail;
    return `${head}${l.detail}; disables ${l.disables}. Fix: ${l.fix}`;
  }).join("\n");
}

/** The first thing `config` needs that the report lacks, as the command's one-line error (else null). */
export function unmetNeed(config: Config, lines: readonly DoctorLine[]): UserError | null {
  const line = (item: string) => lines.find((l) => l.item === item);
  const provider = line(config.model.ep);
  if (provider && !provider.ok) {
    return new UserError(`config key model.ep ${config.model.ep}`, {
      why: provider.detail,
      fix: provider.fix!,
    });
  }
  const bwrap = line("bubblewrap");
  if (bwrap && !bwrap.ok && needsBubblewrap(config)) {
    return new UserError("bubblewrap (rollout.tools.sandbox bwrap)", {
      why: `${bwrap.detail}, and this configuration runs model-written code or MCP servers in it`,
      fix: bwrap.fix!,
    });
  }
  return null;
}

function needsBubblewrap(config: Config): boolean {
  const { tools } = config.rollout;
  const runsCode = tools.enabled.includes("execute_code") || config.score.rewards.code_exec !== undefined;
  return (tools.sandbox === "bwrap" && runsCode) ||
    tools.mcp.some((s) => s.command !== null && s.sandbox === "bwrap");
}

function runtimeLine(): DoctorLine {
  try {
    const lib = openOrtLibrary();
    return {
      item: "onnxruntime",
      ok: true,
      detail: `${lib.version}, C API ${ORT_API_VERSION} (${lib.path})`,
    };
  } catch (e) {
    return {
      item: "onnxruntime",
      ok: false,
      detail: (e as Error).message,
      disables: "every command that loads a model",
      fix: `run \`deno install\` (deno.json pins onnxruntime-node ${ORT_VERSION})`,
    };
  }
}

async function providerLine(ep: ExecutionProvider): Promise<DoctorLine> {
  const problem = (() => {
    try {
      return providerProblem(ep);
    } catch (e) {
      return { why: (e as Error).message, fix: "see the onnxruntime line" };
    }
  })();
  if (problem) {
    return { item: ep, ok: false, detail: problem.why, disables: PROVIDER_USE[ep], fix: problem.fix };
  }
  return { item: ep, ok: true, detail: await deviceName(ep) };
}

/** The adapter or device a provider runs on, where this process can tell. */
async function deviceName(ep: ExecutionProvider): Promise<string> {
  if (ep === "cpu") return `${navigator.hardwareConcurrency} cores`;
  if (ep === "cuda") return nvidiaModels() ?? "an NVIDIA GPU";
  // The Vulkan adapter as Deno's own WebGPU sees it (onnxruntime's Dawn enumerates the same drivers).
  const adapter = await navigator.gpu?.requestAdapter().catch(() => null);
  const name = adapter?.info.description || adapter?.info.vendor || "a Vulkan adapter";
  return /llvmpipe|lavapipe|swiftshader/i.test(name)
    ? `${name} (a software Vulkan device: correct, slow)`
    : name;
}

/** GPU models from the NVIDIA driver's /proc files, e.g. "NVIDIA H100 80GB HBM3". */
function nvidiaModels(): string | null {
  try {
    const models: string[] = [];
    for (const gpu of Deno.readDirSync("/proc/driver/nvidia/gpus")) {
      const info = Deno.readTextFileSync(`/proc/driver/nvidia/gpus/${gpu.name}/information`);
      const model = /^Model:\s*(.+)$/m.exec(info)?.[1];
      if (model) models.push(model.trim());
    }
    return models.length > 0 ? models.join(", ") : null;
  } catch {
    return null;
  }
}

async function bubblewrapLine(): Promise<DoctorLine> {
  const path = await findExecutable("bwrap");
  if (path) return { item: "bubblewrap", ok: true, detail: `${await versionOf(path)} (${path})` };
  return {
    item: "bubblewrap",
    ok: false,
    detail: "bwrap is not installed or not on PATH",
    disables:
      "rollout.tools.sandbox=bwrap (execute_code, the code_exec reward) and MCP servers' bwrap sandbox",
    fix: "apt-get install bubblewrap",
  };
}

async function chromiumLine(): Promise<DoctorLine> {
  const path = (await findExecutable("chromium")) ??
    (await isFile(DEFAULT_CHROMIUM) ? DEFAULT_CHROMIUM : undefined);
  if (path) return { item: "chromium", ok: true, detail: `${await versionOf(path)} (${path})` };
  return {
    item: "chromium",
    ok: false,
    detail: "chromium is not installed",
    disables:
      "the report's PNG screenshot (scripts/screenshot.ts) and its browser test; the HTML report itself works",
    fix: "apt-get install chromium",
  };
}

/** The first line `program --version` prints (empty when it prints nothing or fails). */
async function versionOf(program: string): Promise<string> {
  try {
    const out = await new Deno.Command(program, { args: ["--version"], stdout: "piped", stderr: "null" })
      .output();
    return new TextDecoder().decode(out.stdout).split("\n")[0].trim() || "installed";
  } catch {
    return "installed";
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}
