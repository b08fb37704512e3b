#!/usr/bin/env bats
# rl-queue from the command line: the options, the subcommands, and what survives kill -9.

load helper

setup() { setup_sealed; }
teardown() { teardown_sealed; }

@test "--help lists the subcommands and the environment variable of each option" {
  run rl-queue --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"serve"* && "$output" == *"put"* && "$output" == *"ack"* ]]
  run rl-queue serve --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_QUEUE_DIR]"* ]]
  [[ "$output" == *"[env RL_QUEUE_FSYNC]"* ]]
}

@test "--version prints the version" {
  run rl-queue --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^rl-queue\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "exits 64 on an unknown option" {
  run rl-queue put --no-such-option
  [ "$status" -eq 64 ]
  [[ "$output" == *"--no-such-option"* ]]
}

@test "exits 64 on an --fsync-interval-ms outside 0 to 60000, before touching the directory" {
  run rl-queue serve --dir "$TMP/q" --fsync-interval-ms -1
  [ "$status" -eq 64 ]
  [ "$output" = "rl-queue: --fsync-interval-ms: Value -1 not in range 0 to 60000 (see rl-queue --help)" ]
  [ ! -e "$TMP/q" ]
}

@test "exits 64 without a subcommand" {
  run rl-queue
  [ "$status" -eq 64 ]
}

@test "exits 78 on a config file with an unknown key" {
  printf 'no_such_key = 1\n' > "$TMP/bad.toml"
  run rl-queue serve --dir "$TMP/q" --config "$TMP/bad.toml"
  [ "$status" -eq 78 ]
  [[ "$output" == *"unknown option 'no_such_key'"* ]]
}

@test "command line beats environment beats config file" {
  printf 'fsync = "never"\n' > "$TMP/q.toml"
  RL_QUEUE_FSYNC=always start_queue "$TMP/q" --config "$TMP/q.toml"
  run rl-queue stat --json
  [[ "$output" == *'"fsync":"always"'* ]]
  kill "$QPID"; wait "$QPID" || true
  RL_QUEUE_FSYNC=always start_queue "$TMP/q" --config "$TMP/q.toml" --fsync batch
  run rl-queue stat --json
  [[ "$output" == *'"fsync":"batch"'* ]]
  kill "$QPID"; wait "$QPID" || true
  start_queue "$TMP/q" --config "$TMP/q.toml"
  run rl-queue stat --json
  [[ "$output" == *'"fsync":"never"'* ]]
}

@test "put prints one index per row, get leases them, ack consumes them" {
  start_queue "$TMP/q" --declare gen=prompt
  run bash -c 'printf "%s\n" "{\"prompt\":\"1+1=\"}" "{\"prompt\":\"2+2=\",\"ids\":[1,2]}" | rl-queue put'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = '{"index":0,"line":1}' ]
  [ "${lines[1]}" = '{"index":1,"line":2}' ]
  run rl-queue get --task gen --count 2
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == '{"index":0,"lease":1,"prompt":"1+1="}' ]]
  printf '%s\n' "$output" > "$TMP/got"
  run bash -c "rl-queue ack --task gen < '$TMP/got'"
  [ "$status" -eq 0 ]
  [ "$(count_lines '"acked":true')" -eq 2 ]
  run rl-queue stat
  [[ "$output" == *"gen"*"0"*"0"*"0"*"2"* ]]
}

@test "put exits 65 on a malformed line and keeps the rows before it" {
  start_queue "$TMP/q"
  run bash -c 'printf "%s\n" "{\"a\":1}" "{\"a\":2" "{\"a\":3}" | rl-queue put'
  [ "$status" -eq 65 ]
  [[ "$output" == *'{"index":0,"line":1}'* ]]
  [[ "$output" == *"stdin line 2: not valid JSON"* ]]
  run rl-queue stat --json
  [[ "$output" == *'"rows":1'* ]]
}

