#!/usr/bin/env python3
"""Device time of a profiled step by the operator that launched each kernel.

Reads the Chrome trace that `xlnet-bench --profile_steps N --profile_trace
FILE` writes (LibTorch's Kineto profiler) and charges every GPU kernel,
copy and memset to the operators that were open on the host thread when it
was launched (matched by the launch's correlation id): the autograd node
for backward work ("forward" outside one), then the innermost operators.
So a strided copy shows which `contiguous()` or `reshape` made it, which the
kernel table of `--profile_steps` cannot say.

    python3 bench/trace_ops.py trace.json [--steps 2] [--top 40] [--depth 3]

Python's standard library only; one pass over the trace's events.
"""
import argparse
import bisect
import collections
import json
import re
import sys

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "


def short_name(name):
    """A kernel's or autograd node's name without anonymous namespaces,
    template arguments and parameter lists."""
    name = name.replace("(anonymous namespace)::", "").replace("void ", "")
    name = re.sub(r"^torch::autograd::CppNode<(.*)>$", r"\1", name.strip())
    return re.sub(r"[<(].*", "", name).strip()


class HostOps:
    """The operator events of each host thread as a forest (operators nest),
    for enclosing-operator lookups."""

    def __init__(self, events):
        self.by_thread = collections.defaultdict(list)
        for e in events:
            if e.get("cat") == "cpu_op" and e.get("ph") == "X":
                self.by_thread[e.get("tid")].append(e)
        self.starts, self.parents = {}, {}
        for tid, ops in self.by_thread.items():
            ops.sort(key=lambda o: (o["ts"], -o.get("dur", 0)))
            self.starts[tid] = [o["ts"] for o in ops]
            parents, open_ops = [], []  # open_ops: indices, outermost first
            for i, o in enumerate(ops):
                while open_ops and self._end(ops[open_ops[-1]]) < o["ts"]:
                    open_ops.pop()
                parents.append(open_ops[-1] if open_ops else -1)
                open_ops.append(i)
            self.parents[tid] = parents

    @staticmethod
    def _end(op):
        return op["ts"] + op.get("dur", 0)

    def enclosing(self, tid, ts):
        """Names of the operators open at time ts on thread tid, outermost
        first."""
        ops = self.by_thread.get(tid, [])
        i = bisect.bisect_right(self.starts.get(tid, []), ts) - 1
        while i >= 0 and self._end(ops[i]) < ts:  # ended before: its parent
            i = self.parents[tid][i]
        names = []
        while i >= 0:
            names.append(ops[i]["name"])
            i = self.parents[tid][i]
        return names[::-1]


def attribute(trace, depth):
    """{(stage, operators, kernel): [microseconds, count]} of a trace."""
    events = trace.get("traceEvents", trace if isinstance(trace, list) else [])
    launches = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e
    host = HostOps(events)
    table = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("cat") not in DEVICE_CATEGORIES:
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        stack = host.enclosing(launch["tid"], launch["ts"]) if launch else []
        nodes = [s[len(AUTOGRAD_PREFIX):] for s in stack if s.startswith(AUTOGRAD_PREFIX)]
        # The node runs as an operator of its own name too: not repeated.
        ops = [s for s in stack
               if not s.startswith(AUTOGRAD_PREFIX) and (not nodes or s != nodes[-1])]
        stage = short_name(nodes[-1]) if nodes else ("forward" if launch else "unattributed")
        key = (stage, " > ".join(ops[-depth:]) if depth > 0 else "", short_name(e["name"]))
        table[key][0] += float(e.get("dur", 0))
        table[key][1] += 1
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="Chrome trace of xlnet-bench --profile_trace")
    ap.add_argument("--steps", type=int, default=1,
                    help="profiled steps in the trace (--profile_steps)")
    ap.add_argument("--top", type=int, default=40, help="rows to print")
    ap.add_argument("--depth", type=int, default=3,
                    help="innermost operators to show per row")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.top < 1 or args.depth < 0:
        ap.error("--steps and --top must be >= 1, --depth >= 0")
    try:
        with open(args.trace) as f:
            trace = json.load(f)
    except (OSError, ValueError) as err:
        print(f"trace_ops: {args.trace}: {err}", file=sys.stderr)
        return 1
    table = attribute(trace, args.depth)
    total = sum(v[0] for v in table.values())
    print(f"{args.trace}: {total / 1000 / args.steps:.3f} ms of device work "
          f"per step in {sum(v[1] for v in table.values())} launches")
    print(f"{'ms/step':>9} {'calls':>6}  stage | operators | kernel")
    rows = sorted(table.items(), key=lambda kv: -kv[1][0])[: args.top]
    for (stage, ops, kernel), (us, n) in rows:
        print(f"{us / 1000 / args.steps:9.3f} {n / args.steps:6.1f}  "
              f"{stage} | {ops} | {kernel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
