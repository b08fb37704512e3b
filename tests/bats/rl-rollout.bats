#!/usr/bin/env bats
# rl-rollout from the command line: options, generate from a model file, and the queue loop.

load helper

setup() {
  setup_sealed
  # A small model (the demo's shape is larger; this keeps the tests fast).
  MODEL="$TMP/model.safetensors"
  rl-rollout random-model --out "$MODEL" --seed 1 \
    --model-config '{"architectures":["LlamaForCausalLM"],"vocab_size":15,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":16,"tie_word_embeddings":true}' 2>/dev/null
}
teardown() { teardown_sealed; }

task_stat() {
  rl-queue stat --json | python3 -c 'import json,sys; t={x["name"]:x for x in json.load(sys.stdin)["tasks"]}; print(t[sys.argv[1]][sys.argv[2]])' "$1" "$2"
}

# A queue with tasks generate and reward, version 3 of $MODEL in $TMP/ckpt, and N groups of 4
# prompt rows.
serve_groups() {
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  mkdir "$TMP/ckpt"
  cp "$MODEL" "$TMP/ckpt/weights-3.safetensors"
  rl-reward make-data --count "$1" --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
}

# Waits (20 s at most) for task generate to have consumed N rows.
wait_consumed() {
  for _ in $(seq 1 200); do
    [ "$(task_stat generate consumed)" -eq "$1" ] && return 0
    sleep 0.1
  done
}

# The batch events of a refilling rollout over serve_groups 10's 40 rows: fewer batches than the
# five gets of 8 a batch-by-batch rollout takes, the groups of later gets (leases) in them, and
# the prompt tokens and rounds rl-profile plan fits.
refilled_batches() {
  python3 - "$1" <<'PY'
import json, sys
batches = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "batch"]
assert sum(b["rows"] for b in batches) == 40, batches
assert sum(b["groups"] for b in batches) == 10, batches
assert len(batches) < 5 and sum(b["refills"] for b in batches) >= 1, batches
assert all(b["leases"] == 1 + b["refills"] for b in batches), batches
assert all(b["prompt_tokens"] > 0 and b["rounds"] > 0 for b in batches), batches
PY
}

# rollout_serves N FLAGS...: one rollout (id r1, events under $TMP/run) with these flags serving
# the queue's N rows, stopped with SIGTERM once they are consumed: each consumed once and ready
# for reward.
rollout_serves() {
  local rows="$1"
  shift
  rl-rollout run "$@" --run-dir "$TMP/run" --id r1 --progress-interval 0 2>"$TMP/rollout.log" &
  pid=$!
  PIDS+=("$pid")
  wait_consumed "$rows"
  kill -TERM "$pid"
  wait "$pid"
  [ "$(task_stat generate consumed)" -eq "$rows" ]
  [ "$(task_stat generate leased)" -eq 0 ]
  [ "$(task_stat reward ready)" -eq "$rows" ]
}

# A rollout group of two with these flags: rank 1 (pid in $follower) and rank 0 (in $leader,
# events under $TMP/run), logging to $TMP/rankR.log.
start_group() {
  rl-rollout run "$@" --rank 1 2>"$TMP/rank1.log" &
  follower=$!
  PIDS+=("$follower")
  rl-rollout run "$@" --rank 0 --run-dir "$TMP/run" 2>"$TMP/rank0.log" &
  leader=$!
  PIDS+=("$leader")
}

# A refilling rollout group of two (start_group, these flags added) serving 40 rows (10 groups)
# from a fresh queue, put once the group has formed so that the batches run over it, not on the
# leader alone; stopped with SIGTERM once they are consumed.
refilling_group_serves_40() {
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-rollout random-model --model "$RL_MODEL" --seed 3 --out "$TMP/tiny.safetensors" 2>/dev/null
  start_group --weights "$TMP/tiny.safetensors" --ranks 2 --rendezvous "127.0.0.1:$(free_port)" --id g --threads 1 \
    --wait 0.5 --count 8 --slots 8 --check-every 2 --refill --progress-interval 0 "$@"
  wait_for "$TMP/run/events/rollout-g.jsonl" '"event":"group".*"what":"formed"' 30
  rl-reward make-data --count 10 --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
  wait_consumed 40
  kill -TERM "$leader"
  wait "$leader"
  wait "$follower"
}

man_examples() {
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' "$1"
}

@test "--help lists the subcommands and the environment variable of each option" {
  run rl-rollout --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"run"* && "$output" == *"generate"* ]]
  run rl-rollout run --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_TEMPERATURE]"* && "$output" == *"[env RL_CHECKPOINT_DIR]"* ]]
}

