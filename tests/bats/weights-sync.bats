#!/usr/bin/env bats
# Weight sync in the pipeline: rl-train serves each version over UCX (--weights-bind), rl-rollout
# pulls it (--weights-from) and switches at a batch boundary, relays and rollouts pass versions
# on, a trainer killed in the middle of a pull never leaves a rollout with a partial version, and
# a dead source makes the rollout read the checkpoint files with one warning.
# The kills land inside a pull made slow on purpose (a test hook delays each chunk, about 3 s a
# version), found from the rollout's weights-pulling event.

load helper

setup() {
  setup_sealed
  export PATH="$RL_BUILD_DIR/tools/rl-relay:$PATH"
  cd "$TMP"
  mkdir -p ckpt run
  # A small model as the starting weights: about 30k parameters, many 4 KiB chunks.
  rl-rollout random-model --out ckpt/weights-0.safetensors --seed 1 \
    --model-config '{"architectures":["LlamaForCausalLM"],"vocab_size":15,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":16,"tie_word_embeddings":true}' 2>/dev/null
  rl-train make-data --problems 300 --seed 1 > problems.jsonl
}
teardown() { teardown_sealed; }

TASKS=(--declare generate=prompt_ids --declare reward=prompt,response,answer
       --declare train=prompt_ids,response_ids,logprobs,reward,version)

endpoint() { echo "tcp://127.0.0.1:$(free_port)"; }

# start NAME CMD...: runs CMD in the background with its stderr in NAME.log; its pid in PID_<NAME>.
start() {
  local name="$1"; shift
  "$@" 2>>"$TMP/$name.log" &
  PIDS+=("$!")
  eval "PID_$name=$!"
}

# train NAME ARGS...: rl-train grpo on the small model, sync mode (each version must reach the
# rollout before the next step can train), until --max-steps.
train() {
  local name="$1"; shift
  start "$name" rl-train grpo --checkpoint-dir ckpt --prompts problems.jsonl --group-size 4 \
    --prompts-per-step 2 --mode sync --dynamic-sampling false --eval-every 0 --eval-size 4 \
    --lease-seconds 5 --chunk-size 4096 --run-dir run --id 0 "$@"
}

rollout() {
  local name="$1"; shift
  start "$name" rl-rollout run --max-new-tokens 5 --wait 0.3 --lease 10 --progress-interval 0 --run-dir run "$@"
}

# The rollout's "weights" events must name versions the trainer (or a relay) served, with the
# digest it served them under: a partial or corrupt version would have another digest.
check_weights_events() {
  python3 - "$@" <<'EOF'
import json, sys
rollout, served_logs = sys.argv[1], sys.argv[2:]
served = set()
for path in served_logs:
    for e in map(json.loads, open(path)):
        if e["event"] in ("weights-published", "weights-serve"):
            served.add((e["version"], e["digest"]))
used = [e for e in map(json.loads, open(rollout)) if e["event"] == "weights"]
assert used, "no weights event"
for e in used:
    if e["via"] == "ucx":
        assert (e["version"], e["digest"]) in served, ("a version nobody served", e, served)
print(" ".join(f'{e["version"]}:{e["via"]}' for e in used))
EOF
}

@test "the rollout switches to each version rl-train serves over UCX, and serves it on as a relay" {
  start_queue "$TMP/q" "${TASKS[@]}"
  T=$(endpoint); R=$(endpoint)
  start reward rl-reward run --verifier addition --lease 10
  rollout rollout --weights-from "$T" --weights-bind "$R" --id r1
  train train --max-steps 100 --keep-checkpoints 100 --weights-bind "$T"
  wait_for run/events/rollout-r1.jsonl '"event":"weights".*"version":3,'
  kill -TERM "$PID_train"
  wait "$PID_train"
  ev=run/events/rollout-r1.jsonl
  # Every version 0..3 came over UCX from the trainer's endpoint; none from a file.
  for v in 0 1 2 3; do
    grep -E '"event":"weights"' "$ev" | grep -F "\"version\":$v," | grep -F '"via":"ucx"' | grep -qF "\"from\":\"$T\""
  done
  ! grep -F '"event":"weights"' "$ev" | grep -qF '"via":"file"' || false
  ! grep -q "weights over UCX failed" rollout.log || false
  run check_weights_events "$ev" run/events/train-0.jsonl
  echo "$output"
  [ "$status" -eq 0 ]
  # The trainer served each version before its checkpoint event.
  python3 - run/events/train-0.jsonl <<'EOF'
import json, sys
ev = list(map(json.loads, open(sys.argv[1])))
pub = {e["version"]: e["ts"] for e in ev if e["event"] == "weights-published"}
ckpt = {e["version"]: e["ts"] for e in ev if e["event"] == "checkpoint"}
assert sorted(pub) == list(range(len(pub))) and len(pub) >= 4, pub
for v, ts in ckpt.items():
    assert pub[v] <= ts, (v, pub[v], ts)
EOF
  # The rollout relays what it holds, byte for byte what the trainer wrote.
  run rl-relay pull --weights-from "$R" --wait-version 3 --timeout 10 --out got.safetensors
  [ "$status" -eq 0 ]
  v=$(printf '%s\n' "$output" | grep -o '"version":[0-9]*' | cut -d: -f2)
  [ "$v" -ge 3 ]
  cmp got.safetensors "ckpt/weights-$v.safetensors"
}

