#!/usr/bin/env bats
# rl-reward from the command line: options, the demo data, scoring with verifiers and with an
# external command, and the queue loop.

load helper

setup() { setup_sealed; }
teardown() { teardown_sealed; }

# random_judge DIR: the demo's model directory with random weights: a judge that loads, if not a
# wise one (the judging prompt '{prompt}{response}=' and the verdict token '1' fit its tokenizer).
random_judge() {
  mkdir -p "$1"
  cp "$RL_MODEL"/config.json "$RL_MODEL"/tokenizer.json "$RL_MODEL"/tokenizer_config.json "$1/"
  rl-rollout random-model --out "$1/model.safetensors" --seed 3 2>/dev/null
}
JUDGE_FLAGS=(--judge-template '{prompt}{response}=' --judge-verdict 1 --judge-threshold 0)
# score_judge BATCH: the lines of JUDGE_LINES scored by the random judge of $TMP/judge, BATCH at a time.
score_judge() {
  printf '%s\n' "$JUDGE_LINES" | rl-reward score --judge "$TMP/judge" "${JUDGE_FLAGS[@]}" --count "$1" 2>/dev/null
}
JUDGE_LINES='{"prompt":"123+456=","response":"0579","answer":"0579"}
{"prompt":"001+002=","response":"3","answer":"0003"}
{"prompt":"999+999=","response":"1998","answer":"1998"}'

# task_stat TASK FIELD: one number of `rl-queue stat --json`.
task_stat() {
  rl-queue stat --json | python3 -c 'import json,sys; t={x["name"]:x for x in json.load(sys.stdin)["tasks"]}; print(t[sys.argv[1]][sys.argv[2]])' "$1" "$2"
}

man_examples() {
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' "$1"
}

@test "--help lists the subcommands and the environment variable of each option" {
  run rl-reward --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"run"* && "$output" == *"score"* && "$output" == *"make-data"* ]]
  run rl-reward run --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_VERIFIER]"* && "$output" == *"[env RL_REWARD_EXEC]"* ]]
}

