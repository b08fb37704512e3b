#!/usr/bin/env bats
# rl-profile from the command line: options, exit codes, a short queue benchmark, and the
# EXAMPLES of its manual. Short runs only: the whole file takes well under 30 s.

load helper
bats_require_minimum_version 1.5.0

setup() { setup_sealed; }
teardown() { teardown_sealed; }

# Prints the shell commands between ".\" example-begin" and ".\" example-end" of a man page
# (as tests/bats/examples.bats does).
man_examples() {
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' "$1"
}

@test "--help lists the queue subcommand" {
  run rl-profile --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"queue "*"benchmark rl-queue"* ]]
  run rl-profile queue --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_PUT_BATCH]"* ]]
  [[ "$output" == *"[env RL_QUEUE_FSYNC]"* ]]
}

@test "weights --help shows its own options, and --runs without the queue's rows/s" {
  run rl-profile weights --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--sizes"*"--transports"*"--pullers"* ]]
  [[ "$output" == *"--runs"*"runs of each figure; the median run's is printed"* ]]
  [[ "$output" != *"rows/s"* ]]
}

@test "exits 64 on an unknown option" {
  run rl-profile queue --no-such-option
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: The following argument was not expected: --no-such-option (see rl-profile --help)" ]
}

@test "adaptive: exits 64 with one line without a rendezvous, with a rank past the ranks, or short >= long" {
  run rl-profile adaptive --model "$RL_SOURCE_DIR/share/models/addition-tiny"
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: adaptive: --rendezvous HOST:PORT and a --rank below --ranks are needed" ]
  run rl-profile adaptive --model "$RL_SOURCE_DIR/share/models/addition-tiny" --ranks 2 --rank 2 --rendezvous 127.0.0.1:1
  [ "$status" -eq 64 ]
  run rl-profile adaptive --model "$RL_SOURCE_DIR/share/models/addition-tiny" --rendezvous 127.0.0.1:1 \
    --short-tokens 64 --max-new-tokens 64
  [ "$status" -eq 64 ]
  [[ "$output" == *"--short-tokens must be below --max-new-tokens"* ]]
  # a GPU this build lacks: 69 in one line, before the group is joined
  run rl-profile adaptive --model "$RL_SOURCE_DIR/share/models/addition-tiny" --rendezvous 127.0.0.1:1 --device cuda
  [ "$status" -eq 69 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "rl-profile: --device cuda: "* ]]
}

@test "adaptive on four ranks in bf16: profiled and static at tp 1, 2 and 4, adaptive, the last line" {
  mkdir -p "$TMP/model4"
  cp "$RL_SOURCE_DIR/share/models/addition-tiny/tokenizer.json" \
     "$RL_SOURCE_DIR/share/models/addition-tiny/tokenizer_config.json" "$TMP/model4/"
  # Four key/value heads, so that the model splits over 1, 2 and 4 ranks.
  sed -e 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' \
      -e 's/"intermediate_size": 344/"intermediate_size": 64/' -e 's/"hidden_size": 128/"hidden_size": 64/' \
      -e 's/"head_dim": 32/"head_dim": 16/' \
      -e 's/"max_position_embeddings": 32/"max_position_embeddings": 64/' \
    "$RL_SOURCE_DIR/share/models/addition-tiny/config.json" > "$TMP/model4/config.json"
  local port common pids=() r
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  common=(--model "$TMP/model4" --ranks 4 --rendezvous "127.0.0.1:$port" --threads 1 --requests 8 --slots 2
          --max-new-tokens 16 --short-tokens 3 --prompt-tokens 4 --steps 1 --check-every 2 --repeats 2
          --precision bf16)
  for r in 1 2 3; do
    rl-profile adaptive "${common[@]}" --rank "$r" 2> "$TMP/rank$r.log" &
    pids+=($!)
  done
  run rl-profile adaptive "${common[@]}" --rank 0 --profile-out "$TMP/profile.json"
  echo "$output"
  cat "$TMP"/rank*.log
  for r in "${pids[@]}"; do wait "$r"; done
  [ "$status" -eq 0 ]
  [[ "$output" == *"| workload | static tp 1 (dp 4) s | static tp 2 (dp 2) s | static tp 4 (dp 1) s | adaptive s |"* ]]
  [[ "$output" == *"; cpu, bf16; profile "*"; times are medians of 2 runs"* ]]
  printf '%s\n' "$output" | grep -Eq '^\| long-tail \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| '
  # The profile holds every degree.
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert sorted({p[0] for p in d["decode"]}) == [1, 2, 4]' "$TMP/profile.json"
  printf '%s\n' "$output" | tail -n 1 | grep -Eq \
    '^adaptive/best-static: long-tail [0-9.]+ uniform [0-9.]+; switch/naive-restart [0-9.]+; predictor error [0-9.]+%$'
}

