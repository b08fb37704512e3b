#!/usr/bin/env bash
# The GPU check, in one command on a machine with an NVIDIA GPU, PyTorch (2.x, CUDA), CMake, ninja
# and a C++ compiler, and no package registry:
#   1. unpacks the Debian packages of .gpu-debs/ (scripts/gpu-debs.sh fetched them where apt
#      works) into a prefix of its own, never into /;
#   2. configures roleflow with -DRL_WITH_CUDA=ON against the machine's PyTorch (its libtorch and
#      share/cmake/Torch) and those packages, and builds the tools and the tests that touch a GPU;
#   3. runs those tests (rl_gpu_test: DeviceTrainTest, GroupGpuTest and the CPU/GPU-agnostic ones
#      beside them), with NCCL where PyTorch's wheel or the CUDA toolkit brings nccl.h (one GPU:
#      NCCL between ranks on their own GPUs skips; two ranks sharing the GPU go through host memory);
#   4. runs the addition demo (grpo-demo.sh) with every role on the GPU (RL_DEVICE=cuda);
#   5. prints the figures: rl-profile decode --device cuda on a Qwen3-0.6B-shaped model (random
#      weights, Qwen3's tokenizer from .gpu-debs/qwen3) in float32 and in bf16: prefill, decode and
#      GRPO-step tokens/s at several batch sizes with the caching allocator's peak, beside PyTorch
#      (tests/reference/decode_reference.py) running the same model and step on the same GPU;
#      then rl-rollout batch by batch and with --refill on the GPU (examples/pipelines/refill.sh
#      --width 1024, 128 groups in 128 slots): tokens/s and slot occupancy, in the figures log.
#   6. groups: the demo's short form with a rollout group of two and two data-parallel trainer
#      ranks, every rank on a GPU (one GPU: all share it; two or more: one each, through NCCL),
#      then adaptive-tp.sh --short on the GPU (profile, static and adaptive, a rank killed in a switch);
# Every stage's log goes to $OUT (default /tmp/gpu-check); the summary at the end says which
# stages passed. Exit 0 when all did.
#
# Usage: scripts/gpu-check.sh [--stages unpack,build,test,demo,figures,groups] [--cpu]
#   --stages  run only these, always in the order above (a later call on the same machine reuses
#             the prefix and build-gpu/)
#   --cpu     the same steps against Debian's CPU libtorch, on the CPU (RL_WITH_CUDA off, RL_DEVICE
#             cpu, small figures): how the script itself is checked where no GPU is at hand
# Environment: OUT, RL_GPU_PREFIX (default /tmp/rl-gpu-deps), RL_JOBS (default nproc),
# RL_GPU_DEMO_STEPS (default 40), RL_GPU_BATCHES (default 1,16,64,256), RL_GPU_DEADLINE (seconds
# after the start past which no further stage starts: the device's call has a limit of its own,
# and a summary that says which stages were skipped is worth more than a call killed mid-stage).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-/tmp/gpu-check}
prefix=${RL_GPU_PREFIX:-/tmp/rl-gpu-deps}
jobs=${RL_JOBS:-$(nproc)}
stages=unpack,build,test,demo,figures,groups
cpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --stages) stages=$2; shift 2 ;;
    --cpu) cpu=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
done
mkdir -p "$out"
build=$root/build-gpu
[ "$cpu" = 1 ] && build=$root/build-gpu-cpu
declare -A result
say() { echo "gpu-check: $*" >&2; }
want() { [[ ",$stages," == *",$1,"* ]]; }
# stage NAME CMD...: runs CMD with its output in $out/NAME.log (and on stderr), records pass/fail.
stage() {
  local name=$1 t0=$SECONDS rc
  shift
  if [ -n "${RL_GPU_DEADLINE:-}" ] && [ "$SECONDS" -ge "$RL_GPU_DEADLINE" ]; then
    result[$name]="skipped (${SECONDS} s is past RL_GPU_DEADLINE=$RL_GPU_DEADLINE)"
    say "$name: ${result[$name]}"
    return 1
  fi
  say "== $name"
  "$@" 2>&1 | tee "$out/$name.log" >&2
  rc=${PIPESTATUS[0]}
  result[$name]="$([ "$rc" = 0 ] && echo passed || echo "FAILED ($rc)") in $((SECONDS - t0)) s"
  say "$name: ${result[$name]}"
  return "$rc"
}

