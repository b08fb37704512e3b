#!/usr/bin/env bats
# rl-watchdog from the command line: detection by heartbeats (kill -9, SIGSTOP, stalls, idle
# phases), the supervisor's restarts, escalation and adoption, and a reward command that sleeps
# on purpose. Roles are mostly stand-ins (rl-watchdog beat), so most tests need no libtorch.
# Detection bounds are generous; timings belong in fault-drill.sh's report, not here.
#   RL_WATCHDOG_LONG=1  the 90 s form of the sleeping reward command (default: RL_REWARD_SLEEP, 6 s)

load helper

# Read when the file loads: setup_sealed unsets every RL_* variable of the caller.
REWARD_SLEEP="${RL_REWARD_SLEEP:-6}"
[ -z "${RL_WATCHDOG_LONG:-}" ] || REWARD_SLEEP=90

setup() {
  setup_sealed
  export PATH="$RL_BUILD_DIR/tools/rl-watchdog:$PATH"
  HB="tcp://127.0.0.1:$(free_port)"
}

teardown() {
  [ -d "$TMP/run/watchdog" ] && rl-watchdog stop "$TMP/run" >/dev/null 2>&1 || true
  teardown_sealed
}

# monitor [options]: rl-watchdog monitor on $HB in the background, JSON lines to $TMP/mon.
monitor() {
  rl-watchdog monitor --heartbeat "$HB" --json "$@" > "$TMP/mon" 2> "$TMP/mon.err" &
  PIDS+=($!)
}

# beat ROLE PHASE [options]: a stand-in role heartbeating to $HB; sets BPID.
beat() {
  local role="$1" phase="$2"; shift 2
  rl-watchdog beat --role "$role" --phase "$phase" --heartbeat "$HB" "$@" 2>> "$TMP/beat.err" &
  BPID=$!
  PIDS+=("$BPID")
}

pid_of() { cut -d' ' -f1 "$TMP/run/watchdog/$1.pid"; }

# gone PID: no such process, or only its zombie is left.
gone() { ! kill -0 "$1" 2>/dev/null || [ "$(ps -o stat= -p "$1" | cut -c1)" = Z ]; }

# A pipeline of stand-ins: two rollouts and a trainer stepping every 0.3 s.
stand_in_pipeline() {
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
max_full_restarts = ${1:-2}
grace = 1
[role.rollout]
command = "rl-watchdog beat --role rollout --phase generate"
count = 2
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.3 ${2:-}"
TOML
}

start_watchdog() {
  rl-watchdog run "$TMP/p.toml" --run-dir "$TMP/run" --heartbeat "$HB" "$@" 2>> "$TMP/wd.err" &
  WPID=$!
  PIDS+=("$WPID")
}

@test "--help lists the subcommands and the environment variable of each option" {
  run rl-watchdog --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"monitor"* && "$output" == *"run"* && "$output" == *"stop"* && "$output" == *"beat"* ]]
  run rl-watchdog run --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_HEARTBEAT]"* && "$output" == *"[env RL_WATCHDOG_STALL_TRAIN]"* ]]
}

@test "exits 64 on an unknown option and 78 on a pipeline file with an unknown key" {
  run rl-watchdog monitor --no-such-option
  [ "$status" -eq 64 ]
  printf '[role.a]\ncommand = "true"\ncolour = "red"\n' > "$TMP/bad.toml"
  run rl-watchdog run "$TMP/bad.toml" --run-dir "$TMP/run"
  [ "$status" -eq 78 ]
  [ "$output" = "rl-watchdog: $TMP/bad.toml: unknown key 'colour' in [role.a]" ]
}

@test "monitor: a role killed with SIGKILL is failed within 3.5 s" {
  monitor
  beat reward waiting-for-data
  wait_for "$TMP/mon" '"event":"joined"' 10
  t0=$(date +%s.%N)
  kill -9 "$BPID"
  wait_for "$TMP/mon" '"event":"failed"' 10
  t1=$(date +%s.%N)
  grep '"event":"failed"' "$TMP/mon"
  awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 3.5) }'
}

@test "monitor: a role frozen with SIGSTOP is failed when its heartbeats and a probe go unanswered, and recovers on SIGCONT" {
  monitor
  beat rollout generate --heartbeat-interval 0.2
  wait_for "$TMP/mon" '"event":"joined"' 10
  kill -STOP "$BPID"
  wait_for "$TMP/mon" '"event":"failed"' 10
  grep -q 'no heartbeat for 0\.[6-9] s and no answer to a probe' "$TMP/mon"
  kill -CONT "$BPID"
  wait_for "$TMP/mon" '"event":"recovered"' 10
}

