#!/usr/bin/env bash
# The agent demo: a tiny Llama-style model (share/models/calc-tiny) learns to multiply 2-digit numbers
# with a calculator it calls as a tool. It cannot multiply in its head; with the tool it has to write
# the call "<call>37*48</call>", read the result rl-env appends ("<result>1776</result>", tokens that
# are not trained on), and copy it as its answer.
#
#   1. SFT on a few hundred worked examples teaches the call format (tool results masked out).
#   2. GRPO with multi-turn rollouts: rl-queue, rl-env (the calculator, out of the rollout's process),
#      rl-rollout --tools, rl-reward (exact match of the final answer) and rl-train, each a process.
#      Each conversation's progress is written to its queue row after every turn.
#   3. Held-out accuracy (greedy, 500 problems no run trains on) of the SFT start and of the final
#      policy with the calculator, and of the final policy when every call fails ("without tools").
#
# Usage: agent-demo.sh [--short] [--seed N] [--steps N] [--sft-steps N] [--sft-examples N]
#   --short     a smoke run for CI (a few steps; it shows the pipeline works, not that it learns)
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
# Ends with: held-out accuracy with tools: A -> B (+X points); without tools: C
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools
export RL_MODEL="$rl_root/share/models/calc-tiny"  # the task needs its tool-call tags

seed=1 steps=100 sft_steps=50 sft_examples=400 heldout=500 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=3; sft_steps=10; heldout=48; extra=(--dynamic-sampling false --prompts-per-step 8) ;;
    --seed) seed="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --sft-steps) sft_steps="$2"; shift ;;
    --sft-examples) sft_examples="$2"; shift ;;
    *) echo "agent-demo: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(fresh_run_dir agent-demo)"
export RL_QUEUE="$(free_endpoint)" RL_RUN_DIR="$run"
tools="$(free_endpoint)" broken="$(free_endpoint)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

echo "== data (seed $seed) in $run" >&2
rl-train make-data --task multiply --problems "$sft_examples" --seed "$seed" --response-format tools > "$run/sft.jsonl"
rl-train make-data --task multiply --problems 100000 --seed "$((seed + 1000))" > "$run/prompts.jsonl"
rl-train make-data --task multiply --problems "$heldout" --heldout > "$run/heldout.jsonl"

echo "== SFT on $sft_examples examples that call the calculator ($sft_steps steps; tool results not trained on)" >&2
rl-train sft --data "$run/sft.jsonl" --result-open '<result>' --result-close '</result>' --checkpoint-dir "$run/ckpt" \
  --seed "$seed" --threads 2 --max-steps "$sft_steps" --batch-size 64 --lr 3e-3 --log-level warn > "$run/sft.json"

# The calculator, and a stand-in whose every call fails (what the policy does without tools).
rl-env serve --bind "$tools" --tool calc="rl-env calc" --workers 2 --log-level warn &
pids+=($!)
rl-env serve --bind "$broken" --tool calc='while read -r l; do echo "{\"error\": \"no tools\"}"; done' --workers 2 \
  --log-level warn &
pids+=($!)

# evaluate WEIGHTS ENDPOINT NAME: greedy multi-turn answers to the held-out problems, scored.
evaluate() {
  rl-rollout generate --weights "$1" --tools "$2" --max-turns 3 --temperature 0 --max-new-tokens 40 --threads 2 \
    --log-level warn < "$run/heldout.jsonl" > "$run/answers-$3.jsonl"
  rl-reward score --verifier exact --log-level warn < "$run/answers-$3.jsonl" > "$run/scores-$3.jsonl"
  python3 - "$run/scores-$3.jsonl" > "$run/eval-$3.json" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = len(rows)
print(json.dumps({"problems": n, "accuracy": sum(r["reward"] for r in rows) / n,
                  "tool_calls": sum(r["tool_calls"] for r in rows) / n, "turns": sum(r["turns"] for r in rows) / n}))
EOF
}
echo "== held-out accuracy of the SFT start, with the calculator" >&2
evaluate "$run/ckpt/weights-0.safetensors" "$tools" start
python3 -c "import json,sys; e=json.load(open(sys.argv[1])); print(f\"SFT start: {e['accuracy']:.3f} with tools, \
{e['tool_calls']:.2f} calls per problem\")" "$run/eval-start.json" >&2

echo "== GRPO: rl-queue, rl-env, rl-rollout --tools, rl-reward, rl-train ($steps steps)" >&2
rl-queue serve --dir "$run/queue" --bind "$RL_QUEUE" --id 0 --log-level warn \
  --declare generate=prompt_ids --declare reward=prompt,response,answer \
  --declare train=prompt_ids,response_ids,logprobs,reward,version &
pids+=($!)
until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
rl-rollout run --checkpoint-dir "$run/ckpt" --tools "$tools" --max-turns 3 --max-new-tokens 40 --threads 1 \
  --seed "$seed" --temperature 1 --id 0 --run-dir "$run" --log-level warn &
pids+=($!)
rl-reward run --verifier exact --id 0 --log-level warn &
pids+=($!)
rl-train grpo --checkpoint-dir "$run/ckpt" --prompts "$run/prompts.jsonl" --threads 1 --seed "$seed" \
  --mode sync --max-steps "$steps" --id 0 --run-dir "$run" --log-level warn "${extra[@]}" >&2

echo "== held-out accuracy of the final policy, with the calculator and with every call failing" >&2
last=$(ls "$run/ckpt"/weights-*.safetensors | sort -V | tail -n 1)
evaluate "$last" "$tools" final
evaluate "$last" "$broken" final-no-tools

python3 - "$run" <<'EOF'
import json, sys
run = sys.argv[1]
ev = {w: json.load(open(f"{run}/eval-{w}.json")) for w in ("start", "final", "final-no-tools")}
steps = [e for e in map(json.loads, open(f"{run}/events/train-0.jsonl")) if e["event"] == "step"]
print(f"{'step':>5} {'reward':>7}")
for e in steps[:: max(1, len(steps) // 15)]:
    print(f"{e['step']:>5} {e['reward']:>7.3f}")
batches = [e for e in map(json.loads, open(f"{run}/events/rollout-0.jsonl")) if e["event"] == "batch"]
calls = sum(b.get("tool_calls", 0) for b in batches)
rows = sum(b.get("rows", 0) for b in batches)
print(f"GRPO: {len(steps)} steps, {rows} conversations, {calls / max(rows, 1):.2f} tool calls per conversation")
s, f, n = ev["start"], ev["final"], ev["final-no-tools"]
print(f"tool calls per held-out problem: {s['tool_calls']:.2f} after SFT, {f['tool_calls']:.2f} after GRPO")
print(f"held-out accuracy with tools: {s['accuracy']:.3f} -> {f['accuracy']:.3f} "
      f"({100 * (f['accuracy'] - s['accuracy']):+.1f} points); without tools: {n['accuracy']:.3f}")
EOF
