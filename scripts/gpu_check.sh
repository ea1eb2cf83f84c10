#!/usr/bin/env bash
# Builds xlnet.cpp against a CUDA LibTorch (the PyTorch that `python3` imports,
# e.g. a pip wheel, through scripts/setup_cuda.sh --no-check, unless
# XLNET_GPU_PREBUILT=1 says that script just built it) and runs what needs a
# GPU:
#   1. the whole test suite against that LibTorch (CPU paths; Gloo tests are
#      skipped when its headers are missing, as in pip wheels),
#   2. the HuggingFace comparisons on the GPU (XLNET_TEST_DEVICE=cuda),
#   3. short pretraining runs of configs/tiny.yaml on cuda in fp32, bf16 and
#      fp16, each resumed once, on the bundled sample corpus,
#   4. fine-tuning the fp32 run on the sample genre task on cuda, exporting
#      it, and scripts/check_hf_export.py (needs transformers) on the exports,
#   5. two ranks on the one GPU through torchrun, Gloo over CUDA tensors
#      (train.ranks_per_device=2), against one rank (needs gloo headers in
#      LibTorch, which pip wheels lack; skipped then, and said so).
# Extra dependency prefixes (absl, ICU, ...) go in XLNET_EXTRA_PREFIX
# (';'-separated; e.g. Debian packages unpacked with `dpkg -x` into /opt/deps
# give /opt/deps/usr, with LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu
# for running). Results land in ${XLNET_GPU_OUT:-runs/gpu_check}.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${XLNET_BUILD_DIR:-build-cuda}
OUT=${XLNET_GPU_OUT:-runs/gpu_check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
if [[ -z "${XLNET_GPU_PREBUILT:-}" ]]; then
  scripts/setup_cuda.sh --no-check --no-apt --python "$PY" --build-dir "$BUILD" \
    ${XLNET_EXTRA_PREFIX:+--deps-prefix "$XLNET_EXTRA_PREFIX"}
fi
"$BUILD/bin/xlnet-inspect" --runtime | tee "$OUT/runtime.txt"

echo "== 1. test suite"
ctest --test-dir "$BUILD" --output-on-failure 2>&1 | tee "$OUT/ctest.txt"

echo "== 2. HF comparisons on cuda"
XLNET_TEST_DEVICE=cuda "$BUILD/bin/xlnet_model_test" 2>&1 | tee "$OUT/hf_cuda.txt"

echo "== 3. pretraining on cuda"
DATA=$OUT/data
"$BUILD/bin/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
  --vocab_size 1000 --out "$OUT/spiece.model"
"$BUILD/bin/xlnet-data" prepare --input data/sample/brown_sample.txt \
  --tokenizer "$OUT/spiece.model" --out "$DATA"
for dtype in fp32 bf16 fp16; do
  RUN=$OUT/pretrain_$dtype
  rm -rf "$RUN"
  common=(--config configs/tiny.yaml --data "$DATA" --out "$RUN"
          --set train.device=cuda --set "train.dtype=$dtype"
          --set train.log_steps=100 --set train.save_steps=200)
  "$BUILD/bin/xlnet-pretrain" "${common[@]}" --set train.max_steps=200
  "$BUILD/bin/xlnet-pretrain" "${common[@]}" --set train.max_steps=400 \
    --resume latest
  tail -n 3 "$RUN/metrics.jsonl"
done 2>&1 | tee "$OUT/pretrain.txt"
echo "== 4. fine-tuning, export, HuggingFace check"
CKPT=$(ls -d "$OUT"/pretrain_fp32/checkpoints/step_* | sort -t_ -k2 -n | tail -1)
rm -rf "$OUT/finetune" "$OUT/export"
"$BUILD/bin/xlnet-finetune" --config configs/tiny.yaml --task classification \
  --init "$CKPT" --tokenizer "$OUT/spiece.model" \
  --train data/sample/genre_train.tsv --dev data/sample/genre_dev.tsv \
  --test data/sample/genre_test.tsv --out "$OUT/finetune" --set train.device=cuda
"$BUILD/bin/xlnet-export" --checkpoint "$OUT/finetune/best" --out "$OUT/export/classifier"
"$BUILD/bin/xlnet-export" --checkpoint "$CKPT" --out "$OUT/export/encoder" --encoder_only
if $PY -c 'import transformers' 2>/dev/null; then
  $PY scripts/check_hf_export.py "$OUT/export/encoder"
  for split in dev test; do
    $PY scripts/check_hf_export.py "$OUT/export/classifier" --max_length 64 \
      --tsv data/sample/genre_$split.tsv \
      --predictions "$OUT/finetune/predictions_$split.tsv"
  done
fi 2>&1 | tee "$OUT/hf_export.txt"
echo "== 5. two ranks on one GPU (torchrun, Gloo over CUDA tensors)"
if ! command -v torchrun >/dev/null; then
  echo "skipped: no torchrun"
elif ! grep -q "^XLNET_GLOO_INCLUDE:PATH=/" "$BUILD/CMakeCache.txt"; then
  echo "skipped: this LibTorch ships no gloo headers (pip wheels)"
else
  for ranks in 1 2; do
    RUN=$OUT/pretrain_${ranks}rank_1gpu
    rm -rf "$RUN"
    torchrun --nproc_per_node $ranks --redirects 1 --tee 1 --no_python \
      "$BUILD/bin/xlnet-pretrain" --config configs/tiny.yaml --data "$DATA" \
      --out "$RUN" --set train.device=cuda \
      --set train.ranks_per_device=2 --set model.dropout=0 \
      --set train.max_steps=50 --set train.log_steps=10
    tail -n 1 "$RUN/metrics.jsonl"
  done
fi 2>&1 | tee "$OUT/two_ranks_one_gpu.txt"
echo "gpu_check: done ($OUT)"
