#!/usr/bin/env bash
# Builds xlnet.cpp for GPUs against the CUDA LibTorch of an existing PyTorch
# install (pip or conda; or a LibTorch directory), on Debian or Ubuntu, then
# runs scripts/gpu_check.sh (tests on the GPU, short trainings, export).
#
#   scripts/setup_cuda.sh                     # the torch that python3 imports
#   scripts/setup_cuda.sh --python ~/venv/bin/python --no-check
#   scripts/setup_cuda.sh --torch /opt/libtorch --nccl /opt/nccl
#   scripts/setup_cuda.sh --dry-run           # show what it would do
#
# What it does, in order (each step says what is wrong and how to fix it):
#  1. installs the build dependencies that are missing from the
#     distribution's packages (apt-get; as root, else it prints the command),
#     unless --no-apt or --deps-prefix (dependencies unpacked elsewhere);
#  2. finds LibTorch: torch.utils.cmake_prefix_path of --python's torch, or
#     --torch; refuses a CPU-only torch and one built with the pre-C++11 ABI
#     (torch._C._GLIBCXX_USE_CXX11_ABI false: pip wheels before 2.7), whose
#     std::string cannot link with the distribution's absl, yaml-cpp,
#     SentencePiece;
#  3. checks for the CUDA toolkit (nvcc) that LibTorch's CMake files need;
#  4. finds NCCL's headers: --nccl, else the nvidia/nccl folder of the pip
#     wheels (import nvidia.nccl), else LibTorch's own include directory;
#  5. configures (CMake, Ninja, Release, XLNET_WITH_CUDA=ON) and builds
#     into --build-dir (default build-cuda), printing the time it took;
#  6. unless --no-check, runs scripts/gpu_check.sh on that build.
# Extra CMake arguments go in XLNET_CMAKE_ARGS.
#
# Gloo (CPU data parallel, and several ranks sharing one GPU) needs gloo's
# headers, which pip wheels do not ship; such builds run NCCL only.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
  cat <<'EOF'

Options:
  --python PY        Python whose torch to build against (default: python3)
  --torch DIR        a LibTorch directory (with share/cmake/Torch) instead
  --nccl DIR         NCCL prefix with include/nccl.h and lib/libnccl.so*
  --build-dir DIR    build directory (default: build-cuda)
  --deps-prefix P    ';'-separated prefixes where absl, ICU, SentencePiece,
                     yaml-cpp, nlohmann-json, GoogleTest are unpacked (e.g.
                     Debian packages extracted with dpkg -x); skips apt
  --no-apt           do not install packages; stop if any is missing
  --no-check         build only; do not run scripts/gpu_check.sh
  --dry-run          print the plan and what would fail; change nothing
  -h, --help         this text
EOF
}

PY=python3
TORCH_DIR=
NCCL_DIR=
BUILD=build-cuda
DEPS_PREFIX=${XLNET_EXTRA_PREFIX:-}
USE_APT=1
RUN_CHECK=1
DRY_RUN=0
while (($# > 0)); do
  case "$1" in
    --python) PY=${2:?--python needs a value}; shift 2 ;;
    --torch) TORCH_DIR=${2:?--torch needs a value}; shift 2 ;;
    --nccl) NCCL_DIR=${2:?--nccl needs a value}; shift 2 ;;
    --build-dir) BUILD=${2:?--build-dir needs a value}; shift 2 ;;
    --deps-prefix) DEPS_PREFIX=${2:?--deps-prefix needs a value}; shift 2 ;;
    --no-apt) USE_APT=0; shift ;;
    --no-check) RUN_CHECK=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "setup_cuda: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

say() { echo "setup_cuda: $*"; }
# A problem stops the script, except in a dry run, which lists them all.
problems=0
fail() {
  echo "setup_cuda: error: $*" >&2
  if ((DRY_RUN)); then problems=$((problems + 1)); else exit 1; fi
}
run() {
  echo "+ $*"
  if ((!DRY_RUN)); then "$@"; fi
}

# 1. Distribution packages (the names are the same on Debian 12 and Ubuntu
# 22.04/24.04; only Debian 12's versions are tested).
PACKAGES=(cmake ninja-build g++ pkg-config libsentencepiece-dev libicu-dev
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libgtest-dev zlib1g-dev)
if [[ -n "$DEPS_PREFIX" ]]; then
  say "dependencies from --deps-prefix $DEPS_PREFIX (no apt)"
elif ! command -v dpkg-query >/dev/null; then
  fail "no dpkg: install ${PACKAGES[*]} (or their equivalents) yourself, or" \
    "unpack them and pass --deps-prefix"