@test "--version prints the version" {
  run rl-reward --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^rl-reward\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "exits 64 on an unknown option or verifier" {
  run rl-reward run --no-such-option
  [ "$status" -eq 64 ]
  [[ "$output" == *"--no-such-option"* ]]
  run rl-reward score --verifier fuzzy
  [ "$status" -eq 64 ]
}

@test "exits 64 unless exactly one of --verifier, --exec and --judge is given" {
  run rl-reward score < /dev/null
  [ "$status" -eq 64 ]
  [ "$output" = "rl-reward: give one of --verifier, --exec and --judge" ]
  run rl-reward score --verifier exact --judge "$TMP" < /dev/null
  [ "$status" -eq 64 ]
  run rl-reward score --verifier exact --exec cat < /dev/null
  [ "$status" -eq 64 ]
}

@test "make-data prints zero-padded additions, the same for the same seed" {
  run rl-reward make-data --count 5 --seed 7
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 5 ]
  [[ "${lines[0]}" =~ ^\{\"prompt\":\"[0-9]{3}\+[0-9]{3}=\",\"answer\":\"[0-9]{4}\"\}$ ]]
  first="$output"
  run rl-reward make-data --count 5 --seed 7
  [ "$output" = "$first" ]
  run rl-reward make-data --task subtraction
  [ "$status" -eq 64 ]
}

@test "the held-out set is fixed and never drawn for training" {
  rl-reward make-data --count 200 --heldout | cut -d, -f1 | sort -u > "$TMP/held"
  rl-reward make-data --count 200 --heldout | cut -d, -f1 | sort -u | cmp - "$TMP/held"
  rl-reward make-data --count 20000 --seed 1 | cut -d, -f1 | sort -u > "$TMP/train"
  [ "$(comm -12 "$TMP/held" "$TMP/train" | wc -l)" -eq 0 ]
}

@test "score adds the reward of each line" {
  run bash -c 'printf "%s\n" "{\"prompt\":\"1+2=\",\"response\":\"3\",\"answer\":\"3\"}" "{\"prompt\":\"1+2=\",\"response\":\"03\",\"answer\":\"3\"}" | rl-reward score --verifier addition 2>/dev/null'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = '{"prompt":"1+2=","response":"3","answer":"3","reward":1.0}' ]
  [ "${lines[1]}" = '{"prompt":"1+2=","response":"03","answer":"3","reward":0.0}' ]
}

@test "score exits 65 on a bad line and scores the others" {
  run bash -c 'printf "%s\n" "{\"prompt\":\"p\",\"response\":\"3\",\"answer\":\"3\"}" "{\"prompt\":\"p\"}" | rl-reward score --verifier exact'
  [ "$status" -eq 65 ]
  [[ "$output" == *'"reward":1.0'* ]]
  [[ "$output" == *'rl-reward: stdin line 2: no "response"'* ]]
}

@test "score --verifier math takes the boxed answer, else ####, else the last number, normalized" {
  cat > "$TMP/math.jsonl" <<'EOF'
{"prompt":"p","response":"so \\boxed{\\dfrac{1}{2}}, not 7","answer":"0.5"}
{"prompt":"p","response":"48/2 = 24 clips.\n#### 1,234","answer":"1234"}
{"prompt":"p","response":"It costs $18.00.","answer":18}
{"prompt":"p","response":"\\boxed{\\frac{5}{2}}","answer":2.50}
{"prompt":"p","response":"\\boxed{90^\\circ}","answer":"Angle: 45*2 = 90.\n#### 90"}
{"prompt":"p","response":"\\boxed{12}","answer":"1.2"}
{"prompt":"p","response":"\\boxed{3/4}","answer":"0.76"}
{"prompt":"p","response":"\\boxed{3} or \\boxed{4}","answer":"3"}
{"prompt":"p","response":"no answer","answer":"5"}
EOF
  run bash -c "rl-reward score --verifier math < '$TMP/math.jsonl' 2>/dev/null | python3 -c 'import json,sys; print(*(json.loads(l)[\"reward\"] for l in sys.stdin))'"
  [ "$status" -eq 0 ]
  [ "$output" = "1.0 1.0 1.0 1.0 1.0 0.0 0.0 0.0 0.0" ]
}

@test "score --verifier math exits 65 on an empty answer and scores the other lines" {
  run bash -c "printf '%s\n' '{\"prompt\":\"p\",\"response\":\"#### 2\",\"answer\":\"2\"}' '{\"prompt\":\"p\",\"response\":\"2\",\"answer\":\" \$ \"}' | rl-reward score --verifier math"
  [ "$status" -eq 65 ]
  [[ "$output" == *'"reward":1.0'* ]]
  [[ "$output" == *'rl-reward: stdin line 2: math verifier: the answer is empty'* ]]
}

@test "score with --exec reads the command's replies" {
  cat > "$TMP/judge.sh" <<'SH'
while read -r line; do
  case "$line" in *'"response":"3"'*) echo '{"reward": 1}';; *) echo '{"reward": -0.5}';; esac
done
SH
  run bash -c "printf '%s\n' '{\"prompt\":\"p\",\"response\":\"3\",\"answer\":\"3\"}' '{\"prompt\":\"p\",\"response\":\"4\",\"answer\":\"3\"}' | rl-reward score --exec 'sh $TMP/judge.sh' 2>/dev/null"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == *'"reward":1.0'* ]]
  [[ "${lines[1]}" == *'"reward":-0.5'* ]]
}

@test "a malformed reply of --exec is a clear error, never a zero" {
  run bash -c "echo '{\"prompt\":\"p\",\"response\":\"3\",\"answer\":\"3\"}' | rl-reward score --exec 'while read -r l; do echo oops; done'"
  [ "$status" -eq 65 ]
  [[ "$output" == *"rl-reward: stdin line 1: exec: malformed reply (not JSON): 'oops'"* ]]
  [[ "$output" != *'"reward"'* ]]
}

