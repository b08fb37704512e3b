#!/usr/bin/env bash
# Refill measured: one rl-rollout generating the same prompt groups from rl-queue batch by batch,
# then with --refill (slots kept full across gets, each group put as soon as it is done), on a
# long-tail length distribution and without a trainer, so that generation is the whole job.
# Prints, per run: batches, response tokens, rounds (decode steps), wall seconds from the first
# batch's start to the last one's end, tokens/s over that wall time, slot occupancy (tokens over
# rounds x slots: the share of slot-steps that decoded a token); then the ratio of refill's
# tokens/s to batch's.
#
# Length distribution (as partial-rollouts.sh): a model of the demo's vocabulary with random
# weights and its context raised to --max-new-tokens + 32; its <eos> comes about once per
# vocabulary size of tokens, so lengths fall off geometrically (median ~10) with a tail up to
# --max-new-tokens. Batch by batch, each get of --slots rows decodes until its longest response
# is done; most slots stand empty for most of that.
# The machine's load moves these figures: --repeats N runs the pair N times, interleaved, and
# prints the median of each mode last. Measured on 2 cores (another job on the other core),
# medians of --repeats 3: the defaults 0.238 -> 0.527 occupancy, 1.07x tokens/s (a CPU step's time
# follows its sequences, so an empty slot costs little); --width 1024 0.238 -> 0.559, 1.33x.
# --width W widens the model (hidden W, intermediate 8W/3, the demo's 3 layers): where a decode step
# reads more weights than it computes with, as on a GPU, an emptied slot saves little time.
# --ranks N: the rollout is a rollout group of N processes (rl-rollout run --ranks N, static
# tensor parallelism over all of them), which refills at its checks (--check-every, default 8
# rounds); its rounds are those of rank 0's replica. The rows are put once the group has formed.
# Measured: --ranks 2 --width 1024 --repeats 3, 0.238 -> 0.553 occupancy, 1.22x tokens/s (one
# rollout the same hour: 1.18x).
# --tools: the rows are multi-turn conversations (rl-rollout --tools, up to 4 turns) with the
# calculator in rl-env behind a 50 ms delay, on the agent demo's model with random weights, which
# ends its conversations after 1 to 4 turns; with --refill new conversations take the places of
# those that ended at each turn boundary. Rounds are then turns, and occupancy the share of
# places (--slots a turn) that held a conversation. Measured (--tools --repeats 3, 256
# conversations, 2 cores shared with a build): 16 -> 10 turns, occupancy 0.446 -> 0.684, 1.23x
# tokens/s (5.16 -> 4.31 s).
# Usage: refill.sh [--short] [--groups N] [--group-size N] [--slots N] [--max-new-tokens N] [--width W]
#                  [--repeats N] [--ranks N] [--check-every N] [--tools]
#   --short: a smoke run for CI (16 groups in 16 slots, responses up to 48 tokens)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

groups=64 group=4 slots=64 max_new=160 repeats=1 width= ranks=1 check_every=8 tools=
while [ $# -gt 0 ]; do
  case "$1" in
    --short) groups=16; slots=16; max_new=48 ;;
    --groups) groups="$2"; shift ;;
    --group-size) group="$2"; shift ;;
    --slots) slots="$2"; shift ;;
    --max-new-tokens) max_new="$2"; shift ;;
    --repeats) repeats="$2"; shift ;;
    --width) width="$2"; shift ;;
    --ranks) ranks="$2"; shift ;;
    --check-every) check_every="$2"; shift ;;
    --tools) tools=1 ;;
    *) echo "refill: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(fresh_run_dir refill)"
pids=()
cleanup() {  # the queue last: the rollout stops quietly while it still answers
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  # these alone: with --tools, rl-env serves every run
  [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}" 2>/dev/null || true
}
trap cleanup EXIT

mkdir -p "$run/ckpt"
task=()
if [ -n "$tools" ]; then  # the agent demo's model (its call tags), a slow calculator
  [ "$max_new" -gt 96 ] && max_new=96
  export RL_MODEL="$rl_root/share/models/calc-tiny"
  task=(--task multiply)
  tools_at="$(free_endpoint)"
  rl-env serve --bind "$tools_at" --workers 4 --log-level error \
    --tool calc='while read -r l; do sleep 0.05; printf "%s\n" "$l"; done | rl-env calc' &
  env_pid=$!
  trap 'cleanup; kill "$env_pid" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
else
  long_tail_model "$run/model" "$((max_new + 32))" "$width"
  export RL_MODEL="$run/model"
fi
rl-rollout random-model --model "$RL_MODEL" --seed 1 --out "$run/ckpt/weights-0.safetensors" --log-level warn
rl-train make-data "${task[@]}" --problems "$groups" --seed 1 | rl-train encode > "$run/prompts.jsonl"
rows=$((groups * group))

