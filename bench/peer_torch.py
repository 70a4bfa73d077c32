#!/usr/bin/python3
"""PyTorch peer for `deno task bench`: one GRPO + LoRA train step on a Qwen3 model, written from scratch.

Run with Debian's /usr/bin/python3 (python3-torch 1.13 + libopenblas0-pthread); see bench/README.md.

What it measures
  seconds_per_step: median over --steps timed steps (after one warm-up step) of forward + loss +
  backward only: no optimizer update (`--adamw` times an AdamW update separately), no data loading.
  gflops_4n: 4 × base params × tokens / seconds (the usual "6N" rule less the frozen-weight gradients;
  base params = every tensor in the checkpoint, a tied embedding counted once; tokens = unpadded).
  matmul_gflops_1024: a timed 1024³ float32 matmul at the same thread count, to show the BLAS in use.
Threads: --threads N sets OPENBLAS_NUM_THREADS / OMP_NUM_THREADS before torch loads (Debian's torch
calls OpenBLAS as a "generic" BLAS, which torch.set_num_threads does not reach) and defaults
OMP_WAIT_POLICY=PASSIVE (spinning OpenMP workers slow OpenBLAS on 2 cores; the env var overrides).

The model (Hugging Face Qwen3, no transformers package): embed → per layer
  x += o(attn(rope(q_norm(q(n))), rope(k_norm(k(n))), v(n))), n = input_layernorm(x)
  x += down(silu(gate(m)) · up(m)),                         m = post_attention_layernorm(x)
→ model.norm → head (lm_head, or embed_tokens when tied). LoRA (PEFT): W' = W + (alpha/r)·B·A on the
chosen projections; base weights frozen, only A and B are trained.

Loss: docs/DESIGN.md "The objective", token_mean, beta = 0, eps_low = eps_high = 0.2:
  lp = log_softmax(logits / temperature)[next token], r = exp(lp - old),
  pg = -min(r·A, clip(r, 1-eps, 1+eps)·A), L = Σ m·pg / Σ m.
Choices and deviations
  - Alignment as in rollouts.arrow: loss_mask[t], advantages[t], old_logprobs[t] belong to tokens[t],
    scored from the logits at t-1; token 0 cannot be scored (its mask must be 0).
  - Ragged rows are right-padded to the longest row and run as one batch. With right padding the
    causal mask alone is exact for every real token (a real token only sees earlier, real tokens);
    padded positions are never scored, but do cost body compute (tokens_per_step counts real tokens).
  - The head runs only on scored rows (m ≠ 0), in chunks of --chunk rows, as a custom autograd
    Function (HeadLogprobs): forward keeps h and one log-sum-exp per row; backward recomputes each
    chunk's logits and turns them into the gradient in place. No [tokens, vocab] tensor is kept for
    backward; the price is 3 head GEMMs per chunk instead of 2.
  - RoPE angles are computed in float64 then cast (transformers rounds them to float32 first).
  - --random-batch: tokens uniform over the vocab, mask 1 for t ≥ 1, one N(0,1) advantage per row,
    old_logprobs = the current policy's log-probs (a no-grad pass before timing: ratio 1, on-policy).

Dimension legend: B rows, T padded length, H hidden, nH / nKV query / key-value heads, D head dim,
I intermediate, V vocab, r LoRA rank, N scored tokens, C chunk rows.
"""

import argparse
import json
import math
import os
import resource
import statistics
import struct
import sys
import time

TARGETS = {  # short name → module path inside a layer
    "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
    "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj",
}
EPS_CLIP = 0.2


def build_parser():
    p = argparse.ArgumentParser(description="PyTorch GRPO + LoRA train-step peer (see header).")
    p.add_argument("--model", required=True, help="Hugging Face model directory (config.json + safetensors)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--batch", help="JSON {tokens, loss_mask, advantages, old_logprobs, temperature}")
    src.add_argument("--random-batch", help="B,T: make a batch of B rows of T tokens")
    p.add_argument("--seed", type=int, default=0, help="seed for --random-batch and LoRA init")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=32.0)
    p.add_argument("--targets", default="q,k,v,o,gate,up,down")
    p.add_argument("--chunk", type=int, default=128, help="head rows per chunk: bounds the [chunk, V] logits")
    p.add_argument("--adapter", help="PEFT adapter dir: initial A/B, r, alpha, targets (overrides flags)")
    p.add_argument("--dump-grads", help="write the first step's LoRA gradients here (safetensors, F32)")
    p.add_argument("--float64", action="store_true", help="compute in float64 (for gradient checks)")
    p.add_argument("--adamw", action="store_true", help="also time an AdamW update, separately")
    return p


