#!/usr/bin/env bats
# rl-env from the command line: the options, the calculator, every way a tool can fail (each
# leaving rl-env serving and the next call answered), a kill -9 of rl-env while a call waits,
# the Python example tool, no network, heartbeats to rl-watchdog, and the man page's EXAMPLES.
# The test tools are small scripts written here; every wait is bounded.

load helper

setup() {
  setup_sealed
  export PATH="$RL_BUILD_DIR/tools/rl-env:$RL_BUILD_DIR/tools/rl-watchdog:$PATH"
  EP="tcp://127.0.0.1:$(free_port)"
  mkdir -p "$TMP/tools"
}

teardown() { teardown_sealed; }

man_examples() {
  awk '/^\.\\" example-begin/{f=1;next} /^\.\\" example-end/{f=0} f && !/^\.E[XE]/' "$1"
}

# serve [options]: rl-env serve on $EP in the background, its log in $TMP/env.log; sets EPID and
# returns once it listens.
serve() {
  rl-env serve --bind "$EP" "$@" 2>> "$TMP/env.log" &
  EPID=$!
  PIDS+=("$EPID")
  wait_for "$TMP/env.log" "serving tool calls on" 20
}

# call [options] NAME ARGS...: rl-env call against $EP with bounded waits.
call() { timeout 60 rl-env call --endpoint "$EP" --give-up-s 20 "$@"; }

# tool NAME BODY: writes an executable shell script $TMP/tools/NAME whose first call runs BODY
# (the failure under test) and whose every later call answers {"output": "fine"}.
tool() {
  cat > "$TMP/tools/$1" <<EOF
#!/bin/sh
while read -r line; do
  if [ ! -e "$TMP/tools/$1.failed" ]; then
    touch "$TMP/tools/$1.failed"
    $2
  fi
  echo '{"output": "fine"}'
done
EOF
  chmod +x "$TMP/tools/$1"
}

@test "--help lists the subcommands and the environment variable of each option" {
  run rl-env --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"serve"* && "$output" == *"call"* && "$output" == *"calc"* ]]
  run rl-env serve --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_ENV_TIMEOUT_MS]"* && "$output" == *"[env RL_ENV_MEMORY_MB]"* ]]
  [[ "$output" == *"[env RL_ENV_WORKERS]"* && "$output" == *"[env RL_ENV_NO_NETWORK]"* ]]
  run rl-env call --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"[env RL_ENV_ENDPOINT]"* && "$output" == *"[env RL_ENV_GIVE_UP_S]"* ]]
  run rl-env --version
  [[ "$output" =~ ^rl-env\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "bad options and arguments exit 64 with one line" {
  run rl-env serve --no-such-option
  [ "$status" -eq 64 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"--no-such-option"* ]]
  run rl-env serve --bind "$EP"
  [ "$status" -eq 64 ]
  [ "$output" = "rl-env: give at least one --tool NAME=COMMAND" ]
  run rl-env serve --bind "$EP" --tool calc
  [ "$status" -eq 64 ]
  [ "$output" = "rl-env: --tool wants NAME=COMMAND, not 'calc'" ]
  run rl-env serve --bind "$EP" --tool a=cat --tool a=cat
  [ "$status" -eq 64 ]
  [ "$output" = "rl-env: --tool a is given twice" ]
  run rl-env serve --tool a=cat --workers 0
  [ "$status" -eq 64 ]
  [ "${#lines[@]}" -eq 1 ]
  run rl-env serve --tool a=cat --no-network maybe
  [ "$status" -eq 64 ]
  run rl-env call --endpoint "$EP" calc
  [ "$status" -eq 64 ]
  [ "$output" = "rl-env: call wants NAME ARGUMENTS_JSON pairs (e.g. calc '\"12*34\"')" ]
  run rl-env
  [ "$status" -eq 64 ]
  [ "${#lines[@]}" -eq 1 ]
}

@test "call exits 69 within --give-up-s when no rl-env listens" {
  start=$(date +%s)
  run rl-env call --endpoint "$EP" --give-up-s 1 calc '"1"'
  [ "$status" -eq 69 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "rl-env: no reply from $EP"* ]]
  [ $(( $(date +%s) - start )) -le 4 ]
}

