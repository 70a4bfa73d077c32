/**
 * What an `If` costs a run on the CPU provider: a graph of six Ifs, each running one Add in its taken
 * branch, against the same six Adds with no If, and three Ifs nested in three; microseconds per run,
 * alternating the graphs so that the machine's drift falls on each alike. The main inference graph's decode
 * step runs six Ifs (lib/model/graph/head.ts), which on a GPU provider cost host copies and waits each;
 * this measures whether they cost anything on the CPU (docs/ENGINE_FACTS.md, "The decode session").
 *
 *   deno run -A bench/if_cost.ts [--runs 3000] [--rounds 3]
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { GraphBuilder, type Value } from "../lib/onnx/builder.ts";
import { OPS } from "../lib/onnx/ops.ts";
import { OrtSession } from "../lib/ort/session.ts";
import { OrtTensor } from "../lib/ort/value.ts";
import { median } from "./measure.ts";

const SHAPE = [8, 512];
const STAGES = 6;

type Form = "no If" | "6 Ifs" | "3 in 3 Ifs";

/** `STAGES` doublings of x, each behind an If on `c` as `form` says. */
function graph(form: Form): Uint8Array {
  const g = new GraphBuilder(form);
  const c = g.input("c", "bool", []);
  let x = g.input("x", "float32", SHAPE);
  const twice = (b: GraphBuilder, v: Value) => OPS.Add.emit(b, v, v);
  const behindIf = (b: GraphBuilder, v: Value, inner: (b: GraphBuilder) => Value, name: string) =>
    OPS.If.emit(b, c, (t) => [inner(t)], (e) => [OPS.Identity.emit(e, v)], name)[0];
  for (let i = 0; i < STAGES; i++) {
    const v = x;
    if (form === "no If") x = twice(g, v);
    else if (form === "6 Ifs") x = behindIf(g, v, (t) => twice(t, v), `if${i}`);
    else if (i % 2 === 0) {
      x = behindIf(g, v, (t) => behindIf(t, v, (n) => twice(n, v), `inner${i}`), `outer${i}`);
    } else x = twice(g, v); // the nested form has STAGES / 2 Ifs, each holding one; the rest run bare
  }
  g.output(x, "y", SHAPE);
  return g.toModel();
}

const { values } = parseArgs(Deno.args, { string: ["runs", "rounds"] });
const runs = Number(values.runs ?? 3000);
const rounds = Number(values.rounds ?? 3);
const forms: Form[] = ["no If", "6 Ifs", "3 in 3 Ifs"];
const sessions = forms.map((f) => OrtSession.create(graph(f), { providers: ["cpu"] }));
const inputs = {
  c: new OrtTensor("bool", new Uint8Array([1]), []),
  x: new OrtTensor("float32", new Float32Array(SHAPE[0] * SHAPE[1]), SHAPE),
};
const outputs = { y: new OrtTensor("float32", new Float32Array(SHAPE[0] * SHAPE[1]), SHAPE) };
const perRun: number[][] = forms.map(() => []);
for (const s of sessions) for (let i = 0; i < 200; i++) s.run(inputs, outputs); // warm-up
for (let r = 0; r < rounds; r++) {
  sessions.forEach((s, f) => {
    const t0 = performance.now();
    for (let i = 0; i < runs; i++) s.run(inputs, outputs);
    perRun[f].push(((performance.now() - t0) / runs) * 1000);
  });
}
forms.forEach((f, i) =>
  console.log(`${f}: ${median(perRun[i]).toFixed(1)} µs per run (median of ${rounds})`)
);
sessions.forEach((s) => s.release());
