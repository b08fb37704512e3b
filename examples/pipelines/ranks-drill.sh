#!/usr/bin/env bash
# Kill drill of data-parallel training: the GRPO pipeline under rl-watchdog run with a trainer of
# two ranks (a role with `group = true`, rl-train grpo --world 2), and one rank killed with SIGKILL
# mid-run, `trials` times (rank 1, then rank 0, alternating). After each kill it checks that both
# ranks got new pids and the other roles kept theirs, and times the fault to the re-formed group's
# next step. At the end, with the pipeline stopped, it checks at the queue that no row was lost
# (every row put is held by task generate, and every row the reward stage acked by task train:
# consumed, ready, leased or dropped) or
# trained twice (the rows consumed by task train equal the samples of the steps the model kept).
# It ends with one line:
#   ranks killed N: group back in X.XX s (max), rows lost L, duplicated D
# Usage: ranks-drill.sh [--short] [--trials N] [--seed N] [--bound S]
#   --short   one kill (CI)
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

seed=1 trials=2 bound=90 small=(--dynamic-sampling false --prompts-per-step 8)
while [ $# -gt 0 ]; do
  case "$1" in
    --short) trials=1 ;;
    --trials) trials="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --bound) bound="$2"; shift ;;
    *) echo "ranks-drill: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(run_dir ranks-drill)"
mkdir -p "$run/ckpt"
cleanup() { rl-watchdog stop "$run" >/dev/null 2>&1 || true; [ -n "${RL_RUN_DIR:-}" ] || rm -rf "$run"; }
trap cleanup EXIT
log="$run/events/watchdog-0.jsonl"

echo "== data and a random model in $run" >&2
rl-train make-data --problems 20000 --seed "$((seed + 1000))" > "$run/prompts.jsonl"
rl-rollout random-model --out "$run/ckpt/weights-0.safetensors" --seed "$seed" 2> /dev/null
export RL_QUEUE="$(free_endpoint)"
rendezvous="127.0.0.1:$(free_port)"
# The ranks take WORLD_SIZE, RANK and RL_GROUP_EPOCH from the watchdog (a group role).
cat > "$run/pipeline.toml" <<TOML
[watchdog]
heartbeat_interval = 1
max_full_restarts = 0
grace = 5
[role.queue]
command = "rl-queue serve --dir $run/queue --bind $RL_QUEUE --log-level warn --declare generate=prompt_ids --declare reward=prompt,response,answer --declare train=prompt_ids,response_ids,logprobs,reward,version"
[role.rollout]
command = "rl-rollout run --checkpoint-dir $run/ckpt --threads 1 --seed $seed --lease 20 --log-level warn"
[role.reward]
command = "rl-reward run --verifier addition --lease 20 --log-level warn"
[role.train]
command = "rl-train grpo --checkpoint-dir $run/ckpt --prompts $run/prompts.jsonl --threads 1 --seed $seed --mode async --max-steps 100000 --eval-every 0 --lease-seconds 10 --rendezvous $rendezvous --group-timeout 30 --log-level warn ${small[*]}"
count = 2
group = true
TOML
hb="$(free_endpoint)"
rl-watchdog run "$run/pipeline.toml" --run-dir "$run" --heartbeat "$hb" --log-level warn 2>> "$run/watchdog.log" &
wpid=$!

pid_of() { cut -d' ' -f1 "$run/watchdog/$1.pid" 2>/dev/null || echo 0; }
steps_done() { local n; n=$(grep -c '"event":"step"' "$run/events/train-0.jsonl" 2>/dev/null) || true; echo "${n:-0}"; }
wait_steps() {  # wait_steps N: until rank 0 has completed N more steps
  local want=$(( $(steps_done) + $1 )) deadline=$(( $(date +%s) + bound ))
  until [ "$(steps_done)" -ge "$want" ]; do
    kill -0 "$wpid" 2>/dev/null || { echo "ranks-drill: rl-watchdog exited; its log:" >&2; cat "$run/watchdog.log" >&2; exit 70; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "ranks-drill: no trainer step within $bound s" >&2; exit 70; }
    sleep 0.2
  done
  sleep 1.2  # and a heartbeat has told the watchdog (its escalation rule counts steps since a restart)
}

wait_steps 3
failed=0 worst=0
for ((t = 0; t < trials; t++)); do
  victim="train-$(( (t + 1) % 2 ))"
  others="$(pid_of queue-0) $(pid_of rollout-0) $(pid_of reward-0)"
  t0_pid=$(pid_of train-0) t1_pid=$(pid_of train-1) n=$(steps_done)
  sleep "0.$((RANDOM % 10))"
  echo "== SIGKILL $victim (pid $(pid_of "$victim"))" >&2
  start=$(date +%s.%N)
  kill -9 "$(pid_of "$victim")"
  wait_steps 1
  back=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  ok=ok
  [ "$(pid_of train-0)" != "$t0_pid" ] && [ "$(pid_of train-1)" != "$t1_pid" ] || ok="FAIL (a rank kept its pid)"
  [ "$others" = "$(pid_of queue-0) $(pid_of rollout-0) $(pid_of reward-0)" ] || ok="FAIL (another role restarted)"
  [ "$ok" = ok ] || failed=1
  worst=$(awk -v a="$worst" -v b="$back" 'BEGIN { print (b > a ? b : a) }')
  echo "$victim killed at step $n: group back, next step after $back s  $ok" >&2
  wait_steps 1
done

echo "== stopping the pipeline and checking the queue" >&2
rl-watchdog stop "$run" > /dev/null 2>&1
wait "$wpid" 2> /dev/null || true
port=$(free_port)
rl-queue serve --dir "$run/queue" --bind "tcp://127.0.0.1:$port" --log-level warn &
qpid=$!
until rl-queue stat --connect "tcp://127.0.0.1:$port" --timeout 0.2 > /dev/null 2>&1; do sleep 0.1; done
rl-queue stat --json --connect "tcp://127.0.0.1:$port" > "$run/stat.json"
kill "$qpid"; wait "$qpid" 2> /dev/null || true
python3 - "$run" "$trials" "$worst" "$failed" <<'PY'
import json, sys
run, trials, worst, failed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
stat = json.load(open(f"{run}/stat.json"))
task = {t["name"]: t for t in stat["tasks"]}
held = lambda t: t["consumed"] + t["ready"] + t["leased"] + t["dropped"]
kept = {}  # step -> samples of all ranks (rank 0's events); a step done again replaces its first try
for e in map(json.loads, open(f"{run}/events/train-0.jsonl")):
    if e["event"] == "step":
        kept[e["step"]] = e["samples"]
# A stale row sent back for regeneration (async, k = 1: a group that re-forms may skip a version)
# counts twice in generate's and reward's consumed, once before and once after, and until it is
# generated again it is held by generate, not by train. Counted over both stages, as kill-matrix.sh
# does, each such row adds one to the second term and takes one from the first.
lost = (stat["next_index"] - held(task["generate"])) + (task["reward"]["consumed"] - held(task["train"]))
dup = sum(kept.values()) - task["train"]["consumed"]
print(f"{len(kept)} steps kept, {task['train']['consumed']} train rows consumed; rows put {stat['next_index']}, "
      f"held by generate {held(task['generate'])}; acked by reward {task['reward']['consumed']}, held by train "
      f"{held(task['train'])}", file=sys.stderr)
print(f"ranks killed {trials}: group back in {worst:.2f} s (max), rows lost {lost}, duplicated {dup}")
sys.exit(1 if lost or dup or failed else 0)
PY
