/**
 * `deno task serve` as a process: a missing `serve.adapter_root` is refused in one line before the
 * model loads, unless it is the default `runs` (a fresh clone), which is never created and makes
 * adapter loads answer 404 until it exists; SIGTERM stops the server as Ctrl-C does, and through
 * `deno task serve` (which forwards it) leaves no process behind and the port free.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { assertRefused, command, denoRunArgs } from "../helpers/commands.ts";
import { fileURLToPath } from "node:url";
import { writeStageFile } from "../../lib/arrow/mod.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The serve stage in `cwd` with a config naming `model`, on any free port. */
function serveStage(cwd: string, config: string, extra: string[] = []) {
  return new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs("stages/serve.ts"), "--config", config, "--port", "0", ...extra],
    cwd,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  });
}

/** `deno task serve` with the repository's deno.json, on `config` and any free port (arguments to deno). */
function serveTaskArgs(config: string): string[] {
  return ["task", "--quiet", "--config", join(ROOT, "deno.json"), "serve", "--config", config, "--port", "0"];
}

async function configFor(dir: string, model: string): Promise<string> {
  const config = join(dir, "config.yaml");
  await Deno.writeTextFile(config, `model:\n  path: ${model}\nserve:\n  max_model_len: 64\n`);
  return config;
}

Deno.test("serve: a missing adapter_root is refused in one line, exit 2, before the model loads", async () => {
  const { dir, model } = await unloadableModel();
  const missing = join(dir, "no-such-root");
  const out = await serveStage(dir, await configFor(dir, model), [`--serve.adapter_root=${missing}`])
    .output();
  const stderr = new TextDecoder().decode(out.stderr).trim();
  assert.equal(out.code, 2, stderr);
  assert.equal(stderr.split("\n").length, 1, stderr);
  assert.match(stderr, /serve\.adapter_root/);
  assert.match(stderr, /does not exist/);
  assert.equal(await exists(missing), false, "nothing was created");
});

Deno.test("serve: the default adapter_root may be missing (not created; loads get 404); SIGTERM stops it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "serve-stage-" });
  const child = serveStage(dir, await configFor(dir, await makeTinyModel())).spawn();
  const stderr = new Response(child.stderr).text();
  try {
    const url = await listeningUrl(child.stdout);
    const answer = await fetch(`${url}/v1/load_lora_adapter`, {
      method: "POST",
      body: JSON.stringify({ lora_name: "x", lora_path: "some-run/adapters/step-0001" }),
    });
    const body = await answer.json();
    assert.equal(answer.status, 404);
    assert.match(body.error.message, /not below serve\.adapter_root: \S*runs does not exist yet/);
    assert.equal(await exists(join(dir, "runs")), false, "runs/ was not created");
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* it already exited: the assertions below say how */ }
  }
  const status = await child.status;
  assert.equal(status.code, 143);
  assert.match(await stderr, /serve: stopped by SIGTERM/);
});