@test "calc speaks the tool protocol on stdin and stdout" {
  cat > "$TMP/requests" <<'EOF'
{"name":"calc","arguments":"12*34"}

{"name":"calc","arguments":{"expression":"-(2+3)*4 % 7"}}
{"name":"calc","arguments":"9223372036854775807+1"}
{"name":"calc","arguments":"7/(3-3)"}
{"name":"calc","arguments":"2+"}
EOF
  run rl-env calc < "$TMP/requests"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 5 ]
  [ "${lines[0]}" = '{"output":"408"}' ]
  [ "${lines[1]}" = '{"output":"-6"}' ]
  [ "${lines[2]}" = '{"error":"overflow"}' ]
  [ "${lines[3]}" = '{"error":"division by zero"}' ]
  [ "${lines[4]}" = '{"error":"cannot parse '"'"'2+'"'"': expected a number but found end at offset 2"}' ]
}

@test "serve and call: the calculator, unknown tools, bad arguments, several calls in order" {
  serve --tool calc="rl-env calc"
  run call calc '"12*34"'
  [ "$status" -eq 0 ]
  [ "$output" = '{"output":"408"}' ]
  run call calc '{"expression": "(1+2)*-3"}' nope '"1"' calc 'not json' calc '"1/0"'
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 4 ]
  [ "${lines[0]}" = '{"output":"-9"}' ]
  [ "${lines[1]}" = '{"error":"no tool named '"'"'nope'"'"' (tools: calc)","kind":"unknown-tool"}' ]
  [[ "${lines[2]}" == *'"kind":"bad-arguments"'* ]]
  [ "${lines[3]}" = '{"error":"division by zero","kind":"tool-error"}' ]
}

@test "a tool that sleeps forever times out and the next call succeeds" {
  tool sleepy 'sleep 987654'
  serve --tool sleepy="$TMP/tools/sleepy" --timeout-ms 500
  start=$(date +%s)
  run call --timeout-ms 500 sleepy '{}'
  [ "$status" -eq 1 ]
  [[ "$output" == '{"error":"tool '"'"'sleepy'"'"' gave no reply within 0.5 s; it was killed and will be restarted"'* ]]
  [[ "$output" == *'"kind":"timeout"}' ]]
  [ $(( $(date +%s) - start )) -le 5 ]
  run call sleepy '{}'
  [ "$status" -eq 0 ]
  [ "$output" = '{"output":"fine"}' ]
  run pgrep -f "sleep 987654"  # killed with its process group
  [ "$status" -ne 0 ]
}

@test "a tool's reward comes back with its output; a reward that is not a number up to 1e6 in size is malformed" {
  cat > "$TMP/tools/scored" <<'EOF'
#!/bin/sh
while read -r line; do
  case "$line" in
    *good*) echo '{"output": "yes", "reward": 0.5}' ;;
    *bad*) echo '{"output": "yes", "reward": "high"}' ;;
    *huge*) echo '{"output": "yes", "reward": 1e300}' ;;
    *edge*) echo '{"output": "yes", "reward": -1000000}' ;;
    *) echo '{"output": "plain"}' ;;
  esac
done
EOF
  chmod +x "$TMP/tools/scored"
  serve --tool scored="$TMP/tools/scored"
  run call scored '"good"' scored '"other"'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = '{"output":"yes","reward":0.5}' ]
  [ "${lines[1]}" = '{"output":"plain"}' ]
  run call scored '"bad"'
  [ "$status" -eq 1 ]
  [[ "$output" == *'"kind":"malformed"}' ]]
  # Finite, yet it would overflow the trainer's group variance: refused here, where it costs a call.
  run call scored '"huge"'
  [ "$status" -eq 1 ]
  [[ "$output" == *'"kind":"malformed"}' ]]
  run call scored '"edge"'
  [ "$status" -eq 0 ]
  [ "$output" = '{"output":"yes","reward":-1000000.0}' ]
  run call scored '"good"'
  [ "$output" = '{"output":"yes","reward":0.5}' ]
}

@test "a tool that crashes mid-call is crashed, saying how, and the next call succeeds" {
  tool crash 'kill -SEGV $$'
  tool quits 'exit 3'
  serve --tool crash="$TMP/tools/crash" --tool quits="$TMP/tools/quits"
  run call crash 1 quits 2
  [ "$status" -eq 1 ]
  # /bin/sh ran the script as its child: it says so with status 128 + 11, and rl-env decodes it.
  [[ "${lines[0]}" == *"'crash' exited with status 139 (its command was killed by signal 11, SIGSEGV) during the"* ]]
  [[ "${lines[0]}" == *'"kind":"crashed"}' ]]
  [[ "${lines[1]}" == *"'quits' exited with status 3 during the call"*'"kind":"crashed"}' ]]
  run call crash 1 quits 2
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '%s\n' '{"output":"fine"}' '{"output":"fine"}')" ]
}

