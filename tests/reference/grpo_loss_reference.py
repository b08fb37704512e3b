#!/usr/bin/env python3
"""An independent policy-gradient loss, from the tensors rl-train's trainer dumps
(GrpoOptions::dump_dir, rl-train grpo --dump-dir): usage grpo_loss_reference.py DIR.

Written from the public definitions (DeepSeekMath's GRPO, RLOO, REINFORCE++, GAE and PPO-clip with
a clipped value loss, Schulman's k3 estimator), not from roleflow's code, with plain torch in
float64:
  advantage   grpo: (r - mean(group)) / (std(group, sample) + 1e-4), 0 for a group of one
              rloo: r - mean of the rest of the group, 0 for a group of one
              reinforce++: whiten(r); reinforce++-baseline: whiten(r - mean(group))
              gae: rewards 0 but the last token's, delta = r + gamma V' - V (V' = 0 after the
              end), A = delta + gamma lambda A', return = A + V; then whiten(A)
              whiten over every response token: (x - mean) / sqrt(var(n - 1) + 1e-8)
  turn rewards (turn_rewards, turn_ends: the reward at each turn's last token, 1 where a turn ends)
              grpo: DeepSeekMath's process supervision: a group's turn rewards normalised by
              their mean and std (n - 1) + 1e-4 (none when fewer than two, or all 0), and a
              token gains the sum of the normalised rewards of the turns ending at or after it
              gae: they are token rewards beside the outcome at the last token
  value loss  0.5 max((V - R)^2, (clamp(V, V_old - c, V_old + c) - R)^2) summed over tokens
  ratio       exp(new_lp - old_lp)
  per token   -min(ratio A, clamp(ratio, 1 - clip, 1 + clip) A) + kl_coef k(d), d = ref - new,
              k(d) = exp(d) - d - 1 (k3) or d^2 / 2 (k2, metadata kl_estimator)
  corrections (behaviour = old, proximal = prox, w capped at C, without gradient):
    1 tis        -min(exp(new - old), C) A new, no clip (truncated importance sampling)
    2 decoupled  -min(exp(prox - old), C) min(r A, clamp(r, 1 - clip, 1 + clip) A), r = exp(new - prox)
  sum         over tokens (norm 0, 2, 3: token-mean and the seq-mean-token-sum modes) or of
              per-sequence means (norm 1: seq-mean-token-mean)
It checks every step-S-batch file's advantages (and GAE returns) and every piece's sum, token, sequence, clipped
token and KL counts, prints what it compared, and exits 1 on any disagreement beyond f32 rounding.
"""
import glob
import json
import math
import os
import struct
import sys

import torch


def read_safetensors(path):
    """safetensors: u64-le header length N, N bytes of JSON, then the raw little-endian data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(info["shape"]).to(torch.float64)
    return out, meta


def advantages(rewards, groups):
    adv = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = (groups == g).nonzero().flatten()
        r = rewards[idx]
        if len(idx) < 2:
            continue
        mean = r.mean()
        std = math.sqrt(((r - mean) ** 2).sum().item() / (len(idx) - 1))
        adv[idx] = (r - mean) / (std + 1e-4)
    return adv


def group_centred(rewards, groups, leave_one_out):
    out = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = (groups == g).nonzero().flatten()
        r = rewards[idx]
        n = len(idx)
        if leave_one_out:
            out[idx] = r - (r.sum() - r) / (n - 1) if n > 1 else 0.0
        else:
            out[idx] = r - r.mean()
    return out


def whiten(x, mask):
    n = mask.sum()
    mean = (x * mask).sum() / n
    var = (((x - mean) ** 2) * mask).sum() / (n - 1) if n > 1 else torch.tensor(0.0, dtype=x.dtype)
    return (x - mean) / torch.sqrt(var + 1e-8) * mask


def process(turn_rewards, turn_ends, groups, lengths):
    """DeepSeekMath's process-supervision advantages, [N, T]."""
    out = torch.zeros_like(turn_rewards)
    for g in torch.unique(groups):
        idx = (groups == g).nonzero().flatten().tolist()
        steps = [(i, k) for i in idx for k in range(int(lengths[i])) if turn_ends[i, k] > 0]
        values = torch.tensor([turn_rewards[i, k].item() for i, k in steps], dtype=torch.float64)
        if len(steps) < 2 or not bool((values != 0).any()):
            continue
        mean = values.mean()
        std = math.sqrt(((values - mean) ** 2).sum().item() / (len(steps) - 1))
        for (i, k), v in zip(steps, values):
            out[i, : k + 1] += (v - mean) / (std + 1e-4)  # every token at or before the turn's end
    return out


def gae(rewards, values, lengths, gamma, lam, turn_rewards=None):
    adv, ret = torch.zeros_like(values), torch.zeros_like(values)
    for i in range(len(rewards)):
        n = int(lengths[i])
        a, next_v = 0.0, 0.0
        for k in reversed(range(n)):
            r = rewards[i].item() if k == n - 1 else 0.0
            if turn_rewards is not None:
                r += turn_rewards[i, k].item()
            delta = r + gamma * next_v - values[i, k].item()
            a = delta + gamma * lam * a
            next_v = values[i, k].item()
            adv[i, k], ret[i, k] = a, a + values[i, k].item()
    return adv, ret


