#!/usr/bin/env bash
# The GRPO demo: a 0.55M-parameter Llama-style transformer learns 3-digit addition. rl-train warm-starts it
# with SFT until held-out greedy accuracy crosses --target-accuracy, then rl-queue, one
# rl-rollout, one rl-reward and rl-train run as separate processes until the step budget is
# spent (600 steps: about 7 minutes in all on 2 quiet cores). The final table shows step, mean
# reward, held-out greedy accuracy (256 problems) and samples/s, then the verdict: the SFT start and
# the final weights evaluated on 2000 held-out problems, and the gain in points.
# Weight versions go from rl-train to rl-rollout over UCX (the trainer serves each version as soon
# as its snapshot is in memory); the checkpoint files are the rollout's fallback.
#
# Usage: grpo-demo.sh [--short] [--seed N] [--steps N] [--mode sync|semi-sync|async] [--weights ucx|file]
#                     [--rollout-group N] [--rollouts N] [--train-ranks N] [--final-eval N] [--sft-from RUN]
#                     [--judge DIR] [--kl-coef X] [--ref-role] [--units N] [-- rl-train grpo options...]
#   --short     a smoke run for CI (a few steps; it shows the pipeline works, not that it learns)
#   --weights   how the rollout gets new versions: ucx (default) or checkpoint files only
#   --rollout-group N  the rollout is a group of N processes generating with tensor parallelism
#               (rl-rollout run --ranks N: rank 0 leases and writes, the others follow)
#   --train-ranks N  N data-parallel rl-train ranks (rl-train grpo --world N), one thread each: each
#               leases its token-balanced part of every step's groups; rank 0 checkpoints
#   --rollouts N  N rl-rollout processes (ids 0..N-1) sharing the generate task (default 1)
#   --final-eval N  problems of the final held-out evaluation (default 2000; 0: none)
#   --sft-from  take the SFT warm start of an earlier run directory of the same seed
#   --judge DIR the reward comes from this judge model (rl-reward run --judge, as yatt-judge.sh trains
#               it: judging prompt lib.sh's demo_judge_template, verdict token '1') instead of the
#               rule verifier; held-out accuracy is still measured by the rule
#   --kl-coef X a KL term to the SFT start (version 0) of weight X (default 0: none), its reference model
#               loaded inside rl-train
#   --ref-role  the reference model runs as a role of its own instead (rl-train score on task ref,
#               rl-train grpo --ref-from-queue; --kl-coef 0.01 unless given), supervised: restarted
#               whenever it dies, as rl-watchdog would
#   --units N   the queue's data on N storage units (rl-queue unit) under a controller (serve --units
#               --unit-min-bytes 1: the demo's values are small, and every one goes to the units);
#               the roles find the units by themselves (man rl-queue, STORAGE UNITS)
#   -- ...      more options for rl-train grpo, e.g. -- --advantage gae --critic-lr 1e-3
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

seed=1 steps=600 mode=async sft_steps=2000 target=0.3 extra=() more=() via=ucx final_eval=2000 group=1 ranks=1
rollouts=1 scorer=(--verifier addition) kl=0 ref_role=0 units=0
while [ $# -gt 0 ]; do
  case "$1" in
    --short)  # the untrained model gets uniform (all-zero) groups: no dynamic sampling, small steps
      steps=3; sft_steps=40; target=0.99; final_eval=64; extra=(--dynamic-sampling false --prompts-per-step 8) ;;
    --seed) seed="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --mode) mode="$2"; shift ;;
    --weights) via="$2"; shift ;;
    --rollout-group) group="$2"; shift ;;
    --train-ranks) ranks="$2"; shift ;;
    --rollouts) rollouts="$2"; shift ;;
    --final-eval) final_eval="$2"; shift ;;
    --sft-from) export RL_SFT_FROM="$2"; shift ;;
    --judge) scorer=(--judge "$2" --judge-template "$demo_judge_template" --judge-verdict 1); shift ;;
    --kl-coef) kl="$2"; shift ;;
    --ref-role) ref_role=1 ;;
    --units) units="$2"; shift ;;
    --) shift; more=("$@"); break ;;
    *) echo "grpo-demo: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(fresh_run_dir grpo-demo)"
export RL_QUEUE="$(free_endpoint)" RL_RUN_DIR="$run"
case "$via" in
  ucx) weights="$(free_endpoint)"; pull=(--weights-from "$weights"); serve=(--weights-bind "$weights") ;;
  file) pull=(); serve=() ;;
  *) echo "grpo-demo: --weights must be ucx or file, not $via" >&2; exit 64 ;;
esac
kl_opts=() train_columns=prompt_ids,response_ids,logprobs,reward,version ref_task=()
if [ "$ref_role" = 1 ]; then
  [ "$kl" = 0 ] && kl=0.01
  kl_opts=(--ref-from-queue) train_columns+=,ref_logprobs ref_task=(--declare ref=prompt_ids,response_ids)
