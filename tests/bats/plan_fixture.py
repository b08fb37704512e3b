#!/usr/bin/env python3
"""Writes the event logs of a synthetic run for rl-profile plan's bats tests (rl-profile-plan.bats).

Usage: plan_fixture.py RUN_DIR MODE STEPS [ROLLOUTS]
A run of MODE (sync, semi-sync, async) whose roles cost, per batch of 256 rows of 5-token
responses: generation 0.02 s a round (8 rounds: 0.16 s), scoring 0.01 s, training 0.3 s a step
(0.3 / 2560 s a token), serial trainer work 0.02 s, checkpoint write 0.03 s, weight sync 0.01 s.
In sync mode steps are the sum: 2 batches x 0.16 + 0.01 + 0.3 + 0.02 + 0.03 = 0.68 s apart.
"""
import json
import os
import sys

run, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
rollouts = int(sys.argv[4]) if len(sys.argv) > 4 else 1
k, f = {"sync": (0, 1.0), "semi-sync": (1, 0.5), "async": (1, 0.0)}[mode]
os.makedirs(f"{run}/events", exist_ok=True)
lanes = {"train-0": [], "reward-0": []}
for r in range(rollouts):
    lanes[f"rollout-{r}"] = []
gen, score, train, post, write, sync = 0.16, 0.01, 0.3, 0.02, 0.03, 0.01
period = 2 * gen / rollouts + score + train + post + write if mode == "sync" else train + post
lanes["train-0"].append({"ts": 0.0, "event": "start", "staleness": k, "start_fraction": f,
                         "prompts_per_step": 64, "group_size": 8, "micro_batch": 128})
for i in range(steps):
    t = 1 + period * (i + 1)
    for b in range(2):
        lane = f"rollout-{b % rollouts}"
        lanes[lane].append({"ts": t - 0.5 + 0.01 * b, "event": "batch", "rows": 256, "tokens": 1280, "rounds": 8,
                            "seconds": gen, "prompt_tokens": 2048, "lengths": [3, 4, 5, 6, 8]})
        lanes["reward-0"].append({"ts": t - 0.4 + 0.01 * b, "event": "batch", "rows": 256, "seconds": score / 2})
    lanes["train-0"].append({"ts": t, "event": "step", "tokens": 2560, "train_seconds": train, "samples": 512,
                             "uniform_rows": 0, "eval_seconds": 0.0})
    lanes["train-0"].append({"ts": t + post, "event": "snapshot", "version": i + 1, "seconds": post})
    lanes["train-0"].append({"ts": t + post + write, "event": "checkpoint", "version": i + 1})
    for r in range(rollouts):
        lanes[f"rollout-{r}"].append({"ts": t + post + sync, "event": "weights", "version": i + 1})
for lane, events in lanes.items():
    with open(f"{run}/events/{lane}.jsonl", "w") as out:
        for e in sorted(events, key=lambda e: e["ts"]):
            out.write(json.dumps(e) + "\n")
