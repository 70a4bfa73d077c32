/**
 * MCP tools in a rollout (docs/mcp.md), against the published servers installed from npm:
 * `@modelcontextprotocol/server-filesystem` over stdio inside bubblewrap, rooted in a temporary
 * directory, and `@modelcontextprotocol/server-everything`. A scripted test double plays the model (a
 * tiny random model never writes a tool call) on a tiny model's real tokenizer and chat template: the
 * tool specs in the prompt equal the servers' own `tools/list` (asked over raw JSON-RPC, not through our
 * client), calls reach the servers and their results come back as tool responses with their statuses,
 * a server killed mid-rollout stops the stage with one line, and the example config's server works.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { Config } from "../../lib/config/schema.ts";
import type { Task } from "../../lib/data/task.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { openSession, rollout } from "../../lib/pipeline/mod.ts";
import type { RolloutEpisode } from "../../mod.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { runToolCalls } from "../../lib/rollout/dispatch.ts";
import { Limiter } from "../../lib/rollout/limiter.ts";
import { parseToolCalls } from "../../lib/rollout/tool_calls.ts";
import { loadTools } from "../../lib/tools/registry.ts";
import { command, ROOT } from "../helpers/commands.ts";
import {
  childPids,
  EVERYTHING,
  everythingServer,
  FILESYSTEM,
  filesystemServer,
  mcpConfig,
  mcpTest,
  NODE_MODULES,
  packageBin,
  promptToolSpecs,
  rawToolsList,
  tempRoot,
} from "../helpers/mcp.ts";
import { ScriptedPolicy } from "../helpers/scripted_policy.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const TASK: Task = { id: "t0", source: "arithmetic", prompt: "Use the tools.", answer: "0" };

function toolCall(name: string, args: Record<string, unknown>): string {
  return `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
}

/** Runs `groupSize` episodes of TASK with the scripted policy; the session's servers are stopped after. */
async function scriptedRollout(
  config: Config,
  script: (prompt: string, turn: number) => string,
  groupSize = 1,
  whileOpen?: () => void,
): Promise<RolloutEpisode[]> {
  const tokenizer = await loadTokenizer(await makeTinyModel());
  const policy = new ScriptedPolicy(tokenizer, (prompt, turn) => script(tokenizer.decode([...prompt]), turn));
  const settings = { ...config, rollout: { ...config.rollout, group_size: groupSize } };
  const session = openSession(settings, "test", { open: { policy, tokenizer }, showProgress: false });
  try {
    const { episodes } = await rollout(session, [TASK], { step: 0 });
    whileOpen?.();
    return episodes;
  } finally {
    await session.close();
  }
}

mcpTest("the prompt offers every MCP tool with exactly the schema of the server's tools/list", async () => {
  const root = await tempRoot("mcp-specs-");
  const files = await filesystemServer(root);
  const everything = await everythingServer({ sandbox: "none", read_only: [], name_prefix: "ev_" });
  let prompt = "";
  await scriptedRollout(await mcpConfig([files, everything]), (p) => {
    prompt = p;
    return "Final answer: 0";
  });
  const specs = promptToolSpecs(prompt);
  const expected = [
    ...(await rawToolsList(files.args)).map((tool) => ({ prefix: "", tool })),
    ...(await rawToolsList(everything.args)).map((tool) => ({ prefix: "ev_", tool })),
  ];
  assert.ok(expected.length > 20, "both servers list their tools");
  assert.deepEqual(specs.map((s) => s.function.name), [
    "calculator",
    ...expected.map(({ prefix, tool }) => prefix + tool.name),
  ]);
  for (const { prefix, tool } of expected) {
    const spec = specs.find((s) => s.function.name === prefix + tool.name)!;
    assert.deepEqual(spec, {
      type: "function",
      function: { name: prefix + tool.name, description: tool.description, parameters: tool.inputSchema },
    });
  }
  await Deno.remove(root, { recursive: true });
});