@test "--version prints the version" {
  run rl-rollout --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^rl-rollout\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "random-model exits 78 with a one-line message on a config it cannot honour" {
  run rl-rollout random-model --out "$TMP/x.safetensors" \
    --model-config '{"architectures":["LlamaForCausalLM"],"vocab_size":15,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":16,"hidden_act":"gelu"}'
  [ "$status" -eq 78 ]
  [[ "$output" == *'hidden_act "gelu" is not supported'* ]]
  [ "${#lines[@]}" -eq 1 ]
  run rl-rollout random-model --out "$TMP/x.safetensors" --model-config '{"architectures":["GPT2LMHeadModel"]}'
  [ "$status" -eq 78 ]
  [[ "$output" == *'unsupported architecture "GPT2LMHeadModel"'* ]]
}

@test "exits 64 on an unknown option or a bad value" {
  run rl-rollout generate --weights "$MODEL" --no-such-option
  [ "$status" -eq 64 ]
  [[ "$output" == *"--no-such-option"* ]]
  run rl-rollout generate --weights "$MODEL" --top-p 2
  [ "$status" -eq 64 ]
  # training rollouts sample the whole tempered distribution, whose log-probabilities they record
  run rl-rollout run --checkpoint-dir "$TMP/ckpt" --top-k 5
  [ "$status" -eq 64 ]
  [[ "$output" == *"--top-k and --top-p are for rl-rollout generate"* ]]
  run rl-rollout run --checkpoint-dir "$TMP/ckpt" --top-p 0.9
  [ "$status" -eq 64 ]
}

@test "exits 64 without weights or without --model, and when run has no weights at all" {
  run rl-rollout generate < /dev/null
  [ "$status" -eq 64 ]
  [[ "$output" == *"has no weights: give --weights"* ]]
  run env -u RL_MODEL rl-rollout generate --weights "$MODEL" < /dev/null
  [ "$status" -eq 64 ]
  [[ "$output" == *"--model"* ]]
  run rl-rollout run
  [ "$status" -eq 64 ]
  [ "$output" = "rl-rollout: run needs --weights or --checkpoint-dir (see rl-rollout --help)" ]
}

@test "a rollout group's options: a one-line error and the right exit code for each mistake" {
  run rl-rollout run --weights "$MODEL" --ranks 2
  [ "$status" -eq 64 ]
  [ "$output" = "rl-rollout: --ranks 2 needs --rendezvous HOST:PORT and a --rank below it" ]
  run rl-rollout run --weights "$MODEL" --ranks 2 --rank 2 --rendezvous 127.0.0.1:1
  [ "$status" -eq 64 ]
  run rl-rollout run --weights "$MODEL" --ranks 2 --rendezvous 127.0.0.1:1 --adaptive-profile "$TMP/none.json"
  [ "$status" -eq 74 ]
  [ "${#lines[@]}" -eq 1 ]
  echo 'not json' > "$TMP/bad.json"
  run rl-rollout run --weights "$MODEL" --ranks 2 --rendezvous 127.0.0.1:1 --adaptive-profile "$TMP/bad.json"
  [ "$status" -eq 65 ]
  [[ "$output" == *"not JSON"* ]]
  echo '{"decode": [[1, 1, 0, -1]], "prefill": [], "switch": {}}' > "$TMP/bad.json"
  run rl-rollout run --weights "$MODEL" --ranks 2 --rendezvous 127.0.0.1:1 --adaptive-profile "$TMP/bad.json"
  [ "$status" -eq 65 ]
  [ "${#lines[@]}" -eq 1 ]
  for bad in "--check-every 0" "--switch-margin -0.1" "--switch-margin x"; do
    run rl-rollout run --weights "$MODEL" --ranks 2 --rendezvous 127.0.0.1:1 $bad
    [ "$status" -eq 64 ]
    [ "${#lines[@]}" -eq 1 ]
  done
}

@test "generate answers each prompt line with the response, its ids and log-probabilities" {
  run bash -c "printf '%s\n' '{\"prompt\":\"037+480=\",\"answer\":\"517\"}' '{\"prompt\":\"1+1=\"}' | rl-rollout generate --weights '$MODEL' --max-new-tokens 5 2>/dev/null"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[0]}" == '{"prompt":"037+480=","answer":"517","response":'* ]]
  printf '%s\n' "$output" | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    assert len(j["response_ids"]) == len(j["logprobs"]) >= 1, j
    assert all(lp <= 0 for lp in j["logprobs"]), j
'
}

@test "generate is greedy with --temperature 0 and repeats a sampled run with its seed" {
  echo '{"prompt":"12+34="}' > "$TMP/p"
  a=$(rl-rollout generate --weights "$MODEL" --temperature 0 < "$TMP/p" 2>/dev/null)
  b=$(rl-rollout generate --weights "$MODEL" --temperature 0 < "$TMP/p" 2>/dev/null)
  [ "$a" = "$b" ]
  c=$(rl-rollout generate --weights "$MODEL" --seed 5 < "$TMP/p" 2>/dev/null)
  d=$(rl-rollout generate --weights "$MODEL" --seed 5 < "$TMP/p" 2>/dev/null)
  [ "$c" = "$d" ]
}

@test "generate exits 65 on a bad line after writing the lines before it" {
  run bash -c "printf '%s\n' '{\"prompt\":\"1+1=\"}' '{\"prompt\":\"x\"}' | rl-rollout generate --weights '$MODEL' --max-new-tokens 2"
  [ "$status" -eq 65 ]
  [[ "$output" == *'"prompt":"1+1="'* ]]
  [[ "$output" == *"rl-rollout: stdin line 2: "* ]]
}

@test "generate exits 74 when the model file is missing" {
  run rl-rollout generate --weights "$TMP/none.safetensors" < /dev/null
  [ "$status" -eq 74 ]
}

@test "run fills the rows of task generate, acks them, logs events and stops on SIGTERM" {
  serve_groups 3
  rollout_serves 12 --checkpoint-dir "$TMP/ckpt" --wait 0.5 --max-new-tokens 4 --count 8
  run rl-queue get --task check --columns response_ids,logprobs,version --count 12
  [ "${#lines[@]}" -eq 12 ]
  printf '%s\n' "$output" | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    assert j["version"] == 3, j
    lp = j["logprobs"]
    n = len(lp["data"]) if isinstance(lp, dict) else len(lp)
    assert len(j["response_ids"]) == n >= 1, j
'
  ev="$TMP/run/events/rollout-r1.jsonl"
  grep -q '"event":"batch"' "$ev"
  grep -q '"phase":"generate"' "$ev"
  grep -q '"phase":"waiting-for-data"' "$ev"
  grep -q '"event":"weights".*"version":3' "$ev"
}

