#!/usr/bin/env bash
# Kill matrix: the GRPO demo pipeline under rl-watchdog run (restart policy role), and each role
# in turn (rl-queue, rl-rollout, rl-reward, rl-train) killed with SIGKILL and frozen with SIGSTOP
# at a random moment, `trials` times each. After every fault it checks that only that role got a
# new pid and that it was back (heartbeating) within --bound seconds; at the end, with the
# pipeline stopped, that no acknowledged sample was lost (every row a stage acked is accounted
# for at the next) and that no row reached the trainer twice (the rows consumed by task train
# equal the samples of the steps the model kept). It prints, per role and signal, the time from
# the fault to the watchdog's failure event (detection), to the new instance's first heartbeat
# (back) at p50, p99 and max, and to the trainer's next step (p50, max; beside the usual step
# period, what it would have taken at most without the fault), and how many faults were back
# within the bound. Each trial ends with
# rl-watchdog itself killed (SIGKILL): the roles must keep their pids and the trainer must complete
# a step without it; a new watchdog on the same run directory must adopt all the roles, hear from
# each of them again, and start none.
# With --units N the queue is a controller of N storage units (rl-queue unit), each a role of its
# own (kind unit, listed before the controller: started first, stopped last), killed and frozen
# like the others; at the end every row still live is read back through the units as well.
#
# Usage: kill-matrix.sh [--short] [--long] [--trials N] [--seed N] [--bound S] [--units N]
#   --short   one trial of each role and signal, small steps (CI)
#   --long    20 trials of each (160 faults, about half an hour on two cores)
#   (default) 5 trials of each
# Environment: RL_BUILD_DIR (default ./build), RL_RUN_DIR (default a new /tmp directory).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rl_tools

seed=1 trials=5 bound=60 units=0 small=(--dynamic-sampling false --prompts-per-step 16)
while [ $# -gt 0 ]; do
  case "$1" in
    --short) trials=1 ;;
    --long) trials=20 ;;
    --trials) trials="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --bound) bound="$2"; shift ;;
    --units) units="$2"; shift ;;
    *) echo "kill-matrix: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
run="$(run_dir kill-matrix)"
mkdir -p "$run/ckpt"
RANDOM=$seed
cleanup() { rl-watchdog stop "$run" >/dev/null 2>&1 || true; [ -n "${RL_RUN_DIR:-}" ] || rm -rf "$run"; }
trap cleanup EXIT
log="$run/events/watchdog-0.jsonl"

echo "== data and a random model in $run" >&2
rl-train make-data --problems 20000 --seed "$((seed + 1000))" > "$run/prompts.jsonl"
rl-rollout random-model --out "$run/ckpt/weights-0.safetensors" --seed "$seed" 2> /dev/null
export RL_QUEUE="$(free_endpoint)"
# members: the role instances faults are tried on, as the watchdog names them (kind/id).
members=(queue/0 rollout/0 reward/0 train/0)
unit_list="" unit_flags=""
for ((u = 0; u < units; u++)); do
  unit_list+="${unit_list:+,}$(free_endpoint)"
  members+=("unit/$u")
done
[ "$units" -eq 0 ] || unit_flags="--units $unit_list --unit-min-bytes 1"
tr , '\n' <<< "$unit_list" > "$run/units.txt"
{
  printf '[watchdog]\nheartbeat_interval = 1\nmax_full_restarts = 0\ngrace = 5\n'
  # Unit RL_ID binds line RL_ID + 1 of units.txt.
  [ "$units" -eq 0 ] || printf '[role.unit]\ncount = %d\ncommand = "rl-queue unit --dir %s/unit$RL_ID --bind $(sed -n $((RL_ID + 1))p %s/units.txt) --log-level warn"\n' \
    "$units" "$run" "$run"
} > "$run/pipeline.toml"
cat >> "$run/pipeline.toml" <<TOML
[role.queue]
command = "rl-queue serve --dir $run/queue --bind $RL_QUEUE $unit_flags --log-level warn --declare generate=prompt_ids --declare reward=prompt,response,answer --declare train=prompt_ids,response_ids,logprobs,reward,version"
[role.rollout]
command = "rl-rollout run --checkpoint-dir $run/ckpt --threads 1 --seed $seed --lease 20 --log-level warn"
[role.reward]
command = "rl-reward run --verifier addition --lease 20 --log-level warn"
[role.train]
command = "rl-train grpo --checkpoint-dir $run/ckpt --prompts $run/prompts.jsonl --threads 1 --seed $seed --mode async --max-steps 100000 --eval-every 0 --lease-seconds 10 --log-level warn ${small[*]}"
TOML
hb="$(free_endpoint)"
start_watchdog() {
  rl-watchdog run "$run/pipeline.toml" --run-dir "$run" --heartbeat "$hb" --log-level warn 2>> "$run/watchdog.log" &
  wpid=$!
}
start_watchdog

