#!/usr/bin/env bats
# The drills and measurements of examples/pipelines/ in their short forms: roles killed and
# recovered, rollout groups switching, the YATT table. (examples.bats has the demos; the two files
# are apart so that ctest runs them side by side, each within its time limit.)

load helper

setup() { setup_sealed; }
teardown() { teardown_sealed; }

@test "examples/pipelines/agent-drill.sh in short form: rollouts and rl-env killed, nothing lost or duplicated" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/agent-drill.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" =~ conversations\ lost\ 0,\ duplicated\ 0\;\ turns\ regenerated\ ([0-9]+)\ \(from\ scratch:\ ([0-9]+)\) ]]
  [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]
  [[ "$output" == *"rows with a broken loss mask: 0"* ]]
}

@test "examples/pipelines/agent-drill.sh --refill in short form: batches of several leases killed, nothing lost or duplicated" {
  RL_RUN_DIR="$TMP/drill" run bash "$RL_SOURCE_DIR/examples/pipelines/agent-drill.sh" --short --refill
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"conversations lost 0, duplicated 0;"* ]]
  [[ "$output" == *"rows with a broken loss mask: 0"* ]]
  # The rollouts did take conversations into running batches.
  cat "$TMP"/drill/*/events/rollout-*.jsonl | python3 -c '
import json, sys
refills = sum(json.loads(l).get("refills", 0) for l in sys.stdin if "\"event\":\"batch\"" in l)
assert refills > 0, refills
print(refills, "refills")'
}

@test "examples/pipelines/adaptive-tp.sh in short form: three configurations, the drill loses nothing, the last line" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/adaptive-tp.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -Eq '^\| long-tail \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| '
  printf '%s\n' "$output" | grep -Eq '^\| uniform \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| '
  # Rank 1 stopped in a switch and killed: the leader goes on alone and the group re-forms in place
  # with a new rank 1; then the leader killed: rank 1 joins the new one. Nothing lost or doubled.
  [[ "$output" == *"rollout group killed in a switch: leader went on alone, group re-formed (epoch 2); leader killed: rank 1 rejoined (same pid); rows lost 0, duplicated 0"* ]]
  printf '%s\n' "$output" | tail -n 1 |
    grep -Eq '^adaptive/best-static: long-tail [0-9.]+ uniform [0-9.]+; switch/naive-restart [0-9.]+; predictor error [0-9.]+%$'
}

@test "examples/pipelines/ranks-drill.sh in short form: a trainer rank killed under the watchdog, the group re-forms, no row lost or trained twice" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/ranks-drill.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | tail -n 1 | grep -Eq '^ranks killed 1: group back in [0-9.]+ s \(max\), rows lost 0, duplicated 0$'
}

@test "examples/pipelines/partial-rollouts.sh in short form: finish, interrupt and refill measured in one run, one line each" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/partial-rollouts.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -Eq '^finish +[0-9]+ +[0-9.]+ +[0-9.]+ +0 +0 +0 +0\.00 '
  printf '%s\n' "$output" | grep -Eq '^interrupt +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ '
  printf '%s\n' "$output" | grep -Eq '^refill +[0-9]+ +[0-9.]+ +[0-9.]+ +0 +0 +0 +0\.00 +[0-9.]+ +[0-9.]+ +[0-9]+ '
  # Both trainers reported the age of their tokens, and the interrupting rollout what it cost.
  run_dir="$(printf '%s\n' "$output" | sed -n 's/^runs: //p')"
  grep -q '"older_token_share":' "$run_dir/finish/events/train-0.jsonl"
  grep -q '"event":"batch".*"reprefill_tokens":' "$run_dir/interrupt/events/rollout-0.jsonl"
  grep -q '"event":"batch".*"refills":' "$run_dir/refill/events/rollout-0.jsonl"
}

@test "examples/pipelines/refill.sh in short form: batch by batch and with --refill, one line each and the ratio" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/refill.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -Eq '^batch +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ +0\.[0-9]+$'
  printf '%s\n' "$output" | grep -Eq '^refill +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ +[01]\.[0-9]+$'
  printf '%s\n' "$output" | grep -Eq '^refill/batch: [0-9.]+x tokens/s, slot occupancy 0\.[0-9]+ -> [01]\.[0-9]+$'
  # The refilled rollout took groups into running batches.
  run_dir="$(printf '%s\n' "$output" | sed -n 's/^runs: //p')"
  grep -q '"event":"batch".*"refills":[1-9]' "$run_dir/refill/events/rollout-0.jsonl"
}

@test "examples/pipelines/refill.sh --tools in short form: conversations batch by batch and refilled at turn boundaries" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/refill.sh" --short --tools
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" turns "* ]]
  printf '%s\n' "$output" | grep -Eq '^refill/batch: [0-9.]+x tokens/s, slot occupancy 0\.[0-9]+ -> [01]\.[0-9]+$'
  run_dir="$(printf '%s\n' "$output" | sed -n 's/^runs: //p')"
  grep -q '"event":"batch".*"refills":[1-9]' "$run_dir/refill/events/rollout-0.jsonl"
  grep -q '"event":"batch".*"tool_calls":[1-9]' "$run_dir/refill/events/rollout-0.jsonl"
}

@test "examples/pipelines/kill-by-hand.sh: each role killed -9 and restarted, no group lost or trained twice" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/kill-by-hand.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -c '^ok ')" -eq 4 ]
  [[ "$output" == *"kill -9 rl-rollout"*"kill -9 rl-reward"*"kill -9 rl-train"* ]]
}

@test "examples/pipelines/fault-drill.sh runs its three scenarios in short form and prints ETTR for each" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/fault-drill.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"scenario   ETTR"* ]]
  printf '%s\n' "$output" | grep -qE '^none +1\.000 '
  printf '%s\n' "$output" | grep -qE '^role +[01]\.[0-9]{3} '
  printf '%s\n' "$output" | grep -qE '^job +[01]\.[0-9]{3} '
  # The time from each kill to the trainer's next step, per scenario with kills.
  printf '%s\n' "$output" | grep -qE '^role .* [0-9]+\.[0-9]{2}/[0-9]+\.[0-9]{2} \(period [0-9]+\.[0-9]{2}\)$'
  printf '%s\n' "$output" | grep -qE '^job .* [0-9]+\.[0-9]{2}/[0-9]+\.[0-9]{2} \(period [0-9]+\.[0-9]{2}\)$'
}

@test "examples/pipelines/kill-matrix.sh: every role killed and frozen once, recovered alone, no sample lost or duplicated" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/kill-matrix.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -cE '^(queue|rollout|reward|train) +(KILL|STOP) .* ok$')" -eq 8 ]
  [[ "$output" == *"acknowledged samples lost: 0  duplicates reaching the trainer: 0"* ]]
  [[ "$output" =~ "queue SIGKILL: the trainer's next step after "[0-9.]+" s at p50" ]]
}

# The queue's data on two storage units, each unit a role of the watchdog's: the controller and
# either unit killed and frozen too, and every row still live read back through the units.
@test "examples/pipelines/kill-matrix.sh --units 2: the controller and each storage unit killed and frozen too, nothing lost" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/kill-matrix.sh" --short --units 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -cE '^(queue|rollout|reward|train|unit0|unit1) +(KILL|STOP) .* ok$')" -eq 12 ]
  [[ "$output" == *"adopted 6/6"* ]]
  [[ "$output" == *"acknowledged samples lost: 0  duplicates reaching the trainer: 0"* ]]
  [[ "$output" =~ "live rows read back through the storage units: "([0-9]+)" of "([0-9]+) ]]
  [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
}

# The four parts of yatt.sh in their short forms (yatt-judge.sh's GRPO against the judge is above):
# each part's own checks, then the five lines of the table.
@test "examples/pipelines/yatt.sh in short form: ranks, judge, colocation, placement and plan, the five lines" {
  dir="$BATS_TEST_TMPDIR/yatt"
  run bash "$RL_SOURCE_DIR/examples/pipelines/yatt.sh" --short --dir "$dir"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"split (rollouts/reward)   sweep s/step"* ]]
  # Placement on CPU quota slots, or on shared cores where none can be made, saying so.
  [[ "$output" == *"a pool of 3 slots (quota)"* || "$output" == *"no CPU quotas here"* ]]
  [[ "$output" == *"ranking: "*"configurations of 4 slots"* ]]
  [ "${#lines[@]}" -ge 5 ]
  n=${#lines[@]}
  [[ "${lines[n-5]}" =~ ^ranks\ 2/1:\ accuracy\ [0-9.]+/[0-9.]+,\ s/step\ [0-9.]+/[0-9.]+$ ]]
  [[ "${lines[n-4]}" =~ ^judge\ agreement\ [01]\.[0-9]{3}$ ]]
  [[ "${lines[n-3]}" =~ ^partial/full\ colocation\ rollout\ time\ [0-9]+\.[0-9]{2}$ ]]
  [[ "${lines[n-2]}" =~ ^placement:\ found\ [0-9]+/[0-9]+\ within\ [0-9]+\.[0-9]%\ of\ best\ [0-9]+/[0-9]+\ in\ [0-9]+\ moves ]]
  [[ "${lines[n-1]}" =~ ^plan\ error:\ [0-9]+\.[0-9]%\ [0-9]+\.[0-9]%$ ]]
  # The same command again continues the run in --dir: every part is kept, the same five lines.
  first=("${lines[@]:n-5}")
  run bash "$RL_SOURCE_DIR/examples/pipelines/yatt.sh" --short --dir "$dir"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -c '^== yatt: .* (kept)$')" -eq 4 ]
  n=${#lines[@]}
  [ "${lines[*]:n-5}" = "${first[*]}" ]
  # A directory holding another seed's run is refused, not mixed.
  run bash "$RL_SOURCE_DIR/examples/pipelines/yatt.sh" --short --seed 2 --dir "$dir"
  [ "$status" -eq 73 ]
  [[ "$output" == *"holds a run of seed 1 short, not seed 2 short"* ]]
}
