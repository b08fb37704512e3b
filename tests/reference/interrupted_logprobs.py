#!/usr/bin/env python3
"""Independent check of partial rollouts (rl-rollout run --on-new-weights interrupt).

Usage: interrupted_logprobs.py CONFIG.json TEMPERATURE VERSION=WEIGHTS.safetensors... < ROWS
ROWS: JSON lines as `rl-queue get` prints them, with prompt_ids, response_ids, logprobs and
token_versions. For every token, the weights of the version it is stamped with are run over the
whole sequence by hf_reference.forward (float64, no cache, no roleflow code) and the recorded
log-prob must be log_softmax(logits / TEMPERATURE)[token] (TEMPERATURE 0: greedy, the model's own
log_softmax, and the token must be the argmax). It also counts the tokens after a switch whose
log-prob the older version would NOT give, so a check that cannot tell versions apart fails.
Prints {"rows", "tokens", "mixed_rows", "switched_tokens", "unlike_older", "max_abs_diff"} and
exits 1 on a mismatch (a message on stderr).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

TOLERANCE = 1e-3  # float32 decoding against float64


def data(x):
    return x["data"] if isinstance(x, dict) else x


def main():
    cfg = json.load(open(sys.argv[1]))
    temperature = float(sys.argv[2])
    weights = {}
    for arg in sys.argv[3:]:
        version, path = arg.split("=", 1)
        weights[int(version)] = ref.read_safetensors(path)
    out = {"rows": 0, "tokens": 0, "mixed_rows": 0, "switched_tokens": 0, "unlike_older": 0, "max_abs_diff": 0.0}
    for line in sys.stdin:
        row = json.loads(line)
        prompt, resp = data(row["prompt_ids"]), data(row["response_ids"])
        lps, versions = data(row["logprobs"]), data(row["token_versions"])
        ids = prompt + resp
        logits = {v: ref.forward(cfg, ref.Weights(weights[v]), ids) for v in set(versions)}
        scaled = {v: torch.log_softmax(x / (temperature or 1.0), dim=-1) for v, x in logits.items()}
        out["rows"] += 1
        out["mixed_rows"] += versions[0] != versions[-1]
        for j, (tok, lp, v) in enumerate(zip(resp, lps, versions)):
            pos = len(prompt) + j - 1
            want = scaled[v][pos][tok].item()
            diff = abs(want - lp)
            out["max_abs_diff"] = max(out["max_abs_diff"], diff)
            out["tokens"] += 1
            if diff > TOLERANCE:
                print(f"row {row.get('index')}: token {j} (id {tok}, version {v}) has log-prob {lp}; "
                      f"the reference gives {want}", file=sys.stderr)
                sys.exit(1)
            if temperature == 0 and tok != int(logits[v][pos].argmax()):
                print(f"row {row.get('index')}: token {j} is not version {v}'s argmax", file=sys.stderr)
                sys.exit(1)
            if v != versions[0]:
                out["switched_tokens"] += 1
                out["unlike_older"] += abs(scaled[versions[0]][pos][tok].item() - lp) > TOLERANCE
    print(json.dumps(out))


if __name__ == "__main__":
    main()
