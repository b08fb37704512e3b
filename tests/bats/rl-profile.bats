#!/usr/bin/env bats
# rl-profile from the command line: options, exit codes, a short queue benchmark, and the
# EXAMPLES of its manual. Short runs only: the whole file takes well under 30 s.

load helper

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

@test "exits 64 without a subcommand" {
  run rl-profile
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: A subcommand is required (see rl-profile --help)" ]
}

@test "a short queue run prints JSON figures of put, get, ack and e2e, each exactly once" {
  run rl-profile queue --rows 500 --row-bytes 256 --runs 1 --fsync never --redis off --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/figures.jsonl"
  run python3 - "$TMP/figures.jsonl" <<'PY'
import json, sys
figs = [json.loads(line) for line in open(sys.argv[1])]
queue = {f["op"]: f for f in figs if f["system"] == "rl-queue"}
assert sorted(queue) == ["ack", "e2e", "get", "put"], sorted(queue)
for op, f in queue.items():
    assert f["rows_per_s"] > 0, (op, f)
    assert f["exactly_once"] is True, (op, f)
    assert f["fsync"] == "never" and f["row_bytes"] == 256 and f["runs"] == 1, (op, f)
    assert f["rows"] == 1000, (op, f)  # 2 producers x 500 rows, one pass per phase
zmq = [f for f in figs if f["system"] == "zmq"]
assert sorted(f["op"] for f in zmq) == ["ack", "get", "put"], zmq
assert all(f["exactly_once"] is None for f in zmq), zmq
assert queue["put"]["rows_per_s_vs_zmq"] > 0 and queue["e2e"]["rows_per_s_vs_zmq"] is None
assert not [f for f in figs if f["system"] == "redis"]
print("ok", len(figs), "figures")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "ok 7 figures" ]
}

@test "the EXAMPLES of rl-profile(1) run" {
  man_examples "$RL_SOURCE_DIR/man/rl-profile.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -ge 10 ]
  has_decode || sed -i '/rl-profile decode/d' "$TMP/examples.sh"
  cd "$TMP"
  run bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"rl-queue  e2e"* ]]
  [[ "$output" == *'"system":"rl-queue","op":"e2e"'* ]]
  [[ "$output" == *"bench "*"4000"* ]]
  [[ "$output" == *"exit 64"* ]]
  [ "$(grep -c '"figure":"fanout"' weights.jsonl)" -eq 2 ]
  if has_decode; then [[ "$output" == *"kv-cache "*"no-cache "*"train "* ]]; fi
}

# rl-profile decode exists when the libtorch parts are built (RL_BUILD_MODEL, the default).
has_decode() { rl-profile --help 2>&1 | grep -q '^ *decode '; }

@test "decode prints generation with and without the KV cache and training tokens/s, as JSON too" {
  has_decode || skip "built without the libtorch parts"
  run rl-profile decode --sequences 16 --max-new-tokens 4 --json
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(printf '%s\n' "$output" | grep -c '"tokens_per_s"')" -eq 3 ]
  [[ "$output" == *'"path":"no-cache"'*'"vs_no_cache":1.0'* ]]
}

@test "decode exits 64 when the responses would not fit the model's context" {
  has_decode || skip "built without the libtorch parts"
  run rl-profile decode --max-new-tokens 30
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: --max-new-tokens does not fit the model's context of 32" ]
}
