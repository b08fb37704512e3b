#!/usr/bin/env bash
# The trainer's seconds per step on the GRPO demo with a KL term, its reference model inside
# rl-train (--kl-coef) or as a role of its own (--ref-role: rl-train score, rl-train grpo
# --ref-from-queue): same seed, same SFT start (the first run's), medians over the steps after the
# first 3 of the trainer's step events (seconds: the whole step; train_seconds: its forward,
# backward and update, where the in-process reference's forward pass is).
# Usage: scripts/ref-role-timing.sh [STEPS (30)] [MODE (async)] [KL (0.01)]
# Environment: RL_BUILD_DIR (default ./build); RL_SFT_FROM: take the SFT start of this earlier demo
# run directory (the SFT warm start takes most of the time: about 7 minutes on 2 shared cores).
set -euo pipefail
steps="${1:-30}" mode="${2:-async}" kl="${3:-0.01}"
demo="$(cd "$(dirname "$0")/.." && pwd)/examples/pipelines/grpo-demo.sh"
base="$(mktemp -d /tmp/rl-ref-timing.XXXXXX)"
common=(--steps "$steps" --mode "$mode" --kl-coef "$kl" --final-eval 0)
sft=()
[ -n "${RL_SFT_FROM:-}" ] && sft=(--sft-from "$RL_SFT_FROM")  # an earlier run's SFT start (same seed)
RL_RUN_DIR="$base/in-process" bash "$demo" "${common[@]}" "${sft[@]}" >&2
RL_RUN_DIR="$base/role" bash "$demo" "${common[@]}" --ref-role --sft-from "$base/in-process" >&2
python3 - "$base" <<'PY'
import json, statistics, sys
def medians(run):
    steps = [json.loads(l) for l in open(f"{sys.argv[1]}/{run}/events/train-0.jsonl") if '"event":"step"' in l]
    steps = steps[3:]
    return (statistics.median(s["seconds"] for s in steps), statistics.median(s["train_seconds"] for s in steps),
            statistics.mean(s["kl"] for s in steps), len(steps))
a, b = medians("in-process"), medians("role")
print(f"reference in-process: {a[0]:.3f} s/step (train {a[1]:.3f} s, mean kl {a[2]:.2e}); "
      f"as its own role: {b[0]:.3f} s/step (train {b[1]:.3f} s, mean kl {b[2]:.2e}); {a[3]} steps each; "
      f"run dirs in {sys.argv[1]}")
PY
