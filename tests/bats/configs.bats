#!/usr/bin/env bats
# share/configs: every file there is loaded by the tool it is for, and must work. The pipeline
# files are read by rl-watchdog run (and the demo's one runs a few real GRPO steps); each tool's
# --config file is loaded by every subcommand it has a table for, in a run that shows the file's
# values took effect. A config error exits 78 before anything runs, so a run that gets further
# has parsed the file; the last test checks that a bad file does exit 78.

load helper

setup() {
  setup_sealed
  export PATH="$RL_BUILD_DIR/tools/rl-watchdog:$RL_BUILD_DIR/tools/rl-relay:$PATH"
  CONFIGS="$RL_SOURCE_DIR/share/configs"
}

teardown() {
  for d in "$TMP"/run*; do
    [ -d "$d/watchdog" ] && rl-watchdog stop "$d" >/dev/null 2>&1 || true
  done
  teardown_sealed
}

# prepared DIR: DIR holds what the pipeline files need: prompts.jsonl, heldout.jsonl and an SFT checkpoint
# ckpt/weights-0.safetensors (a few steps: the pipeline has to run, not to learn). Made once per
# file run, then copied.
prepared() {
  local cache="$BATS_FILE_TMPDIR/prepared"
  if [ ! -f "$cache/ckpt/weights-0.safetensors" ]; then
    mkdir -p "$cache"
    rl-train make-data --problems 2000 --seed 1 > "$cache/sft.jsonl"
    rl-train make-data --problems 2000 --seed 1001 > "$cache/prompts.jsonl"
    rl-train make-data --problems 16 --heldout > "$cache/heldout.jsonl"
    rl-train sft --data "$cache/sft.jsonl" --response-key answer --eval-data "$cache/heldout.jsonl" \
      --verifier addition --max-new-tokens 6 --checkpoint-dir "$cache/ckpt" --seed 1 --threads 1 \
      --max-steps 4 --batch-size 32 --eval-every 4 --eval-size 16 --target-accuracy 0.99 \
      --log-level warn > "$cache/sft.json"
  fi
  mkdir -p "$1"
  cp -r "$cache/prompts.jsonl" "$cache/heldout.jsonl" "$cache/ckpt" "$1/"
}

# A small, untrained pipeline: uniform rewards would make dynamic sampling drop every group.
short_pipeline_env() {
  export RL_QUEUE="tcp://127.0.0.1:$(free_port)" RL_WEIGHTS_FROM="tcp://127.0.0.1:$(free_port)"
  export RL_TRAIN_MAX_STEPS="$1" RL_TRAIN_DYNAMIC_SAMPLING=false RL_TRAIN_PROMPTS_PER_STEP=8
  HB="tcp://127.0.0.1:$(free_port)"
}

# consumed TASK: rows of TASK the queue at $RL_QUEUE has consumed.
consumed() {
  rl-queue stat --json | python3 -c 'import json,sys; print(sum(t["consumed"] for t in json.load(sys.stdin)["tasks"] if t["name"] == sys.argv[1]))' "$1"
}

# step_events RUN: the trainer's step numbers, one a line.
step_events() { grep -h '"event":"step"' "$1/events/train-0.jsonl" | grep -o '"step":[0-9]*' | cut -d: -f2; }

@test "share/configs holds the pipeline files and one config per tool, each loaded below" {
  run ls "$CONFIGS"
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '%s\n' fault-drill.toml grpo-demo.toml rl-profile.toml rl-queue.toml rl-relay.toml \
    rl-reward.toml rl-rollout.toml rl-train.toml rl-watchdog.toml)" ]
}

@test "the pipeline files parse: rl-watchdog run reads each and goes on to bind the heartbeat endpoint" {
  # A listener on the heartbeat port: the watchdog gets past the file, fails to bind (69) and
  # starts no role. A file it could not read would exit 78 first.
  port=$(free_port)
  python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(60)' "$port" &
  PIDS+=($!)
  for _ in $(seq 1 50); do python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])))' "$port" 2>/dev/null && break; sleep 0.1; done
  for f in grpo-demo fault-drill; do
    run rl-watchdog run "$CONFIGS/$f.toml" --run-dir "$TMP/run-$f" --heartbeat "tcp://127.0.0.1:$port"
    echo "$f: $output"
    [ "$status" -eq 69 ]
    [ ! -d "$TMP/run-$f/logs" ]
  done
  # The same file with one key misspelt is refused as a config error.
  sed 's/^spares = 1/spare = 1/' "$CONFIGS/fault-drill.toml" > "$TMP/bad.toml"
  run rl-watchdog run "$TMP/bad.toml" --run-dir "$TMP/run-bad" --heartbeat "tcp://127.0.0.1:$port"
  echo "$output"
  [ "$status" -eq 78 ]
  [[ "$output" == *"unknown key 'spare' in [role.train]"* ]]
}