consumed() {
  rl-queue stat --json | python3 -c 'import json,sys; print({t["name"]: t for t in json.load(sys.stdin)["tasks"]}["generate"]["consumed"])'
}

names=()
for ((r = 1; r <= repeats; r++)); do for mode in batch refill; do
  d="$run/$mode"
  [ "$repeats" -gt 1 ] && d="$run/$mode-$r"
  names+=("$(basename "$d")")
  flags=()
  [ "$mode" = refill ] && flags=(--refill)
  [ -n "$tools" ] && flags+=(--tools "$tools_at" --max-turns 4)
  export RL_QUEUE="$(free_endpoint)"
  echo "== $(basename "$d"): $groups groups of $group, $slots slots, responses up to $max_new tokens" >&2
  rl-queue serve --dir "$d/queue" --bind "$RL_QUEUE" --id 0 --log-level warn --declare generate=prompt_ids &
  pids+=($!)
  until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done
  [ "$ranks" -eq 1 ] && rl-queue put --repeat "$group" < "$run/prompts.jsonl" > /dev/null
  common=(--checkpoint-dir "$run/ckpt" "${flags[@]}" --count "$slots" --slots "$slots" --max-new-tokens "$max_new"
          --threads 1 --seed 1 --temperature 1 --wait 0.2 --id 0 --progress-interval 0 --log-level warn)
  if [ "$ranks" -gt 1 ]; then
    common+=(--ranks "$ranks" --rendezvous "127.0.0.1:$(free_port)" --check-every "$check_every")
    for ((k = 1; k < ranks; k++)); do
      rl-rollout run "${common[@]}" --rank "$k" &
      pids+=($!)
    done
    common+=(--rank 0)
  fi
  rl-rollout run "${common[@]}" --run-dir "$d" &
  rollout=$!
  pids+=($rollout)
  if [ "$ranks" -gt 1 ]; then  # the rows once the group has formed: the batches run over it
    for _ in $(seq 1 600); do
      grep -qs '"event":"group".*"what":"formed"' "$d/events/rollout-0.jsonl" && break
      sleep 0.1
    done
    grep -qs '"event":"group".*"what":"formed"' "$d/events/rollout-0.jsonl" ||
      { echo "refill: the rollout group of $ranks did not form within 60 s" >&2; exit 70; }
    rl-queue put --repeat "$group" < "$run/prompts.jsonl" > /dev/null
  fi
  for _ in $(seq 1 6000); do
    [ "$(consumed)" -ge "$rows" ] && break
    if ! kill -0 "$rollout" 2>/dev/null; then  # it exited before the rows were done: say how
      wait "$rollout" && code=0 || code=$?
      echo "refill: rl-rollout exited with status $code before generating the $rows rows" >&2
      exit 70
    fi
    sleep 0.1
  done
  kill -TERM "$rollout"
  wait "$rollout" || true
  cleanup
  pids=()
done; done

python3 - "$run" "$slots" "$rows" "${tools:-0}" "${names[@]}" <<'PY'
import json, statistics, sys
run, slots, rows, tools, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5:]
cols = ("batches", "tokens", "turns" if tools else "rounds", "wall s", "tok/s", "occupancy")
print(f"{'run':<10} " + " ".join(f"{c:>9}" for c in cols))
def line(name, row):
    print(f"{name:<10} {row[0]:>9.0f} {row[1]:>9.0f} {row[2]:>9.0f} {row[3]:>9.2f} {row[4]:>9.0f} {row[5]:>9.3f}")
by_mode = {}
for name in names:
    events = [json.loads(l) for l in open(f"{run}/{name}/events/rollout-0.jsonl")]
    batches = [e for e in events if e["event"] == "batch"]
    assert sum(b["rows"] for b in batches) == rows, (name, [b["rows"] for b in batches])
    tokens = sum(b["tokens"] for b in batches)
    start, end = min(b["ts"] - b["seconds"] for b in batches), max(b["ts"] for b in batches)
    if tools:  # a turn's places: the conversations it generated for, of --slots
        turns = [e for e in events if e["event"] == "turn"]
        rounds, used = len(turns), sum(len(t["rows"]) for t in turns)
    else:
        rounds = sum(b["rounds"] for b in batches)
        used = tokens
    row = [len(batches), tokens, rounds, end - start, tokens / (end - start), used / (rounds * slots)]
    line(name, row)
    by_mode.setdefault(name.split("-")[0], []).append(row)
med = {m: [statistics.median(c) for c in zip(*rs)] for m, rs in by_mode.items()}
if len(names) > 2:
    for mode, row in med.items():
        line(f"{mode} med", row)
print(f"refill/batch: {med['refill'][4] / med['batch'][4]:.2f}x tokens/s, slot occupancy "
      f"{med['batch'][5]:.3f} -> {med['refill'][5]:.3f}")
print(f"runs: {run}")
PY
