#!/usr/bin/env python3
"""bench/trace_ops.py on a small synthetic Kineto trace: kernels charged to
the operators open at their launch (a sibling that ended before skipped),
backward work to its autograd node, a kernel without a launch record
unattributed, times divided by --steps; a broken trace is an error naming
the file. Run as `trace_ops_test.py BUILD_DIR SOURCE_DIR`."""
import json
import os
import subprocess
import sys
import tempfile


def op(name, ts, dur, tid):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid}


def launch(ts, corr, tid):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts,
            "dur": 2, "tid": tid, "args": {"correlation": corr}}


def kernel(name, ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "tid": 7,
            "args": {"correlation": corr}}


def main():
    source = sys.argv[2] if len(sys.argv) > 2 else os.getcwd()
    script = os.path.join(source, "bench", "trace_ops.py")
    events = [
        op("aten::contiguous", 0, 100, 1), op("aten::clone", 5, 90, 1),
        op("aten::empty", 12, 3, 1), op("aten::copy_", 16, 50, 1),
        launch(20, 1, 1),
        kernel("void at::native::elementwise_kernel<128, 4>(int, F)", 30, 3000, 1),
        op("autograd::engine::evaluate_function: MulBackward0", 200, 100, 2),
        op("MulBackward0", 205, 85, 2), op("aten::mul", 210, 40, 2),
        launch(220, 2, 2),
        kernel("void xlnet::(anonymous namespace)::Scale<float>(Params)", 230, 1000, 2),
        launch(222, 3, 2),
        kernel("void xlnet::(anonymous namespace)::Scale<float>(Params)", 240, 1000, 3),
        kernel("Memcpy HtoD (Pinned -> Device)", 400, 500, 99),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        out = subprocess.run([sys.executable, script, path, "--steps", "2"],
                             capture_output=True, text=True, check=True).stdout
        print(out)
        lines = out.splitlines()
        assert "2.750 ms of device work per step in 4 launches" in lines[0], lines[0]
        rows = [[c.strip() for c in l.split("|")] for l in lines[2:]]
        expected = [
            ["1.500    0.5  forward", "aten::contiguous > aten::clone > aten::copy_",
             "at::native::elementwise_kernel"],
            ["1.000    1.0  MulBackward0", "aten::mul", "xlnet::Scale"],
            ["0.250    0.5  unattributed", "", "Memcpy HtoD"],
        ]
        assert rows == expected, rows
        broken = os.path.join(tmp, "broken.json")
        with open(broken, "w") as f:
            f.write("{")
        bad = subprocess.run([sys.executable, script, broken], capture_output=True,
                             text=True)
        assert bad.returncode == 1 and "broken.json" in bad.stderr, bad.stderr
    print("trace_ops_test: passed")


if __name__ == "__main__":
    main()
