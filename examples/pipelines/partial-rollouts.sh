#!/usr/bin/env bash
# Partial rollouts and refill measured: the same asynchronous GRPO run three times, rl-rollout
# --on-new-weights finish, interrupt, and finish with --refill (slots kept full across gets, each
# group put when done), on a long-tail length distribution, with a real rl-train publishing a
# version every step. Prints, per mode, generation tokens/s (tokens over the seconds inside
# Generate, re-prefills included), end-to-end samples/s (rl-train's trained samples over its wall
# clock, start to last step), the share of trained tokens sampled with weights older than the
# trainer's (older_token_share, step events), and what interrupting cost (switches, sequences
# continued under newer weights, tokens prefilled again, seconds).
#
# Length distribution: a model of the demo's vocabulary with random weights (rl-rollout
# random-model) and its context raised to --max-new-tokens + 32: its <eos> comes about once per
# vocabulary size of tokens, so lengths fall off geometrically (median ~10) with a tail up to
# --max-new-tokens; the rollout's batch events give the quartiles, printed too. The verifier gives
# every response reward 0, so the trainer's advantages are 0: its steps (forward, backward, update,
# checkpoint, publish) cost what they cost, but the weights change only by weight decay. The point
# is throughput and token freshness, not learning.
# The machine's load moves these figures: --repeats N runs the modes N times, interleaved
# (finish, interrupt, refill, finish, ...), prints a line per run and the median of each mode last.
# Usage: partial-rollouts.sh [--short] [--steps N] [--max-new-tokens N] [--prompts-per-step N] [--repeats N]
#                            [--weights file|ucx] [--modes "finish interrupt refill refill+interrupt"]
#   --short: a smoke run for CI (3 steps, responses up to 48 tokens, each mode once)
#   --modes: which runs, in order (default finish interrupt refill; refill+interrupt is both)
#   --weights: how versions reach the rollout: weights files in the checkpoint directory (default),
#              or pulled over UCX from rl-train (--weights-bind / --weights-from)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

steps=16 max_new=160 per_step=16 group=4 slots=64 repeats=1 via=file modes="finish interrupt refill"
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=3; max_new=48; per_step=4 ;;
    --steps) steps="$2"; shift ;;
    --max-new-tokens) max_new="$2"; shift ;;
    --prompts-per-step) per_step="$2"; shift ;;
    --repeats) repeats="$2"; shift ;;
    --weights) via="$2"; shift ;;
    --modes) modes="$2"; shift ;;
    *) echo "partial-rollouts: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(fresh_run_dir partial-rollouts)"
