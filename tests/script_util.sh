# What the script tests (tests/*/*_test.sh) share; source it after setting
# NAME (the test's name, for messages).
#
#   cannot_run MESSAGE...   skip (exit 77), or fail where CI is set
#   fail MESSAGE...         fail (exit 1)
#   print_tails N FILE...   the last N lines of each non-empty FILE, on stderr
#   compare_weights TOL REFERENCE FILE...
#       every tensor of each safetensors FILE against REFERENCE's: the same
#       names, dtypes and shapes, float32 values within TOL (0: bit for bit;
#       other dtypes always bit for bit); prints the largest difference per
#       file and returns non-zero when one is beyond TOL. The safetensors
#       layout is read with Python's standard library alone.

cannot_run() {
  echo "$NAME: $*" >&2
  if [[ -n "${CI:-}" ]]; then
    echo "$NAME: FAILED: CI is set, so this is an error, not a skip" >&2
    exit 1
  fi
  echo "$NAME: SKIPPED" >&2
  exit 77
}

fail() {
  echo "$NAME: FAILED: $*" >&2
  exit 1
}

print_tails() {
  local lines=$1 f
  shift
  for f in "$@"; do
    [[ -s "$f" ]] || continue
    echo "----- $f (last $lines lines)" >&2
    tail -n "$lines" "$f" >&2
  done
}

compare_weights() {
  python3 - "$@" <<'PYEOF'
import array, json, struct, sys

def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}

tolerance = float(sys.argv[1])
reference = tensors(sys.argv[2])
ok = True
for path in sys.argv[3:]:
    other = tensors(path)
    if reference.keys() != other.keys():
        sys.exit(f"{path}: tensor names differ: {sorted(reference.keys() ^ other.keys())}")
    worst, differ = 0.0, 0
    for name in sorted(reference):
        (dtype, shape, a), (dtype2, shape2, b) = reference[name], other[name]
        if (dtype, shape) != (dtype2, shape2):
            sys.exit(f"{path}: {name}: {dtype}{shape} vs {dtype2}{shape2}")
        if a == b:
            continue
        differ += 1
        if dtype != "F32":
            sys.exit(f"{path}: {name}: {dtype} values differ")
        x, y = array.array("f", a), array.array("f", b)
        worst = max([worst] + [abs(p - q) for p, q in zip(x, y)])
    print(f"{path}: {len(reference)} tensors, {differ} differ, max |diff| {worst:g}")
    ok = ok and (differ == 0 if tolerance == 0 else worst <= tolerance)
sys.exit(0 if ok else 1)
PYEOF
}
