#!/usr/bin/env bash
# rl-profile plan checked against real runs. One SFT warm start, then grpo-demo.sh runs of several
# configurations from it: sync with one rollout (the run the costs are fitted to), then semi-sync,
# async (k = 1), async with k = 2 and sync with two rollouts. rl-profile plan fits per-role costs
# to the sync run's event logs, predicts each other configuration's seconds per step with its
# simulator, and compares with what each run measured. Dynamic sampling is off so every
# configuration does the same work per step (with it, the share of groups kept depends on how far
# each run has learned, which is not what this checks). Timings are wall clock on a shared machine:
# other load on the cores shows up as error.
# Prints the plan's ranking of every split of the slots (stdout), the predicted and measured table,
# and, last, the line
#   plan error: X.X% X.X% X.X% X.X%
# (|predicted - measured| / measured per checked run, in the order above).
# Usage: yatt-plan.sh [--short] [--steps N] [--seed N] [--configs "semi-sync async async-k2 sync-2"]
#   --short  a smoke run for CI: 4 steps a run, 8 prompts a step, two checked configurations; it
#            shows the pipeline works, not that the predictions are within 15%
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
rl_tools

steps=24 seed=1 sft_steps=40 configs="semi-sync async async-k2 sync-2" warmup=3 short=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=5 short=1 warmup=1 configs="async sync-2" extra=(--prompts-per-step 8) ;;
    --steps) steps="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --configs) configs="$2"; shift ;;
    *) echo "yatt-plan: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
# The grpo-demo.sh options of a configuration.
options() {
  case "$1" in
    sync) echo "--mode sync" ;;
    sync-2) echo "--mode sync --rollouts 2" ;;
    semi-sync) echo "--mode semi-sync" ;;
    async) echo "--mode async" ;;
    async-k2) echo "--mode async -- --max-staleness 2" ;;
    *) echo "yatt-plan: unknown configuration $1 (sync, sync-2, semi-sync, async, async-k2)" >&2; exit 64 ;;
  esac
}
for c in $configs; do options "$c" >/dev/null; done
root="$(fresh_run_dir yatt-plan)"

echo "== SFT warm start ($sft_steps steps), shared by every run" >&2
demo_start "$root/warm" "$seed" 0.99 "$sft_steps" "$sft_steps" >&2
checks=()
for c in sync $configs; do
  echo "== $c: $steps steps ($(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))" >&2
  opts="$(options "$c")"
  case "$opts" in *" -- "*) more="${opts#* -- }"; opts="${opts%% -- *}" ;; *) more="" ;; esac
  # shellcheck disable=SC2086
  RL_RUN_DIR="$root/$c" bash "$here/grpo-demo.sh" --steps "$steps" --seed "$seed" --sft-from "$root/warm" \
    --final-eval 0 $opts -- --dynamic-sampling false "${extra[@]}" $more > "$root/$c.out" 2> "$root/$c.log" ||
    { echo "yatt-plan: the $c run failed; its log: $root/$c.log" >&2; tail -n 5 "$root/$c.log" >&2; exit 70; }
  [ "$c" = sync ] || checks+=(--check "$root/$c")
done
echo "== rl-profile plan, fitted to the sync run; runs in $root" >&2
rl-profile plan --from "$root/sync" --warmup "$warmup" --pool 4 "${checks[@]}"
