#!/usr/bin/env bash
# The rollout-group drill of adaptive-tp.sh: a rollout group of two (rl-rollout run --ranks 2 with
# a decode profile, so it switches from two replicas to one over both ranks once no prompt is
# pending) serves rows of rl-queue; rank 1 is stopped at the start of a switch (the fail point
# RL_FAILPOINT=adaptive-switch) and killed there with SIGKILL. The leader's batch fails, it gives
# its lease back and exits; a new group (both ranks restarted, a fresh rendezvous) answers every
# row. A consumer of the answers counts rows lost (never answered) and duplicated (answered twice).
#
# Usage: adaptive-tp-drill.sh RUN_DIR   (RUN_DIR/model: a model directory, as adaptive-tp.sh makes)
# Ends with: rollout group killed in a switch: leader exit E, rows lost L, duplicated D
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools
run="$1"
rows=24
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

rl-rollout random-model --model "$run/model" --seed 3 --out "$run/drill-weights.safetensors" --log-level warn
# A profile in which one replica over both ranks is ten times faster: the group switches at its
# first check with nothing pending, so the fail point is reached for sure.
python3 - "$run/drill-profile.json" <<'PY'
import json, sys
decode = [[tp, b, t, (0.01 + 0.001 * b + 1e-6 * t) / (10 if tp == 2 else 1)]
          for tp in (1, 2) for b in (1, 16) for t in (0, 4096)]
prefill = [[tp, n, 0.0001 * n] for tp in (1, 2) for n in (1, 256)]
json.dump({"decode": decode, "prefill": prefill,
           "switch": {"gather_bytes_per_s": 1e9, "reshard_s": 0.001, "kv_bytes_per_token": 1024}},
          open(sys.argv[1], "w"))
PY
queue="$(free_endpoint)"
export RL_QUEUE="$queue"
rl-queue serve --dir "$run/drill-queue" --bind "$queue" --id 0 --log-level warn \
  --declare generate=prompt_ids --declare done=response_ids &
pids+=($!)
until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
python3 -c '
import random
random.seed(5)
for i in range('"$rows"'):
    print("{\"prompt_ids\": %s, \"group\": \"g%d\"}" % ([1] + [random.randrange(3, 14) for _ in range(4)], i))
' | rl-queue put --log-level warn > /dev/null

start_group() {  # FAILPOINT_FOR_RANK_1
  local rendezvous="127.0.0.1:$(free_port)" r
  for r in 1 0; do
    RL_FAILPOINT="$([ "$r" = 1 ] && echo "$1" || true)" \
    rl-rollout run --weights "$run/drill-weights.safetensors" --model "$run/model" --ranks 2 --rank "$r" \
      --rendezvous "$rendezvous" --adaptive-profile "$run/drill-profile.json" --count "$rows" --lease 60 \
      --slots 8 --max-new-tokens 12 --temperature 0 --threads 1 --seed 1 --timeout 30 --log-level error &
    group_pids[$r]=$!
    pids+=($!)
  done
}

group_pids=()
start_group adaptive-switch
# Wait for rank 1 to stop in the switch, then kill it there.
for _ in $(seq 1 600); do
  [ "$(awk '{print $3}' "/proc/${group_pids[1]}/stat" 2>/dev/null)" = T ] && break
  sleep 0.1
done
state="$(awk '{print $3}' "/proc/${group_pids[1]}/stat" 2>/dev/null || echo gone)"
[ "$state" = T ] || { echo "adaptive-tp-drill: rank 1 never reached the switch (state $state)" >&2; exit 70; }
kill -9 "${group_pids[1]}"
leader_exit=0
wait "${group_pids[0]}" || leader_exit=$?
wait "${group_pids[1]}" 2>/dev/null || true
echo "rank 1 killed in a switch; the leader exited with $leader_exit" >&2

group_pids=()
start_group ""
got=0
: > "$run/drill-answers.jsonl"
for _ in $(seq 1 120); do
  rl-queue get --task done --count "$rows" --wait 1 --lease 30 --log-level error > "$run/drill-batch.jsonl" || true
  if [ -s "$run/drill-batch.jsonl" ]; then
    cat "$run/drill-batch.jsonl" >> "$run/drill-answers.jsonl"
    lease=$(head -n 1 "$run/drill-batch.jsonl" | grep -o '"lease":[0-9]*' | cut -d: -f2)
    grep -o '"index":[0-9]*' "$run/drill-batch.jsonl" | cut -d: -f2 |
      rl-queue ack --task done --lease-id "$lease" --log-level error > /dev/null
  fi
  got=$(wc -l < "$run/drill-answers.jsonl")
  [ "$got" -ge "$rows" ] && break
done
unique=$(grep -o '"index":[0-9]*' "$run/drill-answers.jsonl" | sort -u | wc -l)
echo "rollout group killed in a switch: leader exit $leader_exit, rows lost $((rows - unique)), duplicated $((got - unique))"