@test "monitor: a trainer without progress in phase train is failed after its stall threshold" {
  monitor --stall-train 1.5
  beat train train --progress-every 0 --heartbeat-interval 0.2
  wait_for "$TMP/mon" '"event":"failed"' 10
  grep -q 'no progress in phase train for 1\.[5-9] s' "$TMP/mon"
}

@test "monitor: idle phases never count, however long they last" {
  monitor --stall-train 1 --stall-rollout 1
  beat train waiting-for-data --progress-every 0 --heartbeat-interval 0.2
  beat rollout waiting-for-weights --progress-every 0 --heartbeat-interval 0.2 --id 1
  beat train checkpoint --progress-every 0 --heartbeat-interval 0.2 --id 2
  sleep 4
  [ "$(grep -c '"event":"joined"' "$TMP/mon")" -eq 3 ]
  ! grep -E '"event":"(suspect|failed)"' "$TMP/mon" || false
}

@test "monitor: a rollout holding work without progress is probed, then failed when the probe finds it idle" {
  monitor --stall-rollout 1 --probe-window 0.5
  beat rollout generate --progress-every 0 --heartbeat-interval 0.2
  wait_for "$TMP/mon" '"event":"failed"' 10
  grep -q '"event":"suspect".*no progress in phase generate' "$TMP/mon"
  grep -q 'a probe found no progress' "$TMP/mon"
}

@test "run: a killed rollout is restarted alone; the other roles keep their pids" {
  stand_in_pipeline
  start_watchdog
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/0"' 20
  sleep 1  # a step or two, so this is not the first step after a start
  r0=$(pid_of rollout-0) r1=$(pid_of rollout-1) t=$(pid_of train-0)
  kill -9 "$r0"
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"restart"' 10
  grep -q '"event":"failure".*killed by signal 9' "$TMP/run/events/watchdog-0.jsonl"
  grep -q '"action":"restart-role".*"reason":"restart rollout/0 only"' "$TMP/run/events/watchdog-0.jsonl"
  [ "$(pid_of rollout-0)" != "$r0" ]
  [ "$(pid_of rollout-1)" = "$r1" ]
  [ "$(pid_of train-0)" = "$t" ]
  kill -0 "$r1" && kill -0 "$t"
}

@test "run: a group role's instances restart together under the next RL_GROUP_EPOCH; the other roles keep their pids" {
  cat > "$TMP/p.toml" <<'TOML'
[watchdog]
heartbeat_interval = 0.2
max_full_restarts = 2
grace = 1
[role.rollout]
command = "rl-watchdog beat --role rollout --phase generate"
[role.train]
command = "echo $RANK/$WORLD_SIZE/$RL_GROUP_EPOCH >> $RL_RUN_DIR/ranks; exec rl-watchdog beat --role train --phase train --step-every 0.3"
count = 2
group = true
TOML
  start_watchdog
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/1"' 20
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/0"' 20
  sleep 1  # a step or two, so this is not the first step after a start
  r=$(pid_of rollout-0) t0=$(pid_of train-0) t1=$(pid_of train-1)
  kill -9 "$t1"
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"restart".*"member":"train/1"' 10
  grep -q '"action":"restart-role".*"reason":"restart train/1 with every instance of role train (a group)"' \
    "$TMP/run/events/watchdog-0.jsonl"
  grep -q '"event":"restart".*"group":true.*"member":"train/0"' "$TMP/run/events/watchdog-0.jsonl"
  [ "$(pid_of train-0)" != "$t0" ] && [ "$(pid_of train-1)" != "$t1" ]
  gone "$t0"
  [ "$(pid_of rollout-0)" = "$r" ]
  wait_for "$TMP/run/ranks" '1/2/1' 10
  [ "$(sort "$TMP/run/ranks" | tr '\n' ' ')" = "0/2/0 0/2/1 1/2/0 1/2/1 " ]
}