mcpTest("scripted calls reach the servers and come back as tool responses with their statuses", async () => {
  const root = await tempRoot("mcp-calls-");
  const note = join(root, "note.txt");
  const servers = [await filesystemServer(root), await everythingServer({ name_prefix: "ev_" })];
  const config = await mcpConfig(servers, [
    ["rollout.tools.max_calls_per_turn", "8"],
    ["rollout.tools.max_output_chars", "100"],
  ]);
  const [episode] = await scriptedRollout(config, (_, turn) => {
    if (turn === 1) {
      return [
        toolCall("write_file", { path: note, content: "from the model" }),
        toolCall("ev_echo", { message: "hi" }),
        toolCall("ev_get-tiny-image", {}),
        toolCall("read_text_file", { path: "/etc/hostname" }),
        toolCall("read_text_file", { file: note }),
        toolCall("ev_echo", { message: "x".repeat(500) }),
      ].join("\n");
    }
    return turn === 2 ? toolCall("read_text_file", { path: note }) : "Final answer: 0";
  });
  assert.equal(await Deno.readTextFile(note), "from the model", "the write reached the server in its jail");
  const calls = episode.toolCalls.map((c) => [c.name, c.status]);
  assert.deepEqual(calls, [
    ["write_file", "ok"],
    ["ev_echo", "ok"],
    ["ev_get-tiny-image", "ok"],
    ["read_text_file", "tool_error"], // outside the server's root
    ["read_text_file", "invalid_arguments"], // checked against the server's schema, never sent
    ["ev_echo", "output_truncated"],
    ["read_text_file", "ok"],
  ]);
  const out = episode.toolCalls.map((c) => c.output);
  assert.equal(out[1], "Echo: hi");
  assert.match(out[2], /^Here's the image you requested:\n\[image: image\/png, \d+ bytes\]/);
  assert.match(out[3], /Access denied - path outside allowed directories/);
  assert.match(out[4], /^Error: invalid arguments for read_text_file: .*required property 'path'/);
  assert.equal(out[6], "from the model");
  assert.equal(episode.status, "tool_error");
  // The results are what the model read: the tool messages and the tokens of the trajectory.
  const toolMessages = episode.messages.filter((m) => m.role === "tool").map((m) => m.content);
  assert.deepEqual(toolMessages, out);
  const tokenizer = await loadTokenizer(await makeTinyModel());
  assert.ok(tokenizer.decode(episode.tokens).includes("<tool_response>\nEcho: hi\n</tool_response>"));
  await Deno.remove(root, { recursive: true });
});

// What the stage does when a stdio MCP server dies (lib/tools/mcp/connection.ts), and why this test
// failed under load (issue 28). A server is an infrastructure fault whenever it dies: the stage stops with
// one line naming it (exit 1, no rollouts file); only a call the server itself refuses is the model's data.
// - Before the first call, or between calls: the next call finds it gone. Three signs can come first: the
//   write of the request fails (its stdin has no reader), its stdout ends, or its exit status arrives.
//   The stage used to count only the last two: when the failed write came first, and the exit had not yet
//   been seen (a 0 ms look, lost under load), the call was a `tool_error`, the episode went on, and the
//   stage exited 0. A failed write now closes the connection too, so every order ends the same way.
// - During a call: its stdout ends, the SDK rejects the pending request, and the exit is awaited (2 s).
// - Alive but unreachable (stdin closed or stdout ended): it is killed, and named as such.
// Here the kill happens before turn 2, after turn 1's call has come back, and the helper waits until the
// jail is gone; whichever sign the stage sees first, the outcome is the same, so load cannot change it.
// tests/tools/mcp_units_test.ts covers each point with the fixture server, the failed write without a race.
mcpTest("a filesystem server killed mid-rollout stops the stage with one line naming it", async () => {
  const root = await tempRoot("mcp-kill-");
  const dir = await Deno.makeTempDir({ prefix: "mcp-kill-out-" });
  const configFile = join(dir, "config.yaml");
  const server = await filesystemServer(root);
  const generation = "  generation:\n    max_total_tokens: 32768\n";
  const tools = `  tools:\n    mcp: ${JSON.stringify([server])}\n`;
  await Deno.writeTextFile(configFile, `rollout:\n${generation}${tools}`);
  const out = join(dir, "rollouts.arrow");
  const result = await command("tests/helpers/mcp_stage.ts", ["--config", configFile, "--out", out], {
    env: {
      MCP_STAGE_TOOL: "list_directory",
      MCP_STAGE_ARGS: JSON.stringify({ path: root }),
      MCP_STAGE_KILL: root,
    },
  });
  const lines = result.stderr.split("\n").filter((l) => l.trim() !== "");
  assert.equal(result.code, 1, result.stderr);
  assert.equal(lines.length, 1, result.stderr);
  assert.match(
    lines[0],
    /^rollout: infrastructure fault: mcp server "files": it exited during the rollout \(killed by SIGKILL\)/,
  );
  assert.ok(!/\bat \S+:\d+:\d+/.test(result.stderr), "no stack trace");
  await assert.rejects(Deno.stat(out), Deno.errors.NotFound);
  await Deno.remove(dir, { recursive: true });
  await Deno.remove(root, { recursive: true });
});

mcpTest("per_episode: true gives each episode its own server, stopped when the episode ends", async () => {
  const bin = await packageBin(EVERYTHING);
  const toggle = (_: string, turn: number) =>
    turn === 1 ? toolCall("toggle-simulated-logging", {}) : "Final answer: 0";
  const outputs = (episodes: RolloutEpisode[]) =>
    episodes.map((e) => e.toolCalls[0].output.split(" ")[0]).sort();
  let running: number[] = [];
  const own = await scriptedRollout(
    await mcpConfig([await everythingServer({ sandbox: "none", read_only: [], per_episode: true })]),
    toggle,
    2,
    () => running = childPids(bin),
  );
  assert.deepEqual(outputs(own), ["Started", "Started"], "each episode toggled a fresh server");
  assert.deepEqual(running, [], "no per-episode server outlives its episode");
  const shared = await scriptedRollout(
    await mcpConfig([await everythingServer({ sandbox: "none", read_only: [] })]),
    toggle,
    2,
    () => running = childPids(bin),
  );
  assert.deepEqual(outputs(shared), ["Started", "Stopped"], "both episodes toggled one server");
  assert.equal(running.length, 1, "the shared server runs until the session closes");
  assert.deepEqual(childPids(bin), [], "session.close() stopped it");
});

mcpTest("a call past timeout_s is a timeout, and the server goes on answering", async () => {
  const config = await mcpConfig([await everythingServer()], [["rollout.tools.timeout_s", "0.5"]]);
  const [episode] = await scriptedRollout(config, (_, turn) => {
    if (turn === 1) return toolCall("trigger-long-running-operation", { duration: 30, steps: 3 });
    return turn === 2 ? toolCall("echo", { message: "still here" }) : "Final answer: 0";
  });
  assert.deepEqual(episode.toolCalls.map((c) => c.status), ["timeout", "ok"]);
  assert.equal(episode.toolCalls[1].output, "Echo: still here");
});

mcpTest(
  "inside bubblewrap a server sees a clean environment and only the declared paths, as declared",
  async () => {
    const config = await mcpConfig([await everythingServer({ env: { GREETING: "hello" } })]);
    const [episode] = await scriptedRollout(
      config,
      (_, turn) => turn === 1 ? toolCall("get-env", {}) : "Final answer: 0",
    );
    const env = JSON.parse(episode.toolCalls[0].output);
    // PWD is the jail shell's own (the working directory's path, as outside).
    assert.deepEqual(Object.keys(env).sort(), ["GREETING", "HOME", "LANG", "PATH", "PWD"]);
    assert.deepEqual([env.GREETING, env.HOME, env.PWD], ["hello", "/home/sandbox", Deno.cwd()]);
    // A root that exists on the host but is not declared does not exist in the jail: the server cannot start.
    const root = await tempRoot("mcp-undeclared-");
    const undeclared = await filesystemServer(root, { read_write: [] });
    const tokenizer = await loadTokenizer(await makeTinyModel());
    const session = openSession(await mcpConfig([undeclared]), "test", {
      open: { tokenizer },
      showProgress: false,
    });
    await assert.rejects(
      session.tools(),
      (e: Error) =>
        e.name === "McpServerError" && !e.message.includes("\n") &&
        /^mcp server "files": it did not start: .*\(exit code 1\); its stderr ends: .*Cannot access directory/
          .test(e.message),
    );
    await session.close();
    // A root declared read_only is read, never written.
    await Deno.writeTextFile(join(root, "kept.txt"), "kept");
    const readOnly = await filesystemServer(root, { read_only: [NODE_MODULES, root], read_write: [] });
    const [episode2] = await scriptedRollout(await mcpConfig([readOnly]), (_, turn) => {
      if (turn > 1) return "Final answer: 0";
      return [
        toolCall("read_text_file", { path: join(root, "kept.txt") }),
        toolCall("write_file", { path: join(root, "new.txt"), content: "x" }),
      ].join("\n");
    });
    assert.deepEqual(episode2.toolCalls.map((c) => [c.status, c.output]), [
      ["ok", "kept"],
      ["tool_error", `EROFS: read-only file system, open '${join(root, "new.txt")}'`],
    ]);
    assert.deepEqual([...Deno.readDirSync(root)].map((e) => e.name), ["kept.txt"]);
    await Deno.remove(root, { recursive: true });
  },
);

mcpTest(
  "examples/mcp_filesystem.yaml's server reads examples/mcp_files, and offers no tool that writes",
  async () => {
    const { config } = await loadConfig({ file: join(ROOT, "examples/mcp_filesystem.yaml") });
    const tools = await loadTools(config.rollout.tools, { baseDir: ROOT });
    try {
      assert.deepEqual([...tools.keys()], config.rollout.tools.mcp[0].tools);
      const text = [
        // The server resolves relative paths against its root, as the example's tasks name them.
        toolCall("read_text_file", { path: "inventory.txt" }),
        toolCall("list_directory", { path: "orders" }),
        toolCall("write_file", { path: "x.txt", content: "x" }),
      ].join("\n");
      const records = await runToolCalls(parseToolCalls(text), tools, {
        task: TASK,
        turn: 1,
        maxCallsPerTurn: 4,
        callsLeft: 4,
        timeoutMs: 5000,
        maxOutputChars: 2000,
        limiter: new Limiter(4),
      });
      assert.deepEqual(records.map((r) => r.status), ["ok", "ok", "unknown_tool"], JSON.stringify(records));
      assert.match(records[0].output, /^plums: 23 crates$/m);
      assert.equal(records[1].output, "[FILE] monday.txt\n[FILE] tuesday.txt");
    } finally {
      await tools.close();
    }
  },
);

mcpTest(
  "inside bubblewrap the running Deno can be a server's interpreter (the package from node_modules)",
  async () => {
    const root = await tempRoot("mcp-deno-");
    await Deno.writeTextFile(join(root, "a.txt"), "read by a server on Deno");
    const version = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json"))).imports[FILESYSTEM];
    const server = {
      name: "files",
      command: Deno.execPath(),
      args: ["run", "--cached-only", "--allow-read", "--allow-write", "--allow-env", version, root],
      env: { DENO_DIR: "/home/sandbox/.deno" },
      read_only: ["deno.json", "deno.lock", "node_modules"].map((p) => join(ROOT, p)),
      read_write: [root],
    };
    const [episode] = await scriptedRollout(await mcpConfig([server]), (_, turn) => {
      return turn === 1 ? toolCall("read_text_file", { path: join(root, "a.txt") }) : "Final answer: 0";
    });
    assert.deepEqual(episode.toolCalls.map((c) => [c.status, c.output]), [[
      "ok",
      "read by a server on Deno",
    ]]);
    await Deno.remove(root, { recursive: true });
  },
);
