#!/usr/bin/env bash
# Kill drill, by hand: the GRPO pipeline runs while rl-rollout, then rl-reward, then rl-train are
# each killed with SIGKILL in the middle of the run and started again, the way an operator would.
# Nothing supervises them here (rl-watchdog does that automatically; see fault-drill.sh).
#
# At the end it checks, from the trainer's event log and rl-queue:
#   - the trainer resumed from its last complete checkpoint, and every step 1..N exists;
#   - no prompt group was trained twice (each step event lists the groups it trained; when a
#     killed trainer's last step never reached a checkpoint, the redone step replaces it);
#   - no prompt group was lost: every group fed (the data cursor) was trained or is still in
#     the queue (ready or leased in generate, reward or train).
# Dynamic sampling is off here, so no group may leave the queue without being trained.
#
# Usage: kill-by-hand.sh [--short] [--seed N]
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
# Exit status: 0 when every check holds, 1 otherwise.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

seed=1 steps=45 per_step=16 group=8
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=24; per_step=4; group=4 ;;
    --seed) seed="$2"; shift ;;
    *) echo "kill-by-hand: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(run_dir kill-by-hand)"
mkdir -p "$run"
export RL_QUEUE="$(free_endpoint)" RL_RUN_DIR="$run"
# Weight versions over UCX from the trainer (a restarted trainer binds the same endpoint again).
weights="$(free_endpoint)"
declare -A pid
cleanup() {
  for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# Short leases: a killed role's rows come back within seconds, not minutes.
start_rollout() {
  rl-rollout run --checkpoint-dir "$run/ckpt" --weights-from "$weights" --threads 1 --seed "$seed" --id 0 --lease 3 \
    --max-new-tokens 8 --log-level warn 2>>"$run/rollout.log" &
  pid[rollout]=$!
}
start_reward() {
  rl-reward run --verifier addition --id 0 --lease 3 --log-level warn 2>>"$run/reward.log" &
  pid[reward]=$!
}
start_train() {
  rl-train grpo --checkpoint-dir "$run/ckpt" --prompts "$run/prompts.jsonl" --threads 1 --seed "$seed" \
    --mode async --max-steps "$steps" --prompts-per-step "$per_step" --group-size "$group" \
    --dynamic-sampling false --stale-rows regenerate --lease-seconds 3 --eval-every 0 --eval-size 16 \
    --weights-bind "$weights" --id 0 --log-level warn 2>>"$run/train.log" &
  pid[train]=$!
}
# Steps the trainer has logged so far (a redone step counts once).
steps_done() {
  [ -f "$run/events/train-0.jsonl" ] || { echo 0; return; }
  grep -c '"event":"step"' "$run/events/train-0.jsonl" || true
}
wait_for_step() {
  for _ in $(seq 1 600); do
    [ "$(steps_done)" -ge "$1" ] && return 0
    kill -0 "${pid[train]}" 2>/dev/null || { echo "kill-by-hand: rl-train exited early; see $run/train.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "kill-by-hand: no step $1 within 2 minutes" >&2
  exit 1
}
kill_and_restart() {
  local role="$1" at="$2"
  wait_for_step "$at"
  echo "== step $(steps_done): kill -9 rl-$role (pid ${pid[$role]}), then start it again" >&2
  kill -9 "${pid[$role]}"
  wait "${pid[$role]}" 2>/dev/null || true
  sleep 1
  "start_$role"
}

echo "== data and a short warm start in $run" >&2
rl-train make-data --problems 2000 --seed "$seed" > "$run/sft.jsonl"
rl-train make-data --problems 2000 --seed "$((seed + 1000))" > "$run/prompts.jsonl"
rl-train sft --data "$run/sft.jsonl" --response-key answer --checkpoint-dir "$run/ckpt" --seed "$seed" \
  --threads 2 --max-steps 40 --log-level warn > /dev/null

rl-queue serve --dir "$run/queue" --bind "$RL_QUEUE" --id 0 --log-level warn \
  --declare generate=prompt_ids --declare reward=prompt,response,answer \
  --declare train=prompt_ids,response_ids,logprobs,reward,version 2>>"$run/queue.log" &
pid[queue]=$!
until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
start_rollout
start_reward
start_train

kill_and_restart rollout $((steps / 5))
kill_and_restart reward $((2 * steps / 5))
kill_and_restart train $((3 * steps / 5))
wait "${pid[train]}"
echo "== rl-train finished $steps steps; checking" >&2

rl-queue stat --json > "$run/stat.json"
cursor=$(rl-queue meta get train.cursor)
python3 - "$run" "$steps" "$group" "$cursor" <<'PY'
import json, sys
run, steps, group, cursor = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
events = [json.loads(l) for l in open(f"{run}/events/train-0.jsonl")]
last = {}
for e in events:
    if e["event"] == "step":
        last[e["step"]] = e  # a step redone after a kill replaces the lost one
resumes = [e for e in events if e["event"] == "resume"]
stat = json.load(open(f"{run}/stat.json"))
in_flight_rows = sum(t.get("ready", 0) + t.get("leased", 0) for t in stat["tasks"]
                     if t["name"] in ("generate", "reward", "train"))
trained = [g for s in sorted(last) for g in last[s].get("trained_groups", [])]
twice = sorted({g for g in trained if trained.count(g) > 1})
missing = cursor - len(set(trained))
checks = [
    ("the trainer resumed from a checkpoint", len(resumes) >= 1,
     ", ".join(f"step {e['step']}" for e in resumes)),
    (f"every step 1..{steps} was trained", sorted(last) == list(range(1, steps + 1)), f"{len(last)} steps"),
    ("no group was trained twice", not twice, f"{len(trained)} groups trained" + (f"; twice: {twice[:5]}" if twice else "")),
    ("no group was lost", 0 <= missing <= in_flight_rows // group,
     f"{cursor} fed, {len(set(trained))} trained, {in_flight_rows // group} still in the queue"),
]
ok = True
for name, good, detail in checks:
    print(f"{'ok  ' if good else 'FAIL'} {name} ({detail})")
    ok = ok and good
print(f"events: {run}/events")
sys.exit(0 if ok else 1)
PY
