#!/usr/bin/env bash
# Fault drill: the GRPO demo's pipeline (rl-queue, rl-rollout, rl-reward, rl-train, weights over
# UCX, the same SFT warm start to 0.3) under rl-watchdog run, three times from one SFT checkpoint:
#   none   no faults;
#   role   the trainer killed (SIGKILL) at a random moment within every 10% of the steps, and only
#          the trainer restarted (from its last checkpoint) while the other roles keep working;
#          a spare trainer (rl-watchdog(1), `spares`) is started ahead and takes over at once;
#   job    the same kills, and every role restarted each time (what frameworks do today).
# It prints ETTR (rl-profile report), end-to-end time, the time from each kill to the trainer's next
# step (p50/max; the usual step period beside it) and the time lost per cause for the three, and
# whether role-based recovery keeps ETTR at or above 0.90 and above the whole-job restart.
#
# Usage: fault-drill.sh [--short] [--steps N] [--seed N] [--spares N] [--keep]
#   --steps   GRPO steps of each scenario (default 200; the demo runs 600): ten kills whatever
#             the length, so fewer steps is a higher fault rate
#   --spares  spare trainers for the role scenario (default 1; 0: a restart starts rl-train anew)
#   --short   a smoke run for CI: 60 small steps from an untrained model, one kill in each half
#             (a kill waits at least 1.1 s into its step: on an idle machine 20 steps of 0.09 s
#             ended before the second kill, leaving no step after it to time)
#   --keep    keep the run directories (printed) for rl-profile report --svg
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

seed=1 steps=200 kills=10 spares=1 keep=0 target=0.3 sft_steps=2000 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=60; kills=2; target=0.99; sft_steps=20; extra=(--dynamic-sampling false --prompts-per-step 8) ;;
    --steps) steps="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --spares) spares="$2"; shift ;;
    --keep) keep=1 ;;
    *) echo "fault-drill: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
top="$(run_dir fault-drill)"
mkdir -p "$top"
RANDOM=$seed
current=""
cleanup() {
  [ -z "$current" ] || rl-watchdog stop "$current" >/dev/null 2>&1 || true
  [ "$keep" = 1 ] || [ -n "${RL_RUN_DIR:-}" ] || rm -rf "$top"
}
trap cleanup EXIT

demo_start "$top/sft" "$seed" "$target" "$sft_steps"

# pipeline RUN WEIGHTS SPARES: the pipeline file of one scenario: the demo's roles and options.
pipeline() {
  local run="$1" weights="$2"
  cat <<TOML
[watchdog]
heartbeat_interval = 1
max_full_restarts = 100
grace = 5
[role.queue]
command = "rl-queue serve --dir $run/queue --bind $RL_QUEUE --log-level warn --declare generate=prompt_ids --declare reward=prompt,response,answer --declare train=prompt_ids,response_ids,logprobs,reward,version"
[role.rollout]
command = "rl-rollout run --checkpoint-dir $run/ckpt --weights-from $weights --threads 1 --seed $seed --temperature 1 --max-new-tokens 8 --log-level warn"
[role.reward]
command = "rl-reward run --verifier addition --log-level warn"
[role.train]
command = "rl-train grpo --checkpoint-dir $run/ckpt --weights-bind $weights --prompts $top/sft/prompts.jsonl --threads 1 --seed $seed --mode async --max-steps $steps --eval-every 5 --eval-data $top/sft/heldout.jsonl --verifier addition --max-new-tokens 6 --lease-seconds 10 --log-level warn ${extra[*]}"
stall = 120
spares = $3
TOML
}

# last_step RUN: the trainer's newest step event (0 before the first).
last_step() {
  local f="$1/events/train-0.jsonl"
  { grep '"event":"step"' "$f" 2>/dev/null || true; } | tail -n 1 | grep -o '"step":[0-9]*' | cut -d: -f2 | grep . || echo 0
}

# last_seconds RUN: how long the trainer's newest step took (1 before the first).
last_seconds() {
  local f="$1/events/train-0.jsonl"
  { grep '"event":"step"' "$f" 2>/dev/null || true; } | tail -n 1 | grep -o '"seconds":[0-9.]*' | cut -d: -f2 | grep . || echo 1
}

# kill_schedule RUN: SIGKILLs the trainer once within each of `kills` equal parts of the steps,
# at a random step of the part and a uniform moment within it, after at least one completed step
# since its last restart (a kill in the first step after a restart would rightly escalate).
kill_schedule() {
  local run="$1" part=$(( (steps + kills - 1) / kills )) last_kill=0 k
  for ((i = 0; i < kills; i++)); do
    k=$(( i * part + RANDOM % part + 1 ))
    [ "$k" -lt "$steps" ] || k=$((steps - 1))  # the last part's kill, not after the final step
    [ "$k" -gt "$last_kill" ] || k=$((last_kill + 1))
    [ "$k" -lt "$steps" ] || break
    while [ "$(last_step "$run")" -lt "$k" ]; do
      kill -0 "$wpid" 2>/dev/null || return 0
      sleep 0.2
    done
    # A uniform moment of the step after it (the last step's duration says how long one takes),
    # and at least a heartbeat after it began: the watchdog has seen the step.
    sleep "$(awk -v s="$(last_seconds "$run")" -v r="$RANDOM" 'BEGIN { d = s - 1.1; if (d < 0) d = 0; printf "%.2f", 1.1 + d * r / 32768 }')"
    # The final step may have come meanwhile (short steps under load): a kill then finds a trainer
    # that is exiting, and no next step to time.
    [ "$(last_step "$run")" -lt "$steps" ] || break
    local pid; pid=$(cut -d' ' -f1 "$run/watchdog/train-0.pid" 2>/dev/null) || continue
    local at; at=$(date +%s.%N)  # before the kill: the watchdog may see the exit before we could write the time
    if kill -9 "$pid" 2>/dev/null; then
      echo "$at" >> "$run/kills.txt"
      echo "   killed the trainer (pid $pid) at step $(last_step "$run")" >&2
    fi
    last_kill=$(last_step "$run")
  done
}