Deno.test("deno task serve stopped by SIGTERM exits 143, leaves no process behind and frees its port", async () => {
  const dir = await Deno.makeTempDir({ prefix: "serve-task-" });
  const config = await configFor(dir, await makeTinyModel());
  const child = new Deno.Command(Deno.execPath(), {
    args: serveTaskArgs(config),
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const stderr = new Response(child.stderr).text();
  let port = 0;
  try {
    port = Number(new URL(await listeningUrl(child.stdout)).port);
    assert.equal(processesNaming(config).length, 2, "deno task and the stage it runs");
  } finally {
    try {
      child.kill("SIGTERM"); // to `deno task` only: it forwards the signal to the stage
    } catch { /* it already exited: the assertions below say how */ }
  }
  const status = await child.status;
  assert.equal(status.code, 143, await stderr);
  assert.match(await stderr, /serve: stopped by SIGTERM/);
  assert.deepEqual(processesNaming(config), [], "no process left running the config");
  Deno.listen({ hostname: "127.0.0.1", port }).close(); // throws AddrInUse if a server still holds it
});

Deno.test("deno task serve started through npx: npx and its sh -c killed (they forward nothing), the server stops and frees its port", async () => {
  const dir = await Deno.makeTempDir({ prefix: "serve-npx-" });
  const config = await configFor(dir, await makeTinyModel());
  // npx's chain as measured: `npm exec` → `sh -c 'deno task …'` → deno task → the stage. A SIGTERM to npx
  // ends npx and the sh alone; here the sh stands for both (`; :` keeps it the deno task's parent).
  const sh = new Deno.Command("sh", {
    args: ["-c", `"$@"; :`, "sh", Deno.execPath(), ...serveTaskArgs(config)],
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", npm_command: "exec", npm_config_user_agent: "npm/11.19.1 node/v20.20.2 linux x64" },
  }).spawn();
  const stderr = new Response(sh.stderr).text();
  let port = 0;
  try {
    port = Number(new URL(await listeningUrl(sh.stdout)).port);
    assert.equal(processesNaming(config).length, 3, "sh, deno task and the stage");
  } finally {
    sh.kill("SIGKILL");
  }
  await sh.status;
  let left = processesNaming(config);
  for (let i = 0; i < 100 && left.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    left = processesNaming(config);
  }
  for (const line of left) Deno.kill(Number(line.split(":")[0]), "SIGKILL"); // leave nothing after a failure
  assert.deepEqual(left, [], "no process left running the config");
  assert.match(
    await stderr,
    /serve: stopped: the npx above its deno task is gone \(deno task's parent, pid \d+, exited\)/,
  );
  Deno.listen({ hostname: "127.0.0.1", port }).close(); // throws AddrInUse if a server still holds it
});

/** The command lines of the running processes whose arguments contain `text` (from /proc). */
function processesNaming(text: string): string[] {
  const found: string[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const line = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).replaceAll("\0", " ");
      if (line.includes(text)) found.push(`${entry.name}: ${line}`);
    } catch { /* it exited while listed */ }
  }
  return found;
}

/** Reads the stage's stdout until its "serve: ... at http://..." line; returns the URL. */
async function listeningUrl(stdout: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  for await (const chunk of stdout.pipeThrough(new TextDecoderStream())) {
    text += chunk;
    const m = /at (http:\/\/\S+)/.exec(text);
    if (m) return m[1];
  }
  throw new Error(`serve exited before listening: ${text}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * A temporary directory holding `model/`, a model directory that passes the argument checks but cannot load
 * (its config.json alone): a run stops there, after the checks before the model loads.
 */
async function unloadableModel(): Promise<{ dir: string; model: string }> {
  const dir = await Deno.makeTempDir({ prefix: "serve-stage-" });
  const model = join(dir, "model");
  await Deno.mkdir(model);
  await Deno.copyFile(join(await makeTinyModel(), "config.json"), join(model, "config.json"));
  return { dir, model };
}

Deno.test("serve --record: an existing DIR/rollouts.arrow not of ours is refused in one line, exit 2, left as it was", async () => {
  const { dir, model } = await unloadableModel();
  const record = join(dir, "rec");
  await Deno.mkdir(record);
  await Deno.writeTextFile(join(record, "rollouts.arrow"), "not ours");
  const out = await serveStage(dir, await configFor(dir, model), ["--record", record]).output();
  const stderr = new TextDecoder().decode(out.stderr).trim();
  assert.equal(out.code, 2, stderr);
  assert.equal(stderr.split("\n").length, 1, stderr);
  assert.match(stderr, /--record \S*rollouts\.arrow: it already exists/);
  assert.equal(await Deno.readTextFile(join(record, "rollouts.arrow")), "not ours", "nothing was changed");
});

Deno.test("serve --record --overwrite: an existing DIR/rollouts.arrow of ours passes the output check", async () => {
  const { dir, model } = await unloadableModel();
  const record = join(dir, "rec");
  await Deno.mkdir(record);
  await writeStageFile(join(record, "rollouts.arrow"), "rollouts", sampleColumns("rollouts", 2), SAMPLE_META);
  const config = await configFor(dir, model);
  const refused = await serveStage(dir, config, ["--record", record]).output();
  assert.match(
    new TextDecoder().decode(refused.stderr),
    /already holds a rollouts stage file.*pass --overwrite/,
  );
  const out = await serveStage(dir, config, ["--record", record, "--overwrite"]).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.notEqual(out.code, 0, "the model cannot load");
  assert.doesNotMatch(stderr, /already holds/, "--overwrite reached the output check");
});

Deno.test("serve: a busy port is refused in one line, exit 2, before the model loads", async () => {
  const { dir, model } = await unloadableModel();
  const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (busy.addr as Deno.NetAddr).port;
    const r = await command("stages/serve.ts", [
      "--config",
      await configFor(dir, model),
      "--port",
      String(port),
    ], {
      cwd: dir,
    });
    assertRefused(r, new RegExp(`serve\\.port \\(got ${port}\\): 127\\.0\\.0\\.1:${port} is already in use`));
  } finally {
    busy.close();
  }
});

Deno.test("serve: the API key is read from DENO_RL_API_KEY, and --help says to prefer it to the flag", async () => {
  const { dir, model } = await unloadableModel();
  const busy = Deno.listen({ hostname: "0.0.0.0", port: 0 });
  try {
    const port = String((busy.addr as Deno.NetAddr).port);
    const args = ["--config", await configFor(dir, model), "--host", "0.0.0.0", "--port", port];
    assertRefused(
      await command("stages/serve.ts", args, { cwd: dir }),
      /serve\.host .*must require an API key/,
    );
    const keyed = await command("stages/serve.ts", args, { cwd: dir, env: { DENO_RL_API_KEY: "k" } });
    assertRefused(
      keyed,
      /serve\.port .*already in use/,
      "the key from the environment passed the host check",
    );
  } finally {
    busy.close();
  }
  const help = await command("stages/serve.ts", ["--help"]);
  assert.match(
    help.stdout.replace(/\s+/g, " "),
    /set the DENO_RL_API_KEY environment variable: a flag .* visible .* in ps/,
  );
});
