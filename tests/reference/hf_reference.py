#!/usr/bin/env python3
"""Reference logits for a Hugging Face Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE or Mixtral model
directory.

Usage: hf_reference.py [--routes FILE] MODEL_DIR TOKEN_ID...
Prints {"logits": [[...V floats...] per token], "routes": [[[k experts] per sparse layer] per token]}
on stdout: the next-token logits at every position of the one sequence given, computed in float64,
and the experts each token used in each sparse layer of a mixture of experts (empty lists for a
dense model). --routes replays experts (routing replay, R3): FILE holds JSON [T][S][k], each
token's experts per sparse layer, or k -1s where the token routes freely.

Written from the public definitions of the architectures (transformers' modeling_llama.py,
modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py, modeling_qwen3_moe.py,
modeling_mixtral.py and _compute_llama3_parameters in modeling_rope_utils.py), without transformers and without roleflow: it parses config.json and the
safetensors files by hand and does the arithmetic with plain torch tensor operations, so that it
checks lib/rl/model independently. Every tensor in the files must be used (lm_head.weight aside
when the embeddings are tied).
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16}


def read_safetensors(path):
    """safetensors: u64-le header length N, N bytes of JSON, then the raw little-endian data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        if info["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).to(torch.float64)
    return out


def read_weights(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    weights = {}
    for shard in shards:
        weights.update(read_safetensors(os.path.join(model_dir, shard)))
    return weights


def inverse_frequencies(cfg, dim):
    base = float(cfg.get("rope_theta", 10000.0))
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    rs = cfg.get("rope_scaling")
    if not rs or rs.get("rope_type", rs.get("type")) == "default":
        return inv
    assert rs.get("rope_type", rs.get("type")) == "llama3", rs
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    inv_llama = torch.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_llama)


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n_rep):
    heads, length, dim = x.shape
    return x[:, None].expand(heads, n_rep, length, dim).reshape(heads * n_rep, length, dim)


class Weights:
    def __init__(self, tensors):
        self.tensors, self.used = tensors, set()

    def __call__(self, name):
        self.used.add(name)
        return self.tensors[name]

    def linear(self, x, prefix, bias):
        y = x @ self(prefix + ".weight").T
        return y + self(prefix + ".bias") if bias else y


ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                 "Qwen3MoeForCausalLM", "MixtralForCausalLM")
MLP_NAMES = ("gate_proj", "up_proj", "down_proj")
MIXTRAL_EXPERT_NAMES = ("w1", "w3", "w2")  # gate, up, down


def swiglu(w, h, prefix, names=MLP_NAMES):
    gate = w.linear(h, prefix + names[0], False)
    up = w.linear(h, prefix + names[1], False)
    return w.linear(torch.nn.functional.silu(gate) * up, prefix + names[2], False)


def sparse_block(cfg, i):
    """Where layer i's MLP is a mixture of experts: (module name, experts, k, renormalized, expert
    projection names); None where it is dense. Qwen3MoeDecoderLayer's rule, and Mixtral's (every
    layer, top k renormalized)."""
    arch = cfg["architectures"][0]
    if arch == "MixtralForCausalLM":
        return "block_sparse_moe", cfg["num_local_experts"], cfg["num_experts_per_tok"], True, MIXTRAL_EXPERT_NAMES
    if (arch == "Qwen3MoeForCausalLM" and cfg["num_experts"] > 0
            and i not in (cfg.get("mlp_only_layers") or [])
            and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0):
        return "mlp", cfg["num_experts"], cfg["num_experts_per_tok"], cfg.get("norm_topk_prob", False), MLP_NAMES
    return None


def moe(w, h, prefix, block, forced=None, chosen=None):
    """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock, one token at a time: the softmax of the
    router's logits, the top k of them (renormalized when the block says so), and the weighted sum
    of the chosen experts' SwiGLU outputs.

    Routing replay (R3, Ma et al. 2025): forced[t], when given and not -1s, is token t's set of
    experts instead of its top k, weighted by the softmax at them (renormalized as above). The
    experts each token used are appended to `chosen` when given."""
    _, experts, k, renormalize, names = block
    probs = torch.softmax(w.linear(h, prefix + "gate", False), dim=-1)
    for e in range(experts):  # every expert's weights count as used
        for name in names:
            w(f"{prefix}experts.{e}.{name}.weight")
    out = torch.zeros_like(h)
    for t in range(h.shape[0]):
        if forced is not None and forced[t][0] >= 0:
            indices = list(forced[t])
            values = probs[t][indices]
        else:
            top = torch.topk(probs[t], k)
            indices, values = top.indices.tolist(), top.values
        if chosen is not None:
            chosen.append(indices)
        weights = values / values.sum() if renormalize else values
        for weight, e in zip(weights, indices):
            out[t] += weight * swiglu(w, h[t:t + 1], f"{prefix}experts.{e}.", names)[0]
    return out


