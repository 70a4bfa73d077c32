#!/usr/bin/env python3
"""PyTorch peer for `deno task bench --only gpu`, on the same GPU in the same run (bench/gpu_bench.ts).

A Qwen3 built by transformers from the same model directory (config.json and safetensors), LoRA through
peft (r 16, alpha 32, all seven projections), on CUDA:

  train: one GRPO-style LoRA step on each batch gpu_bench.ts wrote (--batch FILE, repeated: one row per
         train size): forward, the clipped surrogate over the scored tokens (docs/DESIGN.md "The
         objective", on-policy so the ratio is 1), backward; no optimizer update. tok_per_s = real tokens
         / median seconds over --steps timed steps after one warm-up; tflops_4n = 4 × base params ×
         tokens / seconds, as gpu_bench.ts counts.
  decode: `generate` with sampling at temperature 1 from --batches prompts of --prompt random tokens,
         exactly --decode new tokens each (min_new_tokens = max_new_tokens), KV cache on; the prefill is
         timed apart (a max_new_tokens=1 call) and subtracted, as gpu_bench.ts excludes it.

Prints one JSON object: {impl, torch_version, transformers_version, peft_version, device, dtype, train:
[{tokens_per_step, seconds_per_step, tok_per_s, tflops_4n}, one per --batch], decode: [{batch,
decode_tok_per_s, decode_tflops_2n}]}, or {error} when torch, transformers, peft or a CUDA device is
missing (the bench then shows the peer as unavailable).

  python3 bench/peer_torch_gpu.py --model DIR --batch FILE [--batch FILE ...] [--dtype float16]
      [--batches 1,8,32,64] [--prompt 128] [--decode 64] [--steps 3] [--device cuda]
"""

import argparse
import json
import statistics
import sys
import time

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
EPS_CLIP = 0.2


def fail(message):
    print(json.dumps({"impl": "pytorch+transformers+peft", "error": message}))
    sys.exit(0)


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--batch", required=True, action="append", help="a train batch; repeat for more rows")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    p.add_argument("--batches", default="1,8,32,64")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--decode", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def timed(torch, device, fn):
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def load(args):
    try:
        import torch
        import transformers
        import peft
    except ImportError as e:
        fail(f"{e.name} is not installed")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        fail("no CUDA device")
    dtype = getattr(torch, args.dtype)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype).to(args.device)
    config = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS, bias="none")
    model = peft.get_peft_model(model, config)
    base_params = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    versions = {"torch_version": torch.__version__, "transformers_version": transformers.__version__,
                "peft_version": peft.__version__}
    return torch, model, base_params, versions


def train(torch, model, args, base_params, path):
    with open(path) as f:
        batch = json.load(f)
    rows = [torch.tensor(t) for t in batch["tokens"]]
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width)
    adv = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = torch.tensor(batch["loss_mask"][i], dtype=torch.float)
        adv[i, : len(r)] = torch.tensor(batch["advantages"][i], dtype=torch.float)
    ids, mask, adv = ids.to(args.device), mask.to(args.device), adv.to(args.device)
    tokens = sum(len(r) for r in rows)
    temperature = float(batch.get("temperature", 1.0))
    model.train()

    def step():
        logits = model(input_ids=ids).logits[:, :-1].float() / temperature  # [B, T-1, V]
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # [B, T-1]
        ratio = torch.exp(lp - lp.detach())  # on-policy: old = current
        a, m = adv[:, 1:], mask[:, 1:]
        pg = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - EPS_CLIP, 1 + EPS_CLIP) * a)
        loss = (pg * m).sum() / m.sum().clamp(min=1)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return loss.item()

    step()  # warm-up
    seconds = statistics.median(timed(torch, args.device, step)[0] for _ in range(args.steps))
    tflops = 4 * base_params * tokens / seconds / 1e12
    return {"tokens_per_step": tokens, "seconds_per_step": seconds, "tok_per_s": tokens / seconds,
            "tflops_4n": tflops}


def decode(torch, model, args, base_params):
    model.eval()
    vocab = model.config.vocab_size
    out = []
    for batch in [int(b) for b in args.batches.split(",")]:
        gen = torch.Generator().manual_seed(99)
        ids = torch.randint(0, min(vocab, 150000), (batch, args.prompt), generator=gen).to(args.device)
        attention = torch.ones_like(ids)

        def run(new):
            with torch.no_grad():
                return model.generate(input_ids=ids, attention_mask=attention, max_new_tokens=new,
                                      min_new_tokens=new, do_sample=True, temperature=1.0, top_k=0,
                                      top_p=1.0, use_cache=True, pad_token_id=0)

        run(args.decode)  # warm-up
        prefill = statistics.median(timed(torch, args.device, lambda: run(1))[0] for _ in range(args.steps))
        total = statistics.median(timed(torch, args.device, lambda: run(args.decode))[0] for _ in range(args.steps))
        tok_per_s = batch * (args.decode - 1) / max(total - prefill, 1e-9)
        out.append({"batch": batch, "decode_tok_per_s": tok_per_s,
                    "decode_tflops_2n": 2 * base_params * tok_per_s / 1e12})
    return out


def main():
    args = parse()
    torch, model, base_params, versions = load(args)
    device = args.device
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
    result = {"impl": "pytorch+transformers+peft", **versions, "device": name, "dtype": args.dtype,
              "params": base_params}
    result["train"] = [train(torch, model, args, base_params, path) for path in args.batch]
    result["decode"] = decode(torch, model, args, base_params)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
