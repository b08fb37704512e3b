# Shared by the pipeline scripts here (source it; it runs nothing on its own):
#   rl_tools        puts every rl-* tool of the build on PATH (RL_BUILD_DIR, default ./build) and
#                   exports OMP_WAIT_POLICY=PASSIVE: roles share the cores, and busy-waiting
#                   OpenMP threads would starve the others
#   free_port       prints a TCP port free on 127.0.0.1 now
#   free_endpoint   prints tcp://127.0.0.1:<a free port>
#   run_dir NAME    prints $RL_RUN_DIR, or a new /tmp/rl-NAME.XXXXXX directory when it is unset
rl_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

rl_tools() {
  local build="${RL_BUILD_DIR:-$rl_root/build}" t
  for t in rl-queue rl-rollout rl-reward rl-train rl-relay rl-watchdog rl-profile; do PATH="$build/tools/$t:$PATH"; done
  export PATH OMP_WAIT_POLICY=PASSIVE
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

free_endpoint() { echo "tcp://127.0.0.1:$(free_port)"; }

run_dir() { echo "${RL_RUN_DIR:-$(mktemp -d "/tmp/rl-$1.XXXXXX")}"; }

# demo_start DIR SEED TARGET MAX_STEPS [EVAL_EVERY]: the demo's data and warm start: DIR/sft.jsonl and
# DIR/prompts.jsonl (200000 problems each, disjoint seeds), then SFT until held-out greedy
# accuracy reaches TARGET: DIR/ckpt/weights-0.safetensors, and DIR/sft.json (its result).
demo_start() {
  local dir="$1" seed="$2" target="$3" max="$4" every="${5:-5}"
  mkdir -p "$dir"
  echo "== data (seed $seed) in $dir" >&2
  rl-train make-data --problems 200000 --seed "$seed" > "$dir/sft.jsonl"
  rl-train make-data --problems 200000 --seed "$((seed + 1000))" > "$dir/prompts.jsonl"
  echo "== SFT warm start until held-out greedy accuracy >= $target (at most $max steps)" >&2
  rl-train sft --data "$dir/sft.jsonl" --checkpoint-dir "$dir/ckpt" --seed "$seed" --threads 2 \
    --target-accuracy "$target" --eval-every "$every" --max-steps "$max" > "$dir/sft.json"
}
