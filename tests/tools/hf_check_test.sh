#!/usr/bin/env bash
# CTest xlnet_hf_check_test: the exports and event files of the tools, read
# by the real transformers and TensorBoard.
#
#   hf_check_test.sh BUILD_DIR SOURCE_DIR
#
# A tiny model is pretrained for 10 steps on data/sample/ (TensorBoard on,
# two evaluations) and fine-tuned for a few steps as a classifier (genre
# sample, predictions on its test split), for SQuAD (the v2 fixture) and for
# multiple choice (data/race_sample), and a causal LM (configs/tiny-clm.yaml)
# is pretrained for 10 steps; xlnet-export writes the encoder
# (--encoder_only), the two LMs and the three heads. Then, with the Python of
# XLNET_CHECK_PYTHON (the venv of scripts/setup_python.sh):
# - scripts/check_hf_export.py: each export loads with its AutoModel* class
#   with no missing, unexpected or mismatched weights, AutoTokenizer (fast
#   and use_fast=False) gives xlnet-data prepare's ids on a mixed-case text
#   (use_fast=False also on one with quotes, brackets and a hyphen),
#   and the classifier's HF class probabilities on the genre test split are
#   those of xlnet-finetune's predictions file within 1e-4 (the file has 6
#   significant digits; both run fp32 on the CPU);
# - scripts/check_hf_lm.py: the golden tiny model as a causal LM (attn_type
#   uni), and a tiny model pretrained 10 steps with train.objective clm and
#   exported, give xlnet-run's logits and memory in transformers'
#   XLNetLMHeadModel within 1e-5 over three segments that carry the memory;
# - scripts/check_tensorboard.py: TensorBoard's EventAccumulator lists the
#   scalars of the pretraining and classification runs' RUN/tb
#   (train/loss, train/learning_rate, eval/loss) with metrics.jsonl's values.
# Without the packages it exits 77 (CTest: skipped) naming what to install;
# with CI set that is a failure (exit 1) instead.
set -euo pipefail
BUILD_DIR=$1
SRC=$2
BIN="$BUILD_DIR/bin"
PY=${XLNET_CHECK_PYTHON:-$BUILD_DIR/pyenv/bin/python}

if ! probe=$("$PY" -c 'import torch, transformers, sentencepiece, tensorboard' 2>&1); then
  echo "xlnet_hf_check_test: $PY cannot import torch, transformers," \
    "sentencepiece and tensorboard: ${probe##*$'\n'}" >&2
  echo "  install them with scripts/setup_python.sh (a venv at" \
    "$BUILD_DIR/pyenv with the versions of scripts/requirements-check.txt" \
    "and Debian's python3-torch), or point XLNET_CHECK_PYTHON at a Python" \
    "that has them" >&2
  if [[ -n "${CI:-}" ]]; then
    echo "xlnet_hf_check_test: FAILED: CI is set, so missing packages are" \
      "an error, not a skip" >&2
    exit 1
  fi
  echo "xlnet_hf_check_test: SKIPPED" >&2
  exit 77
fi

