#!/usr/bin/env bash
# WeChat-YATT's and AsyncFlow's ideas in roleflow, measured in one table:
#   1. parallel controllers: the demo with two data-parallel rl-train ranks against one
#      (yatt-ranks.sh);
#   2. a generative reward model: a judge trained with rl-train sft, its agreement with the rule
#      verifier on held-out pairs, and rollout time with the judge beside the sampler (partial
#      colocation) against generate-then-judge (full) (yatt-judge.sh);
#   3. dynamic placement: rl-watchdog's ternary search over the split of slots between rollouts and
#      that judge, from the worst split, against a sweep of every split, on slots with CPU quotas
#      where the machine can make them (yatt-placement.sh --judge);
#   4. resource planning: rl-profile plan's predicted seconds per step against real runs
#      (yatt-plan.sh).
# One SFT warm start serves every part (RL_SFT_FROM), so the whole takes about 28 minutes on 2
# quiet cores (the SFT start 3, ranks 6, judge 5, placement 7, plan 7); --short runs each part in
# its smoke form (a few minutes; it shows the parts work, not the figures). The last five lines
# are the parts' own:
#   ranks 2/1: accuracy X.XXX/X.XXX, s/step X.XX/X.XX
#   judge agreement X.XXX
#   partial/full colocation rollout time X.XX
#   placement: found X/Y within X.X% of best X/Y in N moves (a sweep: M)
#   plan error: X.X% X.X% X.X% ...
# Each part's tables and progress go to stderr; the run directories stay under the top one.
#
# Usage: yatt.sh [--short] [--seed N] [--dir DIR]
#   --dir: keep everything in DIR, and continue there: the SFT start and every part that printed
#          its line are kept, a part that did not finish starts over (empty DIR: a new run). The
#          whole is long enough that a session, or a machine, may end in the middle of it.
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory; --dir
# takes precedence).
set -euo pipefail
here="$(dirname "$0")"
source "$here/lib.sh"
rl_tools

seed=1 short=() dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --short) short=(--short) ;;
    --seed) seed="$2"; shift ;;
    --dir) dir="${2:-}"; [ -n "$dir" ] || { echo "yatt: --dir needs a directory" >&2; exit 64; }; shift ;;
    *) echo "yatt: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
if [ -n "$dir" ]; then
  top="$dir"
  mkdir -p "$top"
  # A directory of another seed or form would mix two runs.
  want="seed $seed${short[*]:+ short}"
  if [ -f "$top/yatt.run" ] && [ "$(cat "$top/yatt.run")" != "$want" ]; then
    echo "yatt: $top holds a run of $(cat "$top/yatt.run"), not $want" >&2
    exit 73
  fi
  echo "$want" > "$top/yatt.run"
else
  top="$(fresh_run_dir yatt)"
fi
if [ ${#short[@]} -eq 0 ] && [ -z "${RL_SFT_FROM:-}" ]; then
  # demo_start ends with the warm start's weights; a directory without them is started over.
  if [ ! -f "$top/sft/ckpt/weights-0.safetensors" ] || [ ! -f "$top/sft.done" ]; then
    rm -rf "$top/sft"
    demo_start "$top/sft" "$seed" 0.3 2000
    touch "$top/sft.done"
  else
    echo "== yatt: the SFT start in $top/sft is kept" >&2
  fi
  export RL_SFT_FROM="$top/sft"
fi

# part NAME SCRIPT LINE ARGS...: runs one part in $top/NAME; its output goes to stderr and
# $top/NAME.out. A part whose output already holds its last line (LINE, a prefix) is kept.
part() {
  local name="$1" script="$2" line="$3"; shift 3
  if [ -f "$top/$name.out" ] && grep -q "^$line" "$top/$name.out"; then
    echo "== yatt: $name is done in $top/$name (kept)" >&2
    return
  fi
  rm -rf "${top:?}/$name" "$top/$name.out"
  echo "== yatt: $name ($script $*)" >&2
  RL_RUN_DIR="$top/$name" bash "$here/$script" "$@" > "$top/$name.part"
  mv "$top/$name.part" "$top/$name.out"
  cat "$top/$name.out" >&2
}
part ranks yatt-ranks.sh 'ranks 2/1: ' "${short[@]}" --seed "$seed"
part judge yatt-judge.sh 'partial/full colocation rollout time ' "${short[@]}" --seed "$seed"
part placement yatt-placement.sh 'placement: ' "${short[@]}" --seed "$seed" --judge "$top/judge/judge"
part plan yatt-plan.sh 'plan error: ' "${short[@]}" --seed "$seed"

grep -h '^ranks 2/1: ' "$top/ranks.out" | tail -n 1
grep -h '^judge agreement ' "$top/judge.out" | tail -n 1
grep -h '^partial/full colocation rollout time ' "$top/judge.out" | tail -n 1
grep -h '^placement: ' "$top/placement.out" | tail -n 1
grep -h '^plan error: ' "$top/plan.out" | tail -n 1