@test "a tool that floods its output is too-large: yes, and a 10 MB line" {
  tool flood 'yes'
  tool bigline 'head -c 10000000 /dev/zero | tr "\\0" x; echo'
  serve --tool flood="$TMP/tools/flood" --tool bigline="$TMP/tools/bigline" --max-output-bytes 65536
  run call flood 1 bigline 1
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == '{"error":"tool '"'"'flood'"'"' wrote more than 65536 bytes in reply; it was killed'* ]]
  [[ "${lines[0]}" == *'"kind":"too-large"}' ]]
  [[ "${lines[1]}" == *'"kind":"too-large"}' ]]
  run call flood 1 bigline 1
  [ "$status" -eq 0 ]
}

@test "a reply that is not the protocol's is malformed, quoted, and the next call succeeds" {
  tool garbage 'echo "this is not json"; continue'
  tool shape 'echo "{\"result\": 1}"; continue'
  serve --tool garbage="$TMP/tools/garbage" --tool shape="$TMP/tools/shape"
  run call garbage 1 shape 1
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" == *"'this is not json'"*'"kind":"malformed"}' ]]
  [[ "${lines[1]}" == *'{\"result\": 1}'*'"kind":"malformed"}' ]]
  run call garbage 1 shape 1
  [ "$status" -eq 0 ]
}

@test "a tool that allocates beyond --memory-mb gets an error result; rl-env serves on" {
  cat > "$TMP/tools/hog.py" <<'EOF'
import json, sys
for line in sys.stdin:
    if json.loads(line)["arguments"] == "big":
        block = bytearray(1 << 30)  # MemoryError under the limit: the process ends
    print(json.dumps({"output": "small is fine"}), flush=True)
EOF
  serve --tool hog="python3 $TMP/tools/hog.py" --memory-mb 256
  run call hog '"big"'
  [ "$status" -eq 1 ]
  [[ "$output" == *'"kind":"crashed"}' ]]
  grep -q "MemoryError" "$TMP/env.log"  # its stderr, in rl-env's log
  kill -0 "$EPID"
  run call hog '"small"'
  [ "$status" -eq 0 ]
  [ "$output" = '{"output":"small is fine"}' ]
}

@test "the calls of one request run in parallel on the workers" {
  cat > "$TMP/tools/slow" <<'EOF'
#!/bin/sh
while read -r line; do sleep 1; echo '{"output": "slept"}'; done
EOF
  chmod +x "$TMP/tools/slow"
  serve --tool slow="$TMP/tools/slow" --workers 4
  start=$(date +%s%N)
  run call slow 1 slow 2 slow 3 slow 4
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 4 ]
  [ $(( ($(date +%s%N) - start) / 1000000 )) -lt 2500 ]
}

@test "rl-env killed -9 while a call waits, and restarted: the call completes" {
  cat > "$TMP/tools/slow" <<'EOF'
#!/bin/sh
while read -r line; do sleep 2; echo '{"output": "done"}'; done
EOF
  chmod +x "$TMP/tools/slow"
  serve --tool slow="$TMP/tools/slow"
  call slow 1 > "$TMP/call.out" 2> "$TMP/call.err" &
  CPID=$!
  sleep 0.7
  kill -9 "$EPID"
  sleep 0.3
  serve --tool slow="$TMP/tools/slow"
  wait "$CPID"
  [ "$(cat "$TMP/call.out")" = '{"output":"done"}' ]
}