@test "run with spares: a killed trainer is replaced by its spare, which was started ahead and held; a new spare follows; spares die with the watchdog" {
  stand_in_pipeline
  printf 'spares = 1\n' >> "$TMP/p.toml"
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"spare".*"kind":"train"' 20
  spare=$(grep '"event":"spare"' "$log" | head -n 1 | grep -o '"pid":[0-9]*' | cut -d: -f2)
  kill -0 "$spare"
  # Held: a spare sends no heartbeats and writes no events before it is needed.
  sleep 1
  ! grep -q "\"pid\":$spare," "$TMP/run/events/train-0.jsonl" || false
  t=$(pid_of train-0) r0=$(pid_of rollout-0)
  kill -9 "$t"
  wait_for "$log" '"event":"restart".*"member":"train/0"' 10
  grep '"event":"restart".*"member":"train/0"' "$log" | grep -q "\"pid\":$spare,.*\"spare\":true"
  [ "$(pid_of train-0)" = "$spare" ]
  [ "$(pid_of rollout-0)" = "$r0" ]
  # The spare became train/0 (RL_ID 0): it heartbeats as such, and a new spare is started.
  wait_for "$log" "\"event\":\"ready\".*\"member\":\"train/0\".*\"pid\":$spare," 10
  for i in $(seq 100); do [ "$(grep -c '"event":"spare"' "$log")" -ge 2 ] && break; sleep 0.1; done
  [ "$(grep -c '"event":"spare"' "$log")" -eq 2 ]
  next=$(grep '"event":"spare"' "$log" | tail -n 1 | grep -o '"pid":[0-9]*' | cut -d: -f2)
  kill -0 "$next"
  # A watchdog killed -9 leaves the roles running, and its spare exits: no one could wake it.
  kill -9 "$WPID"
  for i in $(seq 50); do gone "$next" && break; sleep 0.1; done
  gone "$next"
  kill -0 "$spare" && kill -0 "$r0"
}

@test "run with spares: a spare that exits at once is started again after a delay that doubles, not at every turn" {
  # As an instance it runs; as a spare (RL_SPARE_FD set) it exits at once.
  cat > "$TMP/p.toml" <<'TOML'
[watchdog]
heartbeat_interval = 0.2
grace = 1
[role.train]
command = 'test -z "$RL_SPARE_FD" && exec rl-watchdog beat --role train --phase train --step-every 0.3'
spares = 1
TOML
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"spare-exit"' 20
  sleep 8
  n=$(grep -c '"event":"spare-exit"' "$log")
  [ "$n" -ge 2 ] && [ "$n" -le 4 ]
  grep '"event":"spare-exit"' "$log" | grep -o '"retry_s":[0-9.]*' | cut -d: -f2 | head -n 3 | tr '\n' ' ' | grep -qE '^1(\.0)? 2(\.0)? (4(\.0)? )?$'
  kill -0 "$(pid_of train-0)"
}

