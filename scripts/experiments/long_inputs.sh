#!/usr/bin/env bash
# Segment recurrence in fine-tuning (finetune.long_inputs: chunks;
# docs/finetuning.md, "Long inputs"): the same pretrained tiny model
# fine-tuned the same number of steps with
#   trunc64    inputs truncated to C = 64 tokens (the official behaviour),
#   chunks64   up to 4 chunks of 64 tokens, memory = the whole prefix,
#   chunks64m32  the same with the pretrained model's mem_len (32 tokens),
#   trunc256   inputs truncated to 4 * 64 = 256 tokens (one long forward),
# on two tasks built from the bundled data (data/sample):
#   late   romance vs learned, where the deciding passage starts after 64
#          words of press/religion filler and is followed by 70 more
#          (long_inputs_task.py): nothing of it is in the first 64 tokens;
#   genre  the ordinary 4-genre passage task (genre_{train,dev,test}.tsv).
# The model: configs/tiny.yaml pretrained on data/sample/brown_sample.txt
# (XLNET_PRETRAIN_STEPS, default 1000). Prints test accuracy (dev accuracy)
# of the model picked by dev accuracy, and each run's seconds.
#
# usage: scripts/experiments/long_inputs.sh [OUT]
#   XLNET_BIN picks the binaries' folder; XLNET_SEEDS (default "1234") the
#   fine-tuning seeds; XLNET_STEPS (default 400) the fine-tuning steps;
#   XLNET_TASKS (default "late genre") the tasks; XLNET_THREADS (default 1)
#   train.threads (1 avoids OpenMP oversubscription on shared cores).
#   Finished steps are skipped, so XLNET_TASKS=late and XLNET_TASKS=genre
#   may run side by side once one run (XLNET_TASKS="") has pretrained.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/long_inputs}
BIN=${XLNET_BIN:-build/bin}
SEEDS=${XLNET_SEEDS:-1234}
STEPS=${XLNET_STEPS:-400}
PRE_STEPS=${XLNET_PRETRAIN_STEPS:-1000}
TASKS=${XLNET_TASKS:-late genre}
THREADS=${XLNET_THREADS:-1}
CORPUS=data/sample/brown_sample.txt
mkdir -p "$OUT/runs"

[ -f "$OUT/spiece.model" ] || "$BIN/xlnet-data" tokenizer --input "$CORPUS" \
  --vocab_size 1000 --out "$OUT/spiece.model"
[ -d "$OUT/data" ] || "$BIN/xlnet-data" prepare --input "$CORPUS" \
  --tokenizer "$OUT/spiece.model" --out "$OUT/data"
CKPT=$OUT/pretrain/checkpoints/step_$PRE_STEPS
[ -d "$CKPT" ] || "$BIN/xlnet-pretrain" --config configs/tiny.yaml \
  --data "$OUT/data" --out "$OUT/pretrain" --resume latest \
  --set train.max_steps="$PRE_STEPS" --set train.eval_steps=0 \
  --set train.threads="$THREADS"

[ -f "$OUT/late/test.tsv" ] ||
  python3 scripts/experiments/long_inputs_task.py "$OUT/late"
mkdir -p "$OUT/genre"
for split in train dev test; do
  [ -f "$OUT/genre/$split.tsv" ] ||
    cp "data/sample/genre_$split.tsv" "$OUT/genre/$split.tsv"
done

declare -A MODE=(
  [trunc64]="--set finetune.max_seq_length=64"
  [chunks64]="--set finetune.max_seq_length=64 --set finetune.long_inputs=chunks --set finetune.max_chunks=4 --set finetune.mem_len=0"
  [chunks64m32]="--set finetune.max_seq_length=64 --set finetune.long_inputs=chunks --set finetune.max_chunks=4"
  [trunc256]="--set finetune.max_seq_length=256"
)
for task in $TASKS; do
  for seed in $SEEDS; do
    for mode in trunc64 chunks64 chunks64m32 trunc256; do
      run=$OUT/runs/$task-$mode-$seed
      [ -f "$run/eval_results.json" ] && continue
      read -r -a extra <<<"${MODE[$mode]}"
      start=$(date +%s)
      "$BIN/xlnet-finetune" --config configs/tiny-finetune.yaml \
        --task classification --init "$CKPT" --train "$OUT/$task/train.tsv" \
        --dev "$OUT/$task/dev.tsv" --test "$OUT/$task/test.tsv" \
        --out "$run" --overwrite --set train.seed="$seed" \
        --set train.max_steps="$STEPS" --set train.eval_steps=100 \
        --set finetune.eval_batch_size=64 --set train.threads="$THREADS" \
        "${extra[@]}" >"$run.log" 2>&1
      echo "$(($(date +%s) - start))" >"$run.seconds"
    done
  done
done

echo "== test accuracy (dev accuracy), seconds"
for task in $TASKS; do
  for mode in trunc64 chunks64 chunks64m32 trunc256; do
    for seed in $SEEDS; do
      run=$OUT/runs/$task-$mode-$seed
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print("%-6s %-12s seed %-5s %.4f (%.4f) %ss" % (sys.argv[2], sys.argv[3],
      sys.argv[4], r["test"]["accuracy"], r["dev"]["accuracy"], sys.argv[5]))' \
        "$run/eval_results.json" "$task" "$mode" "$seed" "$(cat "$run.seconds")"
    done
  done
done | tee "$OUT/summary_${TASKS// /_}.txt"