def pin_threads(argv):
    """Sets BLAS/OpenMP thread counts before numpy/torch load: Debian's torch uses OpenBLAS as a
    'generic' BLAS, so torch.set_num_threads does not reach it; OpenBLAS reads its env once at load."""
    args, _ = build_parser().parse_known_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    # OpenMP (elementwise ops) and OpenBLAS (GEMMs) keep separate thread pools; spinning OpenMP
    # workers steal the cores OpenBLAS needs next (and the reverse). Sleep instead; env overrides.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


pin_threads(sys.argv[1:])
import numpy as np  # noqa: E402  (after pin_threads on purpose)
import torch  # noqa: E402


def fail(what, why, fix):
    sys.stderr.write(f"peer_torch: {what}: {why}; {fix}\n")
    sys.exit(2)


# ---------------------------------------------------------------- safetensors

def read_safetensors(path):
    """All tensors of one file as float32 numpy arrays (BF16, F16, F32, F64 accepted)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = to_float32(raw[start:end], info["dtype"], f"{path}: {name}").reshape(info["shape"])
    return out


def to_float32(buf, dtype, where):
    if dtype == "BF16":  # bfloat16 is the top half of a float32
        wide = buf.view("<u2").astype(np.uint32)
        wide <<= 16
        return wide.view(np.float32)
    if dtype in ("F16", "F32", "F64"):
        return buf.view({"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dtype]).astype(np.float32)
    fail(where, f"dtype {dtype} is not a float type", "give a float checkpoint")


def write_safetensors(path, tensors):
    """tensors: name → float32 numpy array; header padded with spaces to 8 bytes, as the format asks."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, arr in tensors.items():
        end = offset + arr.nbytes
        header[name], offset = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, end]}, end
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for arr in tensors.values():
            f.write(np.ascontiguousarray(arr, dtype="<f4").tobytes())


