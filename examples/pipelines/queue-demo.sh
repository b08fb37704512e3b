#!/usr/bin/env bash
# The data flow of roleflow with rl-queue alone: prompts go in, a shell "rollout" answers them in
# groups, a shell "reward" scores them, and the "trainer" takes whole groups with dynamic
# sampling. Every role is a separate process talking to one rl-queue server.
# Usage: queue-demo.sh [--short]    (RL_BUILD_DIR: where the tools are built; default ./build)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools
prompts=40
[ "${1:-}" = "--short" ] && prompts=8
run="$(mktemp -d /tmp/rl-queue-demo.XXXXXX)"
export RL_QUEUE="$(free_endpoint)"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; echo "run directory: $run" >&2' EXIT

rl-queue serve --dir "$run/queue" --bind "$RL_QUEUE" --run-dir "$run" --log-level warn \
  --declare generate=prompt --declare reward=prompt,response --declare train=prompt,response,reward &
until rl-queue stat --timeout 0.2 >/dev/null 2>&1; do sleep 0.1; done

echo "== put $prompts prompts, 4 samples each" >&2
python3 -c "
import random; random.seed(1)
for i in range($prompts):
    a, b = random.randint(0, 99), random.randint(0, 99)
    print('{\"prompt\": \"%d+%d=\", \"answer\": \"%d\"}' % (a, b, a + b))
" | rl-queue put --repeat 4 >/dev/null

echo "== rollout: answer each group (a noisy adder)" >&2
while :; do
  rows=$(rl-queue get --task generate --groups --count 16 --lease 10 --log-level warn)
  [ -z "$rows" ] && break
  printf '%s\n' "$rows" | python3 -c "
import json, random, sys
for r in map(json.loads, sys.stdin):
    a, b = map(int, r['prompt'].rstrip('=').split('+'))
    guess = a + b + random.choice([0, 0, 1, -1])
    print(json.dumps({'index': r['index'], 'response': str(guess), 'version': 0}))
" | rl-queue put >/dev/null
  printf '%s\n' "$rows" | rl-queue ack --task generate >/dev/null
done

echo "== reward: exact match against the sum" >&2
while :; do
  rows=$(rl-queue get --task reward --count 64 --lease 10 --log-level warn)
  [ -z "$rows" ] && break
  printf '%s\n' "$rows" | python3 -c "
import json, sys
for r in map(json.loads, sys.stdin):
    a, b = map(int, r['prompt'].rstrip('=').split('+'))
    print(json.dumps({'index': r['index'], 'reward': 1.0 if r['response'] == str(a + b) else 0.0}))
" | rl-queue put >/dev/null
  printf '%s\n' "$rows" | rl-queue ack --task reward >/dev/null
done

echo "== train: whole groups, uniform-reward groups dropped (dynamic sampling)" >&2
rl-queue get --task train --groups --count 1000 --drop-uniform reward --log-level warn > "$run/train.jsonl"
rl-queue ack --task train < "$run/train.jsonl" >/dev/null
rl-queue stat
echo "trained on $(wc -l < "$run/train.jsonl") samples; the rest were in groups with equal rewards"
