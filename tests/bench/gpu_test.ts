/**
 * `deno task bench --only gpu` at a tiny size on WebGPU (CI: lavapipe): the command a GPU machine runs,
 * end to end — our train step and decode on the provider, the PyTorch peer (reported unavailable where
 * torch, transformers or peft are missing), the device's name, and the Markdown tables. Runs where WebGPU
 * starts, like tests/engine/webgpu_test.ts; its output goes to a temporary --out folder.
 */

import assert from "node:assert/strict";
import { command } from "../helpers/commands.ts";
import { webgpuTest } from "../helpers/webgpu.ts";

webgpuTest(
  "deno task bench --only gpu runs at a tiny size and reports train and decode beside the peer",
  async () => {
    const out = await Deno.makeTempDir({ prefix: "bench-gpu-" });
    const r = await command("bench/bench.ts", [
      "--only",
      "gpu",
      "--models",
      "tiny",
      "--out",
      out,
      "--bench.batches=[1,2]",
      "--bench.prompt_tokens=8",
      "--bench.decode_tokens=3",
      "--bench.repeats=1",
      "--bench.train_tokens=16",
    ], { timeoutMs: 600_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /### GPU, tiny: webgpu, float16, on \S/);
    const train = /^\| tiny \| 16 \| ([\d.]+) \| ([\d.]+) \|/m.exec(r.stdout);
    assert.ok(train && Number(train[2]) > 0, `train row with tokens/s:\n${r.stdout}`);
    for (const batch of [1, 2]) {
      const row = new RegExp(`^\\| ${batch} \\| ([\\d.]+) \\|`, "m").exec(r.stdout);
      assert.ok(row && Number(row[1]) > 0, `decode row for batch ${batch}`);
    }
    assert.match(r.stdout, /PyTorch: (torch \S+, transformers|unavailable \()/);
    const files = [...Deno.readDirSync(out)].map((e) => e.name);
    assert.ok(
      files.some((f) => /^results-.*\.md$/.test(f)) && files.includes("gpu-batch-tiny.json"),
      files.join(),
    );
    await Deno.remove(out, { recursive: true });
  },
);
