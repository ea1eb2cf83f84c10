#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer:
# configures a GCC build with XLNET_SANITIZE="address;undefined" in
# build-san/ (tools, tests and the SentencePiece module all instrumented;
# benchmarks off), builds it and runs every ctest there. Any sanitizer
# report (memory error, leak, undefined behaviour) ends its test with a
# failure, so a clean run is ctest passing.
#
#   scripts/sanitize.sh                 build and run everything
#   scripts/sanitize.sh -R finetune     extra arguments go to ctest
#
# XLNET_SANITIZE_BUILD_DIR (default build-san), XLNET_JOBS (default: all
# cores). A cold build takes about twice the normal one; the tests about
# twice as long (measured figures: docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${XLNET_SANITIZE_BUILD_DIR:-build-san}
# -g1: function names and line tables for the reports, no full debug info.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS=-g1 -DXLNET_SANITIZE="address;undefined" \
  -DXLNET_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j "${XLNET_JOBS:-$(nproc)}"
# halt_on_error: the first UB report aborts (GCC's UBSan recovers by
# default). Leaks are checked at exit (detect_leaks is ASan's default on
# x86-64 Linux); the suppressions name only allocations LibTorch and its
# libraries make once and keep for the process's life.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
if [[ -f scripts/lsan.supp ]]; then
  export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
fi
start=$(date +%s)
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 3000 "$@"
echo "sanitize.sh: ctest under ASan + UBSan passed in $(($(date +%s) - start)) s"