@test "a stalled --exec command times out" {
  run bash -c "echo '{\"prompt\":\"p\",\"response\":\"3\",\"answer\":\"3\"}' | rl-reward score --exec 'sleep 20' --exec-timeout 0.2"
  [ "$status" -eq 65 ]
  [[ "$output" == *"gave no reply within 0.2 s; it was killed and will be restarted"* ]]
}

@test "run writes rewards with the ack of task reward and stops on SIGTERM" {
  start_queue "$TMP/q" --declare reward=prompt,response,answer --declare train=prompt,response,reward
  printf '%s\n' '{"prompt":"1+2=","response":"3","answer":"3"}' '{"prompt":"1+2=","response":"4","answer":"3"}' | rl-queue put >/dev/null
  rl-reward run --exec 'while read -r l; do case "$l" in *"\"response\":\"3\""*) echo "{\"reward\":1}";; *) echo "{\"reward\":0}";; esac; done' \
    --wait 0.5 --run-dir "$TMP/run" --progress-interval 0 2>"$TMP/reward.log" &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 100); do
    [ "$(task_stat reward consumed)" -eq 2 ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$pid"
  run rl-queue get --task train --count 2
  [[ "${lines[0]}" == *'"reward":1'* ]]
  [[ "${lines[1]}" == *'"reward":0'* ]]
  grep -q '"event":"batch"' "$TMP/run/events/reward-0.jsonl"
  grep -q '"phase":"waiting-for-data"' "$TMP/run/events/reward-0.jsonl"
}

@test "run nacks the rows and exits 69 when the --exec command is broken" {
  start_queue "$TMP/q" --declare reward=prompt,response,answer
  printf '%s\n' '{"prompt":"p","response":"3","answer":"3"}' | rl-queue put >/dev/null
  run rl-reward run --exec 'exit 1' --wait 0.2
  [ "$status" -eq 69 ]
  [[ "$output" == *"giving up after 10 failed rows in a row"* ]]
  [ "$(task_stat reward ready)" -eq 1 ]
}

@test "the EXAMPLES of rl-reward(1) run against a live server" {
  start_queue "$TMP/q" --declare reward=prompt,response,answer --declare train=prompt,response,reward
  man_examples "$RL_SOURCE_DIR/man/rl-reward.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -gt 10 ]
  run bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"reward":1.0'* ]]
  [[ "$output" == *'"reward":0.5'* ]]
}

@test "run exits soon after SIGTERM even when the queue is gone" {
  start_queue "$TMP/q" --declare reward=prompt,response,answer
  rl-reward run --verifier addition --wait 0.5 --timeout 120 2>"$TMP/reward.log" &
  pid=$!
  PIDS+=("$pid")
  sleep 1
  kill -9 "$QPID"
  sleep 0.5
  start=$SECONDS
  kill -TERM "$pid"
  status=0
  wait "$pid" || status=$?
  [ "$status" -eq 75 ]
  [ $((SECONDS - start)) -le 8 ]
  grep -q "rl-reward: stopping: the queue does not answer" "$TMP/reward.log"
}

@test "score --judge gives each line the verdict's probability, the same batched as one at a time" {
  random_judge "$TMP/judge"
  run score_judge 64
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  batched="$output"
  python3 -c 'import json,sys; [print(json.loads(l)["reward"]) for l in sys.stdin]' <<< "$output" | while read -r p; do
    python3 -c 'import sys; p=float(sys.argv[1]); sys.exit(0 if 0 < p < 1 else 1)' "$p"
  done
  run score_judge 1
  python3 - "$batched" "$output" <<'PY'
import json, sys
a = [json.loads(l)["reward"] for l in sys.argv[1].splitlines()]
b = [json.loads(l)["reward"] for l in sys.argv[2].splitlines()]
assert len(a) == len(b) == 3 and all(abs(x - y) < 1e-6 for x, y in zip(a, b)), (a, b)
PY
}

