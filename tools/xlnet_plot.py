#!/usr/bin/env python3
"""xlnet-plot: a run's loss curves (training loss, and eval_loss when logged)
against step, drawn to a PNG with matplotlib (Debian: python3-matplotlib).

  build/bin/xlnet-plot RUN/metrics.jsonl --out loss.png
  build/bin/xlnet-plot RUN --out loss.png        # RUN/metrics.jsonl

Like the other xlnet-* tools: errors are one line on stderr naming the file
and line, exit code 2 for bad input or usage and 1 for runtime failures.
"""

import argparse
import json
import math
import os
import stat
import sys
import tempfile

PROGRAM = "xlnet-plot"
TRAIN = ("training loss", "#1f77b4")
EVAL = ("eval loss", "#e6550d")
MARKERS_UP_TO = 60  # points per curve drawn with markers
MIN_SIZE = (320, 200)
MAX_SIDE = 8000


class BadInput(Exception):
    """Bad input or usage: exit code 2."""


def file_kind(mode):
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def read_regular_file(path):
    """The bytes of `path`; like common/file_util.h's ReadFile, refuses
    FIFOs and devices (which would block or never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise BadInput(f"{path}: cannot open: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BadInput(f"{path}: not a regular file ({file_kind(mode)})")
        return f.read()


def reject_constant(name):
    # NaN and Infinity are not JSON; the trainer logs them as null.
    raise ValueError(f"'{name}' is not JSON")


def number_at(record, key, where):
    """A metrics value: a number, or NaN for null."""
    value = record[key]
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{where}: '{key}' is not a number: "
                       f"{json.dumps(value, ensure_ascii=False)}")
    return float(value)


def read_loss_curves(path):
    """[(name, colour, [(step, value)])] from metrics.jsonl: "loss" of the
    training lines and "eval_loss" of the evaluation lines against "step".
    Blank lines are skipped; any other bad line is an error naming it."""
    lines = read_regular_file(path).split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the end of the last line
    train, evals = [], []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip(b" \t\r"):
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(raw.decode("utf-8"),
                                parse_constant=reject_constant)
        except (UnicodeDecodeError, ValueError) as e:
            raise BadInput(f"{where}: not a JSON object ({e})") from None
        if not isinstance(record, dict):
            raise BadInput(f"{where}: not a JSON object")
        if "loss" not in record and "eval_loss" not in record:
            continue
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, (int, float)):
            raise BadInput(f"{where}: a loss without a numeric 'step'")
        if "loss" in record:
            train.append((float(step), number_at(record, "loss", where)))
        if "eval_loss" in record:
            evals.append((float(step), number_at(record, "eval_loss", where)))
    if not train and not evals:
        raise BadInput(f"{path}: no line has 'loss' or 'eval_loss' "
                       f"({len(lines)} lines); is this a run's metrics.jsonl?")
    curves = [(*TRAIN, train), (*EVAL, evals)]
    curves = [c for c in curves if c[2]]
    if not any(math.isfinite(x) and math.isfinite(y)
               for _, _, points in curves for x, y in points):
        raise BadInput(f"{path}: every logged loss is NaN or infinite")
    return curves


def draw(curves, out, title, width, height):
    """Writes the PNG atomically (temporary file beside `out`, renamed)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    dpi = 100
    # Agg truncates figsize * dpi to whole pixels; a quarter pixel more keeps
    # 2.03 * 100 = 202.999... from losing a row.
    fig = Figure(figsize=((width + 0.25) / dpi, (height + 0.25) / dpi),
                 dpi=dpi)
    ax = fig.add_subplot()
    for name, colour, points in curves:
        ax.plot([x for x, _ in points], [y for _, y in points], color=colour,
                linewidth=2, label=name,
                marker="o" if len(points) <= MARKERS_UP_TO else None,
                markersize=4)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(True, color="#e4e4e4")
    ax.legend(loc="upper right")
    if title:
        ax.set_title(title)
    fig.tight_layout()

    directory = os.path.dirname(out) or "."
    try:
        fd, tmp = tempfile.mkstemp(dir=directory,
                                   prefix=f".{os.path.basename(out)}.tmp-")
    except OSError as e:
        raise RuntimeError(f"{out}: cannot write: {e.strerror}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o644 & ~umask)  # mkstemp makes it 0600
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=dpi)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)  # the rename survives a crash
    finally:
        os.close(dir_fd)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(f"{message}; see {PROGRAM} --help")


def main(argv):
    parser = Parser(prog=PROGRAM, allow_abbrev=False,
                    description="Loss curves (training, eval) of a run's "
                    "metrics.jsonl, drawn to a PNG.")
    parser.add_argument("metrics", metavar="RUN/metrics.jsonl|RUN",
                        help="a run's metrics file, or its directory")
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--title", default="",
                        help="title (default: the metrics path)")
    parser.add_argument("--width", type=int, default=900,
                        help="image width in pixels (default 900)")
    parser.add_argument("--height", type=int, default=560,
                        help="image height in pixels (default 560)")
    args = parser.parse_args(argv)
    metrics = args.metrics
    if os.path.isdir(metrics):
        metrics = os.path.join(metrics, "metrics.jsonl")
    if args.width > MAX_SIDE or args.height > MAX_SIDE:
        raise BadInput(f"--width and --height must be <= {MAX_SIDE}")
    if args.width < MIN_SIZE[0] or args.height < MIN_SIZE[1]:
        raise BadInput(f"image size {args.width}x{args.height} is too small "
                       f"(at least {MIN_SIZE[0]}x{MIN_SIZE[1]})")
    curves = read_loss_curves(metrics)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise RuntimeError(f"matplotlib is missing for {sys.executable}; "
                           "install Debian's python3-matplotlib") from None
    draw(curves, args.out, args.title or metrics, args.width, args.height)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BadInput as e:
        print(f"{PROGRAM}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # one line, like the C++ tools
        detail = f"{e.filename}: {e.strerror}" if isinstance(
            e, OSError) and e.filename else str(e)
        print(f"{PROGRAM}: error: {detail}", file=sys.stderr)
        sys.exit(1)