@test "exits 64 without a subcommand" {
  run rl-profile
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: A subcommand is required (see rl-profile --help)" ]
}

@test "a short queue run prints JSON figures of put, get, ack, ack-pipelined and e2e, each exactly once" {
  run rl-profile queue --rows 500 --row-bytes 256 --runs 1 --fsync never --redis off --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/figures.jsonl"
  run python3 - "$TMP/figures.jsonl" <<'PY'
import json, sys
figs = [json.loads(line) for line in open(sys.argv[1])]
queue = {f["op"]: f for f in figs if f["system"] == "rl-queue"}
assert sorted(queue) == ["ack", "ack-pipelined", "e2e", "get", "put"], sorted(queue)
for op, f in queue.items():
    assert f["rows_per_s"] > 0, (op, f)
    assert f["exactly_once"] is True, (op, f)
    assert f["fsync"] == "never" and f["row_bytes"] == 256 and f["runs"] == 1, (op, f)
    if not op.startswith("ack"):
        assert f["rows"] == 1000, (op, f)  # 2 producers x 500 rows, one pass per phase
# each consumer acks the first half of its gets one at a time, the second half pipelined
assert queue["ack"]["rows"] + queue["ack-pipelined"]["rows"] == 1000, queue
assert queue["ack"]["rows"] >= 300 and queue["ack-pipelined"]["rows"] >= 300, queue
zmq = [f for f in figs if f["system"] == "zmq"]
assert sorted(f["op"] for f in zmq) == ["ack", "get", "put"], zmq
assert all(f["exactly_once"] is None for f in zmq), zmq
assert queue["put"]["rows_per_s_vs_zmq"] > 0 and queue["e2e"]["rows_per_s_vs_zmq"] is None
assert not [f for f in figs if f["system"] == "redis"]
print("ok", len(figs), "figures")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "ok 8 figures" ]
}

# The short form of the TransferQueue-shaped configuration (batch 1024, 10 fields of 8192 tokens).
@test "queue --unit-counts prints rows/s and the controller's and units' CPU per row for each unit count" {
  run rl-profile queue --unit-counts 0,1,2 --fields 10 --tokens 256 --batch 32 --rows 64 --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/units.jsonl"
  run python3 - "$TMP/units.jsonl" <<'PY'
import json, sys
figs = [json.loads(line) for line in open(sys.argv[1])]
assert [f["units"] for f in figs] == [0, 1, 2], figs
for f in figs:
    assert f["exactly_once"] is True and f["rows"] == 256 and f["rows_per_s"] > 0, f
    assert f["fields"] == 10 and f["tokens"] == 256 and f["batch"] == 32, f
    # CPU time comes in clock ticks (10 ms): a run this short may show none
    assert f["controller_cpu_us_per_row"] >= 0 and f["unit_cpu_us_per_row"] >= 0, f
    assert f["units"] > 0 or f["unit_cpu_us_per_row"] == 0 == f["units_per_controller"], f
print("ok")
PY
  echo "$output"
  [ "$output" = "ok" ]
}

@test "queue --window 1 acks one request at a time only: no ack-pipelined figure" {
  run rl-profile queue --rows 200 --row-bytes 64 --runs 1 --fsync never --redis off --json --window 1
  [ "$status" -eq 0 ]
  [[ "$output" != *'"op":"ack-pipelined"'* ]]
  local ack='"system":"rl-queue","op":"ack","row_bytes":64,"batch":64,"fsync":"never","producers":2,"consumers":2'
  [[ "$output" == *"$ack"',"runs":1,"rows":400,'* ]]
}