@test "get exits 65 on an unknown task and 64 on a bad count" {
  start_queue "$TMP/q"
  run rl-queue get --task nope
  [ "$status" -eq 65 ]
  [[ "$output" == *"unknown task 'nope'"* ]]
  run rl-queue get --task nope --count 0
  [ "$status" -eq 64 ]
}

@test "acking a row twice exits 65 and says it was refused" {
  start_queue "$TMP/q" --declare t=x
  echo '{"x":1}' | rl-queue put >/dev/null
  rl-queue get --task t >/dev/null
  run rl-queue ack --task t 0
  [ "$status" -eq 0 ]
  run rl-queue ack --task t 0
  [ "$status" -eq 65 ]
  [[ "$output" == *'{"index":0,"acked":false}'* ]]
}

@test "meta set, get and compare-and-set" {
  start_queue "$TMP/q"
  run rl-queue meta set cursor 10
  [ "$status" -eq 0 ]
  run rl-queue meta get cursor
  [ "$output" = "10" ]
  run rl-queue meta set cursor 11 --if-equals 9
  [ "$status" -eq 65 ]
  [[ "$output" == *"meta cursor is '10', not '9'"* ]]
  run rl-queue meta get missing
  [ "$status" -eq 65 ]
}

@test "a second server on the same directory exits 69" {
  start_queue "$TMP/q"
  run rl-queue serve --dir "$TMP/q" --bind "tcp://127.0.0.1:$(free_port)"
  [ "$status" -eq 69 ]
  [[ "$output" == *"another rl-queue server holds"* ]]
}

@test "put --window 16 prints every row's index in input order and stores each row once" {
  start_queue "$TMP/q" --declare t=n
  seq 1 500 | sed 's/.*/{"n":&}/' | rl-queue put --batch 1 --window 16 > "$TMP/out"
  python3 - "$TMP/out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["line"] for r in rows] == list(range(1, 501)), "one line per row, in input order"
assert [r["index"] for r in rows] == list(range(500)), "carried out in input order, once each"
PY
  run rl-queue stat --json
  [[ "$output" == *'"rows":500'* ]]
}

# A batch goes once the next line shows it is complete (a group may go on); then, while stdin has
# nothing more, put waits for the replies in flight instead of a full window.
@test "put --window acknowledges a slow writer's rows as they come, not a window later" {
  start_queue "$TMP/q"
  ( echo '{"n":1}'; echo '{"n":2}'; sleep 2; echo '{"n":3}' ) |
    rl-queue put --batch 1 --window 8 --timeout 10 > "$TMP/out" &
  local putter=$!
  sleep 1
  [ "$(cat "$TMP/out")" = '{"index":0,"line":1}' ]
  wait "$putter"
  [ "$(wc -l < "$TMP/out")" -eq 3 ]
}

@test "put --window 0 exits 64" {
  run rl-queue put --window 0
  [ "$status" -eq 64 ]
  [[ "$output" == *"--window"* ]]
}

@test "put waits for a server that starts late and then finishes" {
  QPORT=$(free_port)
  export RL_QUEUE="tcp://127.0.0.1:$QPORT"
  (seq 1 50 | sed 's/.*/{"n":&}/' | rl-queue put > "$TMP/out") &
  local putter=$!
  sleep 1
  start_queue "$TMP/q"
  wait "$putter"
  [ "$(wc -l < "$TMP/out")" -eq 50 ]
}

