/**
 * An independent float64 Qwen3 causal LM in plain TypeScript, written from Hugging Face
 * transformers' `modeling_qwen3.py`; it shares no code with `lib/` and is the yardstick the ONNX
 * engine is tested against.
 *
 * Dimension legend:
 *   T    tokens in the sequence          V    vocab_size
 *   H    hidden_size                     I    intermediate_size
 *   nH   num_attention_heads             nKV  num_key_value_heads
 *   D    head_dim                        r    LoRA rank
 *
 * Per layer: `x += o_proj(attn(rope(q_norm(q_proj(n))), rope(k_norm(k_proj(n))), v_proj(n)))` with
 * `n = input_layernorm(x)`, then `x += down(silu(gate(m)) · up(m))` with `m = post_attention_layernorm(x)`.
 * q_norm / k_norm are RMSNorms over D applied per head before RoPE; no biases anywhere. After the
 * layers: `model.norm`, then the head (`lm_head`, or `embed_tokens` when tied).
 *
 * Known deviation from transformers: RoPE angles are computed in float64, where transformers rounds
 * `inv_freq` and `position · inv_freq` to float32 (an angle difference of ~1e-7 · position).
 *
 * @module
 */

import { causalAttention } from "./attention.ts";
import { headLogits, targetLogprobs } from "./head.ts";
import { type LayerWeights, loadWeights, type ModelWeights } from "./load.ts";
import { add, argmax, logSoftmax, rmsNorm, ropeInPlace, ropeInvFreq, swiglu } from "./ops.ts";
import type { LoraSpec, Qwen3Config, WeightSource } from "./types.ts";

export type { LoraPair, LoraSpec, Qwen3Config, RefTensor, WeightSource } from "./types.ts";

/** A float64 Qwen3 causal LM; construct once, then ask for logits, log-probs or greedy tokens. */
export class Qwen3Reference {
  readonly config: Qwen3Config;
  readonly #w: ModelWeights;
  readonly #invFreq: Float64Array; // [D/2]

  /** Reads and shape-checks all weights (HF names); `lora` is applied unmerged, PEFT-style. */
  constructor(config: Qwen3Config, weights: WeightSource, lora?: LoraSpec) {
    this.config = config;
    this.#w = loadWeights(config, weights, lora);
    this.#invFreq = ropeInvFreq(config.head_dim, config.rope_theta);
  }

  /** Hidden states after the final norm, `[T, H]` flat; `positions` default to 0..T-1. */
  hidden(seq: number[], positions?: number[]): Float64Array {
    const pos = positions ?? seq.map((_, t) => t);
    if (pos.length !== seq.length) {
      throw new Error(`positions has ${pos.length} entries for ${seq.length} tokens: give one per token.`);
    }
    const { hidden_size: H, rms_norm_eps: eps } = this.config;
    let x = this.#embed(seq); // [T, H]
    for (const layer of this.#w.layers) x = this.#layer(x, layer, pos); // [T, H]
    return rmsNorm(x, seq.length, H, this.#w.norm, eps); // [T, H]
  }

  /** Logits at every position: `[T]` arrays of `[V]`. Allocates T·V float64; prefer `logprobs`. */
  logits(seq: number[], positions?: number[]): Float64Array[] {
    const { hidden_size: H, vocab_size: V } = this.config;
    const h = this.hidden(seq, positions); // [T, H]
    const rows = seq.map((_, t) => t);
    const z = headLogits(h, rows, this.#w.head, H, V); // [T, V]
    return rows.map((t) => z.slice(t * V, (t + 1) * V)); // T × [V]
  }

  /**
   * Per-token log-probs `[T]`: entry 0 is NaN, entry t is
   * `log_softmax(logits[t-1] / temperature)[seq[t]]`. Holds no `[T, V]` array.
   */
  logprobs(seq: number[], temperature = 1): Float64Array {
    checkTemperature(temperature);
    const { hidden_size: H, vocab_size: V } = this.config;
    const h = this.hidden(seq); // [T, H]
    const rows = seq.slice(1).map((_, t) => t);
    const lp = targetLogprobs(h, rows, seq.slice(1), this.#w.head, { H, V, temperature }); // [T-1]
    const out = new Float64Array(seq.length).fill(NaN); // [T]
    out.set(lp, 1);
    return out;
  }

  /** The full next-token distribution after `seq`: `log_softmax(logits[T-1] / temperature)`, `[V]`. */
  nextLogprobsAll(seq: number[], temperature = 1): Float64Array {
    checkTemperature(temperature);
    const z = this.#lastLogits(seq); // [V]
    return logSoftmax(z, 0, z.length, temperature); // [V]
  }

  /** `n` new tokens, each the argmax of the next-token logits (ties → lowest id); the prompt is not included. */
  greedy(prompt: number[], n: number): number[] {
    const seq = [...prompt];
    for (let i = 0; i < n; i++) seq.push(argmax(this.#lastLogits(seq)));
    return seq.slice(prompt.length);
  }

  #lastLogits(seq: number[]): Float64Array {
    if (seq.length === 0) throw new Error("The sequence is empty: give at least one token.");
    const { hidden_size: H, vocab_size: V } = this.config;
    const h = this.hidden(seq); // [T, H]
    return headLogits(h, [seq.length - 1], this.#w.head, H, V); // [V]
  }

  #embed(seq: number[]): Float64Array {
    const { hidden_size: H, vocab_size: V } = this.config;
    const x = new Float64Array(seq.length * H); // [T, H]
    seq.forEach((id, t) => {
      if (!Number.isInteger(id) || id < 0 || id >= V) {
        throw new Error(`Token ${id} at position ${t} is outside the vocabulary 0..${V - 1}.`);
      }
      for (let i = 0; i < H; i++) x[t * H + i] = this.#w.embed[id * H + i];
    });
    return x;
  }

  #layer(x: Float64Array, w: LayerWeights, pos: number[]): Float64Array {
    const T = pos.length;
    const { hidden_size: H, rms_norm_eps: eps, head_dim: D } = this.config;
    const nH = this.config.num_attention_heads, nKV = this.config.num_key_value_heads;
    const n = rmsNorm(x, T, H, w.inputNorm, eps); // [T, H]
    const q = rmsNorm(w.q.apply(n, T), T * nH, D, w.qNorm, eps); // [T, nH*D]
    const k = rmsNorm(w.k.apply(n, T), T * nKV, D, w.kNorm, eps); // [T, nKV*D]
    const v = w.v.apply(n, T); // [T, nKV*D]
    this.#rope(q, pos, nH); // [T, nH*D]
    this.#rope(k, pos, nKV); // [T, nKV*D]
    const a = causalAttention(q, k, v, { T, nH, nKV, D }); // [T, nH*D]
    const x1 = add(x, w.o.apply(a, T)); // [T, H]
    const m = rmsNorm(x1, T, H, w.postNorm, eps); // [T, H]
    const g = swiglu(w.gate.apply(m, T), w.up.apply(m, T)); // [T, I]
    return add(x1, w.down.apply(g, T)); // [T, H]
  }

  #rope(x: Float64Array, pos: number[], heads: number) {
    const D = this.config.head_dim;
    for (let t = 0; t < pos.length; t++) {
      for (let h = 0; h < heads; h++) ropeInPlace(x, (t * heads + h) * D, D, pos[t], this.#invFreq); // [D]
    }
  }
}

function checkTemperature(temperature: number) {
  if (!(temperature > 0) || !Number.isFinite(temperature)) {
    throw new Error(`temperature ${temperature} is not a positive finite number: use e.g. 1 or 0.7.`);
  }
}