@test "a short run compares each fsync policy with Redis under its closest persistence policy, and with never" {
  run rl-profile queue --rows 300 --row-bytes 256 --runs 1 --fsync always,batch,never --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/figures.jsonl"
  run python3 - "$TMP/figures.jsonl" <<'PY'
import json, sys
figs = [json.loads(line) for line in open(sys.argv[1])]
by = {(f["system"], f["fsync"], f["op"]): f for f in figs}
for redis in ("always", "everysec", "off"):
    for op in ("put", "get", "ack", "ack-pipelined", "e2e"):
        f = by[("redis", redis, op)]
        assert f["exactly_once"] is True and f["rows_per_s"] > 0, f
for policy, redis in (("always", "always"), ("batch", "everysec"), ("never", "off")):
    for op in ("put", "get", "ack", "ack-pipelined", "e2e"):
        f = by[("rl-queue", policy, op)]
        assert f["exactly_once"] is True, f
        want = f["rows_per_s"] / by[("redis", redis, op)]["rows_per_s"]
        assert abs(f["rows_per_s_vs_redis"] - want) < 1e-9 * want, (f, want)
        never = f["rows_per_s"] / by[("rl-queue", "never", op)]["rows_per_s"]
        assert abs(f["rows_per_s_vs_never"] - never) < 1e-9 * never, (f, never)
print("ok", len(figs), "figures")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "ok 33 figures" ]
}

@test "the EXAMPLES of rl-profile(1) run" {
  man_examples "$RL_SOURCE_DIR/man/rl-profile.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -ge 10 ]
  has_decode || sed -i '/rl-profile decode/d' "$TMP/examples.sh"
  sed -i "s#share/models/#$RL_SOURCE_DIR/share/models/#g" "$TMP/examples.sh"
  cd "$TMP"
  run bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"rl-queue  e2e"* ]]
  [[ "$output" == *'"system":"rl-queue","op":"e2e"'* ]]
  if command -v redis-server >/dev/null; then
    [[ "$output" == *"# ack rows/s rl-queue (fsync "*"), 1024 B rows: one at a time "*", window 8 "* ]]
  fi
  [[ "$output" == *"bench "*"4000"* ]]
  [[ "$output" == *"exit 64"* ]]
  [ "$(grep -c '"figure":"fanout"' weights.jsonl)" -eq 2 ]
  if has_decode; then [[ "$output" == *"prefill "*"decode "*"prefill "*"decode "*"train "* ]]; fi
}

# rl-profile decode exists when the libtorch parts are built (RL_BUILD_MODEL, the default).
has_decode() { rl-profile --help 2>&1 | grep -q '^ *decode '; }

# A short decode run of the demo model (half a million parameters, random weights).
decode_tiny() {
  rl-profile decode --model "$RL_SOURCE_DIR/share/models/addition-tiny" --batches 1,4 --prompt-tokens 8 \
    --max-new-tokens 4 --sequences 8 "$@"
}
# As rl-profile looks for it (without RL_PYTHON): python3, then Debian's /usr/bin/python3.
has_torch() { python3 -c 'import torch' 2>/dev/null || /usr/bin/python3 -c 'import torch' 2>/dev/null; }

@test "decode sets prefill, decode and GRPO-step tokens/s beside torch's on the same weights, as one JSON object" {
  has_decode || skip "built without the libtorch parts"
  run --separate-stderr decode_tiny --json
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"rl-profile decode: ours: batch 4"* ]]
  printf '%s\n' "$output" > "$TMP/report.json"
  [ "$(wc -l < "$TMP/report.json")" -eq 1 ]
  has_torch && torch=1 || torch=0
  run python3 - "$TMP/report.json" "$torch" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
torch = sys.argv[2] == "1"
assert r["architecture"] == "LlamaForCausalLM" and r["threads"] == 1, r
assert r["prompt_tokens"] == 8 and r["new_tokens"] == 4, r
assert 400_000 < r["parameters"] < 600_000 and r["weight_bytes"] == 4 * r["matmul_parameters"], r
assert r["device"] == "cpu" and r["precision"] == "float32", r
m = r["machine"]
assert m["read_gb_per_s"] > 0 and m["copy_gb_per_s"] > 0 and m["matmul_gflop_per_s"] > 0, m
rows = [(f["figure"], f["batch"], f["tokens"]) for f in r["figures"]]
assert rows == [("prefill", 1, 8), ("decode", 1, 3), ("prefill", 4, 32), ("decode", 4, 12), ("train", 8, 96)], rows
for f in r["figures"]:
    assert f["ours_tokens_per_s"] > 0 and f["of_matmul"] > 0, f
    assert ("of_bandwidth" in f) == (f["figure"] == "decode"), f
    if torch:
        assert f["torch_tokens_per_s"] > 0 and f["ours_vs_torch"] > 0, f
        assert abs(f["ours_vs_torch"] - f["ours_tokens_per_s"] / f["torch_tokens_per_s"]) < 1e-9, f