# pid_of KIND/ID (ID 0 when left out)
pid_of() { local m="$1"; [[ "$m" == */* ]] || m="$m/0"; cut -d' ' -f1 "$run/watchdog/${m%/*}-${m#*/}.pid" 2>/dev/null || echo 0; }
pids() { local m out=""; for m in "${members[@]}"; do out+="${out:+ }$(pid_of "$m")"; done; echo "$out"; }
# label KIND/ID: the name a member's faults are counted under (queue, ..., unit0, unit1).
label() { case "$1" in unit/*) echo "unit${1#unit/}" ;; *) echo "${1%/0}" ;; esac; }
steps_done() { local n; n=$(grep -c '"event":"step"' "$run/events/train-0.jsonl" 2>/dev/null) || true; echo "${n:-0}"; }
# wait_steps N: until the trainer has completed N more steps (and a heartbeat has told the watchdog).
wait_steps() {
  local want=$(( $(steps_done) + $1 )) deadline=$(( $(date +%s) + bound ))
  until [ "$(steps_done)" -ge "$want" ]; do
    kill -0 "$wpid" 2>/dev/null || { echo "kill-matrix: rl-watchdog exited; its log:" >&2; cat "$run/watchdog.log" >&2; exit 70; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "kill-matrix: no trainer step within $bound s" >&2; exit 70; }
    sleep 0.2
  done
  sleep 1.2
}

# watchdog_trial: kill -9 rl-watchdog, see the roles go on without it, start a new one.
watchdog_trial() {
  local before after n starts t0 deadline m ok=ok
  before=$(pids) n=$(steps_done) starts=$(grep -c '"event":"start-role"' "$log" || true)
  t0=$(date +%s.%N)
  kill -9 "$wpid"; wait "$wpid" 2> /dev/null || true
  deadline=$(( $(date +%s) + bound ))
  until [ "$(steps_done)" -gt "$n" ] || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.2; done
  [ "$(steps_done)" -gt "$n" ] || ok="FAIL (no trainer step without the watchdog)"
  after=$(pids)
  [ "$after" = "$before" ] || ok="FAIL (pids $before -> $after)"
  for p in $after; do kill -0 "$p" 2> /dev/null || ok="FAIL (pid $p gone)"; done
  local mark; mark=$(wc -l < "$log")
  start_watchdog
  for m in "${members[@]}"; do
    until tail -n +"$((mark + 1))" "$log" | grep -q "\"event\":\"ready\".*\"member\":\"$m\".*\"pid\":$(pid_of "$m"),"; do
      [ "$(date +%s)" -lt "$deadline" ] || { ok="FAIL ($m not heard from by the new watchdog)"; break; }
      sleep 0.05
    done
  done
  local adopted; adopted=$(tail -n +"$((mark + 1))" "$log" | grep -c '"event":"adopted"' || true)
  [ "$adopted" -eq "${#members[@]}" ] || ok="FAIL (adopted $adopted of ${#members[@]})"
  [ "$(grep -c '"event":"start-role"' "$log")" -eq "$starts" ] || ok="FAIL (the new watchdog started roles)"
  [ "$(pids)" = "$before" ] || ok="FAIL (pids changed after the new watchdog)"
  [ "$ok" = ok ] || failed=1
  printf '%-8s %-5s roles kept pids, trainer stepped without it; adopted %s/%s in %s s  %s\n' watchdog KILL "$adopted" "${#members[@]}" \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')" "$ok" | tee -a "$run/watchdog-trials.txt" >&2
}

results="$run/matrix.txt"
: > "$results"
: > "$run/faults.tsv"
: > "$run/watchdog-trials.txt"
wait_steps 2
failed=0
for ((t = 0; t < trials; t++)); do
  for member in "${members[@]}"; do
    role=$(label "$member")
    for sig in KILL STOP; do
      sleep "$((RANDOM % 2)).$((RANDOM % 10))"
      before=($(pids))
      victim=$(pid_of "$member")
      t0=$(date +%s.%N)
      kill -s "$sig" "$victim"
      # Back: the watchdog's ready event for a new pid of this role.
      deadline=$(( $(date +%s) + bound ))
      until grep -q "\"event\":\"ready\".*\"member\":\"$member\".*\"pid\":$(pid_of "$member")," "$log" 2>/dev/null &&
            [ "$(pid_of "$member")" != "$victim" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || break
        sleep 0.05
      done
      t1=$(date +%s.%N)
      after=($(pids))
      changed=""
      for i in "${!members[@]}"; do
        [ "${before[$i]}" = "${after[$i]}" ] || changed="$changed $(label "${members[$i]}")"
      done
      detect=$(python3 - "$log" "$t0" "$member" <<'PY'
import json, sys
t0, member = float(sys.argv[2]), sys.argv[3]
for e in map(json.loads, open(sys.argv[1])):
    if e["event"] == "failure" and e.get("member") == member and e["ts"] >= t0:
        print("%.2f" % (e["ts"] - t0)); break
else:
    print("-")
PY
)
      back=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
      ok=ok
      [ "$changed" = " $role" ] || ok="FAIL (new pids:${changed:- none})"
      awk -v b="$back" -v lim="$bound" 'BEGIN { exit !(b < lim) }' || ok="FAIL (not back within $bound s)"
      [ "$ok" = ok ] || failed=1
      printf '%-8s %-5s detect %6s s  back %6s s  %s\n' "$role" "$sig" "$detect" "$back" "$ok" | tee -a "$results" >&2
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$role" "$sig" "$detect" "$back" "${ok%% *}" "$t0" >> "$run/faults.tsv"
      wait_steps 1
    done
  done
  watchdog_trial
  wait_steps 1
done

echo "== stopping the pipeline and checking the queue" >&2
rl-watchdog stop "$run" > /dev/null 2>&1
wait "$wpid" 2> /dev/null || true
port=$(free_port)
upids=()
for ((u = 0; u < units; u++)); do
  rl-queue unit --dir "$run/unit$u" --bind "$(sed -n "$((u + 1))p" "$run/units.txt")" --log-level warn &
  upids+=($!)
done
rl-queue serve --dir "$run/queue" --bind "tcp://127.0.0.1:$port" $unit_flags --log-level warn &
qpid=$!
until rl-queue stat --connect "tcp://127.0.0.1:$port" --timeout 0.2 > /dev/null 2>&1; do sleep 0.1; done
rl-queue stat --json --connect "tcp://127.0.0.1:$port" > "$run/stat.json"
# With units: every row still live for a task (the leases the stopped roles held given back) is
# read back, its values from the units, which fails if a unit lost a value the controller refers
# to (unit-reads.txt: task, rows ready, rows read).
: > "$run/unit-reads.txt"
if [ "$units" -gt 0 ]; then
  python3 -c 'import json,sys
for t in json.load(open(sys.argv[1]))["tasks"]:
    for h in t["holders"]: print(t["name"], h)' "$run/stat.json" | while read -r task holder; do
    rl-queue nack --connect "tcp://127.0.0.1:$port" --task "$task" --holder "$holder" > /dev/null
  done
  rl-queue stat --json --connect "tcp://127.0.0.1:$port" > "$run/stat-released.json"
  for task in generate reward train; do
    ready=$(python3 -c 'import json,sys; print(next(t["ready"] for t in json.load(open(sys.argv[1]))["tasks"] if t["name"] == sys.argv[2]))' "$run/stat-released.json" "$task")
    [ "$ready" -gt 0 ] || continue
    got=$(rl-queue get --connect "tcp://127.0.0.1:$port" --task "$task" --count "$ready" --lease 1 2>> "$run/unit-reads.err" | wc -l) || true
    echo "$task $ready $got" >> "$run/unit-reads.txt"
  done
  # A run that ends with every row consumed has nothing live to read back: say so (0 of 0)
  # rather than print no line at all.
  [ -s "$run/unit-reads.txt" ] || echo "none 0 0" >> "$run/unit-reads.txt"
fi
kill "$qpid" "${upids[@]}"; wait "$qpid" "${upids[@]}" 2> /dev/null || true
python3 - "$run" "$results" "$failed" "$bound" <<'PY'
import json, math, sys
run, results, failed, bound = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

def pct(xs, p):  # nearest rank
    return sorted(xs)[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else float("nan")

rows = [l.rstrip("\n").split("\t") for l in open(f"{run}/faults.tsv") if l.strip()]
# The trainer's steps: the time from each fault to the next one, against the usual step period
# (the median gap between steps with no fault between them), which bounds how long the next step
# would have taken to come had there been no fault.
step_ts = sorted(e["ts"] for e in map(json.loads, open(f"{run}/events/train-0.jsonl")) if e["event"] == "step")
fault_ts = sorted(float(r[5]) for r in rows)
quiet = [b - a for a, b in zip(step_ts, step_ts[1:]) if not any(a < t <= b for t in fault_ts)]
period = pct(quiet, 50) if quiet else float("nan")
def next_step(t0):
    later = [t for t in step_ts if t > t0]
    return later[0] - t0 if later else math.inf
print("%-8s %-5s %6s  %21s  %21s  %21s  %s" % ("role", "sig", "trials", "detect p50/p99/max (s)",
      "back p50/p99/max (s)", "next step p50/max (s)", "back within bound"))
kill_detect = []
for role in dict.fromkeys(r[0] for r in rows):
    for sig in ("KILL", "STOP"):
        rs = [r for r in rows if r[0] == role and r[1] == sig]
        if not rs:
            continue
        det = [float(r[2]) if r[2] != "-" else math.inf for r in rs]
        back = [float(r[3]) for r in rs]
        if sig == "KILL":
            kill_detect += det
        within = sum(b < bound for b in back)
        nxt = [next_step(float(r[5])) for r in rs]
        print("%-8s %-5s %6d  %6.2f %6.2f %7.2f  %6.2f %6.2f %7.2f  %13.2f %7.2f  %d/%d (%g s)" % (
            role, sig, len(rs), pct(det, 50), pct(det, 99), max(det), pct(back, 50), pct(back, 99), max(back),
            pct(nxt, 50), max(nxt), within, len(rs), bound))
print("the trainer's usual step period (median gap between steps with no fault between them): %.2f s" % period)
# Issue 20's target: after a SIGKILL of the queue the next step comes within 1 s of when it would
# have come without the fault, which is at most one usual period after the fault.
q = [next_step(float(r[5])) for r in rows if r[0] == "queue" and r[1] == "KILL"]
if q:
    print("queue SIGKILL: the trainer's next step after %.2f s at p50 (max %.2f), %s 1 s of the usual period" % (
        pct(q, 50), max(q), "within" if pct(q, 50) <= period + 1 else "NOT within"))
if kill_detect:
    p99 = pct(kill_detect, 99)
    print("killed roles (SIGKILL, %d faults) detected at p99 in %.2f s: %s the 3.5 s bound" % (
        len(kill_detect), p99, "within" if p99 <= 3.5 else "OUTSIDE"))
stat = json.load(open(f"{run}/stat.json"))
task = {t["name"]: t for t in stat["tasks"]}
held = lambda t: t["consumed"] + t["ready"] + t["leased"] + t["dropped"]
kept = {}
for e in map(json.loads, open(f"{run}/events/train-0.jsonl")):
    if e["event"] == "step":
        kept[e["step"]] = e["samples"]
lost = (stat["next_index"] - held(task["generate"])) + (task["reward"]["consumed"] - held(task["train"]))
dup = sum(kept.values()) - task["train"]["consumed"]
faults = [l for l in open(results) if l.strip()]
bad = [l for l in faults if "FAIL" in l]
print(f"{len(faults)} faults, {len(bad)} not recovered as they should; {len(kept)} steps kept")
print(f"acknowledged samples lost: {lost}  duplicates reaching the trainer: {dup}")
reads = [l.split() for l in open(f"{run}/unit-reads.txt") if l.strip()]
unread = sum(int(want) - int(got) for _, want, got in reads)
if reads:
    print("live rows read back through the storage units: %d of %d%s" % (
        sum(int(g) for _, _, g in reads), sum(int(w) for _, w, _ in reads),
        "" if unread == 0 else "  (" + open(f"{run}/unit-reads.err").read().strip().splitlines()[-1] + ")"))
wd = [l for l in open(f"{run}/watchdog-trials.txt") if l.strip()]
print(f"watchdog killed {len(wd)} times: {sum('FAIL' not in l for l in wd)} with every role untouched and adopted")
bad += [l for l in wd if "FAIL" in l]
sys.exit(1 if bad or lost or dup or failed or unread else 0)
PY