else
  missing=()
  for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
      grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    say "distribution packages present"
  else
    cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
    if ((!USE_APT)); then
      fail "missing packages: ${missing[*]} (--no-apt); install them: $cmd"
    elif [[ $(id -u) -ne 0 ]]; then
      fail "missing packages: ${missing[*]}; run as root: sudo sh -c '$cmd'"
    else
      say "installing ${missing[*]}"
      run apt-get update -qq
      DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq \
        --no-install-recommends "${missing[@]}"
    fi
  fi
fi

# 2. LibTorch.
TORCH_PREFIX=
if [[ -n "$TORCH_DIR" ]]; then
  config=$TORCH_DIR/share/cmake/Torch/TorchConfig.cmake
  if [[ ! -f "$config" ]]; then
    fail "--torch $TORCH_DIR has no share/cmake/Torch/TorchConfig.cmake"
  else
    TORCH_PREFIX=$TORCH_DIR
    ls "$TORCH_DIR"/lib/libtorch_cuda.so >/dev/null 2>&1 ||
      fail "$TORCH_DIR has no lib/libtorch_cuda.so: a CPU-only LibTorch"
    if grep -q "_GLIBCXX_USE_CXX11_ABI=0" "$config"; then
      fail "$TORCH_DIR uses the pre-C++11 ABI; use a cxx11-abi LibTorch"
    fi
    say "LibTorch $TORCH_DIR"
  fi
else
  if ! command -v "$PY" >/dev/null; then
    fail "no Python '$PY' (pass --python or --torch)"
  elif ! info=$("$PY" -c 'import torch
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(torch.version.cuda or "")
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>&1); then
    fail "'$PY' cannot import torch: ${info##*$'\n'} (pass --python or --torch)"
  else
    {
      read -r TORCH_PREFIX
      read -r version
      read -r cuda
      read -r abi
    } <<<"$info"
    say "PyTorch $version (CUDA ${cuda:-none}) at $TORCH_PREFIX"
    [[ -n "$cuda" ]] ||
      fail "torch $version from '$PY' is CPU-only; install a CUDA build"
    [[ "$abi" == 1 ]] ||
      fail "torch $version was built with the pre-C++11 ABI, which cannot" \
        "link with the distribution's libraries; use PyTorch >= 2.7 or a" \
        "cxx11-abi LibTorch (--torch)"
  fi
fi

# 3. The CUDA toolkit LibTorch's CMake files look for.
NVCC=${CUDACXX:-$(command -v nvcc || true)}
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
if [[ -z "$NVCC" ]]; then
  fail "no CUDA toolkit (nvcc) found: LibTorch's CMake files need it. Install" \
    "the toolkit matching torch.version.cuda (NVIDIA's cuda-toolkit-X-Y" \
    "package, or nvidia-cuda-toolkit) or set CUDACXX"
else
  say "CUDA toolkit: $NVCC"
fi

# 4. NCCL headers (CUDA data parallel).
if [[ -z "$NCCL_DIR" && -z "$TORCH_DIR" ]]; then
  NCCL_DIR=$("$PY" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' \
    2>/dev/null || true)
fi
if [[ -n "$NCCL_DIR" && -f "$NCCL_DIR/include/nccl.h" ]]; then
  say "NCCL: $NCCL_DIR"
elif [[ -n "$NCCL_DIR" ]]; then
  fail "$NCCL_DIR has no include/nccl.h"
else
  say "warning: no NCCL headers found (--nccl); CMake then looks in" \
    "LibTorch's include directory, and without them multi-GPU runs are off"
fi

if ((DRY_RUN && problems > 0)); then
  say "dry run: $problems problem(s) above would stop a real run"
fi

# 5. Configure and build.
read -r -a extra_args <<<"${XLNET_CMAKE_ARGS:-}"
start=$SECONDS
run cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DXLNET_WITH_CUDA=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  "-DCMAKE_PREFIX_PATH=$TORCH_PREFIX${DEPS_PREFIX:+;$DEPS_PREFIX}" \
  "-DXLNET_NCCL_ROOT=$NCCL_DIR" \
  ${NVCC:+"-DCUDAToolkit_ROOT=$(dirname "$(dirname "$NVCC")")"} \
  "${extra_args[@]}"
run ninja -C "$BUILD"
if ((!DRY_RUN)); then
  say "built $BUILD in $((SECONDS - start)) s"
  "$BUILD/bin/xlnet-inspect" --runtime
fi

# 6. The GPU checks.
if ((RUN_CHECK)); then
  XLNET_BUILD_DIR=$BUILD PYTHON=$PY XLNET_GPU_PREBUILT=1 \
    run scripts/gpu_check.sh
fi
if ((DRY_RUN && problems > 0)); then exit 1; fi