def read_model_weights(model_dir):
    """HF weights (single file or sharded with model.safetensors.index.json)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        path = os.path.join(model_dir, name)
        if not os.path.exists(path):
            fail(path, "it does not exist", "point --model at a Hugging Face model directory")
        weights.update(read_safetensors(path))
    return weights


# ---------------------------------------------------------------- model

class Config:
    def __init__(self, d):
        if d.get("rope_scaling"):
            fail("config.json: rope_scaling", json.dumps(d["rope_scaling"]), "only plain RoPE is implemented")
        self.H, self.I, self.V = d["hidden_size"], d["intermediate_size"], d["vocab_size"]
        self.layers = d["num_hidden_layers"]
        self.nH, self.nKV = d["num_attention_heads"], d["num_key_value_heads"]
        self.D = d.get("head_dim") or self.H // self.nH
        self.eps, self.theta = d["rms_norm_eps"], d.get("rope_theta", 10000.0)
        self.tied = d.get("tie_word_embeddings", False)


def rms_norm(x, w, eps):  # normalizes the last dim
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(T, D, theta, dtype):
    inv_freq = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)  # [D/2]
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)  # [T, D/2]
    angles = torch.cat([angles, angles], -1)  # [T, D]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat([-x2, x1], -1)


def causal_attention(q, k, v):
    """q [B, nH, T, D], k / v [B, nKV, T, D] → [B, nH, T, D]; query head h reads kv head h // (nH/nKV)."""
    (Bn, nKV, T, D), rep = k.shape, q.shape[1] // k.shape[1]
    # expand + reshape, as transformers' repeat_kv (repeat_interleave's backward is a slow index_add_)
    k, v = (t[:, :, None].expand(Bn, nKV, rep, T, D).reshape(Bn, nKV * rep, T, D) for t in (k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [B, nH, T, T]
    mask = torch.full((T, T), float("-inf"), dtype=q.dtype).triu(1)  # [T, T]
    return torch.softmax(scores + mask, -1) @ v  # [B, nH, T, D]


class Qwen3Lora:
    """Frozen base weights (HF names) plus trainable LoRA pairs keyed (layer, short target)."""

    def __init__(self, cfg, weights, lora):
        self.cfg, self.w, self.lora = cfg, weights, lora
        self.head = weights["model.embed_tokens.weight" if cfg.tied else "lm_head.weight"]  # [V, H]

    def proj(self, i, target, x):
        """x [B, T, in] → x Wᵀ + scale·(x Aᵀ) Bᵀ, [B, T, out]. The scale goes on the rank-r
        intermediate and the LoRA sum rides in the base GEMM (addmm): no extra full-size pass."""
        x2 = x.reshape(-1, x.shape[-1])  # [B*T, in]
        y = x2 @ self.w[f"model.layers.{i}.{TARGETS[target]}.weight"].T  # [B*T, out]
        pair = self.lora.pairs.get((i, target))
        if pair is not None:
            A, B = pair
            y = torch.addmm(y, (x2 @ A.T) * self.lora.scale, B.T)  # [B*T, out]
        return y.view(*x.shape[:-1], y.shape[-1])

    def layer(self, i, x, cos, sin):
        c, (Bn, T, _) = self.cfg, x.shape
        ln = lambda name: self.w[f"model.layers.{i}.{name}.weight"]  # noqa: E731
        n = rms_norm(x, ln("input_layernorm"), c.eps)  # [B, T, H]
        q = rms_norm(self.proj(i, "q", n).view(Bn, T, c.nH, c.D), ln("self_attn.q_norm"), c.eps)
        k = rms_norm(self.proj(i, "k", n).view(Bn, T, c.nKV, c.D), ln("self_attn.k_norm"), c.eps)
        v = self.proj(i, "v", n).view(Bn, T, c.nKV, c.D)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, D]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        a = causal_attention(q, k, v).transpose(1, 2).reshape(Bn, T, c.nH * c.D)  # [B, T, nH*D]
        x = x + self.proj(i, "o", a)  # [B, T, H]
        m = rms_norm(x, ln("post_attention_layernorm"), c.eps)  # [B, T, H]
        g = torch.nn.functional.silu(self.proj(i, "gate", m)) * self.proj(i, "up", m)  # [B, T, I]
        return x + self.proj(i, "down", g)  # [B, T, H]

    def hidden(self, tokens):
        """tokens [B, T] → final-norm hidden states [B, T, H] (positions 0..T-1 in every row)."""
        x = self.w["model.embed_tokens.weight"][tokens]  # [B, T, H]
        cos, sin = rope_tables(tokens.shape[1], self.cfg.D, self.cfg.theta, x.dtype)  # [T, D]
        for i in range(self.cfg.layers):
            x = self.layer(i, x, cos, sin)
        return rms_norm(x, self.w["model.norm.weight"], self.cfg.eps)


def check_weights(cfg, w):
    names = ["model.embed_tokens.weight", "model.norm.weight"] + ([] if cfg.tied else ["lm_head.weight"])
    for i in range(cfg.layers):
        names += [f"model.layers.{i}.{m}.weight" for m in TARGETS.values()]
        names += [f"model.layers.{i}.{m}.weight" for m in
                  ("input_layernorm", "post_attention_layernorm", "self_attn.q_norm", "self_attn.k_norm")]
    for name in names:
        if name not in w:
            fail(f"--model: tensor {name}", "it is missing", "give a Qwen3 checkpoint (tie_word_embeddings?)")


# ---------------------------------------------------------------- LoRA

class Lora:
    """LoRA pairs keyed (layer, short target) → (A [r, in], B [out, r]); scale = alpha / r
    (alpha / √r with rsLoRA)."""

    def __init__(self, pairs, r, alpha, targets, rslora=False):
        self.pairs, self.r, self.alpha, self.targets = pairs, r, alpha, targets
        self.scale = alpha / (math.sqrt(r) if rslora else r)
        self.params = [p.requires_grad_(True) for pair in pairs.values() for p in pair]


def peft_name(layer, target, which):
    return f"base_model.model.model.layers.{layer}.{TARGETS[target]}.lora_{which}.weight"


def linear_shape(cfg, target):  # [out, in]
    q, kv = cfg.nH * cfg.D, cfg.nKV * cfg.D
    return {"q": (q, cfg.H), "k": (kv, cfg.H), "v": (kv, cfg.H), "o": (cfg.H, q),
            "gate": (cfg.I, cfg.H), "up": (cfg.I, cfg.H), "down": (cfg.H, cfg.I)}[target]


def init_lora(cfg, targets, r, alpha, seed, dtype):
    """PEFT init: A ~ kaiming_uniform(a=√5) = U(±1/√in), B = 0."""
    gen, pairs = torch.Generator().manual_seed(seed), {}
    for i in range(cfg.layers):
        for t in targets:
            out_dim, in_dim = linear_shape(cfg, t)
            bound = 1.0 / math.sqrt(in_dim)  # gain √(2/(1+5)) · √(3/in)
            A = (torch.rand(r, in_dim, generator=gen, dtype=torch.float64) * 2 - 1) * bound
            pairs[(i, t)] = (A.to(dtype), torch.zeros(out_dim, r, dtype=dtype))
    return Lora(pairs, r, alpha, targets)


def adapter_targets(modules, where):
    short = {path.split(".")[-1]: t for t, path in TARGETS.items()}  # q_proj → q
    if modules == "all-linear":
        return list(TARGETS)
    unknown = [m for m in modules if m not in short]
    if unknown:
        fail(f"{where}: target_modules", ",".join(unknown), f"use among {','.join(short)}")
    return [t for t in TARGETS if TARGETS[t].split(".")[-1] in modules]


def read_adapter(cfg, adapter_dir, dtype):
    """A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) as a Lora."""
    where = os.path.join(adapter_dir, "adapter_config.json")
    with open(where) as f:
        ac = json.load(f)
    targets, r = adapter_targets(ac.get("target_modules") or [], where), ac["r"]
    tensors, pairs = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors")), {}
    for i in range(cfg.layers):
        for t in targets:
            out_dim, in_dim = linear_shape(cfg, t)
            A, B = tensors.get(peft_name(i, t, "A")), tensors.get(peft_name(i, t, "B"))
            if A is None or B is None or A.shape != (r, in_dim) or B.shape != (out_dim, r):
                fail(f"--adapter: {peft_name(i, t, 'A')}", "missing or misshapen", "use one for this model")
            pairs[(i, t)] = (torch.from_numpy(A).to(dtype), torch.from_numpy(B).to(dtype))
    return Lora(pairs, r, ac["lora_alpha"], targets, bool(ac.get("use_rslora")))


# ---------------------------------------------------------------- batch

def load_batch(path):
    with open(path) as f:
        d = json.load(f)
    rows = d["tokens"]
    for key in ("loss_mask", "advantages", "old_logprobs"):
        if len(d[key]) != len(rows) or any(len(a) != len(b) for a, b in zip(d[key], rows)):
            fail(f"--batch {path}: {key}", "its row lengths differ from tokens", "give one value per token")
    return {k: d[k] for k in ("tokens", "loss_mask", "advantages", "old_logprobs")} | \
        {"temperature": float(d.get("temperature", 1.0))}


def pad(rows, value, dtype):
    T = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (T - len(r)) for r in rows], dtype=dtype)  # [B, T]