def mlp(cfg, w, h, layer, forced=None, chosen=None):
    """Layer `layer`'s MLP, dense or sparse (forced and chosen: moe's, for a sparse one)."""
    p = f"model.layers.{layer}."
    block = sparse_block(cfg, layer)
    return moe(w, h, p + block[0] + ".", block, forced, chosen) if block else swiglu(w, h, p + "mlp.")


def attention_biases(cfg):
    """(q/k/v bias, o_proj bias): Qwen2 has the first always; Mistral and Mixtral neither."""
    arch = cfg["architectures"][0]
    if arch in ("MistralForCausalLM", "MixtralForCausalLM"):
        return False, False
    if arch == "Qwen2ForCausalLM":
        return True, False
    bias = cfg.get("attention_bias", False)
    return bias, bias


def forward(cfg, w, ids, forced=None, routes=None):
    """Logits [T, V]. forced: [T][S][k] experts per token and sparse layer to replay (moe); routes:
    a list that receives the [T][S][k] experts used."""
    arch = cfg["architectures"][0]
    assert arch in ARCHITECTURES, arch
    if arch in ("MistralForCausalLM", "MixtralForCausalLM") and cfg.get("sliding_window"):
        assert cfg["sliding_window"] >= len(ids), "sliding-window attention is not modelled here"
    assert cfg.get("hidden_act", "silu") == "silu"
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg.get("rms_norm_eps", 1e-6)
    qkv_bias, o_bias = attention_biases(cfg)
    length = len(ids)

    freqs = torch.outer(torch.arange(length, dtype=torch.float64), inverse_frequencies(cfg, head_dim))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    causal = torch.full((length, length), float("-inf"), dtype=torch.float64).triu(1)

    x = w("model.embed_tokens.weight")[torch.tensor(ids)]
    per_layer = []  # the experts of each sparse layer, [S][T][k]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w(p + "input_layernorm.weight"), eps)
        q = w.linear(h, p + "self_attn.q_proj", qkv_bias).view(length, heads, head_dim)
        k = w.linear(h, p + "self_attn.k_proj", qkv_bias).view(length, kv_heads, head_dim)
        v = w.linear(h, p + "self_attn.v_proj", qkv_bias).view(length, kv_heads, head_dim)
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            q = rms_norm(q, w(p + "self_attn.q_norm.weight"), eps)
            k = rms_norm(k, w(p + "self_attn.k_norm.weight"), eps)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
        scores = q @ k.transpose(1, 2) / math.sqrt(head_dim) + causal
        attn = torch.softmax(scores, dim=-1) @ v
        attn = attn.transpose(0, 1).reshape(length, heads * head_dim)
        x = x + w.linear(attn, p + "self_attn.o_proj", o_bias)
        h = rms_norm(x, w(p + "post_attention_layernorm.weight"), eps)
        if sparse_block(cfg, i):
            at = len(per_layer)
            per_layer.append([])
            x = x + mlp(cfg, w, h, i, [f[at] for f in forced] if forced else None, per_layer[-1])
        else:
            x = x + mlp(cfg, w, h, i)
    if routes is not None:
        routes.extend([[layer[t] for layer in per_layer] for t in range(length)])
    x = rms_norm(x, w("model.norm.weight"), eps)
    tied = cfg.get("tie_word_embeddings", False)
    head = w("model.embed_tokens.weight") if tied else w("lm_head.weight")
    return x @ head.T


def main():
    args = sys.argv[1:]
    forced = None
    if len(args) >= 2 and args[0] == "--routes":  # a JSON file of [T][S][k] experts to replay
        with open(args[1]) as f:
            forced = json.load(f)
        args = args[2:]
    if len(args) < 2:
        sys.exit("usage: hf_reference.py [--routes FILE] MODEL_DIR TOKEN_ID...")
    model_dir, ids = args[0], [int(t) for t in args[1:]]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    w = Weights(read_weights(model_dir))
    routes = []
    logits = forward(cfg, w, ids, forced, routes)
    unused = set(w.tensors) - w.used - ({"lm_head.weight"} if cfg.get("tie_word_embeddings") else set())
    if unused:
        sys.exit(f"hf_reference: unused tensors {sorted(unused)}")
    json.dump({"logits": logits.tolist(), "routes": routes}, sys.stdout)


if __name__ == "__main__":
    main()