pids=()
cleanup() {  # the queue last: the others stop quietly while it still answers
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# The demo's tokenizer, a context with room for long responses, random weights (version 0).
long_tail_model "$run/model" "$((max_new + 32))"
export RL_MODEL="$run/model"
rl-train make-data --problems 20000 --seed 1 > "$run/prompts.jsonl"
rl-rollout random-model --model "$RL_MODEL" --seed 1 --out "$run/weights-0.safetensors" --log-level warn

runs=()
for ((r = 1; r <= repeats; r++)); do for mode in $modes; do
  case "$mode" in
    finish|interrupt) how=(--on-new-weights "$mode") ;;
    refill) how=(--on-new-weights finish --refill) ;;
    refill+interrupt) how=(--on-new-weights interrupt --refill) ;;
    *) echo "partial-rollouts: --modes takes finish, interrupt, refill and refill+interrupt, not $mode" >&2; exit 64 ;;
  esac
  d="$run/$mode"
  [ "$repeats" -gt 1 ] && d="$run/$mode-$r"
  runs+=("$(basename "$d")")
  mkdir -p "$d/ckpt"
  cp "$run/weights-0.safetensors" "$d/ckpt/"
  export RL_QUEUE="$(free_endpoint)" RL_RUN_DIR="$d"
  pull=() serve=()
  case "$via" in
    file) ;;
    ucx) weights="$(free_endpoint)"; pull=(--weights-from "$weights"); serve=(--weights-bind "$weights") ;;
    *) echo "partial-rollouts: --weights must be file or ucx, not $via" >&2; exit 64 ;;
  esac
  echo "== $(basename "$d"): rl-queue, rl-rollout ${how[*]}, rl-reward," \
    "rl-train grpo --mode async ($steps steps)" >&2
  rl-queue serve --dir "$d/queue" --bind "$RL_QUEUE" --id 0 --log-level warn \
    --declare generate=prompt_ids --declare reward=prompt,response,answer \
    --declare train=prompt_ids,response_ids,logprobs,reward,version &
  pids+=($!)
  until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
  rl-rollout run --checkpoint-dir "$d/ckpt" "${pull[@]}" "${how[@]}" --max-new-tokens "$max_new" --slots "$slots" \
    --threads 1 --seed 1 --temperature 1 --id 0 --log-level warn &
  rollout=$!
  pids+=($rollout)
  rl-reward run --verifier addition --id 0 --log-level warn &
  reward=$!
  pids+=($reward)
  rl-train grpo --checkpoint-dir "$d/ckpt" --prompts "$run/prompts.jsonl" --threads 1 --seed 1 --mode async \
    --max-steps "$steps" --eval-every 0 --dynamic-sampling false --prompts-per-step "$per_step" \
    --group-size "$group" --id 0 --log-level warn "${serve[@]}"
  kill -TERM "$rollout" "$reward"
  wait "$rollout" "$reward" || true
  cleanup
  pids=()
done; done

python3 - "$run" "${runs[@]}" <<'PY'
import json, statistics, sys
run, names = sys.argv[1], sys.argv[2:]
def events(name, role):
    return [json.loads(l) for l in open(f"{run}/{name}/events/{role}-0.jsonl")]
cols = ("gen tok/s", "samples/s", "older tok", "switches", "interrupted", "re-prefill", "switch s", "gen s", "busy",
        "refills")
print(f"{'run':<16} " + " ".join(f"{c:>{max(9, len(c))}}" for c in cols) + f" {'lengths (min q1 med q3 max)':>28}")
def line(name, row, q=""):
    print(f"{name:<16} {row[0]:>9.0f} {row[1]:>9.2f} {row[2]:>9.3f} {row[3]:>9.0f} {row[4]:>11.0f} {row[5]:>10.0f} "
          f"{row[6]:>9.2f} {row[7]:>9.1f} {row[8]:>9.2f} {row[9]:>9.0f} {q:>28}")
by_mode = {}
for name in names:
    tr = events(name, "train")
    steps = [e for e in tr if e["event"] == "step"]
    wall = steps[-1]["ts"] - next(e["ts"] for e in tr if e["event"] == "start")
    samples = sum(e["samples"] for e in steps)
    older = sum(e.get("older_token_share", 0) * e["tokens"] for e in steps) / max(1, sum(e["tokens"] for e in steps))
    batches = [e for e in events(name, "rollout") if e["event"] == "batch"]
    tokens, gen_s = sum(b["tokens"] for b in batches), sum(b["seconds"] for b in batches)
    sw = [sum(b.get(k, 0) for b in batches) for k in ("switches", "interrupted", "reprefill_tokens", "switch_seconds")]
    quart = [sorted(b["lengths"][i] for b in batches) for i in range(5)]
    q = " ".join(f"{(min(c) if i == 0 else max(c) if i == 4 else statistics.median(c)):g}" for i, c in enumerate(quart))
    row = [tokens / gen_s, samples / wall, older] + sw + [gen_s, gen_s / wall, sum(b.get("refills", 0) for b in batches)]
    line(name, row, q)
    by_mode.setdefault(name.split("-")[0], []).append(row)
if len(names) > len(by_mode):  # medians only when a mode ran more than once
    for mode, rows in by_mode.items():
        line(f"{mode} median", [statistics.median(c) for c in zip(*rows)])
print(f"runs: {run}")
PY
