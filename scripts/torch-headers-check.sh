#!/usr/bin/env bash
# Compiles every translation unit of ours that includes libtorch against another release's headers
# (-fsyntax-only, C++20, with -DRL_WITH_CUDA and CUDA's headers where /usr/local/cuda has them;
# NCCL's where the build was configured with RL_WITH_NCCL), so that an API break in a newer or older PyTorch shows here, on the CPU, before a GPU
# machine's short lease is spent finding it. The headers are Debian's libtorch-dev of another
# suite (trixie: 2.6, sid: 2.14 when this was written), downloaded with apt into .torch-headers/
# (ignored by git); the compile commands are those of a configured build (./build by default).
# With --gcc N, every unit (libtorch's or not) is compiled by that suite's GCC N instead of the
# build's compiler: the GPU machine's is GCC 13, whose library headers include less than 12's.
# A few minutes on 2 cores (about 20 with --gcc). Exits 0 when every unit compiled, 1 when one
# did not.
#
# Usage: scripts/torch-headers-check.sh [--suite trixie|sid|SUITE] [--gcc N] [--build DIR] [--jobs N]
set -euo pipefail
suite=trixie gcc="" build=$(dirname "$0")/../build jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=$2; shift 2 ;;
    --gcc) gcc=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "torch-headers-check: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
done
[[ -z "$gcc" || "$gcc" =~ ^[0-9]+$ ]] || { echo "torch-headers-check: --gcc takes a major version (13), not $gcc" >&2; exit 64; }
build=$(realpath -m "$build")  # before the cd: DIR is the caller's
cd "$(dirname "$0")/.."
[ -f "$build/compile_commands.json" ] || {
  echo "torch-headers-check: no $build/compile_commands.json: configure first (scripts/build.sh)" >&2
  exit 66
}
dir=$PWD/.torch-headers/$suite
o=(-o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
   -o Dir::State::Lists="$dir/lists" -o APT::Sandbox::User=root)
mkdir -p "$dir/lists/partial" "$dir/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" > "$dir/sources.list"
if [ ! -d "$dir/root/usr/include/ATen" ]; then
  apt-get "${o[@]}" -qq update
  (cd "$dir" && apt-get "${o[@]}" -qq download libtorch-dev)
  dpkg-deb -x "$dir"/libtorch-dev_*.deb "$dir/root"
fi
cxx=""
if [ -n "$gcc" ]; then
  g=$dir/gcc-$gcc
  if [ ! -x "$g/g++" ]; then
    rm -rf "$g" && mkdir -p "$g/debs" "$g/root"
    apt-get "${o[@]}" -qq update
    # The compiler and what its two programs that run here (the driver and cc1plus) load.
    (cd "$g/debs" && apt-get "${o[@]}" -qq download "g++-$gcc-x86-64-linux-gnu" "cpp-$gcc-x86-64-linux-gnu" \
       "gcc-$gcc-x86-64-linux-gnu" "libstdc++-$gcc-dev" "libgcc-$gcc-dev" "gcc-$gcc-base" \
       libc6 libgmp10 libisl23 libmpc3 libmpfr6 libzstd1 zlib1g libstdc++6 libgcc-s1) || {
      echo "torch-headers-check: $suite has no GCC $gcc (or its libraries moved on): try another --gcc" >&2
      exit 69
    }
    for deb in "$g"/debs/*.deb; do dpkg-deb -x "$deb" "$g/root"; done
    # The suite's GCC wants the suite's glibc, newer than this machine's: both programs run under
    # the suite's own loader and libraries. The C headers stay this machine's.
    lib=$g/root/usr/lib/x86_64-linux-gnu
    cc1=$g/root/usr/libexec/gcc/x86_64-linux-gnu/$gcc/cc1plus
    mv "$cc1" "$cc1.real"
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$lib/ld-linux-x86-64.so.2" "$lib" "$cc1.real" > "$cc1"
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$lib/ld-linux-x86-64.so.2" "$lib" \
      "$g/root/usr/bin/x86_64-linux-gnu-g++-$gcc" > "$g/g++"
    chmod +x "$cc1" "$g/g++"
  fi
  cxx=$g/g++
  echo "torch-headers-check: every unit with $("$cxx" --version | head -1)" >&2
fi
version=$(basename "$dir"/libtorch-dev_*.deb | cut -d_ -f2)
# A CPU build's headers lack the file CUDA's CMake writes; its one macro is all c10/cuda asks of it.
macros=$dir/cuda-macros/c10/cuda/impl
if [ ! -f "$dir/root/usr/include/c10/cuda/impl/cuda_cmake_macros.h" ]; then
  mkdir -p "$macros"
  printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$macros/cuda_cmake_macros.h"
fi
work=$dir/check${gcc:+-gcc$gcc}
with=${gcc:+ with GCC $gcc}
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 - "$build/compile_commands.json" "$dir" "$work" "$cxx" <<'PY'
import json, os, re, sys
commands, dir, work, cxx = sys.argv[1:]
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
        if e["file"].endswith("cmake_pch.hxx.cxx"):
            continue  # the precompiled header's own unit: the units below include it as text
        if cmd.split(" ", 1)[0].endswith("nvcc"):
            continue  # CUDA sources: nvcc's, not a host compiler's
        torch = "/torch/csrc/api/include" in cmd
        if not torch and not cxx:
            continue  # this unit does not see libtorch
        if cxx:
            cmd = cxx + " " + cmd.split(" ", 1)[1]
        cmd = re.sub(r"-isystem \S*/torch/csrc/api/include", extra, cmd)
        cmd = re.sub(r"-std=\S+", "-std=c++20 -fsyntax-only" + (" -DRL_WITH_CUDA" if cuda and torch else ""), cmd)
        cmd = re.sub(r" -o \S+", " ", cmd).replace("$", "$$")
        # Not the build's precompiled ATen (RL_PRECOMPILE_ATEN): its headers, and each unit's own includes.
        cmd = re.sub(r" -Winvalid-pch| -include \S*cmake_pch\.hxx", "", cmd)
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
  echo "torch-headers-check: every unit compiles against libtorch $version$with"
else
  grep -E "error|FAILED" "$work/log" | head -40
  echo "torch-headers-check: $(grep -c '^FAILED' "$work/log") units fail against libtorch $version$with (all of it: $work/log)"
  exit 1
fi