# 4 writers, the server killed -9 while they write, restarted: all rows present exactly once.
# The arguments after the policy go to each writer's rl-queue put.
crash_during_puts() {
  local fsync="$1"; shift
  start_queue "$TMP/q" --fsync "$fsync" --declare check=w,seq
  local writers=()
  for w in 1 2 3 4; do
    # Rows trickle in over about 3 s, so the kill lands in the middle of every stream.
    (python3 -u -c "
import sys, time
for i in range(1, 3001):
    print('{\"w\":$w,\"seq\":%d}' % i)
    if i % 20 == 0: time.sleep(0.02)
" | rl-queue put --timeout 60 "$@" > "$TMP/acked.$w") &
    writers+=($!)
  done
  sleep 1
  kill -9 "$QPID"
  for p in "${writers[@]}"; do kill -0 "$p"; done  # every writer is still writing
  local before; before=$(cat "$TMP"/acked.* | wc -l)
  [ "$before" -gt 0 ] && [ "$before" -lt 12000 ]
  sleep 0.5
  start_queue "$TMP/q" --fsync "$fsync" --declare check=w,seq
  for p in "${writers[@]}"; do wait "$p"; done
  rl-queue get --task check --count 100000 > "$TMP/rows"
  python3 - "$TMP" <<'PY'
import json, sys
tmp = sys.argv[1]
rows = [json.loads(l) for l in open(tmp + "/rows")]
keys = [(r["w"], r["seq"]) for r in rows]
assert len(keys) == 12000, f"{len(keys)} rows, want 12000"
assert len(set(keys)) == 12000, f"{len(keys) - len(set(keys))} duplicates"
acked = [json.loads(l)["index"] for w in "1234" for l in open(f"{tmp}/acked.{w}")]
assert len(acked) == 12000 and len(set(acked)) == 12000, "each writer row acknowledged once"
assert set(acked) == {r["index"] for r in rows}, "acknowledged indices are the stored ones"
PY
}

# Lines come 20 at a time, so a writer with --batch 5 has 4 puts in flight at once.
@test "kill -9 of the server during 4 pipelined put streams loses nothing and adds nothing twice (fsync always)" {
  crash_during_puts always --batch 5 --window 8
}

@test "kill -9 of the server during 4 pipelined put streams loses nothing and adds nothing twice (fsync batch)" {
  crash_during_puts batch --batch 5 --window 8
}

@test "kill -9 of the server during 4 concurrent put streams, one put at a time, loses nothing and adds nothing twice" {
  crash_during_puts batch --batch 20 --window 1
}

@test "kill -9 of a consumer holding leases: its rows come back after the lease and are consumed once" {
  start_queue "$TMP/q" --declare t=x
  seq 1 20 | sed 's/.*/{"x":&}/' | rl-queue put >/dev/null
  # A consumer that takes 10 rows under a 1 s lease and dies before acking.
  (rl-queue get --task t --count 10 --lease 1 > "$TMP/lost"; sleep 30) &
  local consumer=$!
  PIDS+=("$consumer")
  sleep 0.5
  kill -9 "$consumer"
  run rl-queue get --task t --count 20
  [ "$(printf '%s\n' "$output" | grep -c index)" -eq 10 ]
  printf '%s\n' "$output" | rl-queue ack --task t >/dev/null
  sleep 1.2
  run rl-queue get --task t --count 20 --wait 2
  [ "$(printf '%s\n' "$output" | grep -c index)" -eq 10 ]
  printf '%s\n' "$output" | rl-queue ack --task t >/dev/null
  run rl-queue stat --json
  [[ "$output" == *'"consumed":20'* ]]
  # The dead consumer's late ack of its lost lease is refused for rows consumed since.
  run bash -c "rl-queue ack --task t --lease-id 1 < '$TMP/lost'"
  [ "$status" -eq 65 ]
}

@test "a restarted consumer gives back its predecessor's leases at once with nack --holder" {
  start_queue "$TMP/q" --declare t=x
  seq 1 20 | sed 's/.*/{"x":&}/' | rl-queue put >/dev/null
  # Two consumers take 5 rows each under a 60 s lease; one of them is gone (its leases stay).
  rl-queue get --task t --count 5 --holder work/1 >/dev/null
  rl-queue get --task t --count 5 --holder work/2 > "$TMP/held2"
  run rl-queue stat --json
  [[ "$output" == *'"leased":10'* ]]
  [[ "$output" == *'"holders":{"work/1":5,"work/2":5}'* ]]
  run rl-queue stat
  [[ "$output" == *"leases of t: work/1 5 work/2 5"* ]]
  # Its replacement, under the same holder, gives back exactly its 5 rows, not work/2's.
  run rl-queue nack --task t --holder work/1
  [ "$status" -eq 0 ]
  [ "$(count_lines '"released":true')" -eq 5 ]
  run rl-queue get --task t --count 20
  [ "$(printf '%s
' "$output" | grep -c index)" -eq 15 ]
  run bash -c "rl-queue ack --task t --lease-id 2 < '$TMP/held2'"
  [ "$status" -eq 0 ]
  # Nothing left to give back; a holder with indices or a lease is a usage error.
  run rl-queue nack --task t --holder work/1
  [ "$status" -eq 0 ]
  [ "$(count_lines '"released"')" -eq 0 ]
  run rl-queue nack --task t --holder work/1 3
  [ "$status" -eq 64 ]
  [[ "$output" == *"no --lease-id, no indices"* ]]
  run rl-queue nack --task t --holder ""
  [ "$status" -eq 64 ]
}

@test "nack --holder also answers the holder's parked get, which would otherwise lease rows to it again" {
  start_queue "$TMP/q" --declare t=x
  # A consumer waiting for rows when it died: its get stays parked in the server.
  rl-queue get --task t --count 5 --holder work/1 --wait 30 > "$TMP/parked" 2>&1 &
  local parked=$!
  PIDS+=("$parked")
  sleep 0.5
  rl-queue nack --task t --holder work/1 >/dev/null
  seq 1 5 | sed 's/.*/{"x":&}/' | rl-queue put >/dev/null
  # The parked get is refused (65, and says why) instead of taking the new rows.
  local status=0
  wait "$parked" || status=$?
  [ "$status" -eq 65 ]
  grep -q "were given back by a newer process" "$TMP/parked"
  run rl-queue stat --json
  [[ "$output" == *'"ready":5'* ]]
}

@test "whole groups with --repeat, and dynamic sampling drops uniform groups" {
  start_queue "$TMP/q" --declare gen=prompt --declare train=prompt,reward
  printf '%s\n' '{"prompt":"a"}' '{"prompt":"b"}' | rl-queue put --repeat 3 >/dev/null
  rl-queue get --task gen --count 6 --groups > "$TMP/g"
  [ "$(grep -c index "$TMP/g")" -eq 6 ]
  python3 - "$TMP/g" > "$TMP/rewards" <<'PY'
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    reward = 1.0 if r["prompt"] == "a" else float(r["index"] % 2)
    print(json.dumps({"index": r["index"], "reward": reward}))
PY
  rl-queue put < "$TMP/rewards" >/dev/null
  run rl-queue get --task train --count 6 --groups --drop-uniform reward
  [ "$(printf '%s\n' "$output" | grep -c index)" -eq 3 ]
  [[ "$output" == *'"prompt":"b"'* && "$output" != *'"prompt":"a"'* ]]
  run rl-queue stat --json
  [[ "$output" == *'"dropped":3'* ]]
}

@test "retire frees the rows only an unused task kept alive, and stat shows which task holds them" {
  start_queue "$TMP/q" --declare gen=prompt --declare audit=prompt,verdict
  seq 1 4 | sed 's/.*/{"prompt":"p&"}/' | rl-queue put >/dev/null
  rl-queue get --task gen --count 4 | rl-queue ack --task gen >/dev/null
  run rl-queue stat --json
  [[ "$output" == *'"rows":4,'* ]]
  [[ "$output" == *'"holds":0,"leased":0,"name":"gen","optional":false,'* ]]
  [[ "$output" == *'"holds":4,"leased":0,"name":"audit","optional":false,'* ]]
  run rl-queue stat
  [[ "$output" == *"holds  columns"* ]]
  printf '%s\n' "$output" | grep -Eq '^audit +0 +0 +0 +0 +0 +4  prompt,verdict$'
  run rl-queue retire --task audit
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep -qx '{"freed":4,"task":"audit"}'
  [[ "$output" == *"task 'audit' retired; 4 rows only it kept alive were freed"* ]]
  run rl-queue stat --json
  [[ "$output" == *'"rows":0,'* ]]
  [[ "$output" != *audit* ]] || false
  run rl-queue retire --task audit
  [ "$status" -eq 65 ]
  [[ "$output" == *"unknown task 'audit'"* ]]
  # The retirement is in the log: after a restart the task is still gone.
  kill "$QPID"; wait "$QPID" || true
  start_queue "$TMP/q"
  run rl-queue stat --json
  [[ "$output" != *audit* ]] || false
}

@test "an optional task keeps no row alive: rows go once the required tasks consumed them" {
  start_queue "$TMP/q" --declare gen=prompt
  run rl-queue task --task audit --columns prompt --optional
  [ "$status" -eq 0 ]
  run rl-queue task --task audit --columns prompt
  [ "$status" -eq 65 ]
  [[ "$output" == *"exists as an optional task"* ]]
  seq 1 3 | sed 's/.*/{"prompt":"p&"}/' | rl-queue put >/dev/null
  rl-queue get --task audit --count 1 >/dev/null  # row 0 leased by audit stays
  rl-queue get --task gen --count 3 | rl-queue ack --task gen >/dev/null
  run rl-queue stat --json
  [[ "$output" == *'"rows":1,'* ]]
  [[ "$output" == *'"holds":0,"leased":1,"name":"audit","optional":true,'* ]]
  run rl-queue stat
  printf '%s\n' "$output" | grep -Eq '^audit .* -  prompt \(optional\)$'
  run rl-queue ack --task audit 0
  [ "$status" -eq 0 ]
  run rl-queue stat --json
  [[ "$output" == *'"rows":0,'* ]]
}

@test "stat quotes task and holder names that would split a text line" {
  start_queue "$TMP/q" --declare 'my task=x'
  printf '{"x":1}\n{"x":2}\n' | rl-queue put >/dev/null
  rl-queue get --task 'my task' --holder 'train 0' >/dev/null
  rl-queue get --task 'my task' --holder 'train/1' >/dev/null
  run rl-queue stat
  [[ "$output" == *'leases of "my task": "train 0" 1 train/1 1'* ]]
  printf '%s\n' "$output" | grep -Eq '^"my task" +0 '
}

@test "declare and get refuse columns no row can have, and columns named twice" {
  start_queue "$TMP/q"
  run rl-queue task --task t --columns x,index
  [ "$status" -eq 64 ]
  [[ "$output" == *"'index' is reserved, not a column name"* ]]
  run rl-queue get --task t --columns x,x
  [ "$status" -eq 64 ]
  [[ "$output" == *"column 'x' named twice"* ]]
  run rl-queue task --task t --columns x,version,group
  [ "$status" -eq 0 ]
}

@test "serve --declare leaves a task declared optional since then optional" {
  start_queue "$TMP/q" --declare gen=prompt --declare audit=prompt
  run rl-queue task --task audit2 --columns prompt --optional
  [ "$status" -eq 0 ]
  kill "$QPID"; wait "$QPID" || true
  start_queue "$TMP/q" --declare gen=prompt --declare audit2=prompt
  run rl-queue stat --json
  [[ "$output" == *'"name":"audit2","optional":true'* ]]
  [[ "$output" == *'"name":"audit","optional":false'* ]]
}

@test "a leased row's progress, written by update puts, survives kill -9 and comes back with --also to the next lease" {
  start_queue "$TMP/q" --declare generate=prompt
  echo '{"prompt":"2*3="}' | rl-queue put >/dev/null
  run rl-queue get --task generate --lease 2
  [ "$status" -eq 0 ]
  local lease; lease=$(printf '%s\n' "$output" | sed -n 's/.*"lease":\([0-9]*\).*/\1/p')
  [ -n "$lease" ]
  # Two turns, each written into the row under the lease, which each renews.
  run bash -c "echo '{\"index\":0,\"progress\":\"turn 1\"}' | rl-queue put --update generate:$lease --renew 2"
  [ "$status" -eq 0 ]
  [ "$output" = '{"index":0,"line":1}' ]
  echo '{"index":0,"progress":"turn 2"}' | rl-queue put --update "generate:$lease" --renew 3 >/dev/null
  # Refused: a column the row was created with, a new row, an update that would also ack.
  run bash -c "echo '{\"index\":0,\"prompt\":\"x\"}' | rl-queue put --update generate:$lease"
  [ "$status" -eq 65 ]
  [[ "$output" == *"'prompt' was put with the row; an update cannot replace it"* ]]
  run bash -c "echo '{\"progress\":\"x\"}' | rl-queue put --update generate:$lease"
  [ "$status" -eq 64 ]
  run bash -c "echo '{\"index\":0,\"progress\":\"x\"}' | rl-queue put --update generate"
  [ "$status" -eq 64 ]
  run bash -c "echo '{\"index\":0,\"progress\":\"x\"}' | rl-queue put --renew 1"
  [ "$status" -eq 64 ]
  kill -9 "$QPID"
  wait "$QPID" 2>/dev/null || true  # gone, its LOCK with it: a server still dying holds it
  start_queue "$TMP/q" --declare generate=prompt
  # The lease survived the restart (renewed to 3 s) and still holds the row...
  run rl-queue get --task generate --also progress
  [ "$status" -eq 0 ]
  [ "$(count_lines '"index"')" -eq 0 ]
  # ...until it ends: the rollout died, and the next one continues from the last turn.
  run rl-queue get --task generate --also progress --wait 10
  [ "$status" -eq 0 ]
  [ "$(count_lines '"index":0')" -eq 1 ]
  [[ "$output" == *'"progress":"turn 2"'* && "$output" == *'"prompt":"2*3="'* ]]
  run rl-queue get --task generate --also prompt --columns prompt
  [ "$status" -eq 64 ]
  [[ "$output" == *"also: column 'prompt' is one of the task's columns"* ]]
}

# --- storage units ------------------------------------------------------------------------------

# start_unit N [extra unit args...]: storage unit N on port UPORT[N] over $TMP/uN; sets UPID[N].
start_unit() {
  local n="$1"; shift
  [ -n "${UPORT[$n]:-}" ] || UPORT[$n]=$(free_port)
  rl-queue unit --dir "$TMP/u$n" --bind "tcp://127.0.0.1:${UPORT[$n]}" "$@" 2>>"$TMP/unit$n.log" &
  UPID[$n]=$!
  PIDS+=("${UPID[$n]}")
  for _ in $(seq 1 100); do
    rl-queue stat --connect "tcp://127.0.0.1:${UPORT[$n]}" --timeout 0.2 >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  cat "$TMP/unit$n.log" >&2
  return 1
}

units_list() { echo "tcp://127.0.0.1:${UPORT[0]},tcp://127.0.0.1:${UPORT[1]}"; }

@test "a controller with two units: rows put, read back, consumed and freed on the units" {
  start_unit 0
  start_unit 1
  start_queue "$TMP/q" --units "$(units_list)" --declare t=data,n
  run rl-queue meta get queue.units
  [ "$output" = "$(units_list)" ]
  run rl-queue stat
  [[ "$output" == *"units  0 tcp://127.0.0.1:${UPORT[0]}  1 tcp://127.0.0.1:${UPORT[1]}"* ]]
  python3 -c "
for n in range(10): print('{\"n\":%d,\"data\":\"%s\"}' % (n, str(n) * 2000))" | rl-queue put >/dev/null
  run rl-queue stat --connect "tcp://127.0.0.1:${UPORT[1]}" --json
  [[ "$output" == *'"rows":5'* ]]
  run rl-queue get --task t --count 10
  [ "$(count_lines '"index"')" -eq 10 ]
  printf '%s\n' "$output" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    assert r['data'] == str(r['n']) * 2000, r['n']"
  printf '%s\n' "$output" | rl-queue ack --task t >/dev/null
  for _ in $(seq 1 100); do
    run rl-queue stat --connect "tcp://127.0.0.1:${UPORT[0]}" --json
    [[ "$output" == *'"rows":0'* ]] && break
    sleep 0.05
  done
  [[ "$output" == *'"rows":0'* ]]
  # The queue's rows refer to its units: it does not start without them.
  kill "$QPID"; wait "$QPID" || true
  run rl-queue serve --dir "$TMP/q" --bind "tcp://127.0.0.1:$(free_port)"
  [ "$status" -eq 78 ]
  [[ "$output" == *"start it with --units $(units_list)"* ]]
  run rl-queue get --connect "tcp://127.0.0.1:${UPORT[0]}" --task t
  [ "$status" -eq 64 ]
  [[ "$output" == *"a storage unit takes ping, put, stat, read, free and list"* ]]
}

# 4 writers of rows whose data lives on 2 units and a consumer acking them; a unit, then the
# controller, killed -9 and restarted meanwhile: every acknowledged row is there once, with its own
# data, and no row is handed out twice.
@test "kill -9 of a unit and of the controller during put streams and consumption loses no row and leases none twice" {
  start_unit 0
  start_unit 1
  start_queue "$TMP/q" --units "$(units_list)" --declare check=w,seq,data
  local writers=()
  for w in 1 2 3 4; do
    (python3 -u -c "
import time
for i in range(1, 1501):
    print('{\"w\":$w,\"seq\":%d,\"data\":\"%s\"}' % (i, ('%d-%d-' % ($w, i)).ljust(1500, 'x')))
    if i % 20 == 0: time.sleep(0.04)
" | rl-queue put --timeout 60 --batch 10 --window 4 > "$TMP/acked.$w") &
    writers+=($!)
  done
  python3 - "$TMP" > "$TMP/consumer.log" 2>&1 <<'PY' &
import json, subprocess, sys, time
tmp = sys.argv[1]
seen, total, end = open(tmp + "/consumed", "w"), 0, time.time() + 120
while total < 6000 and time.time() < end:
    got = subprocess.run(["rl-queue", "get", "--task", "check", "--count", "100", "--wait", "1", "--lease", "30",
                          "--timeout", "60"], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    rows = [json.loads(l) for l in got.stdout.splitlines() if l.strip()]
    for r in rows:
        assert r["data"] == ("%d-%d-" % (r["w"], r["seq"])).ljust(1500, "x"), (r["w"], r["seq"])
        seen.write("%d %d %d\n" % (r["w"], r["seq"], r["index"]))
    seen.flush()
    if rows:
        ack = subprocess.run(["rl-queue", "ack", "--task", "check", "--timeout", "60"], input=got.stdout,
                             capture_output=True, text=True)
        assert ack.returncode == 0, ack.stderr
    total += len(rows)
PY
  local consumer=$!
  PIDS+=("$consumer")
  sleep 1
  kill -9 "${UPID[1]}"
  sleep 0.5
  start_unit 1
  sleep 0.5
  kill -9 "$QPID"
  local before; before=$(cat "$TMP"/acked.* | wc -l)
  [ "$before" -gt 0 ] && [ "$before" -lt 6000 ]
  sleep 0.5
  start_queue "$TMP/q" --units "$(units_list)" --declare check=w,seq,data
  for p in "${writers[@]}"; do wait "$p"; done
  wait "$consumer" || { cat "$TMP/consumer.log" >&2; false; }
  python3 - "$TMP" <<'PY'
import sys
tmp = sys.argv[1]
acked = [l for w in "1234" for l in open(f"{tmp}/acked.{w}")]
assert len(acked) == 6000, f"{len(acked)} rows acknowledged, want 6000"
seen = [tuple(map(int, l.split())) for l in open(tmp + "/consumed")]
keys = [(w, s) for w, s, i in seen]
assert len(seen) == 6000, f"{len(seen)} rows consumed, want 6000"
assert len(set(keys)) == 6000, f"{len(keys) - len(set(keys))} rows handed out twice"
assert len({i for w, s, i in seen}) == 6000
PY
  run rl-queue stat --json
  [[ "$output" == *'"consumed":6000'* ]]
}