@test "run: killing the watchdog leaves the roles running, and a new one adopts them" {
  stand_in_pipeline
  start_watchdog
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/0"' 20
  sleep 1  # a few trainer steps
  before="$(pid_of rollout-0) $(pid_of rollout-1) $(pid_of train-0)"
  kill -9 "$WPID"
  steps=$(grep -c '"event":"step"' "$TMP/run/events/train-0.jsonl")
  sleep 1.5
  for p in $before; do kill -0 "$p"; done
  # No watchdog, and the trainer goes on stepping.
  [ "$(grep -c '"event":"step"' "$TMP/run/events/train-0.jsonl")" -gt "$steps" ]
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"adopted".*"member":"train/0"' 10
  # Its table is rebuilt from heartbeats: each adopted pid is heard from again.
  for m in rollout/0 rollout/1 train/0; do
    wait_for "$log" "\"event\":\"adopted\".*\"member\":\"$m\"" 10
    wait_for "$log" "\"event\":\"ready\".*\"member\":\"$m\".*\"pid\":$(pid_of "${m/\//-}")," 10
  done
  [ "$(pid_of rollout-0) $(pid_of rollout-1) $(pid_of train-0)" = "$before" ]
  [ "$(grep -c '"event":"start-role"' "$log")" -eq 3 ]
  # It picks up where it was: an adopted role killed now is restarted alone, as before.
  sleep 1
  kill -9 "$(pid_of rollout-1)"
  wait_for "$log" '"event":"restart".*"member":"rollout/1"' 10
  grep -q '"action":"restart-role".*"reason":"restart rollout/1 only"' "$log"
  ! grep -q '"event":"restart-job"' "$log" || false
  [ "$(pid_of rollout-0) $(pid_of train-0)" = "$(echo "$before" | cut -d' ' -f1,3)" ]
}

@test "run: a role that fails in its first step escalates to full restarts, then gives up with a diagnosis (exit 70)" {
  stand_in_pipeline 1 "--duration 0.1; exit 3"
  run timeout 60 rl-watchdog run "$TMP/p.toml" --run-dir "$TMP/run" --heartbeat "$HB"
  echo "$output"
  [ "$status" -eq 70 ]
  [[ "$output" =~ "rl-watchdog: giving up: train/0 failed "(twice at step -?[0-9]+|in the first step after its \(re\)start)"; 1 full restart already did not help; failures:" ]]
  grep -q '"action":"restart-job","event":"decision".*"reason":"train/0 failed in the first step after its (re)start"' \
    "$TMP/run/events/watchdog-0.jsonl"
  grep -q '"event":"restart-job"' "$TMP/run/events/watchdog-0.jsonl"
  grep -q '"action":"give-up"' "$TMP/run/events/watchdog-0.jsonl"
  [ -z "$(ls "$TMP/run/watchdog/"*.pid 2>/dev/null)" ]
}

@test "run: a role whose kind is not the name its process heartbeats as fails its ready timeout with the fix in the reason" {
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
max_full_restarts = 0
grace = 1
[role.trainer]
command = "rl-watchdog beat --role train --phase train --step-every 0.3"
ready_timeout = 1
TOML
  run timeout 60 rl-watchdog run "$TMP/p.toml" --run-dir "$TMP/run" --heartbeat "$HB"
  echo "$output"
  [ "$status" -eq 70 ]
  [[ "$output" == *'trainer/0 failed at step '*': no heartbeat within 1 s of its start; its process heartbeats as train/0: set kind = "train" in [role.trainer]'* ]]
}

@test "run: the trainer's clean exit ends the pipeline with exit 0 and stops the others" {
  stand_in_pipeline 2 "--duration 2"
  run timeout 60 rl-watchdog run "$TMP/p.toml" --run-dir "$TMP/run" --heartbeat "$HB"
  [ "$status" -eq 0 ]
  grep -q '"event":"finished"' "$TMP/run/events/watchdog-0.jsonl"
  [ -z "$(ls "$TMP/run/watchdog/"*.pid 2>/dev/null)" ]
}

@test "run --restart job: one failure restarts every role" {
  stand_in_pipeline 5
  start_watchdog --restart job
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/0"' 20
  r1=$(pid_of rollout-1) t=$(pid_of train-0)
  kill -9 "$(pid_of rollout-0)"
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"restart-job"' 10
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/0".*' 20
  sleep 0.5
  [ "$(pid_of rollout-1)" != "$r1" ]
  [ "$(pid_of train-0)" != "$t" ]
}

@test "stop ends the watchdog and every role it started" {
  stand_in_pipeline
  start_watchdog
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"ready".*"member":"train/0"' 20
  pids="$WPID $(pid_of rollout-0) $(pid_of rollout-1) $(pid_of train-0)"
  run rl-watchdog stop "$TMP/run"
  [ "$status" -eq 0 ]
  [[ "$output" == *"stopped 3 role processes"* ]]
  sleep 0.2
  for p in $pids; do ps -o stat= -p "$p" || true; done
  for p in $pids; do ! kill -0 "$p" 2>/dev/null || [[ "$(ps -o stat= -p "$p")" == Z* ]]; done
}

@test "a reward command that sleeps on purpose causes no false detection" {
  command -v rl-reward >/dev/null || skip "rl-reward is not built (RL_BUILD_MODEL=OFF)"
  sleep_s="$REWARD_SLEEP"
  start_queue "$TMP/q" --declare reward=prompt,response,answer --heartbeat "$HB"
  echo '{"prompt":"1+1=","response":"2","answer":"2"}' | rl-queue put > /dev/null
  monitor --stall-train 5 --stall-rollout 5
  rl-reward run --exec "while read -r l; do sleep $sleep_s; echo '{\"reward\":1}'; done" \
    --exec-timeout $((sleep_s + 30)) --lease $((sleep_s + 30)) --heartbeat "$HB" --run-dir "$TMP/run" \
    2> "$TMP/reward.err" &
  PIDS+=($!)
  beat train waiting-for-data --progress-every 0
  wait_for "$TMP/run/events/reward-0.jsonl" '"phase":"score"' 20
  sleep "$((sleep_s + 2))"
  cat "$TMP/mon"
  grep -q '"event":"joined".*"member":"reward/0"' "$TMP/mon"
  ! grep -E '"event":"(suspect|failed)"' "$TMP/mon" || false
  grep -q '"event":"batch"' "$TMP/run/events/reward-0.jsonl"
}

@test "the EXAMPLES of rl-watchdog(1) run" {
  export RL_HEARTBEAT="$HB"
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' \
    "$RL_SOURCE_DIR/man/rl-watchdog.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -gt 10 ]
  cd "$TMP"
  run timeout 120 bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"failed train/0"*"no progress in phase train"* ]]
  [[ "$output" == *'"action":"restart-role"'* ]]
  [[ "$output" == *"ETTR"* ]]
}