@test "run --judge scores rows through a real rl-queue as score does, and drains on SIGTERM" {
  random_judge "$TMP/judge"
  start_queue "$TMP/q" --declare reward=prompt,response,answer --declare train=prompt,response,reward
  printf '%s\n' "$JUDGE_LINES" | rl-queue put >/dev/null
  rl-reward run --judge "$TMP/judge" "${JUDGE_FLAGS[@]}" --threads 1 --wait 0.5 --run-dir "$TMP/run" \
    --progress-interval 0 2>"$TMP/reward.log" &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 200); do
    [ "$(task_stat reward consumed)" -eq 3 ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$pid"
  grep -q "judge $TMP/judge loaded (prob mode, 1 threads)" "$TMP/reward.log"
  run rl-queue get --task train --count 3
  [ "${#lines[@]}" -eq 3 ]
  from_queue="$output"
  run score_judge 64
  python3 - "$from_queue" "$output" <<'PY'
import json, sys
queue = {json.loads(l)["response"]: json.loads(l)["reward"] for l in sys.argv[1].splitlines()}
score = {json.loads(l)["response"]: json.loads(l)["reward"] for l in sys.argv[2].splitlines()}
assert queue.keys() == score.keys() and all(abs(queue[k] - score[k]) < 1e-6 for k in queue), (queue, score)
PY
  grep -qE '"event":"batch".*"rows":3' "$TMP/run/events/reward-0.jsonl"
}

@test "score --judge-mode generate gives 0 when the pattern finds no verdict in the judge's output" {
  random_judge "$TMP/judge"
  run bash -c "printf '%s\n' '$JUDGE_LINES' | rl-reward score --judge '$TMP/judge' --judge-mode generate \
    --judge-template '{prompt}{response}=' --judge-pattern 'x' --judge-max-new-tokens 2 2>/dev/null"
  [ "$status" -eq 0 ]
  [ "$(count_lines '"reward":0.0')" -eq 3 ]
}

@test "a bad judge is one line and exit 78; a bad template or pattern option exits 64 or 78" {
  run rl-reward score --judge "$TMP/none" < /dev/null
  [ "$status" -eq 78 ]
  [ "$output" = "rl-reward: --judge $TMP/none: no such model directory" ]
  run rl-reward score --judge "$RL_MODEL" < /dev/null
  [ "$status" -eq 78 ]
  [ "$output" = "rl-reward: --judge $RL_MODEL: no model.safetensors: a judge needs trained weights" ]
  random_judge "$TMP/judge"
  run rl-reward score --judge "$TMP/judge" --judge-verdict 12 < /dev/null
  [ "$status" -eq 78 ]
  [[ "$output" == *"--judge-verdict '12' is 2 tokens of the judge's tokenizer; prob mode needs exactly one"* ]]
  run rl-reward score --judge "$TMP/judge" --judge-template '{respnse}' < /dev/null
  [ "$status" -eq 64 ]
  [[ "$output" == *"unknown placeholder {respnse}"* ]]
  run rl-reward score --judge "$TMP/judge" --judge-mode vote < /dev/null
  [ "$status" -eq 64 ]
  run rl-reward score --judge "$TMP/judge" --judge-mode generate --judge-pattern '(' < /dev/null
  [ "$status" -eq 78 ]
  printf 'garbage' > "$TMP/judge/model.safetensors"
  run rl-reward score --judge "$TMP/judge" < /dev/null
  [ "$status" -ne 0 ]
  [ "${#lines[@]}" -eq 1 ]
}

@test "--device of a judge: a GPU this build lacks exits 69 in one line" {
  random_judge "$TMP/judge"
  run rl-reward score --judge "$TMP/judge" "${JUDGE_FLAGS[@]}" --device cuda < /dev/null
  [ "$status" -eq 69 ]
  [[ "$output" == *"--device cuda: "*"CUDA"* ]]
  [ "${#lines[@]}" -eq 1 ]
  printf '%s\n' "$JUDGE_LINES" | RL_DEVICE=cpu rl-reward score --judge "$TMP/judge" "${JUDGE_FLAGS[@]}" > "$TMP/s.jsonl"
  [ "$(wc -l < "$TMP/s.jsonl")" -eq 3 ]
}