c = r["train_check"]
if torch:
    assert r["torch"] == {"available": True, "check_max_abs_diff": r["torch"]["check_max_abs_diff"]}, r["torch"]
    assert r["torch"]["check_max_abs_diff"] < 1e-4, r["torch"]
    # Both sides computed the same GRPO step on the same weights and batch.
    assert abs(c["loss_ours"] - c["loss_torch"]) <= 1e-4 * max(1, abs(c["loss_ours"])), c
    assert abs(c["grad_norm_ours"] - c["grad_norm_torch"]) <= 1e-3 * c["grad_norm_ours"], c
    print("ok with torch")
else:
    print("ok without torch")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  has_torch || skip "no python3 with torch: the torch columns were not checked"
  [ "$output" = "ok with torch" ]
}

@test "decode's torch baseline computes Qwen2 (biases) and Qwen3 (q/k norms) with an untied head as we do" {
  has_decode || skip "built without the libtorch parts"
  has_torch || skip "no python3 with torch"
  for arch in Qwen2ForCausalLM:qwen2 Qwen3ForCausalLM:qwen3; do
    mkdir "$TMP/${arch#*:}"
    cp "$RL_SOURCE_DIR"/share/models/addition-tiny/tokenizer*.json "$TMP/${arch#*:}/"
    python3 - "$RL_SOURCE_DIR/share/models/addition-tiny/config.json" "$TMP/${arch#*:}/config.json" "${arch%:*}" "${arch#*:}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(architectures=[sys.argv[3]], model_type=sys.argv[4], tie_word_embeddings=False)
json.dump(c, open(sys.argv[2], "w"))
PY
    rl-profile decode --model "$TMP/${arch#*:}" --batches 2 --prompt-tokens 8 --max-new-tokens 4 --sequences 8 \
      --json 2>/dev/null > "$TMP/${arch#*:}.json"
    run python3 - "$TMP/${arch#*:}.json" "${arch%:*}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["architecture"] == sys.argv[2], r["architecture"]
assert r["torch"]["available"] and r["torch"]["check_max_abs_diff"] < 1e-4, r["torch"]
c = r["train_check"]
assert abs(c["loss_ours"] - c["loss_torch"]) <= 1e-4 * max(1, abs(c["loss_ours"])), c
assert abs(c["grad_norm_ours"] - c["grad_norm_torch"]) <= 1e-3 * c["grad_norm_ours"], c
assert all(f["ours_vs_torch"] > 0 for f in r["figures"]), r["figures"]
print("ok")
PY
    echo "$arch: $output"
    [ "$output" = "ok" ]
  done
}

@test "decode without python3-torch prints our figures and says why torch's are missing" {
  has_decode || skip "built without the libtorch parts"
  RL_PYTHON=false run --separate-stderr decode_tiny
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ "$output" =~ decode\ +4\ +12\ +[0-9.]+\ +-\ +-\  ]]
  [[ "$output" == *"torch: not run (RL_PYTHON=false does not import torch)" ]]
  [[ "$stderr" == *"rl-profile decode: torch baseline not run: RL_PYTHON=false does not import torch"* ]]
  RL_PYTHON=false run --separate-stderr decode_tiny --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"torch":{"available":false,"check_max_abs_diff":null,"reason":"RL_PYTHON=false does not import torch"}'* ]]
  [[ "$output" == *'"torch_tokens_per_s":null'* ]]
}

@test "decode exits 64 without --model, 65 for a missing directory and 78 for a bad config.json" {
  has_decode || skip "built without the libtorch parts"
  run env -u RL_MODEL rl-profile decode
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: --model is required (see rl-profile --help)" ]
  RL_MODEL="$TMP/none" run rl-profile decode
  [ "$status" -eq 65 ]
  [ "$output" = "rl-profile: $TMP/none: no such model directory" ]
  mkdir "$TMP/bad"
  cp "$RL_SOURCE_DIR"/share/models/addition-tiny/tokenizer*.json "$TMP/bad/"
  echo '{"architectures": ["LlamaForCausalLM"], "vocab_size": 15}' > "$TMP/bad/config.json"
  run rl-profile decode --model "$TMP/bad"
  [ "$status" -eq 78 ]
  [ "$output" = "rl-profile: $TMP/bad/config.json: model config: missing 'hidden_size'" ]
}

