#!/usr/bin/env bats
# A client written in Python from rl-protocol(7) alone (no server or reference
# client source read) talks to a real rl-queue server: the manual is enough.

load helper

CLIENT="$BATS_TEST_DIRNAME/../protocol_client/rlp1_client.py"

setup() {
    setup_sealed
    if ! /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null; then
        skip "/usr/bin/python3 lacks the zmq or msgpack module that the protocol client needs"
    fi
}

teardown() {
    teardown_sealed
}

@test "a client written from rl-protocol.7 alone can put, get and ack" {
    start_queue "$TMP/q"
    run /usr/bin/python3 "$CLIENT" "$RL_QUEUE" selftest
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"checks, 0 failed"* ]]
    [[ "$output" != *FAIL* ]]
}

@test "the protocol client's selftest also passes on a server that already has tasks and rows" {
    start_queue "$TMP/q" --declare other=prompt
    run /usr/bin/python3 "$CLIENT" "$RL_QUEUE" selftest
    echo "$output"
    [ "$status" -eq 0 ]
    run /usr/bin/python3 "$CLIENT" "$RL_QUEUE" selftest
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"checks, 0 failed"* ]]
}

@test "a pipelining client written from rl-protocol.7 puts and acks with 4 lanes in flight, each once and in order" {
    start_queue "$TMP/q"
    run /usr/bin/python3 "$CLIENT" "$RL_QUEUE" pipeline
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"6 checks, 0 failed"* ]]
}

@test "the protocol client gives up with a failure when no server answers" {
    # A port nothing listens on: the client retries, then gives up.
    run timeout 60 /usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from rlp1_client import Client, RLPError, UNAVAILABLE
c = Client("tcp://127.0.0.1:9", give_up_s=1)
try:
    c.ping()
except RLPError as e:
    print(e)
    sys.exit(0 if e.status == UNAVAILABLE else 1)
sys.exit(1)
' "$(dirname "$CLIENT")"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *Unavailable* ]]
}