lib=$prefix/usr/lib/x86_64-linux-gnu
python=${RL_PYTHON:-python3}
[ "$cpu" = 1 ] && python=/usr/bin/python3
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix  # the .pc files say prefix=/usr
export UCX_MODULE_DIR=$lib/ucx
export OMP_WAIT_POLICY=PASSIVE
torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$lib:$prefix/usr/lib${torch_lib:+:$torch_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

unpack() {
  local n=0 f
  ls .gpu-debs/*.deb >/dev/null 2>&1 || { echo "no .gpu-debs/*.deb: run scripts/gpu-debs.sh where apt works"; return 66; }
  # A second call on the same machine finds them unpacked: the same packages, nothing to do.
  local stamp
  stamp=$(md5sum .gpu-debs/*.deb | md5sum | cut -d' ' -f1)
  if [ "$(cat "$prefix/.gpu-debs" 2>/dev/null)" = "$stamp" ]; then
    echo "the packages of .gpu-debs are already unpacked into $prefix"
    return 0
  fi
  rm -rf "$prefix" && mkdir -p "$prefix"
  for f in .gpu-debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$f" "$prefix" || return 1
    else  # a .deb is an ar archive whose data.tar.xz (Debian 12's) holds the files
      ar p "$f" data.tar.xz | tar -xJ -C "$prefix" -f - || return 1
    fi
    n=$((n + 1))
  done
  echo "$n packages unpacked into $prefix"
  echo "$stamp" > "$prefix/.gpu-debs"
  "$prefix/usr/bin/pkgconf" --modversion ucx libpcre2-8 icu-uc sentencepiece hiredis libzmq
}

configure_and_build() {
  local torch_dir cuda=()
  torch_dir=$("$python" -c 'import os, torch.utils; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))') || return 1
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
  # What decides whether this build can work, for whoever reads the log: the machine, and which
  # third-party headers PyTorch ships beside its own (a second fmt or gloo beside Debian's).
  echo "$(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME"), $(cmake --version | head -1), $(c++ --version | head -1)"
  echo "torch/include holds: $(ls "$(dirname "$(dirname "$(dirname "$torch_dir")")")/include" 2>/dev/null | tr '\n' ' ')"
  if [ "$cpu" = 0 ]; then
    # C++20 as PyTorch 2.x builds itself; the Hopper target for anything torch's CMake compiles.
    cuda=(-DRL_WITH_CUDA=ON -DCMAKE_CXX_STANDARD=20 -DCMAKE_CUDA_ARCHITECTURES=90)
    [ -d /usr/local/cuda ] && cuda+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
  # NCCL for groups on GPUs: the nccl.h and libnccl.so.2 PyTorch's wheel brings (nvidia-nccl), else
  # the CUDA toolkit's; without either the groups stage GPU tensors through host memory.
  local nccl_h site
  site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
  nccl_h=$(find "$site/nvidia" -name nccl.h 2>/dev/null | head -1)
  [ -z "$nccl_h" ] && [ -f /usr/local/cuda/include/nccl.h ] && nccl_h=/usr/local/cuda/include/nccl.h
  if [ -n "$nccl_h" ]; then
    echo "NCCL: $nccl_h"
    cuda+=(-DRL_WITH_NCCL=ON -DNCCL_ROOT="$(dirname "$(dirname "$nccl_h")")")
  else
    echo "NCCL: no nccl.h beside PyTorch or in /usr/local/cuda: groups stage GPU tensors through host memory"
  fi
  # CMake 4 refuses the cmake_minimum_required of some packages' old config files without this.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTorch_DIR="$torch_dir" \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkgconf" \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DRL_BUILD_CLI_TESTS=OFF "${cuda[@]}" || return 1
  # Where each package was found: ours, not the system's (the --cpu check's point).
  grep -E '^(spdlog|fmt|CLI11|nlohmann_json|cppzmq|GTest|Gloo)_DIR|^MSGPACK_INCLUDE_DIR|^pkgcfg_lib_UCX_ucp|^RL_TORCH_CPU_LIBRARY|^NCCL_LIBRARY' \
    "$build/CMakeCache.txt"
  # rl_gpu_test: the 13 test files of the test stage in one binary (tests/CMakeLists.txt), not every
  # test of four libraries: the lease is short.
  ninja -C "$build" -j "$jobs" -k 0 rl-train rl-rollout rl-reward rl-queue rl-relay rl-watchdog rl-profile \
    rl_gpu_test rl_grpo_bench
}

# bounded SECONDS CMD...: CMD, killed after SECONDS (four times that on the CPU), so that a hang in
# one step fails its stage in one line instead of eating the device call's whole limit.
bounded() {
  local limit=$1 rc
  shift
  [ "$cpu" = 1 ] && limit=$((limit * 4))
  timeout -k 10 "$limit" "$@"
  rc=$?
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "gpu-check: stopped after $limit s: $*"
  return "$rc"
}

run_tests() {
  local rc=0 device=cuda
  [ "$cpu" = 1 ] && device=cpu
  # All of rl_gpu_test, in full to see the skips: on one GPU only the tests that need two may skip;
  # a DeviceTrainTest skipped means the GPU was not seen.
  OMP_NUM_THREADS=1 bounded 300 "$build/tests/rl_gpu_test" 2>&1 | tee "$build/gpu-test.log" | grep -v '^\[       OK \]'
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  if [ "$cpu" = 0 ] && grep -q '^\[  SKIPPED \] DeviceTrainTest' "$build/gpu-test.log"; then
    echo "DeviceTrainTest skipped: the GPU was not seen"
    rc=1
  fi
  # GRPO in one process on the device: generation, the KL reference and the step
  bounded 120 "$build/lib/rl/train/rl_grpo_bench" model=share/models/addition-tiny steps=3 prompts=16 eval_every=3 \
    kl=0.1 device=$device || rc=1
  return $rc
}

demo() {
  local device=cuda
  [ "$cpu" = 1 ] && device=cpu
  RL_BUILD_DIR=$build RL_DEVICE=$device RL_RUN_DIR=$(mktemp -d /tmp/gpu-check-demo.XXXXXX) \
    bounded 420 bash examples/pipelines/grpo-demo.sh --steps "${RL_GPU_DEMO_STEPS:-40}" --final-eval 300
}

groups() {
  local device=cuda run
  [ "$cpu" = 1 ] && device=cpu
  run=$(mktemp -d /tmp/gpu-check-groups.XXXXXX)
  RL_BUILD_DIR=$build RL_DEVICE=$device RL_RUN_DIR=$run \
    bounded 240 bash examples/pipelines/grpo-demo.sh --short --rollout-group 2 --train-ranks 2 || return 1
  # where each group computed and whether its tensors went through NCCL
  grep -h '"event":"group"' "$run"/events/*.jsonl
  grep -q "\"device\":\"$device" "$run"/events/rollout-0.jsonl || return 1
  # adaptive tensor parallelism on the device: a profile, static and adaptive runs, a rollout group
  # with the profile whose rank is killed in a switch (no row lost or doubled)
  RL_BUILD_DIR=$build RL_DEVICE=$device bounded 300 bash examples/pipelines/adaptive-tp.sh --short
}

figures() {
  local model=/tmp/gpu-check-qwen3 device=cuda batches=${RL_GPU_BATCHES:-1,16,64,256} shape rc=0 p
  shape='"vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128'
  local prompt=128 new=128 sequences=64
  if [ "$cpu" = 1 ]; then  # a small body with the same vocabulary, a few shapes
    device=cpu batches=1,4 prompt=16 new=8 sequences=8
    shape='"vocab_size": 151936, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16'
  fi
  [ -f .gpu-debs/qwen3/tokenizer.json ] || { echo "no .gpu-debs/qwen3/tokenizer.json (scripts/gpu-debs.sh copies it)"; return 66; }
  mkdir -p "$model"
  cp .gpu-debs/qwen3/tokenizer.json .gpu-debs/qwen3/tokenizer_config.json "$model/"
  cat > "$model/config.json" <<JSON
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", $shape, "max_position_embeddings": 40960,
 "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}
JSON
  for p in float32 bf16; do
    RL_PYTHON=$python bounded 240 "$build/tools/rl-profile/rl-profile" decode --model "$model" --device "$device" --precision "$p" \
      --batches "$batches" --prompt-tokens $prompt --max-new-tokens $new --sequences $sequences --threads 8 \
      | tee "$out/figures-$p.txt" || rc=1
  done
  # Refill where an empty slot saves a whole step's weight reads (into this stage's log: $OUT
  # brings back 8 files, the six stage logs and the two tables).
  local refill=(--width 1024 --groups 128 --slots 128)
  [ "$cpu" = 1 ] && refill=(--short)
  RL_BUILD_DIR=$build RL_DEVICE=$device RL_RUN_DIR=$(mktemp -d /tmp/gpu-check-refill.XXXXXX) \
    bounded 240 bash examples/pipelines/refill.sh "${refill[@]}" || rc=1
  return $rc
}

want unpack && { stage unpack unpack || exit 1; }
# ninja -k 0 builds what it can: where the tools linked, the stages that need only them still run.
want build && { stage build configure_and_build || [ -x "$build/tools/rl-profile/rl-profile" ] || exit 1; }
want test && stage test run_tests
want demo && stage demo demo
want figures && stage figures figures
want groups && stage groups groups
say "== summary ($([ "$cpu" = 1 ] && echo "--cpu" || echo "GPU"))"
ok=0
for s in unpack build test demo figures groups; do
  [ -n "${result[$s]:-}" ] || continue
  say "$s: ${result[$s]}"
  [[ "${result[$s]}" == passed* ]] || ok=1
done
for p in float32 bf16; do [ -f "$out/figures-$p.txt" ] && cat "$out/figures-$p.txt"; done
exit $ok
