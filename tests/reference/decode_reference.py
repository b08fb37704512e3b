#!/usr/bin/env python3
"""python3-torch baseline of `rl-profile decode`: prefill, KV-cache decode and one GRPO step.

Usage: decode_reference.py MODEL_DIR SPEC.json
SPEC: {"threads", "seed", "runs" (of each figure; the median is printed), "batches": [..], "prompt_tokens", "new_tokens", "vocab" (ids drawn
below it), "bos" (-1: none), "check": bool, "train": null or {"tokens": [[...]...] (K rows of
prompt_tokens + new_tokens ids), "old_logprobs": [[...]...] (K rows of new_tokens),
"rewards": [...], "groups": [sizes...], "clip", "lr", "grad_clip"}, "device": "cpu" or "cuda:N"
(default cpu), "dtype": "float32" or "bfloat16" (generation with bfloat16 weights, training with
float32 weights under torch.autocast to bfloat16; default float32)}.
Prints JSON lines on stdout, progress on stderr:
  {"figure": "prefill"|"decode", "batch": B, "tokens": n, "seconds": s[, "peak_bytes": b]}
  {"figure": "train", "tokens": n, "seconds": s, "loss": l, "grad_norm": g[, "peak_bytes": b]}
  (peak_bytes on a GPU: torch.cuda.max_memory_allocated during the figure)
  {"figure": "check", "max_abs_diff": d}   (with "check": the float32 cached decode against
                                           hf_reference.forward in float64, one sequence)
The model arithmetic is hf_reference.py's (its weight reader, rotary frequencies, RMSNorm and
rotate_half): what this file adds is batching, a preallocated KV cache and float32, as a plain
python3-torch decode loop does. Training uses torch autograd and torch.optim.AdamW.
"""
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402


def log(msg):
    print("decode_reference: " + msg, file=sys.stderr, flush=True)


