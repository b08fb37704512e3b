#!/usr/bin/env bash
# The agent drill: multi-turn tool conversations (the agent demo's model, on "12*34+56*78=": three
# calculator calls, four turns, after an SFT warm start on 400 such examples) while rollouts and
# the tool sandbox are killed with SIGKILL and restarted. The same conversations run twice on the
# same pipeline: once without faults, once with 20 rollout kills and 10 rl-env kills spread over it.
#
# The pipeline: rl-queue, rl-env (the calculator behind a 100 ms delay, standing in for a slow tool),
# two rl-rollout --tools (small leases of 16 conversations, a 4 s lease), rl-reward, and a consumer
# of task `train` that records every row it is handed and acks it. A killed rollout's restart gives
# its predecessor's leases back at once; the other rollout, or the restart, leases those rows again
# and goes on from each conversation's last completed turn (written to the row after every turn).
# A killed rl-env costs the calls in flight: the rollouts' calls are retried until it is back.
#
# Printed from the rollouts' event logs and the consumer's record:
#   turns regenerated: segments started again for a (conversation, turn) already started once;
#   from scratch: what a restart from the start of each conversation would have regenerated in the
#     same run (those, plus the completed turns each continued conversation came back with);
#   tokens kept: the tokens continued conversations came back with;
#   conversations lost (put, never handed to training) and duplicated (handed out twice): both must be 0;
#   end-to-end time with faults against the same run without them.
#
# Usage: agent-drill.sh [--short] [--refill] [--conversations N] [--seed N]
#   --short   a smoke run for CI: 96 conversations, 3 rollout kills and 2 rl-env kills
#   --refill  the rollouts take more conversations at turn boundaries (rl-rollout --refill): a
#             batch holds several leases, and a kill finds groups put, others mid-way
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
# Ends with: conversations lost L, duplicated D; turns regenerated R (from scratch: S)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools
export RL_MODEL="$rl_root/share/models/calc-tiny"  # the task needs its tool-call tags

seed=1 conversations=1200 rollout_kills=20 env_kills=10 refill=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) conversations=96 rollout_kills=3 env_kills=2 ;;
    --refill) refill=(--refill) ;;
    --conversations) conversations="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    *) echo "agent-drill: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
