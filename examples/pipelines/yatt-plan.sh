#!/usr/bin/env bash
# rl-profile plan checked against real runs. One SFT warm start, then grpo-demo.sh runs of several
# configurations from it: sync with one rollout (the run the costs are fitted to), then semi-sync,
# async (k = 1), async with k = 2 and sync with two rollouts. rl-profile plan fits per-role costs
# to the sync run's event logs, predicts each other configuration's seconds per step with its
# simulator, and compares with what each run measured. Dynamic sampling is off so every
# configuration does the same work per step (with it, the share of groups kept depends on how far
# each run has learned, which is not what this checks). Timings are wall clock on a shared machine:
# other load on the cores shows up as error.
# The machine's parallel speed-up (two busy processes against one) is measured before and after
# each run and given to the plan as --cores for that run. Prints the plan's ranking of every split
# of the slots (stdout), the predicted and measured table, and, last, the line
#   plan error: X.X% X.X% X.X% X.X%
# (|predicted - measured| / measured per checked run, in the order above).
# Usage: yatt-plan.sh [--short] [--steps N] [--seed N] [--configs "semi-sync async async-k2 sync-2"]
#   --short  a smoke run for CI: 10 SFT steps, 5 steps a run, 8 prompts a step, two checked
#            configurations, no speed-up measurement (--cores 1); it shows the pipeline works, not
#            that the predictions are within 15%
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
rl_tools

steps=40 seed=1 sft_steps=40 configs="semi-sync async async-k2 sync-2" warmup=3 short=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) steps=5 short=1 warmup=1 sft_steps=10 configs="async sync-2" extra=(--prompts-per-step 8) ;;
    --steps) steps="$2"; shift ;;
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
for c in sync $configs; do
  before="$(speedup)"
  echo "== $c: $steps steps ($(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg), parallel speed-up $before)" >&2
  opts="$(options "$c")"
  case "$opts" in *" -- "*) more="${opts#* -- }"; opts="${opts%% -- *}" ;; *) more="" ;; esac
  # shellcheck disable=SC2086
  RL_RUN_DIR="$root/$c" bash "$here/grpo-demo.sh" --steps "$steps" --seed "$seed" --sft-from "$root/warm" \
    --final-eval 0 $opts -- --dynamic-sampling false "${extra[@]}" $more > "$root/$c.out" 2> "$root/$c.log" ||
    { echo "yatt-plan: the $c run failed; its log: $root/$c.log" >&2; tail -n 5 "$root/$c.log" >&2; exit 70; }
  after="$(speedup)"
  python3 -c "print(f'{($before + $after) / 2:.2f}')" > "$root/$c.cores"
  echo "   parallel speed-up after: $after" >&2
done
# The ranking on the speed-up of the fitted run; then each other run predicted with the speed-up
# measured around it (the machine's state is an input of the plan, like its cores).
echo "== rl-profile plan, fitted to the sync run; runs in $root" >&2
rl-profile plan --from "$root/sync" --warmup "$warmup" --pool 4 --cores "$(cat "$root/sync.cores")"
for c in $configs; do
  rl-profile plan --from "$root/sync" --warmup "$warmup" --pool 4 --cores "$(cat "$root/$c.cores")" \
    --check "$root/$c" --json 2>/dev/null | grep '"type":"check"' > "$root/$c.check"
done
python3 - "$root" $configs <<'PY'
import json, sys
root, configs = sys.argv[1], sys.argv[2:]
print("\ncheck: predicted against measured (fitted to the sync run)")
print(f"{'config':<10} {'cores':>5} {'predicted':>9} {'measured':>9} {'error':>6}")
errors = []
for c in configs:
    r = json.loads(open(f"{root}/{c}.check").read())
    cores = open(f"{root}/{c}.cores").read().strip()
    errors.append(100 * r["error"])
    print(f"{c:<10} {cores:>5} {r['step_s']:>9.3f} {r['measured_step_s']:>9.3f} {errors[-1]:>5.1f}%")
print("plan error: " + " ".join(f"{e:.1f}%" for e in errors))
PY