@test "decode exits 64 when prompts and responses would not fit the model's context" {
  has_decode || skip "built without the libtorch parts"
  run rl-profile decode --model "$RL_SOURCE_DIR/share/models/addition-tiny" --prompt-tokens 30 --max-new-tokens 4
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: --prompt-tokens + --max-new-tokens do not fit the model's context of 32" ]
  run rl-profile decode --model "$RL_SOURCE_DIR/share/models/addition-tiny" --max-new-tokens 1
  [ "$status" -eq 64 ]
  [[ "$output" == "rl-profile: --max-new-tokens: Value 1 not in range 2 to 1048576"* ]]
}

@test "decode --precision bf16: bfloat16 weights on both sides, the GRPO step beside torch's autocast" {
  has_decode || skip "built without the libtorch parts"
  run --separate-stderr decode_tiny --json --precision bf16 --device cpu
  echo "$stderr"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > "$TMP/report.json"
  run python3 - "$TMP/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["precision"] == "bf16" and r["weight_bytes"] == 2 * r["matmul_parameters"], r
assert all(f["ours_peak_bytes"] is None for f in r["figures"]), "peaks are a GPU's"
c = r["train_check"]
if c["loss_torch"] is not None:
    # bfloat16 keeps 8 bits: the two steps agree to about 1%, not float32's 1e-4.
    assert abs(c["loss_ours"] - c["loss_torch"]) <= 2e-2 * max(1, abs(c["loss_ours"])), c
    assert abs(c["grad_norm_ours"] - c["grad_norm_torch"]) <= 5e-2 * c["grad_norm_ours"], c
print("ok")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  run rl-profile decode --model "$RL_SOURCE_DIR/share/models/addition-tiny" --device cuda
  [ "$status" -eq 69 ]
  [[ "$output" == *"--device cuda: "* ]]
}

@test "report on a run without a trainer: the timeline, the layout switches and stays, no ETTR" {
  mkdir -p "$TMP/run/events"
  cat > "$TMP/run/events/rollout-g.jsonl" <<'JSONL'
{"ts":100,"role":"rollout","id":"g","event":"start","step":0,"phase":"start"}
{"ts":100.5,"role":"rollout","id":"g","event":"phase","step":0,"phase":"generate"}
{"ts":103,"role":"rollout","id":"g","event":"layout","step":0,"phase":"generate","from":1,"to":2,"round":2,"at":101,"sequences":8,"recompute":false,"seconds":0.25,"predicted_s":0.5,"stay_s":0.9}
{"ts":103,"role":"rollout","id":"g","event":"layout","step":0,"phase":"generate","from":2,"to":1,"round":4,"at":102,"sequences":7,"recompute":false,"seconds":0.5,"predicted_s":0.25,"stay_s":1.5}
{"ts":103,"role":"rollout","id":"g","event":"layout_stay","step":0,"phase":"generate","tp":2,"to":1,"round":3,"at":101.5,"sequences":6,"added":2,"predicted_s":1.25,"stay_s":0.5}
{"ts":103,"role":"rollout","id":"g","event":"batch","step":0,"phase":"generate","layout_switches":2,"layout_stays":1}
JSONL
  run --separate-stderr rl-profile report "$TMP/run" --svg "$TMP/t.svg"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$stderr" = "rl-profile: no trainer event log (events/train-*.jsonl)" ]
  [ "${lines[0]}" = "run $TMP/run: 1 event log over 3.0 s, no trainer: no ETTR" ]
  printf '%s\n' "$output" | grep -Eq '^ +rollout-g +2 +1 +1 +1 +0\.750 +0\.750$'
  grep -q '>1 role instance over 3.0 s, no trainer (no ETTR)</text>' "$TMP/t.svg"
  [ "$(grep -c '<line .*stroke="#d81b60"' "$TMP/t.svg")" -eq 3 ]  # two switches and the legend's
  [ "$(grep -c '<circle .*stroke="#d81b60"' "$TMP/t.svg")" -eq 2 ]  # the stay and the legend's
  grep -q '<title>rollout-g: stayed at tp 2 after round 3 for 2 new prompts beside 6 sequences (staying 0.500 s, tp 1 1.250 s predicted)</title>' "$TMP/t.svg"
  run --separate-stderr rl-profile report "$TMP/run" --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
assert lines[0]["type"] == "summary" and lines[0]["ettr"] is None, lines
assert lines[1] == {"type": "layouts", "lane": "rollout-g", "switches": 2, "wider": 1, "narrower": 1,
                    "stays": 1, "seconds": 0.75, "predicted_s": 0.75}, lines'
}
