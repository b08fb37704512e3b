#!/usr/bin/env bash
# The same training budget under several configurations and seeds, side by side: on-policy sync
# GRPO (k = 0), asynchronous GRPO with rollouts up to two versions ahead (k = 2, f = 0) without a
# correction, with truncated importance sampling and with decoupled PPO, sync GRPO in minibatch
# epochs (2 minibatches, 2 passes: 4 optimizer steps per batch on the same samples), and sync PPO
# with a critic (GAE). Each run is a full grpo-demo.sh; the runs of one seed share its SFT warm start
# (the first configuration's), so every configuration starts from the same weights.
# It prints a table per run (steps, samples/s, s/step, start and final held-out accuracy on the
# demo's final evaluation) and ends with one line per configuration:
#   MODE CORRECTION: held-out X.XXX +- X.XXX (N seeds), samples/s X, x sync X.XX
# (mean and sample standard deviation of the final accuracy over the seeds; samples/s over the
# whole run, wall clock; x sync against the first configuration).
# Usage: sync-vs-async.sh [--short] [--steps N] [--seeds N] [--first-seed N] [--configs "A B ..."] [--dir DIR]
#   configurations: sync-none async-none async-tis async-decoupled sync-minibatch sync-ppo
#   sync-ppo-small (default: all but sync-ppo-small, PPO with a critic smaller than the policy)
#   --short: a smoke run for CI (1 seed, a few steps, sync-none and async-decoupled unless given)
#   --dir: keep the runs in DIR (default a new /tmp directory). A run DIR already holds finished
#     (its final evaluation written) is not run again, so the same command goes on where a stopped
#     table stopped (the whole default table took about 70 minutes on 2 quiet cores); an unfinished one starts over.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
args=() steps=200 seeds=3 first=1 root="" configs="sync-none async-none async-tis async-decoupled sync-minibatch sync-ppo" short=0
while [ $# -gt 0 ]; do
  case "$1" in
    --short) args+=(--short); steps=3; seeds=1; short=1 ;;
    --steps) steps="$2"; shift ;;
    --seeds) seeds="$2"; shift ;;
    --first-seed) first="$2"; shift ;;
    --configs) configs="$2"; short=0; shift ;;
    --dir) root="$2"; shift ;;
    *) echo "sync-vs-async: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
[ "$short" = 1 ] && configs="sync-none async-decoupled"
# The grpo-demo.sh options of a configuration.
options() {
  case "$1" in
    sync-none) echo "--mode sync" ;;
    async-none) echo "--mode async -- --max-staleness 2" ;;
    async-tis) echo "--mode async -- --max-staleness 2 --correction tis" ;;
    async-decoupled) echo "--mode async -- --max-staleness 2 --correction decoupled" ;;
    sync-minibatch) echo "--mode sync -- --minibatches 2 --epochs 2" ;;
    sync-ppo) echo "--mode sync -- --advantage gae --critic-lr 1e-3" ;;
    # The critic a model of its own, 1 layer 64 wide against the policy's 3 layers 128 wide.
    sync-ppo-small) echo "--mode sync -- --advantage gae --critic-lr 1e-3 --critic-config $here/../../share/models/critic-tiny" ;;
    *) echo "sync-vs-async: unknown configuration $1" >&2; exit 64 ;;
  esac
}
for c in $configs; do options "$c" >/dev/null; done
[ -n "$root" ] || root="$(mktemp -d /tmp/rl-sync-vs-async.XXXXXX)"
echo "== runs in $root" >&2
for ((seed = first; seed < first + seeds; seed++)); do
  sft=()
  for c in $configs; do
    run="$root/seed-$seed/$c"
    if [ -f "$run/eval-final.json" ]; then
      echo "== seed $seed: $c finished before, kept" >&2
    else
      echo "== seed $seed: $c" >&2
      rm -rf "$run"
      mkdir -p "$root/seed-$seed"
      # shellcheck disable=SC2046
      RL_RUN_DIR="$run" bash "$here/grpo-demo.sh" "${args[@]}" --steps "$steps" --seed "$seed" \
        "${sft[@]}" $(options "$c") > "$run.table"
    fi
    [ ${#sft[@]} -gt 0 ] || sft=(--sft-from "$run")
  done
done
python3 - "$root" "$first" "$seeds" $configs <<'PY'
import json, statistics, sys
root, first, seeds, configs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
# Held-out greedy accuracy of the SFT start and the final weights, on the demo's final evaluation
# (2000 problems; fewer in the short form).
print(f"{'config':<16} {'seed':>4} {'steps':>5} {'samples/s':>10} {'s/step':>7} {'wall (s)':>9} "
      f"{'start':>6} {'final':>6} {'gain':>6}")
summary = {}
for c in configs:
    finals, rates = [], []
    for seed in range(first, first + seeds):
        run = f"{root}/seed-{seed}/{c}"
        ev = [json.loads(l) for l in open(f"{run}/events/train-0.jsonl")]
        steps = [e for e in ev if e["event"] == "step"]
        wall = steps[-1]["ts"] - next(e["ts"] for e in ev if e["event"] == "start")
        samples = sum(e["samples"] for e in steps)
        start, final = (json.load(open(f"{run}/eval-{w}.json"))["accuracy"] for w in ("start", "final"))
        finals.append(final)
        rates.append(samples / wall)
        print(f"{c:<16} {seed:>4} {len(steps):>5} {samples / wall:>10.1f} {wall / len(steps):>7.2f} {wall:>9.0f} "
              f"{start:>6.3f} {final:>6.3f} {100 * (final - start):>+6.1f}")
    summary[c] = (finals, rates)
print(f"runs: {root}")
base = statistics.mean(summary[configs[0]][1])
for c in configs:
    finals, rates = summary[c]
    sd = statistics.stdev(finals) if len(finals) > 1 else 0.0
    mode, correction = c.split("-", 1)
    print(f"{mode} {correction}: held-out {statistics.mean(finals):.3f} +- {sd:.3f} ({len(finals)} seeds), "
          f"samples/s {statistics.mean(rates):.0f}, x {configs[0].split('-')[0]} {statistics.mean(rates) / base:.2f}")
PY
