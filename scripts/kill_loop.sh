#!/usr/bin/env bash
# Fault injection for pretraining: SIGKILLs xlnet-pretrain (configs/tiny.yaml
# on the bundled Brown sample) N times in a row at random moments, every
# other time as soon as a checkpoint is being written or removed (a hidden
# .step_* temporary in RUN/checkpoints/), then lets it finish. Checks that
#   - every restart resumes from the newest checkpoint present when it was
#     killed (a step_N directory only appears once complete), or starts at
#     step 0 when there is none;
#   - the finished run's logged losses and final weights equal, bit for bit,
#     those of the same run never interrupted.
#
#   scripts/kill_loop.sh [N=20] [SEED=1]   (XLNET_BUILD_DIR: default build;
#                                          XLNET_KILL_LOOP_STEPS: default 120;
#                                          XLNET_KILL_LOOP_SET: more --set
#                                          k=v, space-separated, for both
#                                          runs, e.g. train.background_save=true)
#
# XLNET_KILL_LOOP_TMPFS=1 runs the killed run on a nearly full file system:
# a tmpfs (mounted in a private user and mount namespace, so no root is
# needed) just large enough for the run's other files, the checkpoints it
# keeps and the one being written, plus half a checkpoint. A temporary left
# by a kill that the next start did not remove would leave too little room
# for the next save, and every restart would fail the same way.
#
# Exits 0 when every check passed; prints one line per kill.
set -euo pipefail
shopt -s nullglob
if [[ ${XLNET_KILL_LOOP_TMPFS:-0} == 1 && -z ${XLNET_KILL_LOOP_NS:-} ]]; then
  exec env XLNET_KILL_LOOP_NS=1 unshare --user --map-root-user --mount -- \
    "$0" "$@"
fi
cd "$(dirname "$0")/.."
N=${1:-20}
SEED=${2:-1}
BIN=${XLNET_BUILD_DIR:-build}/bin
for tool in xlnet-data xlnet-pretrain; do
  [[ -x $BIN/$tool ]] || { echo "kill_loop: $BIN/$tool not built" >&2; exit 2; }
done
RANDOM=$SEED
WORK=$(mktemp -d /tmp/xlnet-kill-loop.XXXXXX)
trap 'umount "$WORK/fs" 2>/dev/null || true; rm -rf "$WORK"' EXIT

corpus=data/sample/brown_sample.txt
"$BIN/xlnet-data" tokenizer --input "$corpus" --vocab_size 1000 \
  --out "$WORK/spiece.model" >/dev/null 2>&1
"$BIN/xlnet-data" prepare --input "$corpus" --tokenizer "$WORK/spiece.model" \
  --out "$WORK/data" --workers 2 >/dev/null 2>&1

STEPS=${XLNET_KILL_LOOP_STEPS:-120}
EXTRA_SETS=()
for kv in ${XLNET_KILL_LOOP_SET:-}; do EXTRA_SETS+=(--set "$kv"); done
KEEP=2
# The command line of the tiny run into RUN_DIR, as an array: ARGS.
args_for() {  # RUN_DIR [extra flags...]
  local run=$1
  shift
  ARGS=("$BIN/xlnet-pretrain" --config configs/tiny.yaml --data "$WORK/data"
    --out "$run" --set train.threads=1 --set train.eval_steps=0
    --set train.max_steps=$STEPS --set train.save_steps=2
    --set train.keep_checkpoints=$KEEP --set train.log_steps=1
    "${EXTRA_SETS[@]}" "$@")
}
pretrain() {  # RUN_DIR [extra flags...]
  args_for "$@"
  "${ARGS[@]}"
}

# "step loss" per logged step, exactly as written.
losses() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.strip():
        m = json.loads(line)
        if "loss" in m:
            print(m["step"], repr(m["loss"]))' "$1/metrics.jsonl"
}

