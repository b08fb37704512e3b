#!/usr/bin/env bats
# rl-profile colocation (lib/rl/reward/colocation.h): a judge beside the sampler on its own core
# against generate-then-judge on both cores, with dynamic sampling. A file of its own beside
# rl-profile.bats: the measurement lives in lib/rl/reward, with the judge it places.

load helper

setup() {
  setup_sealed
  mkdir -p "$TMP/judge"
  cp "$RL_MODEL"/config.json "$RL_MODEL"/tokenizer.json "$RL_MODEL"/tokenizer_config.json "$TMP/judge/"
  rl-rollout random-model --out "$TMP/judge/model.safetensors" --seed 3 2>/dev/null
  rl-rollout random-model --out "$TMP/policy.safetensors" --seed 4 2>/dev/null
  rl-reward make-data --count 64 > "$TMP/prompts.jsonl"
  # A judge whose verdict is its probability: no two responses alike, so no group is rejected.
  COLOC=(colocation --weights "$TMP/policy.safetensors" --prompts "$TMP/prompts.jsonl" --judge "$TMP/judge"
         --judge-template '{prompt}{response}=' --judge-verdict 1 --judge-threshold 0 --max-new-tokens 4
         --group-size 4 --prompts-per-step 4 --micro-groups 2)
}
teardown() { teardown_sealed; }

@test "colocation times both placements step by step and prints the ratio last" {
  [ "$(nproc)" -ge 2 ] || skip "needs two cores"
  run rl-profile "${COLOC[@]}" --steps 2 --log-level warn
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count_lines '^full ')" -eq 2 ]
  [ "$(count_lines '^partial ')" -eq 2 ]
  [[ "${lines[-2]}" == "dynamic sampling rejected 0.0% of groups (full), 0.0% (partial)" ]]
  [[ "${lines[-1]}" =~ ^partial/full\ colocation\ rollout\ time\ [0-9]+\.[0-9]{2}$ ]]
}

@test "colocation --json prints one object per step and a summary whose ratio is partial_s / full_s" {
  [ "$(nproc)" -ge 2 ] || skip "needs two cores"
  run rl-profile "${COLOC[@]}" --steps 1 --json --log-level warn
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  python3 - "$output" <<'PY'
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
steps, summary = rows[:2], rows[2]
assert sorted(s["mode"] for s in steps) == ["full", "partial"]
assert all(s["groups"] == 4 and s["rejected"] == 0 and s["seconds"] > 0 for s in steps), steps
full = [s["seconds"] for s in steps if s["mode"] == "full"][0]
partial = [s["seconds"] for s in steps if s["mode"] == "partial"][0]
assert abs(summary["ratio"] - partial / full) < 1e-9, summary
PY
}

@test "colocation exits 64 without --judge, with one core or a core it may not use" {
  run rl-profile colocation --prompts "$TMP/prompts.jsonl"
  [ "$status" -eq 64 ]
  [ "$output" = "rl-profile: colocation needs --judge DIR" ]
  run rl-profile "${COLOC[@]}" --cores 0
  [ "$status" -eq 64 ]
  [ "${lines[-1]}" = "rl-profile: --cores wants two cores, SAMPLER,JUDGE" ]
  run rl-profile "${COLOC[@]}" --cores 0,4000
  [ "$status" -eq 64 ]
  [ "${lines[-1]}" = "rl-profile: --cores: this process may not use core 4000" ]
}

@test "colocation exits 78 for a judge directory without weights" {
  rm "$TMP/judge/model.safetensors"
  run rl-profile "${COLOC[@]}"
  [ "$status" -eq 78 ]
  [ "${lines[-1]}" = "rl-profile: --judge $TMP/judge: no model.safetensors: a judge needs trained weights" ]
}

@test "colocation --reject-by addition rejects by the rule: a random policy's groups are all wrong" {
  [ "$(nproc)" -ge 2 ] || skip "needs two cores"
  run rl-profile "${COLOC[@]}" --steps 1 --reject-by addition --json
  [ "$status" -eq 0 ]
  [[ "$output" == *"steps ended at the cap of 40 groups drawn"* ]]
  [ "$(printf '%s\n' "$output" | grep -c '"groups":40,"rejected":40')" -eq 2 ]
}