@test "rl-watchdog run share/configs/grpo-demo.toml runs the demo's pipeline: three GRPO steps, weights over UCX, a clean stop" {
  prepared "$TMP/run"
  short_pipeline_env 3
  run timeout 300 rl-watchdog run "$CONFIGS/grpo-demo.toml" --run-dir "$TMP/run" --heartbeat "$HB" --log-level warn
  echo "$output"
  for f in "$TMP"/run/logs/*.log; do echo "== $f"; tail -n 5 "$f"; done
  [ "$status" -eq 0 ]
  [ "$(step_events "$TMP/run" | tr '\n' ' ')" = "1 2 3 " ]
  [ -f "$TMP/run/ckpt/weights-3.safetensors" ]
  # Every role ran under the watchdog and none failed; the trainer's exit ended the run.
  for kind in queue rollout reward train; do [ -s "$TMP/run/events/$kind-0.jsonl" ]; done
  grep -q '"event":"finished"' "$TMP/run/events/watchdog-0.jsonl"
  ! grep -q '"event":"failure"' "$TMP/run/events/watchdog-0.jsonl" || false
  # The rollout took a newer version from the trainer over UCX, not from the files.
  grep '"event":"weights"' "$TMP/run/events/rollout-0.jsonl" | grep -q '"via":"ucx"'
  # The other roles were stopped: no pid file is left.
  [ -z "$(ls "$TMP/run/watchdog" | grep -v -e watchdog.pid -e state.json)" ]
}

@test "rl-watchdog run share/configs/fault-drill.toml: a killed trainer is replaced by its spare and the run completes" {
  prepared "$TMP/run"
  # Steps enough to outlast the spare's 3 s wait on an idle machine (30 took 2.8 s there).
  short_pipeline_env 80
  rl-watchdog run "$CONFIGS/fault-drill.toml" --run-dir "$TMP/run" --heartbeat "$HB" --log-level warn 2> "$TMP/wd.err" &
  wpid=$!
  PIDS+=("$wpid")
  # The spare is started once the trainer has been ready for 3 s; kill the trainer after that,
  # and after its second step (a failure in the first step after a start escalates).
  wait_for "$TMP/run/events/watchdog-0.jsonl" '"event":"spare"' 120
  wait_for "$TMP/run/events/train-0.jsonl" '"event":"step".*"step":2[,}]' 120
  kill -9 "$(cut -d' ' -f1 "$TMP/run/watchdog/train-0.pid")"
  status=0; wait "$wpid" || status=$?
  cat "$TMP/wd.err"
  grep -E '"event":"(failure|restart|spare|finished)"' "$TMP/run/events/watchdog-0.jsonl"
  [ "$status" -eq 0 ]
  grep '"event":"restart"' "$TMP/run/events/watchdog-0.jsonl" | grep -q '"spare":true'
  ! grep -q '"event":"restart-job"' "$TMP/run/events/watchdog-0.jsonl" || false
  [ "$(step_events "$TMP/run" | sort -n | uniq | tail -n 1)" = 80 ]
}

@test "fault-drill.toml has the roles, keys, values and options of the pipeline fault-drill.sh writes" {
  # The script writes its pipeline from a here-document; the file is that pipeline with the run's
  # paths and endpoints taken from the environment. Values with a shell variable in the script
  # are not compared; [watchdog] may set more keys than the script (it passes them as options).
  run python3 - "$RL_SOURCE_DIR/examples/pipelines/fault-drill.sh" "$CONFIGS/fault-drill.toml" <<'PY'
import re, sys
def tables(text):
    out, cur = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([\w.]+)\]", line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        key, value = (x.strip() for x in line.split("=", 1))
        if key == "command":
            for flag in re.findall(r"(?<!\S)--[a-z][a-z-]*", value):
                cur[flag] = None
        else:
            cur[key] = value.split("#")[0].strip()
    return out
script = re.search(r"cat <<TOML\n(.*?)\nTOML\n", open(sys.argv[1]).read(), re.S).group(1)
a, b = tables(script), tables(open(sys.argv[2]).read())
bad = sorted(set(a) ^ set(b))
for t in sorted(set(a) & set(b)):
    for k in sorted(set(a[t]) | set(b[t])):
        if t == "watchdog" and k not in a[t]:
            continue
        if k not in a[t] or k not in b[t] or ("$" not in a[t][k] if a[t][k] else False) and a[t][k] != b[t][k]:
            bad.append(f"[{t}] {k}: script {a[t].get(k, 'absent')}, file {b[t].get(k, 'absent')}")
print("\n".join(bad) or f"same: {sorted(a)}")
sys.exit(1 if bad else 0)
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "rl-queue.toml: serve declares the demo's tasks from it; put, get and stat read their tables" {
  port=$(free_port)
  rl-queue serve --config "$CONFIGS/rl-queue.toml" --dir "$TMP/q" --bind "tcp://127.0.0.1:$port" 2>> "$TMP/queue.log" &
  PIDS+=($!)
  export RL_QUEUE="tcp://127.0.0.1:$port"  # the files name the default port; the variable wins
  wait_for_queue
  run rl-queue stat --config "$CONFIGS/rl-queue.toml" --json
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"fsync":"batch"'* ]]
  for t in '"generate"' '"reward"' '"train"' '"prompt_ids","response_ids","logprobs","reward","version"'; do
    [[ "$output" == *"$t"* ]]
  done
  run bash -c 'printf "%s\n" "{\"prompt_ids\":[1,4,5]}" "{\"prompt_ids\":[1,6,7]}" | rl-queue put --config "$1"' _ "$CONFIGS/rl-queue.toml"
  [ "$status" -eq 0 ]
  [ "$(count_lines '"index"')" -eq 2 ]
  # count = 1 in [get]: one row of the two.
  run rl-queue get --config "$CONFIGS/rl-queue.toml" --task generate
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count_lines '"prompt_ids"')" -eq 1 ]
}

@test "rl-reward.toml: score uses its verifier; run scores a row from the queue with it" {
  run bash -c 'echo "{\"prompt\":\"001+002=\",\"response\":\"0003\",\"answer\":\"0003\"}" | rl-reward score --config "$1"' _ "$CONFIGS/rl-reward.toml"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"reward":1.0'* ]]
  start_queue "$TMP/q" --declare reward=prompt,response,answer
  rl-reward run --config "$CONFIGS/rl-reward.toml" 2> "$TMP/reward.log" &
  rpid=$!
  PIDS+=("$rpid")
  echo '{"prompt":"001+002=","response":"0004","answer":"0003"}' | rl-queue put > /dev/null
  for _ in $(seq 1 100); do [ "$(consumed reward)" = 1 ] && break; sleep 0.1; done
  [ "$(consumed reward)" = 1 ]
  kill -TERM "$rpid"
  wait "$rpid"
}

@test "rl-rollout.toml: generate stops at its max-new-tokens; run generates for a group from the queue" {
  rl-rollout random-model --out "$TMP/m.safetensors" 2> /dev/null
  run bash -c 'echo "{\"prompt\":\"001+002=\"}" | rl-rollout generate --config "$1" --weights "$2" --log-level warn' _ \
    "$CONFIGS/rl-rollout.toml" "$TMP/m.safetensors"
  echo "$output"
  [ "$status" -eq 0 ]
  n=$(printf '%s\n' "$output" | python3 -c 'import json,sys; print(len(json.loads(sys.stdin.readline())["response_ids"]))')
  [ "$n" -ge 1 ] && [ "$n" -le 8 ]
  start_queue "$TMP/q" --declare generate=prompt_ids
  rl-rollout run --config "$CONFIGS/rl-rollout.toml" --weights "$TMP/m.safetensors" 2> "$TMP/rollout.log" &
  rpid=$!
  PIDS+=("$rpid")
  echo '{"prompt_ids":[1,4,5,13,6,7,14]}' | rl-queue put --repeat 2 > /dev/null
  for _ in $(seq 1 200); do [ "$(consumed generate)" = 2 ] && break; sleep 0.1; done
  cat "$TMP/rollout.log"
  [ "$(consumed generate)" = 2 ]
  kill -TERM "$rpid"
  wait "$rpid"
}

@test "rl-train.toml: sft trains from it; grpo loads it and goes as far as the queue" {
  rl-train make-data --problems 200 --seed 1 > "$TMP/data.jsonl"
  run rl-train sft --config "$CONFIGS/rl-train.toml" --data "$TMP/data.jsonl" --checkpoint-dir "$TMP/ckpt" \
    --eval-data "$TMP/data.jsonl" --max-steps 2 --eval-size 8 --batch-size 16 --log-level warn
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"steps":2'* ]]
  [ -f "$TMP/ckpt/weights-0.safetensors" ]
  # No queue listens: grpo gets past its options and the weights, then gives up on the queue.
  run rl-train grpo --config "$CONFIGS/rl-train.toml" --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/data.jsonl" \
    --connect "tcp://127.0.0.1:$(free_port)" --timeout 1 --log-level warn
  echo "$output"
  [ "$status" -eq 69 ]
}

@test "rl-relay.toml: a relay serves what a publisher serves, and pull fetches it through the relay" {
  rl-rollout random-model --out "$TMP/weights-5.safetensors" 2> /dev/null
  src="tcp://127.0.0.1:$(free_port)" relay="tcp://127.0.0.1:$(free_port)"
  rl-relay publish --file "$TMP/weights-5.safetensors" --weights-bind "$src" 2> "$TMP/publish.log" &
  PIDS+=($!)
  rl-relay serve --config "$CONFIGS/rl-relay.toml" --weights-from "$src" --weights-bind "$relay" 2> "$TMP/relay.log" &
  PIDS+=($!)
  run rl-relay pull --config "$CONFIGS/rl-relay.toml" --weights-from "$relay" --wait-version 5 --timeout 30 --out "$TMP/pulled.safetensors"
  echo "$output"; cat "$TMP/relay.log"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"version":5'* ]]
  cmp "$TMP/weights-5.safetensors" "$TMP/pulled.safetensors"
}

@test "rl-watchdog.toml: monitor and run load their tables" {
  hb="tcp://127.0.0.1:$(free_port)"
  run rl-watchdog monitor --config "$CONFIGS/rl-watchdog.toml" --heartbeat "$hb" --duration 0.3
  echo "$output"
  [ "$status" -eq 0 ]
  cat > "$TMP/p.toml" <<'TOML'
[watchdog]
heartbeat_interval = 0.2
grace = 1
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.2 --duration 1"
TOML
  run rl-watchdog run "$TMP/p.toml" --config "$CONFIGS/rl-watchdog.toml" --run-dir "$TMP/run" --heartbeat "$hb"
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q '"restart":"role"' "$TMP/run/events/watchdog-0.jsonl"
}

@test "rl-profile.toml: queue and decode load their tables" {
  run rl-profile queue --config "$CONFIGS/rl-profile.toml" --rows 64 --row-bytes 64 --runs 1 --fsync never --redis off --json
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"system":"rl-queue"'* ]]
  run rl-profile decode --config "$CONFIGS/rl-profile.toml" --batches 1 --prompt-tokens 8 --sequences 4 --max-new-tokens 4 --json
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "a config file with an unknown key or a bad value exits 78 before anything runs" {
  printf '[stat]\nconect = "tcp://127.0.0.1:1"\n' > "$TMP/bad.toml"
  run rl-queue stat --config "$TMP/bad.toml"
  echo "$output"
  [ "$status" -eq 78 ]
  [[ "$output" == *"unknown option 'conect' for stat"* ]]
  sed 's/^mode = "async"/mode = "asynch"/' "$CONFIGS/rl-train.toml" > "$TMP/bad-train.toml"
  run rl-train grpo --config "$TMP/bad-train.toml" --checkpoint-dir "$TMP/c" --prompts "$TMP/p"
  echo "$output"
  [ "$status" -eq 78 ]
}
