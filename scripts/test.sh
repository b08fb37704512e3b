#!/usr/bin/env bash
# Builds roleflow and runs every test: GoogleTest units and bats command-line tests, through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build="${RL_BUILD_DIR:-build}"
export OMP_WAIT_POLICY=PASSIVE
ctest --test-dir "$build" --output-on-failure -j "${RL_TEST_JOBS:-2}" "$@"