@test "run with standby: a failed trainer takes the slot of a drained rollout, which comes back after the trainer's first step" {
  stand_in_pipeline
  sed -i 's/^grace = 1$/grace = 1\nstandby = true/' "$TMP/p.toml"
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  sleep 1
  r0=$(pid_of rollout-0) r1=$(pid_of rollout-1)
  kill -9 "$(pid_of train-0)"
  wait_for "$log" '"event":"restart".*"member":"train/0"' 20
  grep -q '"event":"standby".*"reason":"train/0 takes the slot of rollout/0 (warm standby)"' "$log"
  ! kill -0 "$r0" 2>/dev/null || [[ "$(ps -o stat= -p "$r0")" == Z* ]]
  wait_for "$log" '"event":"standby-return".*"reason":"rollout/0 is back: train/0 completed a step since it took its slot"' 20
  # In that order: the trainer restarted, heard from, then the rollout back with a new pid.
  restart=$(grep -n '"event":"restart".*"member":"train/0"' "$log" | cut -d: -f1)
  ready=$(grep -n '"event":"ready".*"member":"train/0"' "$log" | tail -n 1 | cut -d: -f1)
  back=$(grep -n '"event":"standby-return"' "$log" | cut -d: -f1)
  [ "$restart" -lt "$ready" ] && [ "$ready" -lt "$back" ]
  r0_new=$(pid_of rollout-0)
  [ "$r0_new" != "$r0" ]
  wait_for "$log" "\"event\":\"ready\".*\"member\":\"rollout/0\".*\"pid\":$r0_new," 10
  [ "$(pid_of rollout-1)" = "$r1" ]
  sleep 1
  ! grep -q '"event":"failure".*"member":"rollout/0"' "$log" || false
  ! grep -q '"event":"restart-job"' "$log" || false
}

@test "run with standby and a single rollout: the rollout comes back as soon as the trainer heartbeats, since the trainer cannot step without it" {
  # The first trainer steps; the restarted one waits for data (no rollout: it would wait forever).
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
grace = 1
standby = true
[role.rollout]
command = "rl-watchdog beat --role rollout --phase generate"
[role.train]
command = "if [ -e $TMP/restarted ]; then exec rl-watchdog beat --role train --phase waiting-for-data; fi; touch $TMP/restarted; exec rl-watchdog beat --role train --phase train --step-every 0.3"
TOML
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  sleep 1
  r0=$(pid_of rollout-0)
  kill -9 "$(pid_of train-0)"
  wait_for "$log" '"event":"standby".*"member":"rollout/0"' 20
  wait_for "$log" '"event":"standby-return".*"reason":"rollout/0 is back: train/0 heartbeats and has no other rollout"' 20
  [ "$(pid_of rollout-0)" != "$r0" ]
  ! grep -q '"event":"restart-job"' "$log" || false
}

# A pipeline of stand-ins that are slow to stop (they heartbeat 30 s after SIGTERM, like roles
# waiting for a dead queue), under restart policy job: a queue, two rollouts, a reward and a
# trainer stepping every 0.3 s. $1: grace.
slow_stop_pipeline() {
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
max_full_restarts = 5
grace = $1
restart = "job"
[role.queue]
command = "rl-watchdog beat --role queue --phase serve"
[role.rollout]
command = "rl-watchdog beat --role rollout --phase generate --stop-delay 30"
count = 2
[role.reward]
command = "rl-watchdog beat --role reward --phase score --stop-delay 30"
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.3 --stop-delay 30"
TOML
}