fi
[ "$kl" = 0 ] || kl_opts+=(--kl-coef "$kl")
pids=()
# supervise NAME COMMAND...: runs COMMAND again whenever it dies (a kill -9 included), as
# rl-watchdog would, until it exits 0 or the supervisor is told to stop (it then stops COMMAND).
supervise() {
  local name="$1" child=0 status
  shift
  trap 'kill "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0' TERM INT
  while :; do
    "$@" &
    child=$!
    status=0
    wait "$child" || status=$?
    [ "$status" = 0 ] && return 0
    echo "grpo-demo: $name exited $status; restarting it" >&2
    sleep 0.5
  done
}
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

demo_start "$run" "$seed" "$target" "$sft_steps"

roles="rl-queue, rl-rollout, rl-reward, rl-train"
[ "$ref_role" = 0 ] || roles="rl-queue, rl-rollout, rl-reward, rl-train score, rl-train"
echo "== GRPO: $roles ($mode, $steps steps, weights over $via${kl_opts[*]:+, ${kl_opts[*]}})" >&2
unit_list=""
for ((u = 0; u < units; u++)); do
  endpoint="$(free_endpoint)"
  rl-queue unit --dir "$run/unit$u" --bind "$endpoint" --id "$u" --log-level warn &
  pids+=($!)
  until rl-queue stat --connect "$endpoint" --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
  unit_list+="${unit_list:+,}$endpoint"
done
rl-queue serve --dir "$run/queue" --bind "$RL_QUEUE" --id 0 --log-level warn ${unit_list:+--units "$unit_list" --unit-min-bytes 1} \
  --declare generate=prompt_ids --declare reward=prompt,response,answer "${ref_task[@]}" \
  --declare train="$train_columns" &
pids+=($!)
until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
# An answer is at most 4 digits and <eos>: a response that has not stopped by 8 tokens is wrong
# anyway, and would otherwise run to the end of the context and pad the trainer's micro-batches.
for ((r = 0; r < rollouts; r++)); do
  rendezvous="127.0.0.1:$(free_port)"
  for ((rank = group - 1; rank >= 0; rank--)); do  # rank 0, the one that leases, last
    grouping=()
    [ "$group" -gt 1 ] && grouping=(--ranks "$group" --rank "$rank" --rendezvous "$rendezvous")
    rl-rollout run --checkpoint-dir "$run/ckpt" "${pull[@]}" --threads 1 --seed "$seed" --temperature 1 --id "$r" \
      --max-new-tokens 8 --log-level warn "${grouping[@]}" &
    pids+=($!)
  done
done
rl-reward run "${scorer[@]}" --id 0 --log-level warn &
pids+=($!)
if [ "$ref_role" = 1 ]; then  # the frozen reference: the SFT start, as the in-process one
  supervise "rl-train score" rl-train score --weights "$run/ckpt/weights-0.safetensors" --threads 1 --temperature 1 \
    --id 0 --log-level warn &
  pids+=($!)
fi
train_rendezvous="127.0.0.1:$(free_port)"
train=(rl-train grpo --checkpoint-dir "$run/ckpt" --prompts "$run/prompts.jsonl" --threads 1 --seed "$seed"
  --mode "$mode" --max-steps "$steps" --eval-every 5 $(demo_eval "$run") "${serve[@]}" "${kl_opts[@]}" "${extra[@]}"
  "${more[@]}")
ranks_pids=()
for ((rank = ranks - 1; rank >= 1; rank--)); do  # the data-parallel ranks besides rank 0
  "${train[@]}" --id "$rank" --world "$ranks" --rank "$rank" --rendezvous "$train_rendezvous" &
  ranks_pids+=($!)
  pids+=($!)
done
if [ "$ranks" -gt 1 ]; then
  "${train[@]}" --id 0 --world "$ranks" --rank 0 --rendezvous "$train_rendezvous"
  for p in "${ranks_pids[@]}"; do wait "$p"; done
else
  "${train[@]}" --id 0
fi

[ "$final_eval" -gt 0 ] || exit 0  # no verdict asked for: the run directory is the result
# The per-step evaluations use 256 problems (+-3 points of noise); the verdict uses 2000 (+-1).
echo "== held-out greedy accuracy of the SFT start and the final weights on $final_eval problems" >&2
last=$(ls "$run/ckpt"/weights-*.safetensors | sort -V | tail -n 1)
for w in start final; do
  [ "$w" = start ] && file="$run/ckpt/weights-0.safetensors" || file="$last"
  rl-train eval --weights "$file" --data "$run/heldout.jsonl" --verifier addition --max-new-tokens 6 \
    --eval-size "$final_eval" --threads 2 > "$run/eval-$w.json"
done

python3 "$(dirname "$0")/verdict.py" "$run"
