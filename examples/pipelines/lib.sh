# Shared by the pipeline scripts here (source it; it runs nothing on its own):
#   rl_tools        puts every rl-* tool of the build on PATH (RL_BUILD_DIR, default ./build),
#                   exports OMP_WAIT_POLICY=PASSIVE (roles share the cores, and busy-waiting
#                   OpenMP threads would starve the others) and RL_MODEL, the model directory
#                   every role's --model defaults to (the demo's, share/models/addition-tiny,
#                   unless set)
#   free_port       prints a TCP port free on 127.0.0.1 now
#   free_endpoint   prints tcp://127.0.0.1:<a free port>
#   run_dir NAME    prints $RL_RUN_DIR, or a new /tmp/rl-NAME.XXXXXX directory when it is unset
#   fresh_run_dir NAME  the same, refusing (exit 73) a directory that holds an earlier run
#   long_tail_model DIR CONTEXT [WIDTH]  writes DIR, a model directory of $RL_MODEL's tokenizer and
#                   config (the demo's) with the context raised to CONTEXT (and hidden size WIDTH): with random
#                   weights its <eos> comes about once per vocabulary size of tokens, so response
#                   lengths fall off geometrically with a tail to the token cap
#   wide_wins_profile FILE  writes a decode profile (rl-profile adaptive's JSON) in which one
#                   replica over two ranks is ten times faster than two replicas: a rollout group
#                   given it merges at every check with nothing pending
rl_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

rl_tools() {
  local build="${RL_BUILD_DIR:-$rl_root/build}" t
  for t in rl-queue rl-rollout rl-reward rl-train rl-relay rl-watchdog rl-profile rl-env; do PATH="$build/tools/$t:$PATH"; done
  export PATH OMP_WAIT_POLICY=PASSIVE RL_MODEL="${RL_MODEL:-$rl_root/share/models/addition-tiny}"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

free_endpoint() { echo "tcp://127.0.0.1:$(free_port)"; }

run_dir() { echo "${RL_RUN_DIR:-$(mktemp -d "/tmp/rl-$1.XXXXXX")}"; }

# fresh_run_dir NAME: run_dir, created, or exit 73 when it holds an earlier run (a trainer would
# resume that run's checkpoints on top of this one's warm start: two runs mixed). Under set -e,
# run="$(fresh_run_dir NAME)" stops the script with that status.
fresh_run_dir() {
  local run
  run="$(run_dir "$1")"
  if [ -n "$(ls -A "$run" 2>/dev/null)" ]; then
    echo "$1: run directory $run is not empty; give RL_RUN_DIR a new or empty directory" >&2
    return 73
  fi
  mkdir -p "$run" && echo "$run"
}

# demo_start DIR SEED TARGET MAX_STEPS [EVAL_EVERY]: the demo's data and warm start: DIR/sft.jsonl and
# DIR/prompts.jsonl (200000 problems each, disjoint seeds), DIR/heldout.jsonl (the fixed held-out
# set, 2000 problems), then SFT (the answer is the response) until held-out greedy accuracy on 256
# of them reaches TARGET: DIR/ckpt/weights-0.safetensors, and DIR/sft.json (its result).
# demo_eval DIR: the flags that evaluate on DIR/heldout.jsonl as the demo does (exact match, an
# answer is at most 4 digits and <eos>).
# demo_judge_template: the judging prompt of the demo's judge (yatt-judge.sh trains it, grpo-demo.sh
# --judge uses it): reference-guided, "<prompt><response>=<answer>=", verdict token "1" or "0".
demo_judge_template='{prompt}{response}={answer}='
demo_eval() { echo "--eval-data $1/heldout.jsonl --verifier addition --max-new-tokens 6"; }
demo_start() {
  local dir="$1" seed="$2" target="$3" max="$4" every="${5:-5}"
  mkdir -p "$dir"
  echo "== data (seed $seed) in $dir" >&2
  rl-train make-data --problems 200000 --seed "$seed" > "$dir/sft.jsonl"
  rl-train make-data --problems 200000 --seed "$((seed + 1000))" > "$dir/prompts.jsonl"
  rl-train make-data --problems 2000 --heldout > "$dir/heldout.jsonl"
  if [ -n "${RL_SFT_FROM:-}" ]; then  # an earlier run's warm start (same seed: same data)
    echo "== SFT warm start taken from $RL_SFT_FROM" >&2
    mkdir -p "$dir/ckpt"
    cp "$RL_SFT_FROM/ckpt/weights-0.safetensors" "$dir/ckpt/"
    cp "$RL_SFT_FROM/sft.json" "$dir/sft.json"
    return
  fi
  echo "== SFT warm start until held-out greedy accuracy >= $target (at most $max steps)" >&2
  # shellcheck disable=SC2046
  rl-train sft --data "$dir/sft.jsonl" --response-key answer $(demo_eval "$dir") --eval-size 256 \
    --checkpoint-dir "$dir/ckpt" --seed "$seed" --threads 2 --target-accuracy "$target" --eval-every "$every" --max-steps "$max" > "$dir/sft.json"
}

long_tail_model() {
  mkdir -p "$1"
  cp "$RL_MODEL"/*.json "$1/"
  python3 - "$1/config.json" "$2" "${3:-}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["max_position_embeddings"] = int(sys.argv[2])
if sys.argv[3]:
    w = int(sys.argv[3])
    c.update(hidden_size=w, intermediate_size=8 * w // 3, head_dim=w // c["num_attention_heads"])
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
}

# A decode profile (rl-rollout --adaptive-profile) for two ranks in which one replica over both is
# ten times faster at every batch size: a group merges whenever nothing is pending and stays
# merged. With "tail" as $2, the wide replica is faster up to 8 sequences and far slower at 16
# (PAT's case, exaggerated): a refilling group merges for a tail and splits for new prompts.
wide_wins_profile() {
  python3 - "$1" "${2:-}" <<'PY'
import json, sys
def step(tp, b, t):
    if sys.argv[2] == "tail":
        return (0.006 + 0.0001 * b if tp == 1 else 0.0005 * b if b <= 8 else 0.05) + 1e-6 * t
    return (0.01 + 0.001 * b + 1e-6 * t) / (10 if tp == 2 else 1)
decode = [[tp, b, t, step(tp, b, t)] for tp in (1, 2) for b in (1, 8, 16) for t in (0, 4096)]
prefill = [[tp, n, 0.0001 * n] for tp in (1, 2) for n in (1, 256)]
json.dump({"decode": decode, "prefill": prefill,
           "switch": {"gather_bytes_per_s": 1e9, "reshard_s": 0.001, "kv_bytes_per_token": 1024}},
          open(sys.argv[1], "w"))
PY
}
