#!/usr/bin/env bash
# Compiles every translation unit of ours that includes libtorch against another release's headers
# (-fsyntax-only, C++20, with -DRL_WITH_CUDA and CUDA's headers where /usr/local/cuda has them;
# NCCL's where the build was configured with RL_WITH_NCCL), so that an API break in a newer or older PyTorch shows here, on the CPU, before a GPU
# machine's short lease is spent finding it. The headers are Debian's libtorch-dev of another
# suite (trixie: 2.6, sid: 2.14 when this was written), downloaded with apt into .torch-headers/
# (ignored by git); the compile commands are those of a configured build (./build by default).
# A few minutes on 2 cores. Exits 0 when every unit compiled, 1 when one did not.
#
# Usage: scripts/torch-headers-check.sh [--suite trixie|sid|SUITE] [--build DIR] [--jobs N]
set -euo pipefail
suite=trixie build=$(dirname "$0")/../build jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "torch-headers-check: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
done
build=$(realpath -m "$build")  # before the cd: DIR is the caller's
cd "$(dirname "$0")/.."
[ -f "$build/compile_commands.json" ] || {
  echo "torch-headers-check: no $build/compile_commands.json: configure first (scripts/build.sh)" >&2
  exit 66
}
dir=$PWD/.torch-headers/$suite
if [ ! -d "$dir/root/usr/include/ATen" ]; then
  mkdir -p "$dir/lists/partial" "$dir/root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" > "$dir/sources.list"
  o=(-o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$dir/lists" -o APT::Sandbox::User=root)
  apt-get "${o[@]}" -qq update
  (cd "$dir" && apt-get "${o[@]}" -qq download libtorch-dev)
  dpkg-deb -x "$dir"/libtorch-dev_*.deb "$dir/root"
fi
version=$(basename "$dir"/libtorch-dev_*.deb | cut -d_ -f2)
# A CPU build's headers lack the file CUDA's CMake writes; its one macro is all c10/cuda asks of it.
macros=$dir/cuda-macros/c10/cuda/impl
if [ ! -f "$dir/root/usr/include/c10/cuda/impl/cuda_cmake_macros.h" ]; then
  mkdir -p "$macros"
  printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$macros/cuda_cmake_macros.h"
fi
work=$dir/check
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 - "$build/compile_commands.json" "$dir" "$work" <<'PY'
import json, os, re, sys
commands, dir, work = sys.argv[1:]
inc = f"{dir}/root/usr/include"
extra = f"-isystem {inc}/torch/csrc/api/include -isystem {inc} -isystem {dir}/cuda-macros"
cuda = os.path.isfile("/usr/local/cuda/include/cuda_runtime.h")
if cuda:
    extra += " -isystem /usr/local/cuda/include"
with open(f"{work}/build.ninja", "w") as out:
    out.write("rule cc\n  command = cd $dir && $cmd && touch $out\n  description = $in\n")
    n = 0
    for i, e in enumerate(json.load(open(commands))):
        cmd = e["command"]
        if "/torch/csrc/api/include" not in cmd:
            continue  # this unit does not see libtorch
        cmd = re.sub(r"-isystem \S*/torch/csrc/api/include", extra, cmd)
        cmd = re.sub(r"-std=\S+", "-std=c++20 -fsyntax-only" + (" -DRL_WITH_CUDA" if cuda else ""), cmd)
        cmd = re.sub(r" -o \S+", " ", cmd).replace("$", "$$")
        out.write(f"build {work}/unit{i}: cc {e['file']}\n  dir = {e['directory']}\n  cmd = {cmd}\n")
        n += 1
print(f"torch-headers-check: {n} units against libtorch-dev {os.path.basename(dir)}", file=sys.stderr)
PY
echo "torch-headers-check: libtorch-dev $version ($suite)" >&2
set +e
ninja -C "$work" -k 0 -j "$jobs" 2>&1 | tee "$work/log" >&2
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 0 ]; then
  echo "torch-headers-check: every unit compiles against libtorch $version"
else
  grep -E "error|FAILED" "$work/log" | head -40
  echo "torch-headers-check: $(grep -c '^FAILED' "$work/log") units fail against libtorch $version (all of it: $work/log)"
  exit 1
fi