@test "run --refill: groups join a running batch and each is put whole" {
  serve_groups 10
  rollout_serves 40 --checkpoint-dir "$TMP/ckpt" --refill --wait 0.5 --max-new-tokens 4 --count 8 --slots 8
  refilled_batches "$TMP/run/events/rollout-r1.jsonl"
  run rl-rollout run --help
  [[ "$output" == *"--refill"*"[env RL_REFILL]"* ]]
}

# rl-env serving the calculator at $EP (logging to $TMP/env.log).
start_calc_env() {
  EP="tcp://127.0.0.1:$(free_port)"
  "$RL_BUILD_DIR/tools/rl-env/rl-env" serve --bind "$EP" --tool calc="$RL_BUILD_DIR/tools/rl-env/rl-env calc" \
    2>> "$TMP/env.log" &
  PIDS+=($!)
  wait_for "$TMP/env.log" "serving tool calls on" 20
}

@test "run --refill --tools: conversations join a running batch at turn boundaries, each group put whole" {
  export RL_MODEL="$RL_SOURCE_DIR/share/models/calc-tiny"  # its call tags
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-rollout random-model --out "$TMP/calc.safetensors" --seed 3 2>/dev/null
  start_calc_env
  rl-train make-data --task multiply --problems 10 --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
  rollout_serves 40 --weights "$TMP/calc.safetensors" --tools "$EP" --max-turns 3 --max-new-tokens 40 --refill \
    --wait 0.5 --count 8 --slots 8 --seed 1
  python3 - "$TMP/run/events/rollout-r1.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
batches = [e for e in events if e["event"] == "batch"]
assert sum(b["rows"] for b in batches) == 40 and sum(b["groups"] for b in batches) == 10, batches
assert len(batches) < 5 and sum(b["refills"] for b in batches) >= 1, batches
assert all(b["leases"] == 1 + b["refills"] and b["prompt_tokens"] > 0 for b in batches), batches
# Within a batch, rows that were not in its first turn start later, at their own turn 0.
joined, first = 0, None
for e in events:
    if e["event"] == "batch":
        first = None
    elif e["event"] == "turn":
        if first is None:
            first = set(e["rows"])
            continue
        for row, turn in zip(e["rows"], e["turns"]):
            if row not in first and turn == 0:
                joined += 1
assert joined >= 4, joined
assert sum(e["tool_calls"] for e in events if e["event"] == "batch") > 0, "no tool was called: the test shows nothing"
PY
}

@test "run --tools: a row that comes in done (conv_done 1: only its put was left) is put with its group, not waited for" {
  export RL_MODEL="$RL_SOURCE_DIR/share/models/calc-tiny"
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-rollout random-model --out "$TMP/calc.safetensors" --seed 3 2>/dev/null
  start_calc_env
  # Two rows of one group; the first carries the progress of a conversation that ended in one
  # turn, written by a rollout that died before its put.
  rl-train make-data --task multiply --problems 1 --seed 2 | rl-train encode | python3 -c '
import json, sys
row = json.loads(sys.stdin.readline())
row["group"] = "g"
done = dict(row, conv_ids=[5, 2], conv_logprobs={"dtype": "f32", "shape": [2], "data": [-1.0, -0.5]},
            conv_mask=[1, 1], conv_versions=[0, 0], conv_turns=1, conv_tool_calls=0, conv_tool_errors=0,
            conv_answer_from=0, conv_done=1)
print(json.dumps(done)); print(json.dumps(row))' | rl-queue put > /dev/null
  rollout_serves 2 --weights "$TMP/calc.safetensors" --tools "$EP" --max-turns 2 --max-new-tokens 10 --wait 0.5
  grep -q '"event":"resume".*"turns":1' "$TMP/run/events/rollout-r1.jsonl"
}

