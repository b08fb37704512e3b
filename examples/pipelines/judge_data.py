#!/usr/bin/env python3
"""Judged examples for yatt-judge.sh, and the judge's agreement with the rule verifier.

  judge_data.py examples TEMPLATE SCORED OUT [--near-miss]
      SCORED: JSON lines from `rl-rollout generate | rl-reward score --verifier addition`
      (prompt, answer, response, reward). Writes OUT: one judged example per line,
      {"prompt": <TEMPLATE rendered>, "response": "1"|"0", "answer": "1"|"0"}: the judging prompt
      the judge is trained on, rendered as rl-reward --judge-template TEMPLATE renders it
      ({prompt}, {response}, {answer}; no other braces), and the rule's verdict. With --near-miss, each problem also gets its right answer (verdict 1) and the right
      answer with one digit changed (verdict 0), so the judge sees both kinds even when the
      policy's samples are mostly wrong.
  judge_data.py agreement JUDGED
      JUDGED: the held-out pairs scored by the judge (`rl-reward score --judge`, field reward) with
      the rule's verdict in field rule. Prints `judge agreement X.XXX` (share of pairs where the
      judge's verdict equals the rule's), then precision and recall of "correct" on stderr.
"""
import json
import random
import sys


def judged(template, prompt, response, answer, verdict):
    v = "1" if verdict else "0"
    text = template.replace("{prompt}", prompt).replace("{response}", response).replace("{answer}", answer)
    return {"prompt": text, "response": v, "answer": v}


def examples(template, scored, out, near_miss):
    rng = random.Random(0)
    seen = set()
    rows = []
    for line in open(scored):
        r = json.loads(line)
        rows.append(judged(template, r["prompt"], r["response"], r["answer"], r["reward"] >= 0.5))
        if near_miss and r["prompt"] not in seen:
            seen.add(r["prompt"])
            answer = r["answer"]
            i = rng.randrange(len(answer))
            wrong = answer[:i] + str((int(answer[i]) + rng.randrange(1, 10)) % 10) + answer[i + 1:]
            rows.append(judged(template, r["prompt"], answer, answer, True))
            rows.append(judged(template, r["prompt"], wrong, answer, False))
    rng.shuffle(rows)
    with open(out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    ones = sum(row["answer"] == "1" for row in rows)
    print(f"judge_data: {len(rows)} judged examples in {out}, {ones} judged correct", file=sys.stderr)


def agreement(path):
    n = agree = tp = fp = fn = 0
    for line in open(path):
        r = json.loads(line)
        judge, rule = r["reward"] >= 0.5, r["rule"] >= 0.5
        n += 1
        agree += judge == rule
        tp += judge and rule
        fp += judge and not rule
        fn += rule and not judge
    if n == 0:
        sys.exit("judge_data: no judged pairs in " + path)
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    print(f"held-out pairs {n}: {tp + fn} correct by the rule; judge precision {precision:.3f}, "
          f"recall {recall:.3f} of 'correct'", file=sys.stderr)
    print(f"judge agreement {agree / n:.3f}")


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "examples":
        examples(sys.argv[2], sys.argv[3], sys.argv[4], "--near-miss" in sys.argv[5:])
    elif len(sys.argv) == 3 and sys.argv[1] == "agreement":
        agreement(sys.argv[2])
    else:
        sys.exit(__doc__)
