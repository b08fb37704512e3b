#!/usr/bin/env bash
# rl-profile plan checked against real runs. One SFT warm start, then rounds of grpo-demo.sh runs
# from it, each round running every configuration once: sync with one rollout (the run that
# round's costs are fitted to), then semi-sync, async (k = 1), async with k = 2 and sync with two
# rollouts (their order turned by one each round, so that none always runs next to the fit).
# rl-profile plan fits per-role costs to the round's sync run, predicts each other
# configuration's seconds per step with its simulator, and the round's run of it measures them. A
# configuration's error is that of its prediction averaged over the rounds against its measure
# averaged over them: the cores here are shared with other sessions, and what they leave us drifts
# by 10-20% over minutes, so one long run of each (the first form of this check) compared runs
# made under different conditions, and the rounds put every configuration under each of them.
# Dynamic sampling is off so every configuration does the same work per step (with it, the share
# of groups kept depends on how far each run has learned, which is not what this checks).
# The machine's parallel speed-up (two busy processes against one) is measured before and after
# each run and given to the plan as --cores for that run. Prints the plan's ranking of every split
# of the slots (stdout, fitted to the first round), each round's predicted and measured table,
# and, last, the line
#   plan error: X.X% X.X% X.X% X.X%
# (|mean predicted - mean measured| / mean measured per checked configuration, in --configs order).
# Usage: yatt-plan.sh [--short] [--rounds N] [--steps N] [--seed N]
#                     [--configs "semi-sync async async-k2 sync-2"]
#   --rounds  rounds of runs (default 3)
#   --steps   steps of each run (default 20; the first 3 are warm-up, left out)
#   --short   a smoke run for CI: 10 SFT steps, one round of 5 steps a run, 8 prompts a step, two
#             checked configurations, no speed-up measurement (--cores 1); it shows the pipeline
#             works, not that the predictions are within 15%
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
rl_tools

steps=20 rounds=3 seed=1 sft_steps=40 configs="semi-sync async async-k2 sync-2" warmup=3 short=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=5 rounds=1 short=1 warmup=1 sft_steps=10 configs="async sync-2" extra=(--prompts-per-step 8) ;;
    --steps) steps="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --configs) configs="$2"; shift ;;
    *) echo "yatt-plan: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
# The grpo-demo.sh options of a configuration.
options() {
  case "$1" in
    sync) echo "--mode sync" ;;
    sync-2) echo "--mode sync --rollouts 2" ;;
    semi-sync) echo "--mode semi-sync" ;;
    async) echo "--mode async" ;;
    async-k2) echo "--mode async -- --max-staleness 2" ;;
    *) echo "yatt-plan: unknown configuration $1 (sync, sync-2, semi-sync, async, async-k2)" >&2; exit 64 ;;
  esac
}
for c in $configs; do options "$c" >/dev/null; done
root="$(fresh_run_dir yatt-plan)"

echo "== SFT warm start ($sft_steps steps), shared by every run" >&2
demo_start "$root/warm" "$seed" 0.99 "$sft_steps" "$sft_steps" >&2
# The machine's parallel speed-up now: 2 x (a busy loop alone) / (two at once), between 1 and 2.
# Where the kernel shares the cores between sessions (autogroup) and others keep them busy, our
# roles get about the same CPU however many run at once, and this is near 1.
speedup() {
  if [ "$short" = 1 ]; then echo 1.00; return; fi
  python3 - <<'PY'
import multiprocessing as mp, statistics, time
def spin(n=2_000_000):
    x = 0
    for i in range(n):
        x += i * i
def timed(k):
    t0 = time.perf_counter()
    ps = [mp.Process(target=spin) for _ in range(k)]
    for p in ps: p.start()
    for p in ps: p.join()
    return time.perf_counter() - t0
alone = statistics.median(timed(1) for _ in range(3))
pair = statistics.median(timed(2) for _ in range(3))
print(f"{max(1.0, min(2.0, 2 * alone / pair)):.2f}")
PY
}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "yatt-plan: --rounds must be a positive number" >&2; exit 64; }
# run ROUND CONFIG: one grpo-demo.sh run in $root/ROUND/CONFIG, its speed-up in CONFIG.cores.
run() {
  local dir="$root/$1" c="$2" before after opts more
  before="$(speedup)"
  echo "== round ${1#r}, $c: $steps steps ($(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg), parallel speed-up $before)" >&2
  opts="$(options "$c")"
  case "$opts" in *" -- "*) more="${opts#* -- }"; opts="${opts%% -- *}" ;; *) more="" ;; esac
  # shellcheck disable=SC2086
  RL_RUN_DIR="$dir/$c" bash "$here/grpo-demo.sh" --steps "$steps" --seed "$seed" --sft-from "$root/warm" \
    --final-eval 0 $opts -- --dynamic-sampling false "${extra[@]}" $more > "$dir/$c.out" 2> "$dir/$c.log" ||
    { echo "yatt-plan: the $c run failed; its log: $dir/$c.log" >&2; tail -n 5 "$dir/$c.log" >&2; exit 70; }
  after="$(speedup)"
  python3 -c "print(f'{($before + $after) / 2:.2f}')" > "$dir/$c.cores"
  echo "   parallel speed-up after: $after" >&2
}
read -r -a checked <<< "$configs"
for ((r = 1; r <= rounds; r++)); do
  mkdir -p "$root/r$r"
  run "r$r" sync
  n=${#checked[@]}
  for ((i = 0; i < n; i++)); do run "r$r" "${checked[$(( (i + r - 1) % n ))]}"; done
  # Each run predicted with the speed-up measured around it (the machine's state is an input of
  # the plan, like its cores), from the costs of this round's sync run.
  for c in $configs; do
    rl-profile plan --from "$root/r$r/sync" --warmup "$warmup" --pool 4 --cores "$(cat "$root/r$r/$c.cores")" \
      --check "$root/r$r/$c" --json 2>/dev/null | grep '"type":"check"' > "$root/r$r/$c.check"
  done
done
echo "== rl-profile plan, fitted to round 1's sync run; runs in $root" >&2
rl-profile plan --from "$root/r1/sync" --warmup "$warmup" --pool 4 --cores "$(cat "$root/r1/sync.cores")"
python3 - "$root" "$rounds" $configs <<'PY'
import json, sys
root, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("\ncheck: predicted against measured s/step (each round fitted to its own sync run)")
print(f"{'round':<6} {'config':<10} {'cores':>5} {'fitted':>7} {'predicted':>9} {'measured':>9} {'error':>6}")
pred = {c: [] for c in configs}
meas = {c: [] for c in configs}
for r in range(1, rounds + 1):
    for c in configs:
        check = json.loads(open(f"{root}/r{r}/{c}.check").read())
        cores = open(f"{root}/r{r}/{c}.cores").read().strip()
        fitted = open(f"{root}/r{r}/sync.cores").read().strip()
        pred[c].append(check["step_s"])
        meas[c].append(check["measured_step_s"])
        print(f"{r:<6} {c:<10} {cores:>5} {fitted:>7} {check['step_s']:>9.3f} {check['measured_step_s']:>9.3f} "
              f"{100 * check['error']:>5.1f}%")
errors = []
for c in configs:
    p, m = sum(pred[c]) / rounds, sum(meas[c]) / rounds
    errors.append(100 * abs(p - m) / m)
    print(f"{'mean':<6} {c:<10} {'':>5} {'':>7} {p:>9.3f} {m:>9.3f} {errors[-1]:>5.1f}%")
print("plan error: " + " ".join(f"{e:.1f}%" for e in errors))
PY
