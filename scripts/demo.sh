#!/usr/bin/env bash
# The README's main command: install dependencies, build, then run the main
# job on the bundled sample corpus (data/sample/brown_sample.txt):
#   1. train a SentencePiece tokenizer with XLNet's special ids,
#   2. tokenize the corpus into shards,
#   3. pretrain configs/tiny.yaml on the CPU (loss visibly falling),
#   leaving a HuggingFace-layout checkpoint under runs/demo/pretrain.
# Fine-tuning and export join this script as their issue lands.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BIN=build/bin
OUT=${XLNET_DEMO_OUT:-runs/demo}
CORPUS=data/sample/brown_sample.txt
mkdir -p "$OUT"

echo "== 1. tokenizer (vocab 1000) on $CORPUS"
"$BIN/xlnet-data" tokenizer --input "$CORPUS" --vocab_size 1000 --out "$OUT/spiece.model"

echo "== 2. shards"
"$BIN/xlnet-data" prepare --input "$CORPUS" --tokenizer "$OUT/spiece.model" \
  --out "$OUT/data" --workers "$(nproc)"

echo "== 3. pretraining configs/tiny.yaml (resumes if a checkpoint exists)"
"$BIN/xlnet-pretrain" --config configs/tiny.yaml --data "$OUT/data" \
  --out "$OUT/pretrain" --resume latest "$@"

echo "== result"
"$BIN/xlnet-inspect" "$(ls -d "$OUT"/pretrain/checkpoints/step_* | sort -t_ -k2 -n | tail -1)"
echo "loss curve: $OUT/pretrain/metrics.jsonl"
