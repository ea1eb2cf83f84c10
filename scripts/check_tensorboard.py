#!/usr/bin/env python3
"""Reads a run's RUN/tb with TensorBoard's own reader and checks its scalars.

  check_tensorboard.py RUN [--require train/loss,train/learning_rate]
                       [--rtol 1e-6]

TensorBoard's EventAccumulator (the loader behind `tensorboard --logdir`)
loads RUN/tb. Checks: every tag in --require is listed as a scalar, and
every scalar has, step by step, the values of RUN/metrics.jsonl (tag
train/K is the key K of a training line, eval/K the key eval_K of an
evaluation line; the event files store float32, so within --rtol relative;
a step logged in one and not the other, or a tag with no key, is an error).
Exits 1 when a check fails. Needs tensorboard.
"""
import argparse
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
  ap.add_argument("run")
  ap.add_argument("--require", default="train/loss,train/learning_rate",
                  help="comma-separated scalar tags that must be present")
  ap.add_argument("--rtol", type=float, default=1e-6,
                  help="relative tolerance (float32 events vs JSON doubles)")
  args = ap.parse_args()

  tb_dir = os.path.join(args.run, "tb")
  acc = event_accumulator.EventAccumulator(
      tb_dir, size_guidance={event_accumulator.SCALARS: 0})
  acc.Reload()
  tags = sorted(acc.Tags()["scalars"])
  print(f"{tb_dir}: scalars {tags}")
  missing = [t for t in args.require.split(",") if t and t not in tags]
  if missing:
    print(f"{tb_dir}: TensorBoard lists no scalar {missing}")
    return 1

  # metrics.jsonl: step -> {key: value}, numbers only.
  logged = {}
  with open(os.path.join(args.run, "metrics.jsonl")) as f:
    for line in f:
      if not line.strip():
        continue
      row = json.loads(line)
      logged.setdefault(row["step"], {}).update(
          {k: v for k, v in row.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)})
  keys = set().union(*logged.values()) if logged else set()
  compared = 0
  errors = []
  for tag in tags:
    group, _, name = tag.partition("/")
    key = {"train": name, "eval": "eval_" + name}.get(group, tag)
    if key not in keys:
      errors.append(f"{tag}: no key {key!r} in metrics.jsonl")
      continue
    events = {e.step: e.value for e in acc.Scalars(tag)}
    want = {s: row[key] for s, row in logged.items() if key in row}
    if set(events) != set(want):
      errors.append(f"{tag}: steps {sorted(events)} in {tb_dir}, "
                    f"{key} at steps {sorted(want)} in metrics.jsonl")
      continue
    for step, value in sorted(events.items()):
      if not math.isclose(value, want[step], rel_tol=args.rtol,
                          abs_tol=1e-30):
        errors.append(f"{tag} at step {step}: {value} in {tb_dir}, "
                      f"{key} {want[step]} in metrics.jsonl")
      compared += 1
  for e in errors:
    print(e)
  print(f"{compared} values of {len(tags)} tags compared with metrics.jsonl: "
        f"{'mismatch' if errors else 'equal'} (rtol {args.rtol})")
  return 1 if errors else 0


if __name__ == "__main__":
  sys.exit(main())
