#!/usr/bin/env bash
# Adaptive tensor parallelism for long-tail generation, measured: rl-profile adaptive on two
# processes (one rank each, one core each; --ranks 4 for four). A Llama-style model of about 78M
# parameters with random weights, deep and thin as small models are (24 layers of width 512, as
# SmolLM2-135M has 30 of 576; decoding it is bound by compute and memory, not by overheads),
# generates greedily on a long-tail workload (most responses short, one in ten at the length
# limit) and a uniform one (the same tokens, every response alike), each as static tensor
# parallelism 1 (two data-parallel replicas), static 2 (one replica over both processes) and
# adaptive (two replicas that merge into one when the predictor says so); 96 prompts, 32 slots per
# replica, each configuration run five times in turn and its median time reported (one run apiece
# moves by up to 15% on a shared machine), about 10 minutes on 2 cores.
# Why deep and thin: a tensor-parallel replica pays two all-reduces per layer, and on a CPU it
# also halves each rank's weight reads; with 12 layers of width 768 the two nearly cancelled and
# two replicas decoded full batches only 3% faster than one over both ranks, too little for the
# bulk phase to show. With twice the layers per FLOP the all-reduces show, as they do on GPUs.
# Then it writes the decode profile, and a rollout group of two
# (rl-rollout run --ranks 2 --adaptive-profile) serves rows from rl-queue with it; one rank is
# killed while the group switches, and every row is still answered exactly once.
# The last line:
#   adaptive/best-static: long-tail X.XX uniform X.XX; switch/naive-restart X.XX; predictor error X.X%
#
# Usage: adaptive-tp.sh [--short] [--ranks N]
#   --short   a tiny model and workload for CI: shows it runs, not the speed-ups
#   --ranks N the measurement on N processes (2 or 4; default 2): static at each degree 1, 2 .. N
#             and adaptive, which may widen several times (1 -> 2 -> 4). On a 2-core machine 4
#             ranks share the cores, so their timings say nothing about the speed-ups.
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory), RL_DEVICE
# (cuda: every rank of the profile and of the rollout group on a GPU, cuda:RANK modulo the GPUs).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

short=0
ranks=2
while [ $# -gt 0 ]; do
  case "$1" in
    --short) short=1 ;;
    --ranks)
      ranks="${2:-}"
      [ "$ranks" = 2 ] || [ "$ranks" = 4 ] || { echo "adaptive-tp: --ranks is 2 or 4" >&2; exit 64; }
      shift ;;
    *) echo "adaptive-tp: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(fresh_run_dir adaptive-tp)"
mkdir -p "$run/model"
cp "$RL_MODEL/tokenizer.json" "$RL_MODEL/tokenizer_config.json" "$run/model/"
if [ "$short" = 1 ]; then
  shape='"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": '"$ranks"', "head_dim": 32, "vocab_size": 64'
  bench=(--requests 8 --slots 2 --max-new-tokens 24 --short-tokens 4 --prompt-tokens 8 --steps 2)
else
  shape='"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 24, "num_attention_heads": 8,
         "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 4096'
  bench=(--requests 96 --slots 32 --max-new-tokens 160 --short-tokens 12 --prompt-tokens 16 --steps 4 --repeats 5)
fi
cat > "$run/model/config.json" <<JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 1, "eos_token_id": 2,
 "hidden_act": "silu", "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "tie_word_embeddings": true, "torch_dtype": "float32", $shape}
JSON

echo "== rl-profile adaptive on $ranks ranks: profile, then static at each degree and adaptive on two workloads" >&2
rendezvous="127.0.0.1:$(free_port)"
common=(--model "$run/model" --ranks "$ranks" --rendezvous "$rendezvous" --threads 1 --seed 1 "${bench[@]}")
followers=()
for r in $(seq 1 $((ranks - 1))); do
  rl-profile adaptive "${common[@]}" --rank "$r" 2> "$run/rank$r.log" &
  followers+=($!)
done
rl-profile adaptive "${common[@]}" --rank 0 --profile-out "$run/profile.json" | tee "$run/report.txt"
for p in "${followers[@]}"; do wait "$p"; done

# The rollout group over rl-queue, a rank killed in a switch and then the leader: the group
# re-forms in place each time, nothing is lost.
bash "$(dirname "$0")/adaptive-tp-drill.sh" "$run" >&2

tail -n 1 "$run/report.txt"
