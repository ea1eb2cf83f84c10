#!/usr/bin/env bash
# What a checkpoint save costs the steps around it, saved on the training
# thread (foreground) and in the background (train.background_save=true):
# the real xlnet-pretrain on CONFIG for STEPS steps with a save every
# SAVE_EVERY steps (keep_checkpoints 2), the two modes interleaved, ROUNDS
# times each, on the bundled sample prepared as bench/checkpoint_scale.sh
# prepares it. bench/save_stall.py reads each run's log: the median step
# away from saves, and for each save the longest step it overlapped as a
# ratio to that. Extra arguments go to xlnet-pretrain (e.g. --set
# train.device=cuda). Nothing is asserted; on a shared machine say so next
# to any figure quoted.
#
#   bench/background_save.sh OUT_DIR [CONFIG (configs/small.yaml)]
#       [STEPS (24)] [SAVE_EVERY (6)] [ROUNDS (2)] [xlnet-pretrain args...]
#
# Needs a build of xlnet-data and xlnet-pretrain (XLNET_BUILD_DIR, default
# build; XLNET_BIN overrides the bin folder).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/background_save.sh OUT_DIR [CONFIG] [STEPS] [SAVE_EVERY] [ROUNDS] [args...]}
config=${2:-configs/small.yaml}
steps=${3:-24}
every=${4:-6}
rounds=${5:-2}
shift $(($# < 5 ? $# : 5))
bin=${XLNET_BIN:-${XLNET_BUILD_DIR:-build}/bin}
for t in xlnet-data xlnet-pretrain; do
  [[ -x "$bin/$t" ]] || { echo "background_save: $bin/$t missing: build it" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
data=${XLNET_BENCH_DATA:-$out/data}
if [[ ! -e "$data/manifest.json" ]]; then
  "$bin/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
    --vocab_size 1000 --out "$out/spiece.model" > "$out/data.log" 2>&1
  "$bin/xlnet-data" prepare --input data/sample/brown_sample.txt \
    --config "$config" --tokenizer "$out/spiece.model" --out "$data" \
    >> "$out/data.log" 2>&1
fi
echo "background_save: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $config, $steps steps, a save every $every" |
  tee "$out/results.txt"
for ((round = 1; round <= rounds; round++)); do
  for mode in foreground background; do
    run=$out/${mode}_$round
    rm -rf "$run"
    flag=false
    [[ $mode == background ]] && flag=true
    XLNET_LOG_LEVEL=info "$bin/xlnet-pretrain" --config "$config" \
      --data "$data" --out "$run" --set "train.max_steps=$steps" \
      --set "train.save_steps=$every" --set train.log_steps=1 \
      --set train.eval_steps=0 --set train.keep_checkpoints=2 \
      --set "train.background_save=$flag" "$@" > "$run.log" 2>&1 ||
      { echo "background_save: $mode run failed: $run.log" >&2; tail -5 "$run.log" >&2; exit 1; }
    python3 bench/save_stall.py "$run.log" --json "$run.json" |
      tee -a "$out/results.txt"
  done
done
