#!/usr/bin/env bash
# Kill matrix: the GRPO demo pipeline under rl-watchdog run (restart policy role), and each role
# in turn (rl-queue, rl-rollout, rl-reward, rl-train) killed with SIGKILL and frozen with SIGSTOP
# at a random moment, `trials` times each. After every fault it checks that only that role got a
# new pid and that it was back (heartbeating) within --bound seconds; at the end, with the
# pipeline stopped, that no acknowledged sample was lost (every row a stage acked is accounted
# for at the next) and that no row reached the trainer twice (the rows consumed by task train
# equal the samples of the steps the model kept).
#
# Usage: kill-matrix.sh [--short] [--trials N] [--seed N] [--bound S]
#   --short   one trial of each role and signal, small steps (CI)
#   (default) 5 trials of each
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="${RL_BUILD_DIR:-$here/build}"
for t in rl-queue rl-rollout rl-reward rl-train rl-watchdog rl-profile; do PATH="$build/tools/$t:$PATH"; done
export PATH OMP_WAIT_POLICY=PASSIVE

seed=1 trials=5 bound=60 small=(--dynamic-sampling false --prompts-per-step 16)
while [ $# -gt 0 ]; do
  case "$1" in
    --short) trials=1 ;;
    --trials) trials="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --bound) bound="$2"; shift ;;
    *) echo "kill-matrix: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="${RL_RUN_DIR:-$(mktemp -d /tmp/rl-kill-matrix.XXXXXX)}"
mkdir -p "$run/ckpt"
RANDOM=$seed
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cleanup() { rl-watchdog stop "$run" >/dev/null 2>&1 || true; [ -n "${RL_RUN_DIR:-}" ] || rm -rf "$run"; }
trap cleanup EXIT
log="$run/events/watchdog-0.jsonl"

echo "== data and a random model in $run" >&2
rl-train make-data --problems 20000 --seed "$((seed + 1000))" > "$run/prompts.jsonl"
rl-rollout random-model --out "$run/ckpt/weights-0.safetensors" --seed "$seed" 2> /dev/null
export RL_QUEUE="tcp://127.0.0.1:$(free_port)"
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
command = "rl-train grpo --checkpoint-dir $run/ckpt --prompts $run/prompts.jsonl --threads 1 --seed $seed --mode async --max-steps 100000 --eval-every 0 --lease-seconds 10 --log-level warn ${small[*]}"
TOML
rl-watchdog run "$run/pipeline.toml" --run-dir "$run" --heartbeat "tcp://127.0.0.1:$(free_port)" \
  --log-level warn 2> "$run/watchdog.log" &
wpid=$!

pid_of() { cut -d' ' -f1 "$run/watchdog/$1-0.pid" 2>/dev/null || echo 0; }
pids() { echo "$(pid_of queue) $(pid_of rollout) $(pid_of reward) $(pid_of train)"; }
steps_done() { local n; n=$(grep -c '"event":"step"' "$run/events/train-0.jsonl" 2>/dev/null) || true; echo "${n:-0}"; }
# wait_steps N: until the trainer has completed N more steps (and a heartbeat has told the watchdog).
wait_steps() {
  local want=$(( $(steps_done) + $1 )) deadline=$(( $(date +%s) + bound ))
  until [ "$(steps_done)" -ge "$want" ]; do
    kill -0 "$wpid" 2>/dev/null || { echo "kill-matrix: rl-watchdog exited; its log:" >&2; cat "$run/watchdog.log" >&2; exit 70; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "kill-matrix: no trainer step within $bound s" >&2; exit 70; }
    sleep 0.2
  done
  sleep 1.2
}

results="$run/matrix.txt"
: > "$results"
wait_steps 2
failed=0
for ((t = 0; t < trials; t++)); do
  for role in queue rollout reward train; do
    for sig in KILL STOP; do
      sleep "$((RANDOM % 2)).$((RANDOM % 10))"
      before=($(pids))
      victim=$(pid_of "$role")
      t0=$(date +%s.%N)
      kill -s "$sig" "$victim"
      # Back: the watchdog's ready event for a new pid of this role.
      deadline=$(( $(date +%s) + bound ))
      until grep -q "\"event\":\"ready\".*\"member\":\"$role/0\".*\"pid\":$(pid_of "$role")," "$log" 2>/dev/null &&
            [ "$(pid_of "$role")" != "$victim" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || break
        sleep 0.05
      done
      t1=$(date +%s.%N)
      after=($(pids))
      changed=""
      for i in 0 1 2 3; do
        name=$(echo queue rollout reward train | cut -d' ' -f$((i + 1)))
        [ "${before[$i]}" = "${after[$i]}" ] || changed="$changed $name"
      done
      detect=$(python3 - "$log" "$t0" "$role" <<'PY'
import json, sys
t0, member = float(sys.argv[2]), sys.argv[3] + "/0"
for e in map(json.loads, open(sys.argv[1])):
    if e["event"] == "failure" and e.get("member") == member and e["ts"] >= t0:
        print("%.2f" % (e["ts"] - t0)); break
else:
    print("-")
PY
)
      back=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
      ok=ok
      [ "$changed" = " $role" ] || ok="FAIL (new pids:${changed:- none})"
      awk -v b="$back" -v lim="$bound" 'BEGIN { exit !(b < lim) }' || ok="FAIL (not back within $bound s)"
      [ "$ok" = ok ] || failed=1
      printf '%-8s %-5s detect %6s s  back %6s s  %s\n' "$role" "$sig" "$detect" "$back" "$ok" | tee -a "$results" >&2
      wait_steps 1
    done
  done
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
python3 - "$run" "$results" "$failed" <<'PY'
import json, sys
run, results, failed = sys.argv[1], sys.argv[2], int(sys.argv[3])
stat = json.load(open(f"{run}/stat.json"))
task = {t["name"]: t for t in stat["tasks"]}
held = lambda t: t["consumed"] + t["ready"] + t["leased"] + t["dropped"]
kept = {}
for e in map(json.loads, open(f"{run}/events/train-0.jsonl")):
    if e["event"] == "step":
        kept[e["step"]] = e["samples"]
lost = (stat["next_index"] - held(task["generate"])) + (task["reward"]["consumed"] - held(task["train"]))
dup = sum(kept.values()) - task["train"]["consumed"]
faults = [l for l in open(results) if l.strip()]
bad = [l for l in faults if "FAIL" in l]
print(f"{len(faults)} faults, {len(bad)} not recovered as they should; {len(kept)} steps kept")
print(f"acknowledged samples lost: {lost}  duplicates reaching the trainer: {dup}")
sys.exit(1 if bad or lost or dup or failed else 0)
PY