@test "run: a full restart after the queue's death kills its clients at once and steps again within 3 s, not after a grace per role" {
  slow_stop_pipeline 10
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  sleep 1
  old="$(pid_of rollout-0) $(pid_of rollout-1) $(pid_of reward-0) $(pid_of train-0)"
  t0=$(date +%s.%N)
  kill -9 "$(pid_of queue-0)"
  wait_for "$log" '"event":"restart-job"' 10
  wait_for "$log" '"event":"stopped-all"' 10
  grep '"event":"stopped-all"' "$log"
  grep -q '"event":"stopped-all".*"killed":\["train/0","reward/0","rollout/1","rollout/0"\].*"reason":"the queue is gone' "$log"
  for p in $old; do gone "$p"; done
  # The restarted trainer's first step: the first step event after its start event.
  t1=""
  for _ in $(seq 100); do
    t1=$(python3 - "$TMP/run/events/train-0.jsonl" "$t0" <<'PY'
import json, sys
t0, started = float(sys.argv[2]), False
for e in map(json.loads, open(sys.argv[1])):
    started |= e["event"] == "start" and e["ts"] > t0
    if started and e["event"] == "step":
        print(e["ts"]); break
PY
)
    [ -z "$t1" ] || break
    sleep 0.1
  done
  [ -n "$t1" ]
  echo "from the queue's kill to the trainer's next step: $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"
  awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 3) }'
}

@test "run: heartbeats sent during a full restart's stop phase make no ghost joins, and the clients stop together" {
  slow_stop_pipeline 1
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  sleep 1
  old="$(pid_of queue-0) $(pid_of rollout-0) $(pid_of rollout-1) $(pid_of reward-0) $(pid_of train-0)"
  kill -9 "$(pid_of rollout-0)"
  wait_for "$log" '"event":"stopped-all"' 10
  for _ in $(seq 200); do
    ! sed -n '/"event":"stopped-all"/,$p' "$log" | grep -q '"event":"ready".*"member":"train/0"' || break
    sleep 0.05
  done
  # The queue is alive: its clients get their grace (1 s, heartbeating all along), all at once,
  # not one after the other (3 s).
  grep '"event":"stopped-all"' "$log"
  grep -qE '"event":"stopped-all".*"killed":\[\].*"roles":5,"seconds":1\.[0-4]' "$log"
  sleep 1
  # Every join after the restart is a new process; the old ones heartbeated during their grace.
  mark=$(grep -n '"event":"restart-job"' "$log" | cut -d: -f1)
  tail -n +"$mark" "$log" | grep '"event":"joined"'
  for p in $old; do
    ! tail -n +"$mark" "$log" | grep -q "\"event\":\"joined\".*\"pid\":$p," || { echo "ghost join of pid $p"; false; }
  done
  [ "$(tail -n +"$mark" "$log" | grep -c '"event":"joined"')" -eq 5 ]
}

@test "run: a role adopted by a new watchdog keeps its history: killed before the trainer's next step, it is restarted alone" {
  # The first trainer steps; the restarted one never does (its steps counter stays 0), so an
  # adopted role's steps since its start can only come from the previous watchdog's state.
  stand_in_pipeline 2
  local first="rl-watchdog beat --role train --phase train --step-every 0.3"
  local later="rl-watchdog beat --role train --phase waiting-for-data"
  local train="if [ -e $TMP/restarted ]; then exec $later; fi; touch $TMP/restarted; exec $first"
  sed -i "s|^command = \"rl-watchdog beat --role train.*|command = \"$train\"|" "$TMP/p.toml"
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  sleep 1
  kill -9 "$(pid_of train-0)"
  wait_for "$log" '"event":"restart".*"member":"train/0"' 10
  wait_for "$log" "\"event\":\"ready\".*\"member\":\"train/0\".*\"pid\":$(pid_of train-0)," 10
  kill -9 "$WPID"
  wait "$WPID" 2>/dev/null || true
  mark=$(wc -l < "$log")
  start_watchdog
  for _ in $(seq 200); do
    [ "$(tail -n +"$((mark + 1))" "$log" | grep -c '"event":"ready"')" -lt 3 ] || break
    sleep 0.05
  done
  tail -n +"$((mark + 1))" "$log" | grep '"event":"\(adopted\|ready\)"'
  [ "$(tail -n +"$((mark + 1))" "$log" | grep -c '"event":"ready"')" -eq 3 ]
  tail -n +"$((mark + 1))" "$log" | grep -q '"event":"adopted","history":"state.json".*"member":"rollout/1".*"steps_since_start":[1-9]'
  tail -n +"$((mark + 1))" "$log" | grep -q '"event":"adopted","history":"state.json".*"member":"train/0".*"restarts":1,.*"steps_since_start":0'
  kill -9 "$(pid_of rollout-1)"
  wait_for "$log" '"event":"restart".*"member":"rollout/1"' 10
  grep -q '"action":"restart-role".*"reason":"restart rollout/1 only"' "$log"
  ! grep -q '"event":"restart-job"' "$log" || false
}

