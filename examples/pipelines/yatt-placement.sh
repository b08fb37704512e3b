#!/usr/bin/env bash
# Dynamic placement, measured: the GRPO demo's pipeline under rl-watchdog run with a pool of P
# slots split between rl-rollout instances and rl-reward instances (the rule verifier, or a judge
# model with --judge), each instance in its slot (rl-watchdog(1), SLOTS, PLACEMENT).
# Two runs from one SFT warm start:
#   sweep    [placement] search = "sweep": every split measured (the median step time of `measure`
#            trainer steps after `settle`), which gives the best split and the worst;
#   ternary  the watchdog's ternary search, started from the sweep's worst split.
# It prints the sweep's table, the search's moves and measurements, and the line
#   placement: found X/Y within Z.Z% of best X/Y in N moves (a sweep: M)
# where the found split's time and the best are both the sweep's measurements (one run, one
# condition of the machine), and N counts the slots the search moved.
#
# Slots (--slots):
#   quota    (the default) the trainer has the first CPU to itself; the pool shares the last CPU,
#            each slot with a CPU quota of 1/P of it ("cpus=1 quota=0.167"): a slot is capacity
#            that its role cannot lend, as a GPU is, so moving a slot moves 1/P of the pool's
#            speed from one role to the other. Where the machine cannot make cgroups (rl-watchdog
#            exits 69), the run falls back to shared, saying so.
#   shared   slots alternate between the first and last CPU with no quota, the trainer on all
#            CPUs: a role that waits leaves its core to the others, so the split hardly matters
#            on 2 cores and the search measures mostly noise (docs/design.md, Placement).
#
# Usage: yatt-placement.sh [--short] [--pool P] [--measure N] [--seed N] [--judge DIR]
#                          [--slots quota|shared] [--keep]
#   --pool    slots in the pool (default 6)
#   --measure trainer steps whose median times a split (default 12, after 3 that let a move settle)
#   --judge   score with rl-reward --judge DIR instead of the addition rule
#   --short   a smoke run for CI: a pool of 3, small steps from an untrained model
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

seed=1 pool=6 keep=0 target=0.3 sft_steps=2000 judge="" settle=3 measure=12 slots=quota extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) pool=3; target=0.99; sft_steps=20; settle=1; measure=2
             extra=(--dynamic-sampling false --prompts-per-step 8) ;;
    --pool) pool="$2"; shift ;;
    --measure) measure="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --judge) judge="$2"; shift ;;
    --slots) slots="$2"; shift ;;
    --keep) keep=1 ;;
    *) echo "yatt-placement: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
[[ "$pool" =~ ^[0-9]+$ ]] && [ "$pool" -ge 2 ] || { echo "yatt-placement: --pool must be 2 or more" >&2; exit 64; }
case "$slots" in quota|shared) ;; *) echo "yatt-placement: --slots is quota or shared, not $slots" >&2; exit 64 ;; esac
top="$(run_dir yatt-placement)"
mkdir -p "$top"
current=""
cleanup() {
  [ -z "$current" ] || rl-watchdog stop "$current" >/dev/null 2>&1 || true
  [ "$keep" = 1 ] || [ -n "${RL_RUN_DIR:-}" ] || rm -rf "$top"
}
trap cleanup EXIT

demo_start "$top/sft" "$seed" "$target" "$sft_steps"
cpus=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
first=$(echo "$cpus" | tr ',-' '\n\n' | head -1)
last=$(echo "$cpus" | tr ',-' '\n\n' | tail -1)
score="--verifier addition"
# The demo's judge, as yatt-judge.sh trains it (lib.sh: demo_judge_template, verdict token 1).
[ -z "$judge" ] || score="--judge $judge --judge-template '$demo_judge_template' --judge-verdict 1"