# The newest step_N directory in RUN/checkpoints (0: none).
newest() {
  local best=0 d s
  for d in "$1"/checkpoints/step_*; do
    [[ -d $d ]] || continue
    s=${d##*/step_}
    ((s > best)) && best=$s
  done
  echo "$best"
}

pretrain "$WORK/full" >"$WORK/full.log" 2>&1 || {
  echo "kill_loop: the uninterrupted run failed:" >&2
  tail -5 "$WORK/full.log" >&2
  exit 1
}

RUN=$WORK/killed
if [[ ${XLNET_KILL_LOOP_TMPFS:-0} == 1 ]]; then
  # Sizes as the file system counts them (whole blocks).
  ckpt=$(du -sB1 "$WORK/full/checkpoints/step_$STEPS" | cut -f1)
  other=$(($(du -sB1 "$WORK/full" | cut -f1) - $(du -sB1 "$WORK/full/checkpoints" | cut -f1)))
  fs_bytes=$((2 * other + (KEEP + 1) * ckpt + ckpt / 2))
  mkdir -p "$WORK/fs"
  mount -t tmpfs -o "size=$fs_bytes" tmpfs "$WORK/fs"
  RUN=$WORK/fs/killed
  echo "kill_loop: the run is on a $fs_bytes-byte tmpfs (a checkpoint is $ckpt bytes, the rest of the run $other)"
fi
failures=0
inside=0
kills=0
for ((i = 1; i <= N; i++)); do
  expected=$(newest "$RUN")
  log=$WORK/attempt_$i.log
  # Hidden temporaries already there (left by earlier kills).
  stale=$(cd "$RUN/checkpoints" 2>/dev/null && ls -a | grep '^\.step_' || true)
  args_for "$RUN" --resume latest
  setsid "${ARGS[@]}" >"$log" 2>&1 &
  pid=$!
  finished=no
  if ((i % 2 == 0)); then
    # Kill the moment a new checkpoint is being written or removed (a glob,
    # not a process per look: on a tmpfs a save takes milliseconds).
    how="in a checkpoint write"
    for ((t = 0; t < 1000000; t++)); do
      temps=("$RUN"/checkpoints/.step_*)
      if [[ -e ${temps[0]:-} && ${temps[*]##*/} != "${stale//$'\n'/ }" ]]; then
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      kill -0 "$pid" 2>/dev/null || { finished=yes; break; }
    done
  else
    how="at random"
    sleep "$((RANDOM % 3)).$((RANDOM % 10))"
    kill -0 "$pid" 2>/dev/null || finished=yes
  fi
  if [[ $finished == yes ]]; then
    wait "$pid" || true
    echo "attempt $i: finished before the kill"
    break
  fi
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # A temporary the kill left behind: it struck inside a write or removal.
  now=$(cd "$RUN/checkpoints" 2>/dev/null && ls -a | grep '^\.step_' || true)
  hit_temp=no
  [[ -n $now && $now != "$stale" ]] && hit_temp=yes
  kills=$((kills + 1))
  [[ $hit_temp == yes ]] && inside=$((inside + 1))
  # What the attempt resumed from.
  if ((expected == 0)); then
    if grep -q "resumed from" "$log"; then
      echo "attempt $i: FAIL resumed although no checkpoint existed" >&2
      failures=$((failures + 1))
    fi
    got="step 0 (none)"
  elif grep -q "resumed from $RUN/checkpoints/step_$expected at step $expected" "$log"; then
    got="step_$expected"
  elif grep -q "resumed from" "$log"; then
    echo "attempt $i: FAIL expected step_$expected: $(grep 'resumed from' "$log")" >&2
    failures=$((failures + 1))
    got="wrong"
  else
    got="killed before loading step_$expected"
  fi
  echo "kill $kills ($how; inside a checkpoint write: $hit_temp): resumed $got; newest now step_$(newest "$RUN")"
done

# Let it finish.
if ! pretrain "$RUN" --resume latest >"$WORK/final.log" 2>&1; then
  echo "kill_loop: FAIL the final resume failed:" >&2
  tail -5 "$WORK/final.log" >&2
  exit 1
fi
if ! diff <(losses "$WORK/full") <(losses "$RUN") >"$WORK/diff.txt"; then
  echo "kill_loop: FAIL logged losses differ from the uninterrupted run:" >&2
  head -10 "$WORK/diff.txt" >&2
  failures=$((failures + 1))
fi
if ! cmp -s "$WORK/full/checkpoints/step_$STEPS/model.safetensors" \
  "$RUN/checkpoints/step_$STEPS/model.safetensors"; then
  echo "kill_loop: FAIL final weights differ from the uninterrupted run" >&2
  failures=$((failures + 1))
fi
if [[ ${XLNET_KILL_LOOP_TMPFS:-0} == 1 ]]; then
  echo "kill_loop: the tmpfs ends $(df -B1 --output=used,size "$WORK/fs" | tail -1 | awk '{print $1 " of " $2}') bytes used"
fi
echo "kill_loop: $kills kills ($inside while a checkpoint was being written or removed)," \
  "$(losses "$RUN" | wc -l) logged steps, $failures failures"
((failures == 0))