# A tool for calc-tiny's calls (tool protocol, man rl-env) that answers "0", and once, at the
# first call after groups joined a running batch (turn events of $TMP/run/events), gives back
# the oldest lease the rollout holds with rl-queue nack, as a lease that ends under a slow turn.
# It writes the lease it ended to $TMP/nacked.
write_lease_ending_tool() {
  cat > "$TMP/tool.py" <<'PY'
import json, os, subprocess, sys
queue, events, mark = sys.argv[1:4]
def joined():
    first, batch = None, []
    for line in open(events):
        e = json.loads(line)
        if e["event"] == "batch":
            first, batch = None, []
        elif e["event"] == "turn":
            if first is None:
                first = set(e["rows"])
            batch += e["rows"]
    return first is not None and any(r not in first for r in batch)
for line in sys.stdin:
    if not os.path.exists(mark) and joined():
        for lease in range(1, 200):
            r = subprocess.run(["rl-queue", "nack", "--connect", queue, "--task", "generate", "--lease-id", str(lease)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                open(mark, "w").write(str(lease))
                break
    print(json.dumps({"output": "0"}), flush=True)
PY
}

@test "run --refill --tools: a lease that ends mid-batch loses only its rows, which come back and are put once" {
  export RL_MODEL="$RL_SOURCE_DIR/share/models/calc-tiny"
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-rollout random-model --out "$TMP/calc.safetensors" --seed 3 2>/dev/null
  write_lease_ending_tool
  mkdir -p "$TMP/run/events"
  touch "$TMP/run/events/rollout-r1.jsonl"
  EP="tcp://127.0.0.1:$(free_port)"
  "$RL_BUILD_DIR/tools/rl-env/rl-env" serve --bind "$EP" --no-network off \
    --tool calc="python3 $TMP/tool.py $RL_QUEUE $TMP/run/events/rollout-r1.jsonl $TMP/nacked" 2>> "$TMP/env.log" &
  PIDS+=($!)
  wait_for "$TMP/env.log" "serving tool calls on" 20
  rl-train make-data --task multiply --problems 10 --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
  rollout_serves 40 --weights "$TMP/calc.safetensors" --tools "$EP" --max-turns 3 --max-new-tokens 40 --refill \
    --wait 0.5 --count 8 --slots 8 --seed 1
  [ -s "$TMP/nacked" ]
  grep -q 'progress of .* conversations not written' "$TMP/rollout.log"
  python3 - "$TMP/run/events/rollout-r1.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
lost = [e for e in events if e["event"] == "lease_lost"]
gone = sum(e["rows"] for e in lost)
assert lost and gone >= 1, lost
# The batch that lost the lease held others.
at = events.index(lost[0])
end = next(e for e in events[at:] if e["event"] == "batch")
assert end["leases"] >= 2, end
# The lost rows were taken again (each put once: rollout_serves counted 40 in reward), those
# that had taken a turn going on from the progress written for it.
batches = [e for e in events if e["event"] == "batch"]
assert sum(b["rows"] for b in batches) == 40 + gone, (batches, lost)
resumed = [e for e in events[at:] if e["event"] == "resume"]
assert resumed and all(e["turns"] >= 1 for e in resumed), resumed
PY
  grep -q 'rows lost to leases that ended (expired or given back)' "$TMP/rollout.log"
}

@test "run --ranks 2 --refill: the group takes groups at its checks and puts each whole" {
  refilling_group_serves_40 --max-new-tokens 6
  [ "$(task_stat generate consumed)" -eq 40 ]
  [ "$(task_stat generate leased)" -eq 0 ]
  [ "$(task_stat reward ready)" -eq 40 ]
  [ "$(grep -c '"what":"lost"' "$TMP/run/events/rollout-g.jsonl")" -eq 0 ]
  refilled_batches "$TMP/run/events/rollout-g.jsonl"
}

# Layout events (rl-rollout(1), "Events") of a rollout group's log: each well-formed, written at
# its batch's end, stamped inside that batch, counted by it.
layout_events_well_formed() {
  python3 - "$1" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
layouts = [e for e in events if e["event"] == "layout"]
assert layouts, events
assert all(e["sequences"] >= 0 and e["seconds"] >= 0 and e["stay_s"] >= 0 for e in layouts), layouts
assert all(e["from"] == 1 and e["to"] == 2 or e["from"] == 2 and e["to"] == 1 for e in layouts), layouts
batch_ends = [e["ts"] for e in events if e["event"] == "batch"]
for e in layouts:
    end = min(t for t in batch_ends if t >= e["ts"])
    began = max([t for t in batch_ends if t < end] + [events[0]["ts"]])
    assert began <= e["at"] <= e["ts"] <= end, (began, e, end)
assert [e["at"] for e in layouts] == sorted(e["at"] for e in layouts), layouts
assert sum(e.get("layout_switches", 0) for e in events if e["event"] == "batch") == len(layouts)
PY
}

@test "run --ranks 2 --refill with a profile where one wide replica is always faster: it merges and stays merged for new groups" {
  source "$RL_SOURCE_DIR/examples/pipelines/lib.sh"
  wide_wins_profile "$TMP/profile.json"
  refilling_group_serves_40 --max-new-tokens 10 --adaptive-profile "$TMP/profile.json"
  [ "$(task_stat reward ready)" -eq 40 ]
  refilled_batches "$TMP/run/events/rollout-g.jsonl"
  layout_events_well_formed "$TMP/run/events/rollout-g.jsonl"
  python3 - "$TMP/run/events/rollout-g.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
layouts = [e for e in events if e["event"] == "layout"]
batches = [e for e in events if e["event"] == "batch"]
assert all(e["from"] == 1 and e["to"] == 2 and e["predicted_s"] < e["stay_s"] for e in layouts), layouts
# New groups that came while merged were taken into the wide replica, not split for.
assert 1 <= sum(b["layout_stays"] for b in batches) <= sum(b["refills"] for b in batches), batches
# Each stay is an event: the split to tp 1 it weighed, predicted slower than staying.
stays = [e for e in events if e["event"] == "layout_stay"]
assert len(stays) == sum(b["layout_stays"] for b in batches), stays
assert all(e["tp"] == 2 and e["to"] == 1 and e["added"] >= 1 and e["stay_s"] < e["predicted_s"] for e in stays), stays
PY
}

@test "run --ranks 2 --refill with a profile where the wide replica wins only for a few sequences: it merges for a tail, splits for new groups" {
  source "$RL_SOURCE_DIR/examples/pipelines/lib.sh"
  wide_wins_profile "$TMP/profile.json" tail
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  long_tail_model "$TMP/long" 128  # room for responses long enough to come in during
  rl-rollout random-model --model "$TMP/long" --seed 3 --out "$TMP/long.safetensors" 2>/dev/null
  start_group --model "$TMP/long" --weights "$TMP/long.safetensors" --ranks 2 --rendezvous "127.0.0.1:$(free_port)" \
    --id g --threads 1 --wait 0.5 --count 8 --slots 8 --check-every 2 --refill --progress-interval 0 \
    --max-new-tokens 96 --adaptive-profile "$TMP/profile.json"
  wait_for "$TMP/run/events/rollout-g.jsonl" '"event":"group".*"what":"formed"' 30
  rl-reward make-data --count 10 --seed 2 | rl-train encode > "$TMP/rows.jsonl"
  # Two groups alone: eight sequences over 16 slots and nothing more at the first check, which
  # merges them. The other eight groups come while they decode, merged.
  head -n 2 "$TMP/rows.jsonl" | rl-queue put --repeat 4 > /dev/null
  for _ in $(seq 1 200); do [ "$(task_stat generate leased)" -eq 8 ] && break; sleep 0.02; done
  tail -n +3 "$TMP/rows.jsonl" | rl-queue put --repeat 4 > /dev/null
  for _ in $(seq 1 600); do [ "$(task_stat generate consumed)" -eq 40 ] && break; sleep 0.1; done
  kill -TERM "$leader"
  wait "$leader"
  wait "$follower"
  [ "$(task_stat reward ready)" -eq 40 ]
  layout_events_well_formed "$TMP/run/events/rollout-g.jsonl"
  python3 - "$TMP/run/events/rollout-g.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
layouts = [e for e in events if e["event"] == "layout"]
assert layouts[0]["from"] == 1 and layouts[0]["to"] == 2 and layouts[0]["round"] == 2, layouts
# A split for the new groups, predicted faster than taking them into the wide replica.
splits = [e for e in layouts if e["from"] == 2 and e["to"] == 1]
assert splits and all(0 < e["predicted_s"] < e["stay_s"] for e in splits), layouts
PY
}

@test "run --ranks 2 --refill: a follower killed mid-batch loses no row and doubles none; the leader goes on alone" {
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  # A wider model with room for long responses: a batch lasts long enough to be cut into.
  mkdir "$TMP/wide"
  cp "$RL_MODEL"/*.json "$TMP/wide/"
  python3 - "$TMP/wide/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(max_position_embeddings=96, hidden_size=512, intermediate_size=1376, head_dim=128)
json.dump(c, open(sys.argv[1], "w"))
PY
  rl-rollout random-model --model "$TMP/wide" --seed 1 --out "$TMP/wide.safetensors" 2>/dev/null
  local group
  group=(--model "$TMP/wide" --weights "$TMP/wide.safetensors" --ranks 2 --rendezvous "127.0.0.1:$(free_port)"
         --id g --threads 1 --wait 0.5 --count 16 --slots 16 --max-new-tokens 64 --check-every 2 --refill
         --progress-interval 0)
  start_group "${group[@]}"
  wait_for "$TMP/run/events/rollout-g.jsonl" '"event":"group".*"what":"formed"' 30
  rl-reward make-data --count 25 --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
  # The first groups are put: the batch is under way, with more to take.
  for _ in $(seq 1 400); do [ "$(task_stat reward ready)" -ge 4 ] && break; sleep 0.05; done
  [ "$(task_stat generate consumed)" -lt 100 ]
  kill -9 "$follower"
  for _ in $(seq 1 600); do [ "$(task_stat generate consumed)" -ge 100 ] && break; sleep 0.1; done
  [ "$(task_stat generate consumed)" -eq 100 ]
  [ "$(task_stat generate leased)" -eq 0 ]
  [ "$(task_stat reward ready)" -eq 100 ]
  kill -0 "$leader"
  grep -q "the rollout group broke during a batch" "$TMP/rank0.log"
  grep '"event":"group"' "$TMP/run/events/rollout-g.jsonl" | grep -q '"what":"lost"'
  kill -TERM "$leader"
  wait "$leader"
}

@test "run --ranks 2 re-forms in place: a follower killed with SIGKILL is replaced, the leader goes on alone meanwhile" {
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-reward make-data --count 1 --seed 2 | rl-train encode > "$TMP/rows.jsonl"  # one group of 4 (--repeat 4)
  # weights of the shape of --model's config (RL_MODEL), which every rank builds its model from
  rl-rollout random-model --model "$RL_MODEL" --seed 3 --out "$TMP/tiny.safetensors" 2>/dev/null
  local rv group
  rv="127.0.0.1:$(free_port)"
  group=(--weights "$TMP/tiny.safetensors" --ranks 2 --rendezvous "$rv" --id g --threads 1 --wait 0.2 --count 4 --max-new-tokens 4
         --progress-interval 0)
  start_group "${group[@]}"
  ev="$TMP/run/events/rollout-g.jsonl"
  consumed() {  # N: waits until N rows of task generate were consumed
    for _ in $(seq 1 300); do
      [ "$(task_stat generate consumed)" -ge "$1" ] && return 0
      sleep 0.1
    done
    echo "consumed $(task_stat generate consumed) of $1" >&2; cat "$TMP"/rank*.log >&2
    return 1
  }
  rl-queue put --repeat 4 < "$TMP/rows.jsonl" > /dev/null
  consumed 4
  grep '"event":"group"' "$ev" | grep '"what":"formed"' | grep -q '"epoch":1'
  kill -9 "$follower"
  wait "$follower" || true
  # The next rows find the group broken: the leader drops it and answers alone.
  rl-queue put --repeat 4 < "$TMP/rows.jsonl" > /dev/null
  consumed 8
  kill -0 "$leader"
  grep '"event":"group"' "$ev" | grep '"what":"lost"' | grep -q '"epoch":1'
  # Rank 1 again: once it waits, the next batch forms epoch 2 with it.
  rl-rollout run "${group[@]}" --rank 1 2>"$TMP/rank1-again.log" &
  follower=$!
  PIDS+=("$follower")
  for round in $(seq 1 20); do
    rl-queue put --repeat 4 < "$TMP/rows.jsonl" > /dev/null
    consumed $((8 + 4 * round))
    grep '"event":"group"' "$ev" | grep '"what":"formed"' | grep -q '"epoch":2' && break
  done
  grep '"event":"group"' "$ev" | grep '"what":"formed"' | grep -q '"epoch":2'
  [ "$(task_stat reward ready)" -eq "$(task_stat generate consumed)" ]
  # SIGTERM: the leader stops, and tells its follower, which exits 0 too.
  kill -TERM "$leader"
  wait "$leader"
  wait "$follower"
}

@test "run --ranks 2 under rl-watchdog, one role of two instances: a killed follower restarts alone, the leader keeps its pid" {
  export PATH="$RL_BUILD_DIR/tools/rl-watchdog:$PATH"
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-reward make-data --count 1 --seed 2 | rl-train encode > "$TMP/rows.jsonl"
  rl-rollout random-model --model "$RL_MODEL" --seed 3 --out "$TMP/tiny.safetensors" 2>/dev/null
  # Each instance is the rank its RL_ID says; the trainer stand-in steps, so a failure is not in
  # the first step after a start (which the watchdog would answer with a full restart).
  cat > "$TMP/p.toml" <<TOML
[watchdog]
heartbeat_interval = 0.2
max_full_restarts = 2
grace = 1
[role.rollout]
command = "rl-rollout run --weights $TMP/tiny.safetensors --ranks 2 --rank \$RL_ID --rendezvous 127.0.0.1:$(free_port) --threads 1 --wait 0.2 --count 4 --max-new-tokens 4 --progress-interval 0"
count = 2
[role.train]
command = "rl-watchdog beat --role train --phase train --step-every 0.3"
TOML
  rl-watchdog run "$TMP/p.toml" --run-dir "$TMP/run" --heartbeat "tcp://127.0.0.1:$(free_port)" 2>> "$TMP/wd.err" &
  PIDS+=($!)
  log="$TMP/run/events/watchdog-0.jsonl" ev="$TMP/run/events/rollout-0.jsonl"
  wait_for "$log" '"event":"ready".*"member":"rollout/1"' 30
  wait_for "$ev" '"event":"group".*"what":"formed"' 30
  rl-queue put --repeat 4 < "$TMP/rows.jsonl" > /dev/null
  sleep 1
  leader=$(cut -d' ' -f1 "$TMP/run/watchdog/rollout-0.pid") follower=$(cut -d' ' -f1 "$TMP/run/watchdog/rollout-1.pid")
  kill -9 "$follower"
  wait_for "$log" '"event":"restart".*"member":"rollout/1"' 20
  grep -q '"action":"restart-role".*"reason":"restart rollout/1 only"' "$log"
  for round in $(seq 1 40); do
    grep '"event":"group"' "$ev" | grep '"what":"formed"' | grep -q '"epoch":2' && break
    rl-queue put --repeat 4 < "$TMP/rows.jsonl" > /dev/null
    sleep 0.5
  done
  grep '"event":"group"' "$ev" | grep '"what":"formed"' | grep -q '"epoch":2'
  [ "$(cut -d' ' -f1 "$TMP/run/watchdog/rollout-0.pid")" = "$leader" ]
  kill -0 "$leader"
  ! grep -q '"event":"restart".*"member":"rollout/0"' "$log" || false
  rl-watchdog stop "$TMP/run" > /dev/null
}

@test "run --ranks 2: a follower whose --model does not fit the leader's weights exits 64 with a one-line error" {
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  rl-reward make-data --count 1 --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
  local rv group
  rv="127.0.0.1:$(free_port)"
  # $MODEL has its own config; the follower builds RL_MODEL's, whose parameters differ
  group=(--weights "$MODEL" --ranks 2 --rendezvous "$rv" --id g --threads 1 --wait 0.2 --count 4 --max-new-tokens 4)
  rl-rollout run "${group[@]}" --rank 0 --run-dir "$TMP/run" 2>"$TMP/rank0.log" &
  leader=$!
  PIDS+=("$leader")
  run rl-rollout run "${group[@]}" --rank 1
  [ "$status" -eq 64 ]
  [ "$(count_lines '^rl-rollout: ')" -eq "${#lines[@]}" ]
  [[ "${lines[-1]}" == "rl-rollout: rollout group: the leader's model has other parameters or shapes than this rank's (give every rank the same --model)" ]]
  # the leader drops the group and answers alone
  for _ in $(seq 1 300); do
    [ "$(task_stat generate consumed)" -ge 4 ] && break
    sleep 0.1
  done
  [ "$(task_stat generate consumed)" -eq 4 ]
  kill -TERM "$leader"
  wait "$leader"
}

@test "run --ranks 2: a follower whose rank 0 cannot be reached exits 69 after --rejoin-timeout, in one line" {
  run rl-rollout run --weights "$MODEL" --ranks 2 --rank 1 --rendezvous "127.0.0.1:$(free_port)" --rejoin-timeout 1
  [ "$status" -eq 69 ]
  [[ "$output" =~ ^rl-rollout:\ rollout\ group:\ rank\ 0\ unreachable\ for\ 1\ s\ \(nothing\ listens\ at\ 127\.0\.0\.1:[0-9]+\)$ ]]
  run rl-rollout run --weights "$MODEL" --ranks 2 --rank 1 --rendezvous 127.0.0.1:1 --rejoin-timeout 0
  [ "$status" -eq 64 ]
}

@test "--on-new-weights takes finish or interrupt, and interrupt not with a rollout group" {
  run rl-rollout run --weights "$MODEL" --on-new-weights later
  [ "$status" -eq 64 ]
  [[ "$output" == *"--on-new-weights"* ]]
  run rl-rollout run --weights "$MODEL" --on-new-weights interrupt --ranks 2 --rendezvous 127.0.0.1:1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-rollout: --on-new-weights interrupt is not supported with --ranks > 1 (a rollout group"\
" generates as one; it switches at batch boundaries)" ]
  run rl-rollout run --help
  [[ "$output" == *"--on-new-weights"*"[env RL_ON_NEW_WEIGHTS]"* ]]
}

@test "generate --precision bf16 computes in bfloat16: the float32 run's log-probabilities, rounded" {
  printf '%s\n' '{"prompt":"12+34="}' '{"prompt":"5+5="}' > "$TMP/p"
  rl-rollout generate --weights "$MODEL" --temperature 0 --max-new-tokens 1 --precision float32 < "$TMP/p" > "$TMP/f32" 2>/dev/null
  rl-rollout generate --weights "$MODEL" --temperature 0 --max-new-tokens 1 --precision auto < "$TMP/p" > "$TMP/auto" 2>/dev/null
  RL_ROLLOUT_PRECISION=bf16 rl-rollout generate --weights "$MODEL" --temperature 0 --max-new-tokens 1 < "$TMP/p" > "$TMP/bf16" 2>/dev/null
  cmp "$TMP/f32" "$TMP/auto"  # the file is float32
  python3 - "$TMP/f32" "$TMP/bf16" <<'PY'
import json, sys
f32, bf16 = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
gaps = [abs(a["logprobs"][0] - b["logprobs"][0]) for a, b in zip(f32, bf16)]
assert len(gaps) == 2 and max(gaps) > 0, gaps
assert max(gaps) < 0.1, gaps
PY
  run rl-rollout generate --weights "$MODEL" --precision fp8 < "$TMP/p"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--precision"* ]]
  run rl-rollout run --help
  [[ "$output" == *"--precision"*"[env RL_ROLLOUT_PRECISION]"* ]]
}

@test "run --on-new-weights interrupt: a version that arrives mid-batch is used from the next token" {
  # A context long enough for a batch that takes a few seconds, greedy so responses run long.
  config='{"architectures":["LlamaForCausalLM"],"vocab_size":15,"hidden_size":64,"intermediate_size":128,'
  config+='"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":640,'
  config+='"tie_word_embeddings":true,"rms_norm_eps":1e-5,"rope_theta":10000.0}'
  printf '%s' "$config" > "$TMP/config.json"
  rl-rollout random-model --out "$TMP/long.safetensors" --seed 1 --model-config "$config" 2>/dev/null
  rl-rollout random-model --out "$TMP/long4.safetensors" --seed 2 --model-config "$config" 2>/dev/null
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  mkdir "$TMP/ckpt"
  cp "$TMP/long.safetensors" "$TMP/ckpt/weights-3.safetensors"
  rl-reward make-data --count 8 --seed 2 | rl-train encode | rl-queue put --repeat 4 > /dev/null
  rl-rollout run --checkpoint-dir "$TMP/ckpt" --on-new-weights interrupt --temperature 0 --max-new-tokens 600 \
    --slots 8 --count 32 --wait 0.5 --run-dir "$TMP/run" --id r1 --progress-interval 0 2>"$TMP/rollout.log" &
  pid=$!
  PIDS+=("$pid")
  ev="$TMP/run/events/rollout-r1.jsonl"
  for _ in $(seq 1 600); do
    grep -q '"phase":"generate"' "$ev" 2>/dev/null && break
    sleep 0.02
  done
  sleep 0.05  # some tokens under version 3 first
  cp "$TMP/long4.safetensors" "$TMP/ckpt/.tmp" && mv "$TMP/ckpt/.tmp" "$TMP/ckpt/weights-4.safetensors"
  for _ in $(seq 1 600); do
    [ "$(task_stat generate consumed)" -eq 32 ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$pid"
  [ "$(task_stat generate consumed)" -eq 32 ]
  grep -q '"event":"interrupt".*"version":4' "$ev"
  grep -q 'weight switches mid-generation' "$TMP/rollout.log"
  run rl-queue get --task check --columns prompt_ids,response_ids,logprobs,token_versions,version --count 32
  [ "${#lines[@]}" -eq 32 ]
  printf '%s\n' "$output" > "$TMP/rows.jsonl"
  # Every row: one version per token, never decreasing; its version the oldest. Some rows began
  # under 3 and went on under 4.
  printf '%s\n' "$output" | python3 -c '
import json, sys
def data(x): return x["data"] if isinstance(x, dict) else x
mixed = 0
for line in sys.stdin:
    j = json.loads(line)
    v, ids = data(j["token_versions"]), data(j["response_ids"])
    assert len(v) == len(ids) == len(data(j["logprobs"])) >= 1, j
    assert v == sorted(v) and set(v) <= {3, 4}, v
    assert j["version"] == min(v), j
    mixed += v[0] == 3 and v[-1] == 4
assert mixed >= 1, "no row was interrupted"
'
  # Independently (python3-torch, float64, no cache): each token's log-prob and greedy choice are
  # those of the version it is stamped with, and the check can tell the two versions apart.
  py=python3
  python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3
  $py -c 'import torch' 2>/dev/null || skip "no python3 with torch: the log-probs were not checked independently"
  run $py "$RL_SOURCE_DIR/tests/reference/interrupted_logprobs.py" "$TMP/config.json" 0 \
    3="$TMP/long.safetensors" 4="$TMP/long4.safetensors" < "$TMP/rows.jsonl"
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read().strip().splitlines()[-1])
assert j["rows"] == 32 and j["mixed_rows"] >= 1 and j["switched_tokens"] > 0, j
assert j["unlike_older"] > j["switched_tokens"] // 2, j
'
}

@test "the EXAMPLES of rl-rollout(1) run against a live server" {
  start_queue "$TMP/q" --declare generate=prompt_ids --declare reward=prompt,response,answer
  export MODEL
  man_examples "$RL_SOURCE_DIR/man/rl-rollout.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -gt 5 ]
  run bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "8" ]
}

@test "generate --tools: conversations call the calculator in rl-env, tool tokens masked out" {
  CALC="$RL_SOURCE_DIR/share/models/calc-tiny"
  rl-rollout random-model --model "$CALC" --out "$TMP/calc.safetensors" --seed 3 2>/dev/null
  EP="tcp://127.0.0.1:$(free_port)"
  "$RL_BUILD_DIR/tools/rl-env/rl-env" serve --bind "$EP" --tool calc="$RL_BUILD_DIR/tools/rl-env/rl-env calc" \
    2>> "$TMP/env.log" &
  PIDS+=($!)
  wait_for "$TMP/env.log" "serving tool calls on" 20
  for i in $(seq 1 40); do echo "{\"prompt\": \"$i*7=\"}"; done > "$TMP/p"
  run bash -c "rl-rollout generate --model '$CALC' --weights '$TMP/calc.safetensors' --tools '$EP' --max-turns 3 \
    --max-new-tokens 40 --seed 1 < '$TMP/p' 2>'$TMP/err'"
  cat "$TMP/err"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 40 ]
  printf '%s\n' "$output" | python3 -c '
import json, sys
calls = 0
for line in sys.stdin:
    j = json.loads(line)
    ids, mask = j["response_ids"], j["loss_mask"]
    assert len(ids) == len(mask) == len(j["logprobs"]), j
    assert 1 <= j["turns"] <= 3 and set(mask) <= {0, 1}, j
    for i, m in enumerate(mask):  # a tool run starts with <result> (19) right after a model </call> (18)
        if m == 0 and (i == 0 or mask[i - 1] == 1):
            assert ids[i] == 19 and ids[i - 1] == 18, j
        if m == 0:
            assert j["logprobs"][i] == 0, j
    calls += j["tool_calls"]
assert calls > 0, "the random model never called: the test shows nothing"
'
  grep -q "tool calls" "$TMP/err"
}

@test "run and generate exit 78 with --tools when the model has no single-token call tags" {
  run bash -c "echo '{\"prompt\": \"1+1=\"}' | rl-rollout generate --weights '$MODEL' --tools tcp://127.0.0.1:9 --max-new-tokens 2"
  [ "$status" -eq 78 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"'<call>' is not a token of"* ]]
  # run refuses before it reaches for the queue (nothing listens there)
  run timeout 20 rl-rollout run --weights "$MODEL" --tools tcp://127.0.0.1:9 --connect tcp://127.0.0.1:9 --timeout 5
  [ "$status" -eq 78 ]
  [[ "$output" == *"'<call>' is not a token of"* ]]
  # Result tags the vocabulary cannot spell: refused at the start too, not at the first call.
  export RL_MODEL="$RL_SOURCE_DIR/share/models/calc-tiny"  # its call tags
  rl-rollout random-model --out "$TMP/calc.safetensors" --seed 3 2>/dev/null
  run timeout 20 rl-rollout run --weights "$TMP/calc.safetensors" \
    --tools tcp://127.0.0.1:9 --connect tcp://127.0.0.1:9 --timeout 5 --result-open 'R:'
  echo "$output"
  [ "$status" -eq 78 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "rl-rollout: --result-open 'R:': "* ]]
}

@test "--tool-format: template needs a chat template (78), a bad mode is usage (64), auto falls back to the tags" {
  run bash -c "echo '{\"prompt\": \"1+1=\"}' | rl-rollout generate --weights '$MODEL' --tools tcp://127.0.0.1:9 --tool-format template"
  [ "$status" -eq 78 ]
  [ "${#lines[@]}" -eq 1 ]
  [ "$output" = "rl-rollout: --tool-format template: the model has no chat template" ]
  run timeout 20 rl-rollout run --weights "$MODEL" --tools tcp://127.0.0.1:9 --tool-format template --connect tcp://127.0.0.1:9
  [ "$status" -eq 78 ]
  [[ "$output" == *"the model has no chat template" ]]
  run rl-rollout generate --weights "$MODEL" --tools tcp://127.0.0.1:9 --tool-format jinja
  [ "$status" -eq 64 ]
  # auto: the demo's directory has no template, so its tags are the flags' (and not tokens of it)
  run bash -c "echo '{\"prompt\": \"1+1=\"}' | rl-rollout generate --weights '$MODEL' --tools tcp://127.0.0.1:9"
  [ "$status" -eq 78 ]
  [[ "$output" == *"'<call>' is not a token of"* ]]
}

@test "--device: a GPU this build lacks exits 69 in one line, for a rollout group's ranks too" {
  run rl-rollout generate --weights "$MODEL" --device cuda < /dev/null
  [ "$status" -eq 69 ]
  [[ "$output" == *"--device cuda: "*"CUDA"* ]]
  [ "${#lines[@]}" -eq 1 ]
  run rl-rollout generate --weights "$MODEL" --device cuda:x < /dev/null
  [ "$status" -eq 64 ]
  # a follower of a rollout group checks its GPU before it joins (rank 1: cuda:1 where visible)
  run rl-rollout run --weights "$MODEL" --ranks 2 --rank 1 --rendezvous 127.0.0.1:1 --device cuda
  [ "$status" -eq 69 ]
  [[ "$output" == *"--device cuda: "*"CUDA"* ]]
  [ "${#lines[@]}" -eq 1 ]
  echo '{"prompt": "123+456="}' | rl-rollout generate --weights "$MODEL" --device cpu --max-new-tokens 4 > "$TMP/out.jsonl"
  [ "$(wc -l < "$TMP/out.jsonl")" -eq 1 ]
}