def prepare(batch, dtype):
    """Padded tensors plus the scored positions (b, t) with m ≠ 0, t ≥ 1."""
    lengths = [len(r) for r in batch["tokens"]]
    if min(lengths) < 1:
        fail("batch", "a row has no tokens", "drop empty rows")
    mask = pad(batch["loss_mask"], 0, dtype)  # [B, T]
    if bool((mask[:, 0] != 0).any()):
        fail("batch: loss_mask[:, 0]", "is nonzero", "token 0 has no log-prob: mask it out")
    b, t = mask.nonzero(as_tuple=True)  # [N], [N]
    if len(b) == 0:
        fail("batch: loss_mask", "is all zero", "mark at least one token")
    pick = lambda key: pad(batch[key], 0.0, dtype)[b, t]  # noqa: E731  # [N]
    return {"tokens": pad(batch["tokens"], 0, torch.long), "rows": b, "pos": t, "m": mask[b, t],
            "adv": pick("advantages"), "old": pick("old_logprobs"), "temperature": batch["temperature"],
            "n_tokens": sum(lengths)}


def random_batch(spec, vocab, seed):
    B, T = (int(x) for x in spec.split(","))
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (B, T), generator=gen)
    adv = torch.randn(B, 1, generator=gen, dtype=torch.float64).expand(B, T)
    mask = [[0] + [1] * (T - 1)] * B
    return {"tokens": tokens.tolist(), "loss_mask": mask, "advantages": adv.tolist(),
            "old_logprobs": [[0.0] * T] * B, "temperature": 1.0}