@test "a trainer killed in the middle of a pull: the rollout finishes from a relay, whole and verified" {
  start_queue "$TMP/q" "${TASKS[@]}"
  T=$(endpoint); R=$(endpoint)
  start reward rl-reward run --verifier addition --lease 10
  start relay rl-relay serve --weights-from "$T" --weights-bind "$R" --poll-interval 0.05 --run-dir run --id 1
  # Slow pulls (about 3 s a version) over tcp, so the kill lands inside one.
  UCX_TLS=tcp RL_WEIGHTS_TEST_CHUNK_DELAY_MS=100 rollout rollout --weights-from "$T,$R" --id r1 --weights-timeout 60
  train train --max-steps 100 --weights-bind "$T"
  wait_for run/events/rollout-r1.jsonl '"event":"weights-pulling".*"min_version":[1-9]'
  v=$(grep '"event":"weights-pulling"' run/events/rollout-r1.jsonl | tail -n 1 | grep -o '"min_version":[0-9]*' | cut -d: -f2)
  wait_for run/events/rl-relay-1.jsonl "\"event\":\"weights-pulled\".*\"version\":$v[,}]" 10
  kill -9 "$PID_train"
  # The relay still holds version $v: the rollout ends on it (or a later one) without the trainer.
  wait_for run/events/rollout-r1.jsonl "\"event\":\"weights\".*\"version\":$v," 30
  grep '"event":"weights"' run/events/rollout-r1.jsonl | grep "\"version\":$v," | grep -F '"via":"ucx"' | grep -qF "\"from\":\"$R\""
  run check_weights_events run/events/rollout-r1.jsonl run/events/train-0.jsonl run/events/rl-relay-1.jsonl
  echo "$output"
  [ "$status" -eq 0 ]
  ! grep -q '"event":"weights-bad"' run/events/rollout-r1.jsonl || false
  kill -0 "$PID_rollout"
}

@test "a trainer killed in the middle of a pull with no relay: the rollout waits for the restarted trainer and pulls again, whole and verified" {
  start_queue "$TMP/q" "${TASKS[@]}"
  T=$(endpoint)
  start reward rl-reward run --verifier addition --lease 10
  UCX_TLS=tcp RL_WEIGHTS_TEST_CHUNK_DELAY_MS=100 rollout rollout --weights-from "$T" --id r1 --weights-timeout 60
  train train1 --max-steps 100 --weights-bind "$T"
  wait_for run/events/rollout-r1.jsonl '"event":"weights-pulling".*"min_version":[1-9]'
  kill -9 "$PID_train1"
  sleep 0.5
  train train2 --max-steps 100 --weights-bind "$T"
  # The restarted trainer serves its checkpoint's version again, then new ones: the rollout
  # goes on to them.
  wait_for run/events/rollout-r1.jsonl '"event":"weights".*"version":3,' 60
  kill -TERM "$PID_train2"
  wait "$PID_train2"
  # The kill cut a pull short: the rollout said so, and started that version again or waited.
  grep -qE "trying another source|dropping [0-9]+ of its|went away with its source" rollout.log
  run check_weights_events run/events/rollout-r1.jsonl run/events/train-0.jsonl
  echo "$output"
  [ "$status" -eq 0 ]
  ! grep -q '"event":"weights-bad"' run/events/rollout-r1.jsonl || false
  ! grep -q "weights over UCX failed" rollout.log || false
}

@test "with its weight source dead the rollout reads the checkpoint files, and says why once" {
  start_queue "$TMP/q" --declare generate=prompt_ids
  rl-reward make-data --count 6 --seed 2 | rl-train encode | rl-queue put --repeat 2 > /dev/null
  mv ckpt/weights-0.safetensors ckpt/weights-1.safetensors
  D=$(endpoint)
  rollout rollout --weights-from "$D" --checkpoint-dir ckpt --weights-timeout 1 --count 4 --id r1
  wait_for run/events/rollout-r1.jsonl '"event":"weights".*"version":1,.*"via":"file"' 20
  cp ckpt/weights-1.safetensors ckpt/tmp && mv ckpt/tmp ckpt/weights-2.safetensors  # whole, as the trainer writes
  wait_for run/events/rollout-r1.jsonl '"event":"weights".*"version":2,.*"via":"file"' 20
  rl-reward make-data --count 6 --seed 3 | rl-train encode | rl-queue put --repeat 2 > /dev/null
  wait_for run/events/rollout-r1.jsonl '"event":"batch".*"version":2' 20
  sleep 2  # several more looks at the dead source: still one warning
  kill -TERM "$PID_rollout"
  wait "$PID_rollout"
  run grep "weights over UCX failed" rollout.log
  [ "${#lines[@]}" -eq 1 ]
  [[ "${lines[0]}" == *"weights over UCX failed for 1 s: no weight source answered ($D: "*"); reading weights files from ckpt until it works again" ]]
  [ "$(grep -c '"event":"weights-fallback"' run/events/rollout-r1.jsonl)" -eq 1 ]
  grep -q '"cause":"unreachable"' run/events/rollout-r1.jsonl
}