@test "examples/tools/pyexpr.py: a tool in Python" {
  serve --tool py="python3 $RL_SOURCE_DIR/examples/tools/pyexpr.py"
  run call py '"2**10 + max(3, 4)"' py '{"expression": "x * y > 10 and not False", "variables": {"x": 3, "y": 4}}' \
    py '"(n := 12) * n"' py '"round(7 / 2) if 1 < 2 < 3 else 0"'
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '%s\n' '{"output":"1028"}' '{"output":"True"}' '{"output":"144"}' '{"output":"4"}')" ]
  run call py '"__import__(\"os\").system(\"id\")"' py '"9**9**9"' py '"1/0"' py '"x."'
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = '{"error":"not allowed: Call","kind":"tool-error"}' ]
  [ "${lines[1]}" = '{"error":"exponent too large (over 10000)","kind":"tool-error"}' ]
  [ "${lines[2]}" = '{"error":"division by zero","kind":"tool-error"}' ]
  [[ "${lines[3]}" == '{"error":"cannot parse: '* ]]
}

@test "tools have no network where the kernel allows it, and the log says which" {
  cat > "$TMP/tools/net.py" <<'EOF'
import json, socket, sys
for line in sys.stdin:
    port = json.loads(line)["arguments"]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        print(json.dumps({"output": "connected"}), flush=True)
    except OSError as e:
        print(json.dumps({"output": "refused: %s" % e.strerror}), flush=True)
EOF
  port=${EP##*:}
  serve --tool net="python3 $TMP/tools/net.py"
  if grep -q "tools have the network" "$TMP/env.log"; then
    run rl-env serve --bind "tcp://127.0.0.1:$(free_port)" --tool net=cat --no-network require
    [ "$status" -eq 69 ]
    skip "this kernel refuses unprivileged user and network namespaces"
  fi
  grep -q "tools run without network" "$TMP/env.log"
  run call net "$port"
  [ "$status" -eq 0 ]
  [[ "$output" == '{"output":"refused: '* ]]
  kill "$EPID"
  wait "$EPID" || true
  serve --tool net="python3 $TMP/tools/net.py" --no-network off
  run call net "$port"
  [ "$output" = '{"output":"connected"}' ]
}

@test "rl-env heartbeats to rl-watchdog as role env" {
  HB="tcp://127.0.0.1:$(free_port)"
  rl-watchdog monitor --heartbeat "$HB" --json > "$TMP/mon" 2> "$TMP/mon.err" &
  PIDS+=($!)
  serve --tool calc="rl-env calc" --heartbeat "$HB" --heartbeat-interval 0.2 --id 3
  wait_for "$TMP/mon" '"event":"joined".*"member":"env/3"' 20
}

@test "the EXAMPLES of rl-env(1) run" {
  man_examples "$RL_SOURCE_DIR/man/rl-env.1" > "$TMP/examples.sh"
  [ "$(wc -l < "$TMP/examples.sh")" -gt 5 ]
  cd "$RL_SOURCE_DIR"
  run timeout 120 bash -euo pipefail "$TMP/examples.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'{"output":"408"}'* ]]
  [[ "$output" == *'{"output":"1028"}'* ]]
}

@test "call passes JSON arrays through untouched, and arguments nested too deep are refused without harm" {
  cat > "$TMP/echo.py" <<'PY'
import json, sys
for line in sys.stdin:  # answers with the arguments it was given, as JSON text
    print(json.dumps({"output": json.dumps(json.loads(line)["arguments"])}), flush=True)
PY
  serve --tool echo="exec python3 $TMP/echo.py" --tool calc="rl-env calc"
  run call echo '[1, 2]'
  [ "$status" -eq 0 ]
  [ "$output" = '{"output":"[1, 2]"}' ]
  deep="$(python3 -c 'print("[" * 5000 + "]" * 5000)')"
  run call echo "$deep"
  [ "$status" -eq 1 ]
  [[ "$output" == *'"kind":"bad-arguments"'* ]]
  kill -0 "$EPID"
  run call calc '"6*7"'
  [ "$output" = '{"output":"42"}' ]
}

@test "a tool that closes its stderr does not keep rl-env busy while it works" {
  cat > "$TMP/quiet" <<'SH'
#!/bin/sh
exec 2>&-
while read -r l; do sleep 1; echo '{"output": "done"}'; done
SH
  chmod +x "$TMP/quiet"
  serve --tool quiet="exec $TMP/quiet"
  before=$(awk '{print $14 + $15}' "/proc/$EPID/stat")
  run call quiet 1 quiet 2
  [ "$status" -eq 0 ]
  after=$(awk '{print $14 + $15}' "/proc/$EPID/stat")
  # Two one-second calls: a spinning wait would burn most of them (clock ticks of 10 ms).
  [ $((after - before)) -lt 30 ]
}