# ---------------------------------------------------------------- loss

class HeadLogprobs(torch.autograd.Function):
    """lp[n] = log_softmax(h[n] headᵀ / temperature)[targets[n]], chunk rows at a time.

    Keeps only h and one log-sum-exp per row for backward; backward recomputes each chunk's logits
    and turns them into the gradient in place: d lp / d logits = onehot(target) - softmax.
    The head is frozen: no gradient for it.
    """

    @staticmethod
    def forward(ctx, h, head, targets, temperature, chunk):  # h [N, H], head [V, H], targets [N]
        lse, lp = torch.empty(len(h), dtype=h.dtype), torch.empty(len(h), dtype=h.dtype)  # [N]
        for s in range(0, len(h), chunk):
            z = (h[s:s + chunk] / temperature) @ head.T  # [C, V]
            lse[s:s + chunk] = torch.logsumexp(z, -1)
            lp[s:s + chunk] = z.gather(1, targets[s:s + chunk, None]).squeeze(1) - lse[s:s + chunk]
        ctx.save_for_backward(h, head, targets, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        return lp

    @staticmethod
    def backward(ctx, g):  # g [N]
        h, head, targets, lse = ctx.saved_tensors
        T, grad_h = ctx.temperature, torch.empty_like(h)  # [N, H]
        for s in range(0, len(h), ctx.chunk):
            e = min(s + ctx.chunk, len(h))
            z = (h[s:e] / T) @ head.T  # [C, V]
            z.sub_(lse[s:e, None]).exp_().mul_(-g[s:e, None])  # -g · softmax
            z[torch.arange(e - s), targets[s:e]] += g[s:e]  # + g · onehot
            grad_h[s:e] = (z @ head) / T  # [C, H]
        return grad_h, None, None, None, None


def token_logprobs(model, b, chunk):
    """Log-probs of the scored tokens [N]; the head never holds more than [chunk, V]."""
    h = model.hidden(b["tokens"])[b["rows"], b["pos"] - 1]  # [N, H]
    targets = b["tokens"][b["rows"], b["pos"]]  # [N]
    return HeadLogprobs.apply(h, model.head, targets, b["temperature"], chunk)  # [N]


def grpo_loss(lp, b):
    """token_mean clipped policy-gradient loss, beta = 0."""
    ratio = torch.exp(lp - b["old"])  # [N]
    clipped = torch.clamp(ratio, 1 - EPS_CLIP, 1 + EPS_CLIP)
    pg = -torch.minimum(ratio * b["adv"], clipped * b["adv"])  # [N]
    return (b["m"] * pg).sum() / b["m"].sum()


# ---------------------------------------------------------------- timing

def train_step(model, params, b, chunk):
    """forward + loss + backward (no optimizer); returns (loss, seconds)."""
    for p in params:
        p.grad = None
    t0 = time.perf_counter()
    loss = grpo_loss(token_logprobs(model, b, chunk), b)
    loss.backward()
    return loss.item(), time.perf_counter() - t0


def matmul_gflops(n=1024, reps=10):
    a, c = torch.randn(n, n), torch.randn(n, n)
    a @ c
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ c
        times.append(time.perf_counter() - t0)
    return 2 * n ** 3 / statistics.median(times) / 1e9


def blas_info():
    conf = torch.__config__.show()
    info = next((w[10:] for w in conf.replace(",", " ").split() if w.startswith("BLAS_INFO=")), "?")
    with open("/proc/self/maps") as f:  # the BLAS actually loaded (libblas.so.3 is an alternatives link)
        libs = sorted({ln.split()[-1].rsplit("/", 1)[-1] for ln in f if "blas" in ln or "lapack" in ln})
    return f"BLAS_INFO={info}", libs


def peak_rss_mib():  # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(args, lora, b, first, times, adamw_times, n_base):
    sec, (blas, libs) = statistics.median(times), blas_info()
    out = {"impl": "torch", "torch_version": torch.__version__, "blas": blas, "blas_loaded": libs,
           "threads": args.threads, "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
           "tokens_per_step": b["n_tokens"], "seconds_per_step": sec, "tok_per_s": b["n_tokens"] / sec,
           "gflops_4n": 4 * n_base * b["n_tokens"] / sec / 1e9, "matmul_gflops_1024": matmul_gflops(),
           "peak_rss_mb": peak_rss_mib(), "peak_rss_mib": peak_rss_mib(),  # one figure, two names
           "loss": first[0], "grad_norm": first[1],
           "step_seconds": times, "rows": int(b["tokens"].shape[0]), "scored_tokens": int(b["m"].numel()),
           "base_params": n_base, "lora_params": sum(p.numel() for p in lora.params), "lora_r": lora.r,
           "lora_alpha": lora.alpha, "targets": lora.targets, "chunk": args.chunk,
           "dtype": "float64" if args.float64 else "float32", "step": "forward+loss+backward, no optimizer"}
    if adamw_times:
        out["adamw_seconds"] = statistics.median(adamw_times)
    print(json.dumps(out))


def dump_grads(path, lora):
    grads = {}
    for (i, t), (A, B) in sorted(lora.pairs.items()):
        grads[peft_name(i, t, "A")] = A.grad.float().numpy()
        grads[peft_name(i, t, "B")] = B.grad.float().numpy()
    write_safetensors(path, grads)


def build(args):
    """(model, base param count) from the flags; the model's LoRA is random-init or --adapter."""
    dtype = torch.float64 if args.float64 else torch.float32
    config = os.path.join(args.model, "config.json")
    if not os.path.exists(config):
        fail(config, "it does not exist", "point --model at a Hugging Face model directory")
    with open(config) as f:
        cfg = Config(json.load(f))
    np_weights = read_model_weights(args.model)
    check_weights(cfg, np_weights)
    weights = {k: torch.from_numpy(v).to(dtype) for k, v in np_weights.items()}  # shares memory in float32
    if args.adapter:
        lora = read_adapter(cfg, args.adapter, dtype)
    else:
        targets = [t for t in args.targets.split(",") if t]
        bad = [t for t in targets if t not in TARGETS]
        if bad:
            fail("--targets", ",".join(bad), f"choose among {','.join(TARGETS)}")
        lora = init_lora(cfg, targets, args.lora_r, args.lora_alpha, args.seed, dtype)
    return Qwen3Lora(cfg, weights, lora), sum(v.numel() for v in weights.values())


def timed_steps(model, b, args):
    """--steps timed steps; with --adamw an AdamW update after each, timed on its own."""
    opt = torch.optim.AdamW(model.lora.params, lr=1e-6) if args.adamw else None
    times, adamw_times = [], []
    for _ in range(args.steps):
        times.append(train_step(model, model.lora.params, b, args.chunk)[1])
        if opt:
            t0 = time.perf_counter()
            opt.step()
            adamw_times.append(time.perf_counter() - t0)
    return times, adamw_times


def main():
    args = build_parser().parse_args()
    torch.set_num_threads(args.threads)
    if args.steps < 1:
        fail("--steps", str(args.steps), "give at least 1")
    model, n_base = build(args)
    raw = load_batch(args.batch) if args.batch else random_batch(args.random_batch, model.cfg.V, args.seed)
    b = prepare(raw, torch.float64 if args.float64 else torch.float32)
    if args.random_batch:  # on-policy: old = current log-probs
        with torch.no_grad():
            b["old"] = token_logprobs(model, b, args.chunk)
    params = model.lora.params
    loss, _ = train_step(model, params, b, args.chunk)  # warm-up; its loss and gradients are reported
    first = (loss, math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params)))
    if args.dump_grads:
        dump_grads(args.dump_grads, model.lora)
    times, adamw_times = timed_steps(model, b, args)
    report(args, model.lora, b, first, times, adamw_times, n_base)


if __name__ == "__main__":
    main()