def rms_norm(x, weight, eps):
    """hf_reference.rms_norm, computed in float32 for a 16-bit x as Hugging Face's models do."""
    if x.dtype == torch.float32:
        return ref.rms_norm(x, weight, eps)
    return weight * ref.rms_norm(x.float(), torch.ones((), device=x.device), eps).to(x.dtype)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak(device, out):
    if device.type == "cuda":
        out["peak_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


class Model:
    """A decoder of hf_reference's families over its weights, batched, with an optional cache."""

    def __init__(self, cfg, tensors, context, device=torch.device("cpu")):
        self.cfg = cfg
        self.device = device
        self.w = ref.Weights(tensors)
        arch = cfg["architectures"][0]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg.get("head_dim") or cfg["hidden_size"] // self.heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.qkv_bias, self.o_bias = ref.attention_biases(cfg)
        self.qk_norm = arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
        inv = ref.inverse_frequencies(cfg, self.head_dim)
        freqs = torch.outer(torch.arange(context, dtype=torch.float64), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().float().to(device), emb.sin().float().to(device)
        tied = cfg.get("tie_word_embeddings", False)
        self.head_name = "model.embed_tokens.weight" if tied else "lm_head.weight"

    def swiglu(self, h, prefix, names=ref.MLP_NAMES):
        w = self.w
        gate = w.linear(h, prefix + names[0], False)
        up = w.linear(h, prefix + names[1], False)
        return w.linear(torch.nn.functional.silu(gate) * up, prefix + names[2], False)

    def moe(self, h, prefix, block):
        """A sparse block (hf_reference.sparse_block) as transformers batches it: the tokens of each
        chosen expert together, weighted by the router's top-k softmax."""
        _, _, k, renormalize, names = block
        flat = h.reshape(-1, h.shape[-1])
        probs = torch.softmax(self.w.linear(flat, prefix + "gate", False).float(), dim=-1)
        weights, chosen = torch.topk(probs, k, dim=-1)
        if renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(flat.dtype)
        out = torch.zeros_like(flat)
        for e in torch.unique(chosen).tolist():
            tokens, slot = torch.where(chosen == e)
            y = self.swiglu(flat[tokens], f"{prefix}experts.{e}.", names) * weights[tokens, slot, None]
            out.index_add_(0, tokens, y.to(out.dtype))
        return out.view(h.shape)

    def mlp(self, h, layer):
        p = f"model.layers.{layer}."
        block = ref.sparse_block(self.cfg, layer)
        return self.moe(h, p + block[0] + ".", block) if block else self.swiglu(h, p + "mlp.")

    def new_cache(self, batch, context):
        shape = (batch, self.kv_heads, context, self.head_dim)
        like = self.w("model.norm.weight")
        return [(like.new_empty(shape), like.new_empty(shape)) for _ in range(self.cfg["num_hidden_layers"])]

    def forward(self, ids, cache=None, start=0, last_only=False):
        """ids [B, T] at positions start..start+T-1 -> logits [B, T, V] ([B, 1, V] with last_only,
        as a prefill needs only the last position's); writes the cache."""
        w, b, t = self.w, ids.shape[0], ids.shape[1]
        end = start + t
        cos, sin = self.cos[start:end], self.sin[start:end]
        mask = torch.full((t, end), float("-inf"), device=self.device).triu(start + 1) if t > 1 else None
        rep = self.heads // self.kv_heads
        x = torch.nn.functional.embedding(ids, w("model.embed_tokens.weight"))
        for i in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = rms_norm(x, w(p + "input_layernorm.weight"), self.eps)
            q = w.linear(h, p + "self_attn.q_proj", self.qkv_bias).view(b, t, self.heads, self.head_dim)
            k = w.linear(h, p + "self_attn.k_proj", self.qkv_bias).view(b, t, self.kv_heads, self.head_dim)
            v = w.linear(h, p + "self_attn.v_proj", self.qkv_bias).view(b, t, self.kv_heads, self.head_dim)
            if self.qk_norm:
                q = rms_norm(q, w(p + "self_attn.q_norm.weight"), self.eps)
                k = rms_norm(k, w(p + "self_attn.k_norm.weight"), self.eps)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            q = (q * cos + ref.rotate_half(q) * sin).to(h.dtype)
            k = (k * cos + ref.rotate_half(k) * sin).to(h.dtype)
            if cache is not None:
                ck, cv = cache[i]
                ck[:, :, start:end] = k
                cv[:, :, start:end] = v
                k, v = ck[:, :, :end], cv[:, :, :end]
            length = k.shape[2]
            k = k[:, :, None].expand(b, self.kv_heads, rep, length, self.head_dim).reshape(b, self.heads, length, -1)
            v = v[:, :, None].expand(b, self.kv_heads, rep, length, self.head_dim).reshape(b, self.heads, length, -1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask
            attn = (torch.softmax(scores.float(), dim=-1).to(v.dtype) @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + w.linear(attn, p + "self_attn.o_proj", self.o_bias)
            h = rms_norm(x, w(p + "post_attention_layernorm.weight"), self.eps)
            x = x + self.mlp(h, i)
        if last_only:
            x = x[:, -1:]
        x = rms_norm(x, w("model.norm.weight"), self.eps)
        return (x @ w(self.head_name).T).float()


def sample(logits, gen):
    """A token per row drawn from softmax(logits) and its log-probability, as a rollout does."""
    logp = torch.log_softmax(logits, dim=-1)
    ids = torch.multinomial(logp.exp(), 1, generator=gen)
    return ids, logp.gather(1, ids)


def generate(model, prompts, new_tokens, gen):
    """Prefill then new_tokens - 1 decode steps; returns (prefill seconds, decode seconds)."""
    b, p = prompts.shape
    cache = model.new_cache(b, p + new_tokens)
    with torch.no_grad():
        sync(model.device)
        t0 = time.perf_counter()
        ids, _ = sample(model.forward(prompts, cache, 0, last_only=True)[:, -1], gen)
        sync(model.device)
        t1 = time.perf_counter()
        for step in range(new_tokens - 1):
            ids, _ = sample(model.forward(ids, cache, p + step)[:, -1], gen)
        sync(model.device)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def train_step(cfg, tensors, spec, device, bf16):
    """One GRPO step as rl::train::GrpoTrainer takes it (token-normalised clipped loss)."""
    params = {name: t.to(device).clone().requires_grad_(True) for name, t in tensors.items()}
    tokens = torch.tensor(spec["tokens"], dtype=torch.long, device=device)
    old_lp = torch.tensor(spec["old_logprobs"], dtype=torch.float32, device=device)
    rewards = torch.tensor(spec["rewards"], dtype=torch.float32, device=device)
    adv = []
    for r in torch.split(rewards, spec["groups"]):
        adv.append((r - r.mean()) / (r.std() + 1e-4) if len(r) > 1 else torch.zeros_like(r))
    adv = torch.cat(adv).unsqueeze(1)
    model = Model(cfg, params, tokens.shape[1], device)
    opt = torch.optim.AdamW(list(params.values()), lr=spec["lr"], weight_decay=0.0)
    n_new = old_lp.shape[1]
    reset_peak(device)
    sync(device)
    t0 = time.perf_counter()
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model.forward(tokens)
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(2, tokens[:, 1:, None]).squeeze(2)
    ratio = torch.exp(logp[:, -n_new:] - old_lp)
    clip = spec["clip"]
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    loss = per_token.sum() / per_token.numel()
    opt.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(list(params.values()), spec["grad_clip"])
    opt.step()
    sync(device)
    seconds = time.perf_counter() - t0
    return peak(device, {"figure": "train", "tokens": tokens.numel(), "seconds": seconds,
                         "loss": loss.item(), "grad_norm": grad_norm.item()})


def check(cfg, tensors64, prompt, new_tokens):
    """max |cached float32 logits - hf_reference.forward float64| over a greedy continuation."""
    model = Model(cfg, {k: v.float() for k, v in tensors64.items()}, len(prompt) + new_tokens)
    cache = model.new_cache(1, len(prompt) + new_tokens)
    ids, got = list(prompt), []
    with torch.no_grad():
        logits = model.forward(torch.tensor([prompt]), cache, 0)[0]
        got.extend(logits)
        for _ in range(new_tokens - 1):
            ids.append(int(got[-1].argmax()))
            got.append(model.forward(torch.tensor([[ids[-1]]]), cache, len(ids) - 1)[0, 0])
    want = ref.forward(cfg, ref.Weights(tensors64), ids)
    return (torch.stack(got).double() - want).abs().max().item()


def median(values):
    return sorted(values)[len(values) // 2]


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: decode_reference.py MODEL_DIR SPEC.json")
    model_dir = sys.argv[1]
    with open(sys.argv[2]) as f:
        spec = json.load(f)
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors64 = ref.read_weights(model_dir)
    tensors = {k: v.float() for k, v in tensors64.items()}
    p, n = spec["prompt_tokens"], spec["new_tokens"]
    device = torch.device(spec.get("device", "cpu"))
    bf16 = spec.get("dtype", "float32") == "bfloat16"
    gen = torch.Generator().manual_seed(spec["seed"])
    device_gen = gen if device.type == "cpu" else torch.Generator(device=device).manual_seed(spec["seed"])
    if spec.get("check"):
        prompt = torch.randint(0, spec["vocab"], (p,), generator=gen).tolist()
        emit({"figure": "check", "max_abs_diff": check(cfg, tensors64, prompt, n)})
    del tensors64
    dtype = torch.bfloat16 if bf16 else torch.float32
    model = Model(cfg, {k: v.to(device, dtype) for k, v in tensors.items()}, p + n, device)
    generate(model, torch.randint(0, spec["vocab"], (1, 2), generator=gen).to(device), 2, device_gen)  # warm-up
    for b in spec["batches"]:
        prompts = torch.randint(0, spec["vocab"], (b, p), generator=gen)
        if spec["bos"] >= 0:
            prompts[:, 0] = spec["bos"]
        log(f"torch: batch {b}, {p} prompt and {n} new tokens each")
        reset_peak(device)
        times = [generate(model, prompts.to(device), n, device_gen) for _ in range(spec.get("runs", 1))]
        prefill_s, decode_s = median([t[0] for t in times]), median([t[1] for t in times])
        emit(peak(device, {"figure": "prefill", "batch": b, "tokens": b * p, "seconds": prefill_s}))
        emit(peak(device, {"figure": "decode", "batch": b, "tokens": b * (n - 1), "seconds": decode_s}))
    del model
    if spec.get("train"):
        log(f"torch: one GRPO step over {len(spec['train']['tokens'])} sequences")
        steps = [train_step(cfg, tensors, spec["train"], device, bf16) for _ in range(spec.get("runs", 1))]
        step = steps[0]
        step["seconds"] = median([x["seconds"] for x in steps])
        emit(step)


if __name__ == "__main__":
    main()
