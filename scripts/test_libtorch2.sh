#!/usr/bin/env bash
# Builds the tree against LibTorch 2.x, the version GPU users build against,
# and runs the test suite on the CPU: code guarded by TORCH_VERSION_MAJOR >= 2
# (attention sdpa, the fused AdamW and its device-side skip, the deferred step
# reads' CUDA event, NCCL's device binding) then compiles here, and what of
# it runs on the CPU runs, before any GPU window.
#
# usage: scripts/test_libtorch2.sh [--build-only] [CTEST_ARGS...]
#
# LibTorch comes from PyPI's torch wheel (its LibTorch with CMake config; the
# wheel is the CUDA build, 0.5 GB, and no CPU-only wheel is on PyPI), unpacked
# under XLNET_TORCH2_DIR (default build/torch2; kept, so a second run
# downloads nothing). Loading libtorch_cuda.so needs the CUDA runtime
# libraries even on a CPU: those of the CUDA toolkit (CUDA_HOME, default
# /usr/local/cuda) and three the toolkit lacks (cuSPARSELt, NVSHMEM,
# cuFile), taken from their wheels at the versions the torch wheel pins.
# The build (XLNET_BUILD_DIR, default build-torch2) has our CUDA kernels
# (sm_90 only, to keep the build short), so nvcc compiles them too.
#
# Settings: XLNET_TORCH2_VERSION (default 2.11.0, the GPU image's),
# XLNET_JOBS (ninja -j), XLNET_CHECK_PYTHON (the venv of the transformers
# check; default build/pyenv/bin/python from scripts/setup_python.sh),
# XLNET_CMAKE_ARGS (more cmake options, space-separated, e.g.
# -DXLNET_CUDA_PENDING=ON for the kernel changes not yet run on a GPU).
#
# Tests that need Gloo skip (pip's LibTorch ships no Gloo headers). A cold
# build takes about 40 minutes on 2 cores and the suite about 10; CI does
# not run this script (it would double CI's time).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${XLNET_TORCH2_VERSION:-2.11.0}
DIR=${XLNET_TORCH2_DIR:-build/torch2}
BUILD=${XLNET_BUILD_DIR:-build-torch2}
CUDA=${CUDA_HOME:-/usr/local/cuda}
BUILD_ONLY=0
if [[ "${1:-}" == "--build-only" ]]; then
  BUILD_ONLY=1
  shift
fi

fail() {
  echo "test_libtorch2: $*" >&2
  exit 1
}

[[ -x "$CUDA/bin/nvcc" ]] ||
  fail "no CUDA toolkit at $CUDA (set CUDA_HOME): the wheel's CMake config and its libraries need one"
mkdir -p "$DIR/wheels" "$DIR/nv"
DIR=$(cd "$DIR" && pwd)

# fetch PIN: downloads PIN's wheel into $DIR/wheels (once); prints its path.
fetch() {
  local stem version
  stem=$(echo "${1%%==*}" | tr - _)
  version=${1#*==}
  version=${version%.\*}
  if ! ls "$DIR"/wheels/"$stem-$version"*.whl > /dev/null 2>&1; then
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: "$1" -d "$DIR/wheels" > /dev/null ||
      fail "pip could not download $1"
  fi
  ls "$DIR"/wheels/"$stem-$version"*.whl | head -1
}

# wheel_pins WHEEL REGEX [EXTRA]: WHEEL's Requires-Dist pins whose package
# name matches REGEX (only those of EXTRA when given), one per line.
wheel_pins() {
  python3 - "$@" << 'PY'
import re, sys, zipfile
wheel, pattern = sys.argv[1], re.compile(sys.argv[2])
extra = sys.argv[3] if len(sys.argv) > 3 else None
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        requirement, _, marker = line[len("Requires-Dist: "):].partition(";")
        if extra and f"extra == '{extra}'" not in marker:
            continue
        pin = re.sub(r"\[.*\]", "", requirement.strip())
        if pattern.fullmatch(pin.split("==")[0]):
            print(pin)
PY
}

# unpack WHEEL DEST [PREFIX]: WHEEL's files (those under PREFIX) into DEST.
unpack() {
  python3 - "$@" << 'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    prefix = sys.argv[3] if len(sys.argv) > 3 else ""
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(prefix)])
PY
}

# The torch wheel (kept: its pins name the other wheels), unpacked once.
ls "$DIR"/wheels/torch-"$VERSION"-*.whl > /dev/null 2>&1 ||
  echo "test_libtorch2: downloading torch==$VERSION (about 0.5 GB)"
torch_wheel=$(fetch "torch==$VERSION")
if [[ ! -f "$DIR/torch/.unpacked" ]]; then
  echo "test_libtorch2: unpacking $torch_wheel"
  rm -rf "$DIR/torch"
  unpack "$torch_wheel" "$DIR" torch/
  touch "$DIR/torch/.unpacked"
fi

# The runtime libraries the toolkit lacks, at the versions the wheel pins
# (cuFile through its cuda-toolkit metapackage's "cufile" extra).
pins=$(wheel_pins "$torch_wheel" 'nvidia-(cusparselt|nvshmem)-cu[0-9]+')
toolkit=$(wheel_pins "$torch_wheel" 'cuda-toolkit' | head -1)
[[ -n "$toolkit" && $(echo "$pins" | wc -l) == 2 ]] ||
  fail "$torch_wheel: no cuSPARSELt, NVSHMEM or cuda-toolkit pin found"
pins+=$'\n'$(wheel_pins "$(fetch "$toolkit")" 'nvidia-cufile' cufile)
while IFS= read -r pin; do
  [[ -f "$DIR/nv/.$pin" ]] && continue
  echo "test_libtorch2: fetching $pin"
  unpack "$(fetch "$pin")" "$DIR/nv"
  touch "$DIR/nv/.$pin"
done <<< "$pins"

libs=("$DIR/torch/lib")
while IFS= read -r lib; do libs+=("$lib"); done < <(
  find "$DIR/nv/nvidia" -maxdepth 3 -type d -name lib | sort)
libs+=("$CUDA/lib64")
LIBS=$(
  IFS=:
  echo "${libs[*]}"
)
missing=$(LD_LIBRARY_PATH=$LIBS ldd "$DIR/torch/lib/libtorch_cuda.so" |
  grep "not found" || true)
[[ -z "$missing" ]] ||
  fail "libtorch_cuda.so needs libraries found nowhere:"$'\n'"$missing"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$DIR/torch/share/cmake" \
  -DXLNET_WITH_CUDA=ON -DXLNET_CUDA_ATTENTION=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DXLNET_NCCL_ROOT="$CUDA" \
  -DXLNET_CHECK_PYTHON="${XLNET_CHECK_PYTHON:-$PWD/build/pyenv/bin/python}" \
  "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$LIBS" \
  "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$LIBS" ${XLNET_CMAKE_ARGS:-} > /dev/null
ninja -C "$BUILD" ${XLNET_JOBS:+-j "$XLNET_JOBS"}
((BUILD_ONLY)) && exit 0
# The suite on the CPU, with the wheel's libraries found.
LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  ctest --test-dir "$BUILD" --output-on-failure "$@"
