#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang-14 (ASan + UBSan) into
# build-fuzz/ and runs each, printing the executions per target.
#
#   scripts/fuzz.sh            1,000,000 executions per target
#   scripts/fuzz.sh 200000     that many executions per target
#   scripts/fuzz.sh 60s        60 seconds per target
#
# XLNET_FUZZ_TARGETS="shard squad" runs only those; XLNET_JOBS (default 2)
# build jobs. New inputs go to build-fuzz/corpus/<target>/ (the committed
# seeds in fuzz/corpus/<target>/ are read, never written); a crash leaves
# build-fuzz/artifacts/<target>/crash-* and makes the script exit 1. Copy a
# crasher into fuzz/corpus/<target>/ once fixed: ctest's
# xlnet_fuzz_regression replays it in every build.
# Needs: clang-14, libclang-rt-14-dev (scripts/setup.sh's packages for the rest).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-1000000}
BUILD_DIR=${XLNET_FUZZ_BUILD_DIR:-build-fuzz}
# Every target of fuzz/targets.inc but tokenizer (ASan refuses the
# RTLD_DEEPBIND dlopen() of SentencePiece; ctest replays its inputs).
read -r -a targets <<<"${XLNET_FUZZ_TARGETS:-$(sed -n \
  's/^XLNET_FUZZ_TARGET(\([a-z_]*\)).*/\1/p' fuzz/targets.inc |
  grep -vx tokenizer | tr '\n' ' ')}"

CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-gline-tables-only \
  -DXLNET_FUZZ=ON -DXLNET_BUILD_TESTS=OFF -DXLNET_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j "${XLNET_JOBS:-2}" xlnet_fuzz_regression \
  "${targets[@]/#/xlnet_fuzz_}"
# The committed inputs first, under ASan + UBSan without libFuzzer.
XLNET_LOG_LEVEL=error "$BUILD_DIR/bin/xlnet_fuzz_regression" fuzz/corpus

if [[ $LIMIT == *s ]]; then
  limit_flag=-max_total_time=${LIMIT%s}
else
  limit_flag=-runs=$LIMIT
fi
# Inputs bigger than the seeds buy little; squad's seed is 6.6 KB and the
# v1 shard fixture 23 KB.
max_len() {
  case $1 in
    squad) echo 8192 ;;
    shard) echo 32768 ;;
    *) echo 4096 ;;
  esac
}

export XLNET_LOG_LEVEL=error
failed=0
summary=""
for t in "${targets[@]}"; do
  work="$BUILD_DIR/corpus/$t"
  artifacts="$BUILD_DIR/artifacts/$t"
  log="$BUILD_DIR/fuzz-$t.log"
  mkdir -p "$work" "$artifacts"
  echo "== $t ($limit_flag, log $log)"
  start=$(date +%s.%N)
  rc=0
  "$BUILD_DIR/bin/xlnet_fuzz_$t" "$limit_flag" -max_len="$(max_len "$t")" \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(echo "$end - $start" | bc)
  rate=$(echo "${runs:-0} / $secs" | bc)
  result=ok
  if [[ $rc != 0 ]]; then
    result="FAILED (rc $rc): $(grep -m1 -E 'ERROR|runtime error|deadly' "$log" || true)"
    failed=1
  fi
  line=$(printf '%-18s %10s execs %8.0f s %7s exec/s  %s' "$t" "${runs:-?}" \
    "$secs" "$rate" "$result")
  echo "$line"
  summary+="$line"$'\n'
done
echo
echo "== summary ($limit_flag)"
printf '%s' "$summary"
exit $failed
