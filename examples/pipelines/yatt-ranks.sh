#!/usr/bin/env bash
# Data-parallel training against one trainer: the GRPO demo (grpo-demo.sh) with one rl-train rank
# and with two (rl-train grpo --world 2, one thread each), same seed, same step budget, the
# two-rank run taking the one-rank run's SFT warm start (--sft-from) so both start from the same
# weights. It prints one line:
#   ranks 2/1: accuracy X.XXX/X.XXX, s/step X.XX/X.XX
# accuracy: the final weights' held-out greedy accuracy (the demo's final evaluation); s/step: the
# mean wall-clock seconds per training step (rank 0's step events, the first step left out: it
# waits for the first rollouts). On a 2-core machine the two ranks share the cores with the rollout
# and the reward, and a sync step splits only its training between them, so two ranks are faster
# by about what that saves (see docs/design.md "Data-parallel training").
# Usage: yatt-ranks.sh [--short] [--steps N] [--seed N] [--mode sync|semi-sync|async] [-- rl-train options...]
#   --short: a smoke run for CI (a few steps; it shows both forms run, not that they learn)
#   -- ...: more options for rl-train grpo in both runs, e.g. PPO with a critic over minibatches:
#           -- --advantage gae --critic-lr 1e-3 --minibatches 2 --epochs 2
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory; both runs
# go under it, as ranks-1 and ranks-2).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
args=() steps=200 seed=1 mode=sync more=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) args+=(--short); steps=3 ;;
    --steps) steps="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --mode) mode="$2"; shift ;;
    --) shift; more=(-- "$@"); break ;;
    *) echo "yatt-ranks: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
root="$(fresh_run_dir yatt-ranks)"
for ranks in 1 2; do
  sft=()
  [ "$ranks" = 1 ] || sft=(--sft-from "$root/ranks-1")
  echo "== $ranks trainer rank(s): $steps steps, seed $seed, $mode" >&2
  RL_RUN_DIR="$root/ranks-$ranks" bash "$here/grpo-demo.sh" "${args[@]}" --steps "$steps" --seed "$seed" \
    --mode "$mode" --train-ranks "$ranks" "${sft[@]}" "${more[@]}" > "$root/ranks-$ranks.table"
done
python3 - "$root" <<'PY'
import json, sys
root = sys.argv[1]
def figures(ranks):
    run = f"{root}/ranks-{ranks}"
    steps = [e for e in map(json.loads, open(f"{run}/events/train-0.jsonl")) if e["event"] == "step"]
    timed = [e["seconds"] for e in steps[1:]] or [e["seconds"] for e in steps]
    accuracy = json.loads(open(f"{run}/eval-final.json").read())["accuracy"]
    return accuracy, sum(timed) / len(timed)
(a2, s2), (a1, s1) = figures(2), figures(1)
print(f"runs: {root}", file=sys.stderr)
print(f"ranks 2/1: accuracy {a2:.3f}/{a1:.3f}, s/step {s2:.2f}/{s1:.2f}")
PY