def token_advantages(t, meta):
    """The expected [N, T] advantages of a batch file (and the GAE returns, or None)."""
    rewards, groups, lengths = t["rewards"], t["group"], t["lengths"]
    width = t["token_adv"].shape[1]
    mask = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).double()
    name = meta.get("advantage", "grpo")
    turns = t.get("turn_rewards")
    if turns is not None and turns.shape[1] == 0:
        turns = None
    if name == "gae":
        adv, ret = gae(rewards, t["values"], lengths, float(meta["gamma"]), float(meta["lambda"]), turns)
        return whiten(adv, mask), ret * mask, mask
    if name == "grpo":
        per = advantages(rewards, groups)
    elif name == "rloo":
        per = group_centred(rewards, groups, True)
    elif name in ("reinforce++", "reinforce++-baseline"):
        per = rewards.clone() if name == "reinforce++" else group_centred(rewards, groups, False)
    else:
        raise SystemExit(f"unknown advantage estimator {name}")
    tokens = per.unsqueeze(1) * mask
    if name.startswith("reinforce++"):
        tokens = whiten(tokens, mask)
    if name == "grpo" and turns is not None:
        tokens = tokens + process(turns, t["turn_ends"], groups, lengths) * mask
    return tokens, None, mask


def value_sums(t, meta):
    v, old, ret, mask = t["values"], t["old_values"], t["returns"], t["mask"]
    c = float(meta["value_clip"])
    plain = (v - ret) ** 2
    loss, clipped = plain, 0.0
    if c > 0:
        other = (torch.clamp(v, old - c, old + c) - ret) ** 2
        loss = torch.maximum(plain, other)
        clipped = ((other > plain).double() * mask).sum().item()
    return {"value_sum": 0.5 * (loss * mask).sum().item(), "value_clipped": clipped}


def piece_sums(t, meta):
    adv = t["adv"] if t["adv"].dim() == 2 else t["adv"].unsqueeze(1)
    new, old, mask = t["new_lp"], t["old_lp"], t["mask"]
    clip, kl_coef, norm = float(meta["clip"]), float(meta["kl_coef"]), int(meta["norm"])
    correction, cap = int(meta.get("correction", "0")), float(meta.get("cap", "1"))
    base = t["prox_lp"] if correction == 2 else old
    ratio = torch.exp((new - base) * mask)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * adv
    loss = -torch.minimum(unclipped, clipped)
    weights = {}
    if correction:
        w = torch.exp(((new if correction == 1 else t["prox_lp"]) - old) * mask)
        weights = {"weight_sum": (w * mask).sum().item(), "weight_max": (w * mask).max().item(),
                   "capped": ((w > cap).double() * mask).sum().item()}
        w = torch.clamp(w, max=cap)
        loss = -w * adv * new if correction == 1 else w * loss
    kl_sum = 0.0
    if "ref_lp" in t and kl_coef != 0:
        d = (t["ref_lp"] - new) * mask
        kl = 0.5 * d * d if meta.get("kl_estimator", "k3") == "k2" else torch.exp(d) - d - 1
        loss = loss + kl_coef * kl
        kl_sum = (kl * mask).sum().item()
    loss = loss * mask
    lengths = mask.sum(1)
    total = (loss.sum(1) / lengths.clamp(min=1)).sum() if norm == 1 else loss.sum()
    n_clipped = 0.0 if correction == 1 else ((clipped < unclipped).double() * mask).sum().item()
    out = {"sum": total.item(), "tokens": lengths.sum().item(), "sequences": (lengths > 0).sum().item(),
           "clipped": n_clipped, "kl": kl_sum}
    out.update(weights)
    if "values" in t:
        out.update(value_sums(t, meta))
    return out


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: grpo_loss_reference.py DIR")
    bad, worst = 0, 0.0
    batches = sorted(glob.glob(os.path.join(sys.argv[1], "step-*-batch.safetensors")))
    pieces = sorted(glob.glob(os.path.join(sys.argv[1], "step-*-update-*-piece-*.safetensors")))
    if not batches or not pieces:
        raise SystemExit(f"{sys.argv[1]}: no dumped steps")
    for path in batches:
        t, meta = read_safetensors(path)
        adv, ret, mask = token_advantages(t, meta)
        checks = [("advantages", adv, t["token_adv"])]
        if ret is not None:
            checks.append(("returns", ret, t["returns"]))
        for what, want, got in checks:
            diff = ((want - got) * mask).abs().max().item()
            worst = max(worst, diff)
            if diff > 1e-4:
                print(f"{path}: {what} differ by {diff:.3g}")
                bad += 1
    for path in pieces:
        t, meta = read_safetensors(path)
        mine = piece_sums(t, meta)
        scale = max(1.0, abs(mine["sum"]))
        for key in ("tokens", "sequences", "clipped", "capped", "value_clipped"):
            if key not in mine:
                continue
            if mine[key] != float(meta[key]):
                print(f"{path}: {key} {meta[key]}, reference {mine[key]}")
                bad += 1
        for key in ("sum", "kl", "weight_sum", "weight_max", "value_sum"):
            if key not in mine:
                continue
            diff = abs(mine[key] - float(meta[key])) / max(1.0, abs(mine[key]))
            worst = max(worst, diff)
            if diff > 1e-5 * scale:
                print(f"{path}: {key} {meta[key]}, reference {mine[key]:.9g}")
                bad += 1
    print(f"{len(batches)} batches, {len(pieces)} pieces: largest relative difference {worst:.2e}, "
          f"{bad} disagreements")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
