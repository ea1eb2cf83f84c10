#!/usr/bin/env bash
# Syntax-checks the CUDA/NCCL code paths against Debian's (CPU-only) LibTorch
# headers plus the CUDA toolkit's headers, where no CUDA LibTorch is
# available: every project source that includes c10d is compiled with
# -fsyntax-only -DUSE_C10D_NCCL -DXLNET_WITH_CUDA=1. This checks that the code
# compiles; it does not run anything on a GPU.
#
# Needs: a configured build/ (compile_commands.json) and CUDA headers
# (CUDA_HOME, default /usr/local/cuda, with nccl.h).
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
BUILD_DIR=${XLNET_BUILD_DIR:-build}
if [[ ! -f "$CUDA_HOME/include/cuda_runtime.h" || ! -f "$CUDA_HOME/include/nccl.h" ]]; then
  echo "check_cuda_syntax: no CUDA headers with NCCL under $CUDA_HOME; skipped" >&2
  exit 0
fi
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
# Debian's LibTorch lacks this generated header of CUDA builds.
mkdir -p "$stub/c10/cuda/impl"
echo '#define C10_CUDA_BUILD_SHARED_LIBS' > "$stub/c10/cuda/impl/cuda_cmake_macros.h"
files=$(grep -l "c10d\|XLNET_WITH_CUDA\|torch::kCUDA\|is_cuda" \
  common/*.cc model/*.cc pretrain/*.cc finetune/*.cc 2>/dev/null || true)
status=0
for f in $files; do
  echo "check_cuda_syntax: $f"
  g++ -std=gnu++17 -fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 \
    -DUSE_C10D_NCCL -DUSE_C10D_GLOO -DUSE_DISTRIBUTED -DXLNET_WITH_CUDA=1 -DXLNET_WITH_GLOO=1 \
    -I"$stub" -I. -isystem /usr/include/torch/csrc/api/include \
    -isystem "$CUDA_HOME/include" "$f" || status=1
done
[[ $status -eq 0 ]] && echo "check_cuda_syntax: ok (${files//$'\n'/ })"
exit $status
