#!/usr/bin/env python3
"""The end of a GRPO demo run (grpo-demo.sh, hf-grpo.sh): the table of steps (mean reward of every
row the step was sent, dropped uniform groups included; held-out accuracy, samples/s) from RUN/sft.json and RUN/events/train-0.jsonl, the verdict line
from RUN/eval-start.json and RUN/eval-final.json (rl-train eval of the SFT start and of the final
version), and tokens/s of generation and training from the events.

Usage: verdict.py RUN
"""
import json, sys
run = sys.argv[1]
sft = json.load(open(f"{run}/sft.json"))
steps = [e for e in map(json.loads, open(f"{run}/events/train-0.jsonl")) if e["event"] == "step"]
print(f"{'step':>5} {'reward':>7} {'heldout':>8} {'samples/s':>10}")
print(f"{'sft':>5} {'':>7} {sft.get('accuracy', 0):>8.3f} {'':>10}")
for e in steps:
    acc = e.get("accuracy")
    acc = "" if acc is None else format(acc, ".3f")
    reward = e.get("population_reward", e["reward"])  # runs from before it: the trained groups' mean
    print(f"{e['step']:>5} {reward:>7.3f} {acc:>8} {e['samples_per_s']:>10.1f}")
start, final = (json.load(open(f"{run}/eval-{w}.json")) for w in ("start", "final"))
# An exported directory has no version of its own: the newest step's is the one it holds.
version = final.get("version") or (steps[-1]["version"] if steps else 0)
print(f"held-out greedy accuracy on {final['problems']} problems: {start['accuracy']:.3f} after SFT -> "
      f"{final['accuracy']:.3f} after {len(steps)} GRPO steps (version {version}): "
      f"{100 * (final['accuracy'] - start['accuracy']):+.1f} points")
def totals(path, event, tokens, seconds):
    try:
        es = [e for e in map(json.loads, open(path)) if e["event"] == event]
    except FileNotFoundError:
        return 0.0
    t, s = sum(e.get(tokens, 0) for e in es), sum(e.get(seconds, 0) for e in es)
    return t / s if s > 0 else 0.0
gen = totals(f"{run}/events/rollout-0.jsonl", "batch", "tokens", "seconds")
trn = totals(f"{run}/events/train-0.jsonl", "step", "tokens", "train_seconds")
if steps:
    wall = steps[-1]["ts"] - steps[0]["ts"] + steps[0]["seconds"]
    print(f"{len(steps)} steps in {wall:.0f} s ({wall / len(steps):.2f} s/step); response tokens/s: "
          f"{gen:.0f} generating (KV cache), {trn:.0f} training")
print(f"checkpoints: {run}/ckpt   events: {run}/events")