@test "monitor: heartbeats that queued up while the watchdog was frozen count when they were sent: a role that froze meanwhile is suspect at once" {
  monitor
  beat reward waiting-for-data --heartbeat-interval 0.2
  wait_for "$TMP/mon" '"event":"joined"' 10
  mon_pid="${PIDS[0]}"
  kill -STOP "$mon_pid"
  sleep 0.5
  kill -STOP "$BPID"
  sleep 2
  kill -CONT "$mon_pid"
  wait_for "$TMP/mon" '"event":"failed"' 10
  cat "$TMP/mon"
  # Silent since its own freeze (about 2 s), not since the watchdog read its last heartbeat.
  grep -qE '"event":"suspect".*"reason":"no heartbeat for (1\.[89]|[2-9]\.[0-9]) s"' "$TMP/mon"
  ! grep -qE '"event":"(cleared|recovered)"' "$TMP/mon" || false
  kill -CONT "$BPID"
}

# cpus_of PID: the CPUs the kernel lets PID run on (Cpus_allowed_list of /proc/PID/status).
cpus_of() { awk '/^Cpus_allowed_list:/ {print $2}' "/proc/$1/status"; }

@test "slots: each role runs on its slot's CPUs with RL_SLOT_* set, and a standby trainer takes the CPUs of the rollout it drains" {
  first=$(cpus_of $$ | cut -d, -f1 | cut -d- -f1)
  last=$(cpus_of $$ | tr ',-' '\n\n' | tail -1)
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
grace = 1
standby = true
slots = ["cpus=$first", "cpus=$last"]
[role.rollout]
command = "echo \$RL_SLOT_IDS \$RL_SLOT_CPUS \$RL_SLOT_THREADS > $TMP/rollout-env; exec rl-watchdog beat --role rollout --phase generate"
slots = 1
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.3"
slots = 1
TOML
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  wait_for "$log" '"event":"ready".*"member":"rollout/0"' 20
  [ "$(cpus_of "$(pid_of rollout-0)")" = "$first" ]
  [ "$(cpus_of "$(pid_of train-0)")" = "$last" ]
  [ "$(cat "$TMP/rollout-env")" = "0 $first 1" ]
  wait_for "$TMP/run/events/train-0.jsonl" '"event":"step"' 20
  sleep 0.6  # a heartbeat tells the watchdog of the step: a failure in the first step escalates
  kill -9 "$(pid_of train-0)"
  wait_for "$log" '"event":"standby".*"member":"rollout/0"' 20
  wait_for "$log" '"event":"standby-return"' 20
  wait_for "$log" '"event":"ready".*"member":"rollout/0"' 20
  [ "$(cpus_of "$(pid_of train-0)")" = "$first" ]
  [ "$(cpus_of "$(pid_of rollout-0)")" = "$last" ]
  [ "$(cat "$TMP/rollout-env")" = "1 $last 1" ]
}

# quota_of PID: the CPU quota of PID's cgroup v1 cpu group in CPUs (quota over period; "-1": none),
# and the group's directory, from /proc/PID/cgroup and /proc/self/mountinfo.
quota_of() {
  python3 - "$1" <<'PY'
import sys
pid = sys.argv[1]
group = [l.strip().split(":", 2)[2] for l in open(f"/proc/{pid}/cgroup") if "cpu" in l.split(":")[1].split(",")][0]
for line in open("/proc/self/mountinfo"):
    pre, post = line.split(" - ")
    fields, (fstype, _, sup) = pre.split(), post.split()
    if fstype == "cgroup" and "cpu" in sup.split(","):
        root, point = fields[3], fields[4]
        rel = group[len(root):] if root != "/" and group.startswith(root) else group
        d = point + ("" if rel == "/" else rel)
        q, p = (int(open(f"{d}/cpu.cfs_{k}_us").read()) for k in ("quota", "period"))
        print(-1 if q < 0 else round(q / p, 4), d)
        break
PY
}

