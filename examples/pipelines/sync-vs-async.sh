#!/usr/bin/env bash
# The same GRPO budget in sync mode (k = 0, f = 1: on-policy) and async mode (k = 1, f = 0:
# rollouts run one version ahead), side by side: samples/s, seconds per step, final held-out
# greedy accuracy. Each mode is a full grpo-demo.sh run with its own SFT warm start from the same
# seed, so both start from the same weights.
# Usage: sync-vs-async.sh [--short] [--steps N] [--seed N]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
args=() steps=200 seed=1
while [ $# -gt 0 ]; do
  case "$1" in
    --short) args+=(--short); steps=3 ;;
    --steps) steps="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    *) echo "sync-vs-async: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
root="$(mktemp -d /tmp/rl-sync-vs-async.XXXXXX)"
for mode in sync async; do
  echo "== $mode" >&2
  RL_RUN_DIR="$root/$mode" bash "$here/grpo-demo.sh" "${args[@]}" --mode "$mode" --steps "$steps" --seed "$seed" \
    > "$root/$mode.table"
done
python3 - "$root" <<'PY'
import json, sys
root = sys.argv[1]
# Held-out greedy accuracy of the SFT start and the final weights, on the demo's final evaluation
# (2000 problems; fewer in the short form).
print(f"{'mode':<6} {'steps':>5} {'samples/s':>10} {'s/step':>7} {'wall (s)':>9} {'start':>6} {'final':>6} {'gain':>6}")
for mode in ("sync", "async"):
    ev = [json.loads(l) for l in open(f"{root}/{mode}/events/train-0.jsonl")]
    steps = [e for e in ev if e["event"] == "step"]
    wall = steps[-1]["ts"] - next(e["ts"] for e in ev if e["event"] == "start")
    samples = sum(e["samples"] for e in steps)
    start, final = (json.load(open(f"{root}/{mode}/eval-{w}.json"))["accuracy"] for w in ("start", "final"))
    print(f"{mode:<6} {len(steps):>5} {samples / wall:>10.1f} {wall / len(steps):>7.2f} {wall:>9.0f} "
          f"{start:>6.3f} {final:>6.3f} {100 * (final - start):>+6.1f}")
print(f"runs: {root}")
PY
