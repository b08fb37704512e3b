#!/usr/bin/env bash
# The rollout-group drill of adaptive-tp.sh: a rollout group of two (rl-rollout run --ranks 2 with
# a decode profile, so it switches from two replicas to one over both ranks once no prompt is
# pending) serves rows of rl-queue, and re-forms in place when a rank dies:
#   1. rank 1 is stopped at the start of a switch (the fail point RL_FAILPOINT=adaptive-switch) and
#      killed there with SIGKILL. The leader's batch fails over the group; the leader (the same
#      process) generates it alone and answers every row. Only rank 1 is started again; the next
#      rows find it waiting, and the group forms its epoch 2.
#   2. the leader is killed (SIGKILL, between batches) and started again; rank 1 (the same process)
#      joins the new leader's group, and the next rows are answered by it.
# A consumer of the answers counts rows lost (never answered) and duplicated (answered twice).
#
# Usage: adaptive-tp-drill.sh RUN_DIR   (RUN_DIR/model: a model directory, as adaptive-tp.sh makes)
# Ends with: rollout group killed in a switch: leader went on alone, group re-formed (epoch E);
#            leader killed: rank 1 rejoined (same pid); rows lost L, duplicated D
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
wide_wins_profile "$run/drill-profile.json"
queue="$(free_endpoint)"
export RL_QUEUE="$queue"
rl-queue serve --dir "$run/drill-queue" --bind "$queue" --id 0 --log-level warn \
  --declare generate=prompt_ids --declare done=response_ids &
pids+=($!)
until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
put=0
put_rows() {  # SEED
  put=$((put + rows))
  python3 -c '
import random
random.seed('"$1"')
for i in range('"$rows"'):
    print("{\"prompt_ids\": %s, \"group\": \"g%d-%d\"}" % ([1] + [random.randrange(3, 14) for _ in range(4)], '"$1"', i))
' | rl-queue put --log-level warn > /dev/null
}

rendezvous="127.0.0.1:$(free_port)"
events="$run/drill-events"
rm -rf "$events"
start_rank() {  # RANK FAILPOINT
  RL_FAILPOINT="$2" \
  rl-rollout run --weights "$run/drill-weights.safetensors" --model "$run/model" --ranks 2 --rank "$1" \
    --rendezvous "$rendezvous" --adaptive-profile "$run/drill-profile.json" --count "$rows" --lease 60 \
    --slots 8 --max-new-tokens 12 --temperature 0 --threads 1 --seed 1 --timeout 30 --rejoin-timeout 60 \
    --run-dir "$events" --id 0 --log-level warn 2>> "$run/drill-rank$1.log" &
  group_pids[$1]=$!
  pids+=($!)
}
alive() { kill -0 "$1" 2>/dev/null; }

got=0
: > "$run/drill-answers.jsonl"
collect() {  # WANT: reads answers until WANT in all (or two minutes)
  for _ in $(seq 1 120); do
    rl-queue get --task done --count "$rows" --wait 1 --lease 30 --log-level error > "$run/drill-batch.jsonl" || true
    if [ -s "$run/drill-batch.jsonl" ]; then
      cat "$run/drill-batch.jsonl" >> "$run/drill-answers.jsonl"
      lease=$(head -n 1 "$run/drill-batch.jsonl" | grep -o '"lease":[0-9]*' | cut -d: -f2)
      grep -o '"index":[0-9]*' "$run/drill-batch.jsonl" | cut -d: -f2 |
        rl-queue ack --task done --lease-id "$lease" --log-level error > /dev/null
    fi
    got=$(wc -l < "$run/drill-answers.jsonl")
    [ "$got" -ge "$1" ] && return 0
  done
  echo "adaptive-tp-drill: $got answers of $1" >&2
  exit 70
}
formed() {  # EPOCH: how many times the leader's group (any leader's) formed that epoch
  { grep '"what":"formed"' "$events"/events/rollout-0.jsonl 2>/dev/null || true; } | grep -c "\"epoch\":$1," || true
}

group_pids=()
start_rank 1 adaptive-switch
start_rank 0 ""
put_rows 5
# 1. Rank 1 stops in the switch and is killed there; the leader answers the rows alone.
for _ in $(seq 1 600); do
  [ "$(awk '{print $3}' "/proc/${group_pids[1]}/stat" 2>/dev/null)" = T ] && break
  sleep 0.1
done
state="$(awk '{print $3}' "/proc/${group_pids[1]}/stat" 2>/dev/null || echo gone)"
[ "$state" = T ] || { echo "adaptive-tp-drill: rank 1 never reached the switch (state $state)" >&2; exit 70; }
leader=${group_pids[0]}
kill -9 "${group_pids[1]}"
wait "${group_pids[1]}" 2>/dev/null || true
collect "$rows"
alive "$leader" || { echo "adaptive-tp-drill: the leader exited when rank 1 died" >&2; exit 70; }
echo "rank 1 killed in a switch; the leader answered the batch alone" >&2
# Only rank 1 starts again; the next rows form epoch 2 with it.
start_rank 1 ""
follower=${group_pids[1]}
seed=100
until [ "$(formed 2)" -ge 1 ]; do
  alive "$leader" && alive "$follower" || { echo "adaptive-tp-drill: a rank exited before the group re-formed" >&2; exit 70; }
  [ "$seed" -lt 110 ] || { echo "adaptive-tp-drill: the group never re-formed" >&2; exit 70; }
  seed=$((seed + 1))
  put_rows "$seed"
  collect "$put"
done
echo "rank 1 started again; the group re-formed (epoch 2)" >&2
# 2. The leader is killed between batches and started again; rank 1 stays and joins it.
kill -9 "$leader"
wait "$leader" 2>/dev/null || true
start_rank 0 ""
put_rows 7
collect "$put"
alive "$follower" || { echo "adaptive-tp-drill: rank 1 exited when the leader died" >&2; exit 70; }
# A group of two forms only with rank 1 in it: the new leader's epoch 1 is rank 1's rejoining.
[ "$(formed 1)" -ge 2 ] || { echo "adaptive-tp-drill: rank 1 never joined the new leader" >&2; exit 70; }
unique=$(grep -o '"index":[0-9]*' "$run/drill-answers.jsonl" | sort -u | wc -l)
echo "rollout group killed in a switch: leader went on alone, group re-formed (epoch 2); leader killed: rank 1 rejoined (same pid); rows lost $((put - unique)), duplicated $((got - unique))"