# pipeline RUN SEARCH ROLLOUTS: the pipeline file of one run.
pipeline() {
  local run="$1" weights; weights="$(free_endpoint)"
  # Gets of 8 groups, so that a step's 64 groups spread over every instance of a role: with the
  # tools' 256 rows a get, two instances took all of a step's first wave and the split of the
  # rest did not matter.
  local list="" i quota count=64
  quota=$(python3 -c "print(f'{1 / $pool:.3f}')")
  for ((i = 0; i < pool; i++)); do
    if [ "$slots" = quota ]; then list+="\"cpus=$last quota=$quota\", "
    else list+="\"cpus=$([ $((i % 2)) = 0 ] && echo "$first" || echo "$last")\", "; fi
  done
  if [ "$slots" = quota ]; then list+="\"cpus=$first\""; else list+="\"cpus=$cpus\""; fi
  cat <<TOML
[watchdog]
heartbeat_interval = 0.5
max_full_restarts = 3
grace = 5
slots = [$list]
[placement]
between = ["rollout", "reward"]
search = "$2"
settle = $settle
measure = $measure
[role.queue]
command = "rl-queue serve --dir $run/queue --bind $RL_QUEUE --log-level warn --declare generate=prompt_ids --declare reward=prompt,response,answer --declare train=prompt_ids,response_ids,logprobs,reward,version"
[role.rollout]
command = "rl-rollout run --checkpoint-dir $run/ckpt --weights-from $weights --threads 1 --count $count --seed $seed --temperature 1 --max-new-tokens 8 --log-level warn"
count = $3
slots = 1
[role.reward]
command = "rl-reward run $score --threads 1 --count $count --log-level warn"
count = $((pool - $3))
slots = 1
[role.train]
command = "rl-train grpo --checkpoint-dir $run/ckpt --weights-bind $weights --prompts $top/sft/prompts.jsonl --threads \$RL_SLOT_THREADS --seed $seed --mode sync --max-steps 100000 --eval-every 0 --lease-seconds 10 --log-level warn ${extra[*]}"
slots = 1
stall = 120
TOML
}

# search_run NAME SEARCH ROLLOUTS: runs the pipeline until the watchdog's placement-found event.
search_run() {
  local run="$top/$1"
  current="$run"
  mkdir -p "$run/ckpt"
  cp "$top/sft/ckpt/weights-0.safetensors" "$run/ckpt/"
  export RL_QUEUE; RL_QUEUE="$(free_endpoint)"
  pipeline "$run" "$2" "$3" > "$run/pipeline.toml"
  echo "== $1: a pool of $pool slots ($slots), starting at $3 rollout(s) / $((pool - $3)) reward role(s)" >&2
  rl-watchdog run "$run/pipeline.toml" --run-dir "$run" --heartbeat "$(free_endpoint)" 2> "$run/watchdog.log" &
  local wpid=$! log="$run/events/watchdog-0.jsonl"
  until grep -q '"event":"placement-found"' "$log" 2>/dev/null; do
    if ! kill -0 "$wpid" 2>/dev/null; then
      if [ "$slots" = quota ] && grep -q "cannot enforce" "$run/watchdog.log"; then
        echo "yatt-placement: $(grep -m1 "cannot enforce" "$run/watchdog.log")" >&2
        echo "yatt-placement: no CPU quotas here; the slots share the cores instead (--slots shared)" >&2
        slots=shared current=""
        rm -rf "$run"
        search_run "$@"
        return
      fi
      echo "yatt-placement: rl-watchdog ended before the search did; its log:" >&2
      tail -n 30 "$run/watchdog.log" >&2
      exit 70
    fi
    sleep 0.5
  done
  rl-watchdog stop "$run" >/dev/null 2>&1 || true
  wait "$wpid" 2>/dev/null || true
  current=""
}

search_run sweep sweep $((pool / 2))
worst=$(python3 - "$top/sweep/events/watchdog-0.jsonl" <<'PY'
import json, sys
m = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "placement-measure"]
print(max(m, key=lambda e: e["seconds"])["split"])
PY
)
search_run ternary ternary "$worst"

python3 - "$top" "$pool" <<'PY'
import json, sys
top, pool = sys.argv[1], int(sys.argv[2])
def events(run):
    return [e for e in map(json.loads, open(f"{top}/{run}/events/watchdog-0.jsonl"))]
sweep = {e["split"]: e["seconds"] for e in events("sweep") if e["event"] == "placement-measure"}
sweep_moves = sum(1 for e in events("sweep") if e["event"] == "placement-move")
found = [e for e in events("ternary") if e["event"] == "placement-found"][0]
print("split (rollouts/reward)   sweep s/step   ternary s/step", file=sys.stderr)
for x in sorted(sweep):
    t = found["measured"].get(str(x))
    print("%12d/%-12d %10.3f   %12s" % (x, pool - x, sweep[x], "%.3f" % t if t is not None else "-"), file=sys.stderr)
for e in events("ternary"):
    if e["event"] == "placement-move":
        print("  move: %s -> %s (%s)" % (e["from"], e["to"], e["reason"]), file=sys.stderr)
best = min(sweep, key=sweep.get)
x = found["split"]
gap = 100.0 * (sweep[x] - sweep[best]) / sweep[best]
print("placement: found %d/%d within %.1f%% of best %d/%d in %d moves (a sweep: %d)"
      % (x, pool - x, gap, best, pool - best, found["moves"], sweep_moves))
PY
