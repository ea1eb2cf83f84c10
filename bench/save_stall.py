#!/usr/bin/env python3
"""What checkpoint saves cost a run's steps, read from its log.

Reads the progress lines of an `xlnet-pretrain` run logged with
`train.log_steps=1` and `XLNET_LOG_LEVEL=info` (each "step N/M" line carries
its time) and the "saved checkpoint" lines. A step's wall time is the time
between its line and the previous one, so the time of a save on the training
thread falls into the step after it. Prints the median step of the steps
away from saves ("normal"), and for each save the longest of the steps it
overlapped (the step after the save, and in the background until its commit
was logged), as a ratio to normal.

    python3 bench/save_stall.py RUN.log [--skip 3] [--json OUT.json]
"""
import argparse
import datetime
import json
import re
import statistics
import sys

STEP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*\] step (\d+)/\d+ ")
SAVED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*\] saved checkpoint "
                   r"\S*step_(\d+) in (the background in )?([0-9.]+) s")


def when(text):
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--skip", type=int, default=3,
                    help="first steps left out of 'normal' (warm-up)")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    steps, saves = {}, []
    for line in open(a.log, errors="replace"):
        m = STEP.match(line)
        if m:
            steps[int(m.group(2))] = when(m.group(1))
            continue
        m = SAVED.match(line)
        if m:
            saves.append({"step": int(m.group(2)), "logged": when(m.group(1)),
                          "background": bool(m.group(3)),
                          "seconds": float(m.group(4))})
    if len(steps) < a.skip + 3:
        sys.exit(f"{a.log}: only {len(steps)} step lines (log_steps=1 and "
                 "XLNET_LOG_LEVEL=info?)")
    wall = {n: steps[n] - steps[n - 1] for n in steps if n - 1 in steps}
    # Steps a save overlapped: from the one after the save step to the one
    # in which its commit was logged.
    during = {}
    for s in saves:
        last = s["step"] + 1
        while last + 1 in steps and steps[last] < s["logged"]:
            last += 1
        during[s["step"]] = [n for n in range(s["step"] + 1, last + 1)
                             if n in wall]
    busy = {n for ns in during.values() for n in ns}
    normal = statistics.median(
        w for n, w in wall.items() if n > a.skip and n not in busy)
    out = {"log": a.log, "normal_step_seconds": normal, "saves": []}
    print(f"{a.log}: normal step {normal * 1e3:.1f} ms (median of "
          f"{sum(1 for n in wall if n > a.skip and n not in busy)} steps)")
    for s in saves:
        ns = during.get(s["step"], [])
        if not ns:
            continue
        worst = max(wall[n] for n in ns)
        row = dict(s, steps=ns, longest_step_seconds=worst,
                   ratio=worst / normal)
        out["saves"].append(row)
        print(f"  save of step {s['step']}: "
              f"{'background' if s['background'] else 'foreground'} "
              f"{s['seconds']:.2f} s; overlapped steps {ns[0]}-{ns[-1]}, "
              f"the longest {worst * 1e3:.1f} ms = {worst / normal:.2f}x normal")
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