TMP=$(mktemp -d /tmp/xlnet_hf_check_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
run() {
  local log="$TMP/log"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "xlnet_hf_check_test: failed: $*" >&2
    exit 1
  fi
}

CORPUS="$SRC/data/sample/brown_sample.txt"
run "$BIN/xlnet-data" tokenizer --input "$CORPUS" --vocab_size 1000 \
  --out "$TMP/spiece.model"
run "$BIN/xlnet-data" prepare --input "$CORPUS" --tokenizer "$TMP/spiece.model" \
  --out "$TMP/data"
run "$BIN/xlnet-pretrain" --config "$SRC/configs/tiny.yaml" --data "$TMP/data" \
  --out "$TMP/pretrain" --set train.max_steps=10 --set train.log_steps=2 \
  --set train.eval_steps=5 --set train.eval_batches=2 --set train.threads=1 \
  --set train.tensorboard=true
CKPT="$TMP/pretrain/checkpoints/step_10"
run "$BIN/xlnet-export" --checkpoint "$CKPT" --out "$TMP/export/lm"
run "$BIN/xlnet-export" --checkpoint "$CKPT" --encoder_only \
  --out "$TMP/export/encoder"

# A causal LM (train.objective clm, attn_type uni), exported as an
# XLNetLMHeadModel.
run "$BIN/xlnet-pretrain" --config "$SRC/configs/tiny-clm.yaml" --data "$TMP/data" \
  --out "$TMP/clm" --set train.max_steps=10 --set train.eval_steps=0 \
  --set train.threads=1
run "$BIN/xlnet-export" --checkpoint "$TMP/clm/checkpoints/step_10" \
  --out "$TMP/export/clm"

finetune() {
  local task=$1 out=$2
  shift 2
  run "$BIN/xlnet-finetune" --config "$SRC/configs/tiny-finetune.yaml" \
    --init "$CKPT" --task "$task" --out "$TMP/$out" --set train.threads=1 \
    --set train.warmup_steps=0 --set train.tensorboard=true "$@"
  run "$BIN/xlnet-export" --checkpoint "$(ls -d "$TMP/$out"/checkpoints/step_*)" \
    --out "$TMP/export/$out"
}
GENRE="$SRC/data/sample/genre"
finetune classification classifier --train "${GENRE}_train.tsv" \
  --test "${GENRE}_test.tsv" --set train.max_steps=4
finetune squad qa --train "$SRC/tests/fixtures/finetune/squad_v2_small.json" \
  --set train.max_steps=2 --set finetune.doc_stride=24 \
  --set finetune.max_query_length=16
finetune multiple_choice multiple_choice \
  --train "$SRC/data/race_sample/train.jsonl" --set train.max_steps=2 \
  --set finetune.max_seq_length=96 --set finetune.max_qa_length=24

# Texts through xlnet.cpp's tokenizer (its text rules included), for both
# of transformers' tokenizers: a mixed-case line; one with spiece.model's
# user-defined pieces before letters (quotes, a hyphen, a dot, brackets),
# where transformers' own conversion of spiece.model differs and the
# export's tokenizer.json must not; and 300 lines of the Brown sample.
cat >"$TMP/text.txt" <<'EOF'
Hello World, the QUICK brown Fox met Mr. McDonald in NEW York at 10:30.
She said "Hi" to the well-known U.S. Senator (Democrat) in ``Paris''.
EOF
awk 'NF && ++n <= 300' "$SRC/data/sample/brown_sample.txt" >"$TMP/brown.txt"
for name in text brown; do
  run "$BIN/xlnet-data" prepare --input "$TMP/$name.txt" \
    --tokenizer "$TMP/spiece.model" --out "$TMP/$name"
done

status=0
"$PY" "$SRC/scripts/check_hf_export.py" "$TMP"/export/{encoder,lm,clm,classifier,qa,multiple_choice} \
  --text "$TMP/text.txt" --prepared "$TMP/text" \
  --text "$TMP/brown.txt" --prepared "$TMP/brown" \
  --tsv "${GENRE}_test.tsv" --predictions "$TMP/classifier/predictions_test.tsv" \
  --max_length 64 --max_prob_diff 1e-4 || status=1
# The golden tiny model as a causal LM (attn_type uni, memory 8 < the 36
# tokens fed, same_length, clamp_len): logits and memory over 3 segments.
mkdir "$TMP/causal"
cp "$SRC/tests/fixtures/golden_tiny/model.safetensors" "$TMP/causal/"
"$PY" - "$SRC/tests/fixtures/golden_tiny/config.json" "$TMP/causal/config.json" <<'PYEOF'
import json, sys
config = json.load(open(sys.argv[1]))
config.update(attn_type="uni", same_length=True, clamp_len=10, mem_len=8,
              use_mems_eval=True)
json.dump(config, open(sys.argv[2], "w"), indent=1)
PYEOF
"$PY" "$SRC/scripts/check_hf_lm.py" "$TMP/causal" --xlnet_run "$BIN/xlnet-run" \
  || status=1
# The exported causal LM (trained with memory 64; 3 segments of 40 tokens).
"$PY" "$SRC/scripts/check_hf_lm.py" "$TMP/export/clm" --xlnet_run "$BIN/xlnet-run" \
  --seq_len 40 || status=1
"$PY" "$SRC/scripts/check_tensorboard.py" "$TMP/pretrain" \
  --require train/loss,train/learning_rate,eval/loss || status=1
"$PY" "$SRC/scripts/check_tensorboard.py" "$TMP/classifier" || status=1
exit $status
