#!/usr/bin/env bash
# Configures and builds roleflow into ./build (or $RL_BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${RL_BUILD_DIR:-build}"
jobs="${RL_JOBS:-$(nproc)}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >&2
elif [ $# -gt 0 ]; then
  cmake -S . -B "$build" "$@" >&2
fi
echo "build: compiling with $jobs jobs into $build (the libtorch parts take a few minutes the first time)" >&2
cmake --build "$build" -j "$jobs" >&2
