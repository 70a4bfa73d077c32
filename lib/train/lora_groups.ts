/**
 * The train graph's adapter in the groups layout (lib/model/graph/lora_inputs.ts): per layer and group
 * of Linears that read one input (q/k/v, o, gate/up, down), one stacked A `[Σr, in]` and one block-diagonal
 * B `[Σout, Σr]` with the scale folded in, so a group's adapter is two Gemms forward and four backward
 * whatever its members (with pairs: three kernels forward and five backward per Linear, issue 29).
 *
 * The gradients still come out per PEFT tensor, equal to the pairs layout's: member i's rows of dA_g are
 * dA_i; member i's diagonal block of dB_g is the gradient of `scale · B_i`, so dB_i is scale times it
 * (the off-diagonal blocks, the gradients of the zeros, are dropped).
 *
 * @module
 */

import type { Qwen3Config } from "../model/hf_config.ts";
import { type LoraShape, type LoraWeights, peftKey, type QwenLinear } from "../model/lora.ts";
import { linearShape, QWEN3_LINEAR_GROUPS } from "../model/model_dir.ts";
import { type LoraGroupSpec, loraGroupSpecs } from "../model/graph/lora_inputs.ts";

/** Where one targeted member sits in its group's tensors. */
interface MemberPlace {
  layer: number;
  linear: QwenLinear;
  /** First output row (of B_g) and first A row (B_g column) of the member. */
  row: number;
  col: number;
  outDim: number;
}

/** The targeted members of a group spec with their places, in group order. */
function membersOf(cfg: Qwen3Config, spec: LoraGroupSpec, r: number): MemberPlace[] {
  const places: MemberPlace[] = [];
  let row = 0;
  let col = 0;
  for (const linear of QWEN3_LINEAR_GROUPS[spec.index]) {
    const outDim = linearShape(cfg, linear)[0];
    if (spec.targeted.includes(linear)) {
      places.push({ layer: spec.layer, linear, row, col, outDim });
      col += r;
    }
    row += outDim;
  }
  return places;
}

/**
 * The per-PEFT-key gradients of an adapter from its group gradients (`grads` by group input name, as
 * the train graph outputs them), written into `into` (one array per PEFT key, allocated by the caller).
 */
export function ungroupGradients(
  cfg: Qwen3Config,
  shape: LoraShape,
  grads: ReadonlyMap<string, Float32Array | Float16Array>,
  scale: number,
  into: LoraWeights,
): void {
  const r = shape.r;
  for (const spec of loraGroupSpecs(cfg, shape)) {
    const [rank, inDim] = spec.a.dims;
    const dA = grads.get(spec.a.name)!; // [Σr, in]
    const dB = grads.get(spec.b.name)!; // [Σout, Σr]
    for (const m of membersOf(cfg, spec, r)) {
      into.get(peftKey(m.layer, m.linear, "A"))!.set(dA.subarray(m.col * inDim, (m.col + r) * inDim));
      const b = into.get(peftKey(m.layer, m.linear, "B"))!; // [out, r]
      for (let i = 0; i < m.outDim; i++) {
        for (let j = 0; j < r; j++) b[i * r + j] = scale * dB[(m.row + i) * rank + m.col + j];
      }
    }
  }
}