# detection_latency RUN: the largest time from a kill (kills.txt) to the watchdog's next failure
# event, in seconds ("-" without kills).
detection_latency() {
  [ -f "$1/kills.txt" ] || { echo "-"; return; }
  python3 - "$1" <<'PY'
import json, sys
run = sys.argv[1]
kills = [float(l) for l in open(f"{run}/kills.txt") if l.strip()]
fails = [e["ts"] for e in map(json.loads, open(f"{run}/events/watchdog-0.jsonl")) if e["event"] == "failure"]
# A failure stamped a few ms before the kill's own timestamp has been seen (clocks of two
# processes): it is that kill's, not an earlier one's.
lat = [max(0.0, min((f for f in fails if f >= k - 0.05), default=float("nan")) - k) for k in kills]
print("%.2f" % max(lat))
PY
}

# next_step RUN: the time from each kill to the trainer's next step event, "p50/max" in seconds,
# and the usual step period (the median gap between steps with no kill between them) as "period"
# ("-" without kills). A kill after the final step (a race kill_schedule narrows but cannot close)
# has no next step and is left out.
next_step() {
  [ -f "$1/kills.txt" ] || { echo "-"; return; }
  python3 - "$1" <<'PY'
import json, math, statistics, sys
run = sys.argv[1]
kills = sorted(float(l) for l in open(f"{run}/kills.txt") if l.strip())
steps = sorted(e["ts"] for e in map(json.loads, open(f"{run}/events/train-0.jsonl")) if e["event"] == "step")
after = sorted(min(s for s in steps if s > k) - k for k in kills if steps and k < steps[-1])
if not after:
    print("-")
    sys.exit(0)
quiet = [b - a for a, b in zip(steps, steps[1:]) if not any(a < k <= b for k in kills)]
period = statistics.median(quiet) if quiet else math.nan
print("%.2f/%.2f (period %.2f)" % (after[(len(after) - 1) // 2], after[-1], period))
PY
}

declare -A ettr e2e faults restarts detect lost nexts
for scenario in none role job; do
  run="$top/$scenario"
  current="$run"
  mkdir -p "$run/ckpt"
  cp "$top/sft/ckpt/weights-0.safetensors" "$run/ckpt/"
  export RL_QUEUE="$(free_endpoint)"
  policy=role n_spares=$spares
  [ "$scenario" = job ] && policy=job n_spares=0  # a full restart starts every process anew
  pipeline "$run" "$(free_endpoint)" "$n_spares" > "$run/pipeline.toml"
  echo "== $scenario: $steps steps, restart policy $policy, $n_spares spare trainer(s)" >&2
  t0=$(date +%s.%N)
  rl-watchdog run "$run/pipeline.toml" --run-dir "$run" --restart "$policy" \
    --heartbeat "$(free_endpoint)" --log-level warn 2> "$run/watchdog.log" &
  wpid=$!
  [ "$scenario" = none ] || kill_schedule "$run"
  status=0; wait "$wpid" || status=$?
  t1=$(date +%s.%N)
  current=""
  if [ "$status" -ne 0 ]; then echo "fault-drill: rl-watchdog exited $status; its log:" >&2; cat "$run/watchdog.log" >&2; exit 70; fi
  rl-profile report "$run" --json > "$run/report.jsonl"
  summary=$(head -n 1 "$run/report.jsonl")
  detect[$scenario]=$(detection_latency "$run")
  nexts[$scenario]=$(next_step "$run")
  ettr[$scenario]=$(python3 -c 'import json,sys; print("%.3f" % json.loads(sys.argv[1])["ettr"])' "$summary")
  faults[$scenario]=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["faults"])' "$summary")
  lost[$scenario]=$(python3 -c 'import json,sys; j = json.loads(sys.argv[1]); print("%.1f/%.1f/%.1f" % (j["detection_s"], j["restart_s"], j["catch_up_s"]))' "$summary")
  restarts[$scenario]=$(grep -c '"event":"restart-job"' "$run/events/watchdog-0.jsonl" || true)
  e2e[$scenario]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
done

printf '%-8s %6s %8s %7s %14s %16s  %-36s  %s\n' scenario ETTR "e2e (s)" faults "full restarts" "max detect (s)" \
  "lost: detection/restart/catch-up (s)" "kill -> next step p50/max (s)"
for scenario in none role job; do
  printf '%-8s %6s %8s %7s %14s %16s  %-36s  %s\n' "$scenario" "${ettr[$scenario]}" "${e2e[$scenario]}" \
    "${faults[$scenario]}" "${restarts[$scenario]}" "${detect[$scenario]}" "${lost[$scenario]}" "${nexts[$scenario]}"
done
awk -v r="${ettr[role]}" -v j="${ettr[job]}" 'BEGIN {
  printf "role-based recovery: ETTR %.3f, %s 0.90, %s the whole-job restart'"'"'s %.3f\n", r, (r >= 0.9) ? "at or above" : "BELOW", (r > j) ? "above" : "NOT above", j }'
[ "$keep" = 0 ] || echo "runs: $top/{none,role,job} (rl-profile report DIR --svg timeline.svg)"
