#!/usr/bin/env bats
# rl-profile plan from the command line: options, exit codes, and a plan fitted to the event logs
# of a synthetic run (plan_fixture.py: fixed role costs, so the step times are known). Its own
# file beside rl-profile.bats so the subcommand's tests stay together; seconds in all.

load helper
bats_require_minimum_version 1.5.0

setup() { setup_sealed; }
teardown() { teardown_sealed; }

fixture() { python3 "$RL_SOURCE_DIR/tests/bats/plan_fixture.py" "$@"; }

@test "plan --help lists its options with their meaning" {
  run rl-profile plan --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--from"*"--decode-profile"*"--pool"*"--modes"*"--trainer-ranks"*"--sim-steps"* ]]
  [[ "$output" == *"--check"*"measured step time beside the prediction"* ]]
  run rl-profile --help
  [[ "$output" == *"plan "*"simulate the pipeline"* ]]
}

@test "plan exits 64 with one line without an input, on an unknown mode, or a warm-up past the steps" {
  run rl-profile plan
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: plan needs --from RUN_DIR, --decode-profile FILE or both" ]
  fixture "$TMP/run" sync 10
  run rl-profile plan --from "$TMP/run" --modes sync,fast
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: plan: a mode is sync, semi-sync, async or async-kN, not 'fast'" ]
  run rl-profile plan --from "$TMP/run" --warmup 10 --sim-steps 10
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: plan: --warmup must be below --sim-steps" ]
  run rl-profile plan --from "$TMP/run" --pool 2
  [ "$status" -eq 64 ]
  [[ "$output" == *"a pool of 2 slots leaves no room"* ]]
}

@test "plan exits 74 for a missing run or profile and 65 for malformed events or a malformed profile" {
  run rl-profile plan --from "$TMP/none"
  [ "$status" -eq 74 ]
  [ "$output" = "rl-profile: plan: no run directory $TMP/none" ]
  run rl-profile plan --decode-profile "$TMP/none.json"
  [ "$status" -eq 74 ]
  [ "${#lines[@]}" -eq 1 ]
  fixture "$TMP/run" sync 10
  printf 'not json\n{"ts": 1, "event": "x"}\n' >> "$TMP/run/events/reward-0.jsonl"
  run rl-profile plan --from "$TMP/run"
  [ "$status" -eq 65 ]
  [[ "$output" == *"reward-0.jsonl line 21 is not an event line"* ]]
  fixture "$TMP/old" sync 10
  sed -i 's/"rounds": 8, //' "$TMP/old/events/rollout-0.jsonl"
  run rl-profile plan --from "$TMP/old"
  [ "$status" -eq 65 ]
  [[ "$output" == *"rollout-0: a batch event has no number rounds (a run from an older roleflow?)"* ]]
  echo '{"decode": [[1, 2]]}' > "$TMP/bad.json"
  run rl-profile plan --decode-profile "$TMP/bad.json"
  [ "$status" -eq 65 ]
  [[ "$output" == *"a decode point is not [tp, batch, context, seconds]"* ]]
}

@test "plan fitted to a sync run ranks every split and mode and predicts other runs within a few percent" {
  fixture "$TMP/sync" sync 20
  fixture "$TMP/async" async 20
  fixture "$TMP/sync-2" sync 20 2
  run rl-profile plan --from "$TMP/sync" --pool 4 --cores 4 --check "$TMP/async" --check "$TMP/sync-2"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"fitted to $TMP/sync: 1R+1W+1T, sync, 20 steps, 0.680 s/step measured"* ]]
  [[ "$output" == *"ranking: 8 configurations of 4 slots on 4 cores"* ]]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +[1-8]  [12]R\+[12]W\+1T ')" -eq 8 ]
  # The fixture's async run steps at trainer + serial work, 0.32 s (the simulator adds the waits
  # of feeding only between gets); sync with two rollouts halves generation: 0.68 - 0.16 = 0.52 s.
  [[ "$output" =~ async\ +0\.3[2-4][0-9]\ +0\.320 ]]
  [[ "$output" =~ sync\ +0\.5[2-4][0-9]\ +0\.520 ]]
  [[ "${lines[-1]}" =~ ^plan\ error:\ [0-4]\.[0-9]%\ [0-4]\.[0-9]%$ ]]
}

@test "plan --json prints the costs, the fitted run, one line per configuration and the checks" {
  fixture "$TMP/sync" sync 12
  fixture "$TMP/semi" semi-sync 12
  run --separate-stderr rl-profile plan --from "$TMP/sync" --json --modes sync,async-k2 --trainer-ranks 1,2 \
    --pool 5 --check "$TMP/semi"
  [ "$status" -eq 0 ]
  printf '%s\n' "${lines[@]:0:${#lines[@]}-1}" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
kinds = [r["type"] for r in rows]
assert kinds[:2] == ["costs", "fitted"], kinds
plans = [r for r in rows if r["type"] == "plan"]
# ranks 1: rollouts 1..3; ranks 2: rollouts 1..2; two modes each
assert len(plans) == 10, len(plans)
assert plans == sorted(plans, key=lambda r: r["step_s"])
assert {r["ranks"] for r in plans} == {1, 2}
check = [r for r in rows if r["type"] == "check"]
assert len(check) == 1 and check[0]["mode"] == "semi-sync" and check[0]["measured_step_s"] > 0, check
assert abs(rows[0]["train_token_s"] - 0.3 / 2560) < 1e-9, rows[0]
'
  [[ "${lines[-1]}" == "plan error: "* ]]
}

@test "plan with only a decode profile costs the rounds from it" {
  echo '{"decode": [[1, 1, 10, 0.001], [1, 256, 4000, 0.05]], "prefill": [[1, 100, 0.01]], "switch": {}}' \
    > "$TMP/p.json"
  run rl-profile plan --decode-profile "$TMP/p.json" --modes sync --pool 3
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"no --from run"* ]]
  [[ "$output" == *"(rounds: decode profile)"* ]]
  [ "$(printf '%s\n' "$output" | grep -cE '^ +1  1R\+1W\+1T +sync ')" -eq 1 ]
}