@test "slots with a quota: each role runs in a CPU quota group of its slots, RL_SLOT_QUOTA set, and the groups go with the pipeline" {
  last=$(cpus_of $$ | tr ',-' '\n\n' | tail -1)
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
grace = 1
slots = ["cpus=$last quota=0.25", "quota=0.5"]
[role.rollout]
command = "echo \$RL_SLOT_QUOTA \$RL_SLOT_THREADS > $TMP/rollout-env; exec rl-watchdog beat --role rollout --phase generate"
slots = 1
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.3"
slots = 1
TOML
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  for _ in $(seq 50); do
    [ -f "$log" ] || ! grep -q "cannot enforce" "$TMP/wd.err" || break
    grep -q '"event":"ready".*"member":"train/0"' "$log" 2>/dev/null && break
    sleep 0.2
  done
  if grep -q "cannot enforce" "$TMP/wd.err"; then
    # The refusal is the behaviour to check where no cgroup can be made: one line, exit 69.
    wait "$WPID" || status=$?
    [ "$status" -eq 69 ]
    skip "no CPU quotas on this machine: $(grep -m1 'cannot enforce' "$TMP/wd.err")"
  fi
  wait_for "$log" '"event":"ready".*"member":"rollout/0"' 20
  wait_for "$log" '"event":"ready".*"member":"train/0"' 20
  [ "$(cat "$TMP/rollout-env")" = "0.25 1" ]
  read -r quota dir < <(quota_of "$(pid_of rollout-0)")
  [ "$quota" = 0.25 ]
  [[ "$dir" == */roleflow-*/slots-0 ]]
  read -r tquota tdir < <(quota_of "$(pid_of train-0)")
  [ "$tquota" = 0.5 ]
  [[ "$tdir" == */roleflow-*/slots-1 ]]
  [ "$(cpus_of "$(pid_of rollout-0)")" = "$last" ]
  rl-watchdog stop "$TMP/run"
  [ ! -d "$dir" ] && [ ! -d "$tdir" ] && [ ! -d "$(dirname "$dir")" ]
}

@test "placement: the split moves one slot at a time through a ternary search, ends on the best split measured, and every process runs on its slot" {
  # Stand-ins step at a constant pace, so every split measures the same: the search measures all
  # three splits of a pool of four (1, 2 and 3 rollouts) and returns to the first of the equals.
  first=$(cpus_of $$ | cut -d, -f1 | cut -d- -f1)
  last=$(cpus_of $$ | tr ',-' '\n\n' | tail -1)
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
grace = 1
slots = ["cpus=$first", "cpus=$last", "cpus=$first", "cpus=$last", "cpus=$first"]
[placement]
between = ["rollout", "reward"]
settle = 0
measure = 2
[role.rollout]
command = "rl-watchdog beat --role rollout --phase generate"
count = 1
slots = 1
[role.reward]
command = "rl-watchdog beat --role reward --phase score"
count = 3
slots = 1
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.1"
slots = 1
TOML
  start_watchdog
  log="$TMP/run/events/watchdog-0.jsonl"
  wait_for "$log" '"event":"placement-found"' 60
  [ "$(grep -c '"event":"placement-measure"' "$log")" -eq 3 ]
  [ "$(grep -c '"event":"placement-move"' "$log")" -eq 4 ]
  grep -q '"event":"placement-found".*"moves":4.*"split":1' "$log"
  grep -q '"event":"placement-move".*"from":"reward/2".*"to":"rollout/1"' "$log"
  # Each process of the final split runs on the CPUs of the slot state.json gives it.
  sleep 0.5
  python3 - "$TMP/run" <<'PY'
import json, sys
run = sys.argv[1]
state = json.load(open(f"{run}/watchdog/state.json"))
slots = state["placement"]["slots"]
assert sorted(state["placement"]["parked"]) == ["rollout/1", "rollout/2"], state["placement"]
assert sorted(k for k in slots if k.split("/")[0] in ("rollout", "reward")) == \
    ["reward/0", "reward/1", "reward/2", "rollout/0"], slots
toml = open(f"{run}/../p.toml").read()
cpus = [s.split("=")[1] for s in toml.split("slots = [")[1].split("]")[0].replace('"', "").split(", ")]
for key, idx in slots.items():
    pid = open(f"{run}/watchdog/{key.replace('/', '-')}.pid").read().split()[0]
    allowed = [l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("Cpus_allowed_list:")][0]
    assert allowed == cpus[idx[0]], (key, idx, allowed, cpus)
print("ok")
PY
}