top="$(run_dir agent-drill)"
mkdir -p "$top"
RANDOM=$seed
pids=()
cleanup() {
  for p in "${pids[@]}" ${rollout_pids[@]+"${rollout_pids[@]}"} ${env_pid:+"$env_pid"}; do
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT

echo "== data and a warm start (SFT on 400 examples that call the calculator three times) in $top" >&2
rl-train make-data --task chain --problems 400 --seed "$seed" --response-format tools > "$top/sft.jsonl"
rl-train sft --data "$top/sft.jsonl" --result-open '<result>' --result-close '</result>' --checkpoint-dir "$top/ckpt" \
  --seed "$seed" --threads 2 --max-steps 100 --batch-size 64 --lr 3e-3 --log-level warn > /dev/null
rl-train make-data --task chain --problems "$conversations" --seed "$((seed + 7))" | rl-train encode |
  python3 -c '
import json, sys
for i, line in enumerate(sys.stdin):
    r = json.loads(line)
    r["group"] = "c%d" % i
    print(json.dumps(r))' > "$top/rows.jsonl"
weights="$top/ckpt/weights-0.safetensors"

start_env() {
  rl-env serve --bind "$tools" --workers 4 --log-level error \
    --tool calc='while read -r l; do sleep 0.1; printf "%s\n" "$l"; done | rl-env calc' &
  env_pid=$!
}
start_rollout() {  # ID
  rl-rollout run --connect "$queue" --weights "$weights" --tools "$tools" --max-turns 5 --max-new-tokens 80 \
    --count 16 --lease 4 --temperature 1 --seed "$((seed + $1))" --threads 1 --id "$1" --run-dir "$run" \
    --progress-interval 0 --timeout 120 --log-level error ${refill[@]+"${refill[@]}"} &
  rollout_pids[$1]=$!
}

# run_once NAME KILLS: the whole drill on fresh processes; KILLS 0 means no faults.
run_once() {
  local name="$1" kills="$2" t0 t1 k
  run="$top/$name"
  mkdir -p "$run"
  queue="$(free_endpoint)" tools="$(free_endpoint)"
  export RL_QUEUE="$queue"
  rl-queue serve --dir "$run/queue" --bind "$queue" --id 0 --log-level warn \
    --declare generate=prompt_ids --declare reward=prompt,response,answer \
    --declare train=prompt_ids,response_ids,logprobs,reward,version &
  pids+=($!)
  until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
  start_env
  rl-reward run --verifier exact --id 0 --log-level warn &
  pids+=($!)
  rollout_pids=()
  start_rollout 0
  start_rollout 1
  rl-queue put --log-level warn < "$top/rows.jsonl" > /dev/null
  t0=$(date +%s.%N)
  # The consumer: every row of task train, recorded and acked.
  (
    got=0
    while [ "$got" -lt "$conversations" ]; do
      rl-queue get --task train --count 64 --wait 2 --lease 30 --also loss_mask,turns,tool_calls --log-level error \
        > "$run/batch.jsonl" || true
      [ -s "$run/batch.jsonl" ] || continue
      cat "$run/batch.jsonl" >> "$run/trained.jsonl"
      lease=$(head -n 1 "$run/batch.jsonl" | grep -o '"lease":[0-9]*' | cut -d: -f2)
      grep -o '"index":[0-9]*' "$run/batch.jsonl" | cut -d: -f2 |
        rl-queue ack --task train --lease-id "$lease" --log-level error > /dev/null
      got=$(wc -l < "$run/trained.jsonl")
    done
  ) &
  local consumer=$!
  if [ "$kills" -gt 0 ]; then
    # Spread the kills over the fault-free run's duration, rl-env's evenly among the rollouts'.
    local gap
    gap=$(python3 -c "print(max(0.3, $base_s / ($kills + 2)))")
    for k in $(seq 1 "$kills"); do
      kill -0 "$consumer" 2>/dev/null || break
      sleep "$gap"
      if [ $((k * env_kills / kills)) -gt "$env_done" ]; then
        kill -9 "$env_pid" 2>/dev/null || true
        wait "$env_pid" 2>/dev/null || true
        env_done=$((env_done + 1))
        sleep 0.3
        start_env
      else
        local victim=$((RANDOM % 2))
        kill -9 "${rollout_pids[$victim]}" 2>/dev/null || true
        wait "${rollout_pids[$victim]}" 2>/dev/null || true
        rollout_done=$((rollout_done + 1))
        start_rollout "$victim"
      fi
    done
  fi
  wait "$consumer"
  t1=$(date +%s.%N)
  echo "$t0 $t1" > "$run/times"
  for p in "${rollout_pids[@]}" "$env_pid" "${pids[@]:1}"; do kill "$p" 2>/dev/null || true; done
  wait "${rollout_pids[@]}" "$env_pid" "${pids[@]:1}" 2>/dev/null || true
  kill "${pids[0]}" 2>/dev/null || true  # the queue last: the others stop without complaints
  wait 2>/dev/null || true
  pids=() rollout_pids=() env_pid=""
}

echo "== $conversations conversations, no faults" >&2
env_done=0 rollout_done=0
run_once clean 0
base_s=$(python3 -c "a, b = map(float, open('$top/clean/times').read().split()); print(b - a)")
echo "== the same conversations with $rollout_kills rollout kills and $env_kills rl-env kills" >&2
env_done=0 rollout_done=0
run_once faults $((rollout_kills + env_kills))
echo "killed: $rollout_done rollouts, $env_done rl-env" >&2

python3 - "$top" "$conversations" "$rollout_done" "$env_done" <<'EOF'
import collections, glob, json, sys
top, n, rk, ek = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def times(name):
    a, b = map(float, open(f"{top}/{name}/times").read().split())
    return b - a
out = {}
for name in ("clean", "faults"):
    started, resumed_turns, kept_tokens, resumes = collections.Counter(), 0, 0, 0
    for path in glob.glob(f"{top}/{name}/events/rollout-*.jsonl"):
        for line in open(path):
            try:
                e = json.loads(line)
            except ValueError:
                continue  # the last line of a killed process may be cut short
            if e.get("event") == "turn":
                for row, turn in zip(e["rows"], e["turns"]):
                    started[(row, turn)] += 1
            elif e.get("event") == "resume":
                resumes += 1
                resumed_turns += e["turns"]
                kept_tokens += e["tokens"]
    trained = [json.loads(l) for l in open(f"{top}/{name}/trained.jsonl")]
    seen = collections.Counter(r["index"] for r in trained)
    def broken(r):  # a mask of the wrong length or values, or a tool run not opened by <result> (19)
        ids, mask = r["response_ids"], r.get("loss_mask", [])
        if len(mask) != len(ids) or not set(mask) <= {0, 1}:
            return True
        return any(m == 0 and (i == 0 or mask[i - 1] == 1) and ids[i] != 19 for i, m in enumerate(mask))
    bad = sum(1 for r in trained if broken(r))
    regenerated = sum(c - 1 for c in started.values())
    out[name] = dict(seconds=times(name), lost=n - len(seen), duplicated=sum(c - 1 for c in seen.values()),
                     regenerated=regenerated, scratch=regenerated + resumed_turns, kept=kept_tokens,
                     resumes=resumes, turns=len(started), bad=bad,
                     calls=sum(r.get("tool_calls", 0) for r in trained))
c, f = out["clean"], out["faults"]
print(f"{n} conversations, {f['turns']} turns, {f['calls']} tool calls; killed {rk} rollouts and {ek} rl-env")
print(f"no faults: {c['seconds']:.1f} s; with faults: {f['seconds']:.1f} s ({f['seconds'] / c['seconds']:.2f}x)")
print(f"continued from their last turn: {f['resumes']} conversations, {f['kept']} tokens kept "
      f"(not generated again); rows with a broken loss mask: {f['bad']}")
print(f"conversations lost {f['lost']}, duplicated {f['duplicated']}; "
      f"turns regenerated {f['regenerated']} (from scratch: {f['scratch']})")
EOF
