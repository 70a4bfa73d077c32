/** What adapter_config.json names as the base model: something peft can find on another machine. */

import assert from "node:assert/strict";
import { join } from "node:path";
import { peftBaseModelName } from "../../lib/model/peft.ts";

Deno.test("base_model_name_or_path: the Hub id from config.json or a Hugging Face cache path, else a relative path", async () => {
  const root = await Deno.makeTempDir({ prefix: "peft-base-" });
  const named = join(root, "named");
  await Deno.mkdir(named);
  await Deno.writeTextFile(join(named, "config.json"), JSON.stringify({ _name_or_path: "Qwen/Qwen3-0.6B" }));
  assert.equal(await peftBaseModelName(named), "Qwen/Qwen3-0.6B");
  const snapshot = join(root, "hub", "models--Qwen--Qwen3-1.7B", "snapshots", "abc123");
  await Deno.mkdir(snapshot, { recursive: true });
  await Deno.writeTextFile(join(snapshot, "config.json"), JSON.stringify({ _name_or_path: "/home/me/qwen" }));
  assert.equal(await peftBaseModelName(snapshot), "Qwen/Qwen3-1.7B", "a local _name_or_path is no Hub id");
  const plain = join(root, "model");
  await Deno.mkdir(plain);
  await Deno.writeTextFile(join(plain, "config.json"), "{}");
  const written = await peftBaseModelName(plain);
  assert.ok(!written.startsWith("/"), written);
  assert.equal(join(Deno.cwd(), written), plain);
  assert.equal(
    await peftBaseModelName("runs/demo/model"),
    "runs/demo/model",
    "a relative path stays as given",
  );
});
