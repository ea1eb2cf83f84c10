#!/usr/bin/env bash
# The genre acceptance experiment (docs/finetuning.md, "Results on the Brown
# genre task"):
#   1. the Brown corpus minus every document that the genre task's dev/test
#      passages come from (brown_pretrain_corpus.py),
#   2. an 8000-piece tokenizer and shards of it,
#   3. pretraining configs/brown-small.yaml,
#   4. fine-tuning on the 15-genre task from that checkpoint and, for
#      comparison, from random weights (--from_scratch),
#   5. the bag-of-words baseline,
# then a summary of test accuracies. Needs python3 for step 1.
#
# usage: scripts/experiments/brown_genre.sh BROWN_DIR [OUT]
#   BROWN_DIR holds brown.txt and genre/{train,dev,test}.tsv.
#   XLNET_CONFIG picks the pretraining config (default
#   configs/brown-small.yaml, CPU; configs/brown-medium.yaml is the GPU one
#   behind the figures in docs/finetuning.md) and XLNET_FT_CONFIG the
#   fine-tuning one (default: the same name with -finetune); XLNET_SET="--set
#   train.device=cuda" adds settings to pretraining, XLNET_FT_SET to
#   fine-tuning;
#   XLNET_BOW=0 skips the baseline; XLNET_BIN picks the binaries' folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
BROWN=${1:?usage: brown_genre.sh BROWN_DIR [OUT]}
OUT=${2:-runs/brown_genre}
BIN=${XLNET_BIN:-build/bin}
read -r -a SET <<<"${XLNET_SET:-}"        # --set ... for pretraining
read -r -a FT_SET <<<"${XLNET_FT_SET:-}"  # --set ... for fine-tuning
CFG=${XLNET_CONFIG:-configs/brown-small.yaml}
FT_CFG=${XLNET_FT_CONFIG:-${CFG%.yaml}-finetune.yaml}
GENRE=$BROWN/genre
mkdir -p "$OUT"

python3 scripts/experiments/brown_pretrain_corpus.py "$BROWN" "$OUT/corpus.txt"
[ -f "$OUT/spiece.model" ] || "$BIN/xlnet-data" tokenizer \
  --input "$OUT/corpus.txt" --vocab_size 8000 --out "$OUT/spiece.model"
"$BIN/xlnet-data" prepare --input "$OUT/corpus.txt" \
  --tokenizer "$OUT/spiece.model" --out "$OUT/data"
"$BIN/xlnet-pretrain" --config "$CFG" --data "$OUT/data" \
  --out "$OUT/pretrain" --resume latest "${SET[@]}"
CKPT=$(ls -d "$OUT"/pretrain/checkpoints/step_* | sort -t_ -k2 -n | tail -1)

for init in pretrained scratch; do
  extra=()
  [ "$init" = scratch ] && extra=(--from_scratch)
  "$BIN/xlnet-finetune" --config "$FT_CFG" --task classification \
    --init "$CKPT" --tokenizer "$OUT/spiece.model" --train "$GENRE/train.tsv" --dev "$GENRE/dev.tsv" \
    --test "$GENRE/test.tsv" --out "$OUT/finetune_$init" --resume latest \
    "${extra[@]}" "${FT_SET[@]}"
done
[ "${XLNET_BOW:-1}" = 0 ] || "$BIN/xlnet-baseline" --train "$GENRE/train.tsv" --dev "$GENRE/dev.tsv" \
  --test "$GENRE/test.tsv" --out "$OUT/bow"

echo "== test accuracy (dev accuracy)"
for run in finetune_pretrained finetune_scratch bow; do
  [ -f "$OUT/$run/eval_results.json" ] || continue
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print("%-20s %.4f (%.4f)" % (sys.argv[2], r["test"]["accuracy"], r["dev"]["accuracy"]))' \
    "$OUT/$run/eval_results.json" "$run"
done | tee "$OUT/summary.txt"
