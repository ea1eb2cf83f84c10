#!/usr/bin/env bash
# Builds xlnet.cpp against a CUDA LibTorch (the PyTorch that `python3` imports,
# e.g. a pip wheel, through scripts/setup_cuda.sh --no-check, unless
# XLNET_GPU_PREBUILT=1 says that script just built it) and runs what needs a
# GPU:
#   1. the whole test suite against that LibTorch (CPU paths; Gloo tests are
#      skipped when its headers are missing, as in pip wheels),
#   2. the HuggingFace comparisons on the GPU (XLNET_TEST_DEVICE=cuda), with
#      the unfused core, the CUDA kernel (if built) and attention 'sdpa',
#   3. short pretraining runs of configs/tiny.yaml on cuda in fp32, bf16 and
#      fp16, each SIGKILLed after its step-100 checkpoint and resumed, with
#      the final weights compared to an uninterrupted run (bit-identical
#      expected: CUDA runs here are deterministic),
#   4. fine-tuning the fp32 run on the sample genre task on cuda, exporting
#      it, and scripts/check_hf_export.py (needs transformers) on the exports,
#   5. two ranks on the one GPU through torchrun, Gloo over CUDA tensors
#      (train.ranks_per_device=2), against one rank (needs gloo headers in
#      LibTorch, which pip wheels lack; skipped then, and said so).
# Extra dependency prefixes (absl, ICU, ...) go in XLNET_EXTRA_PREFIX
# (';'-separated; e.g. Debian packages unpacked with `dpkg -x` into /opt/deps
# give /opt/deps/usr, with LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu
# for running). Results land in ${XLNET_GPU_OUT:-runs/gpu_check}. Every step
# runs even when an earlier one failed; the script lists the failed steps and
# exits 1 at the end. XLNET_GPU_DEVICE=cpu runs steps 3-4 on the CPU (to
# check the script itself on a machine without a GPU).
set -uo pipefail
source "$(dirname "$0")/script_util.sh"
cd "$(dirname "$0")/.."
BUILD=${XLNET_BUILD_DIR:-build-cuda}
OUT=${XLNET_GPU_OUT:-runs/gpu_check}
PY=${PYTHON:-python3}
DEV=${XLNET_GPU_DEVICE:-cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
failed=()
check() {  # check NAME: records a failed step (call right after it)
  local rc=$?
  if ((rc != 0)); then
    failed+=("$1")
    echo "gpu_check: step '$1' failed (exit $rc)"
  fi
}
if [[ -z "${XLNET_GPU_PREBUILT:-}" ]]; then
  scripts/setup_cuda.sh --no-check --no-apt --python "$PY" --build-dir "$BUILD" \
    ${XLNET_EXTRA_PREFIX:+--deps-prefix "$XLNET_EXTRA_PREFIX"} || exit 1
fi
"$BUILD/bin/xlnet-inspect" --runtime | tee "$OUT/runtime.txt"

if [[ "$DEV" == cuda ]]; then
  echo "== 1. test suite"
  ctest --test-dir "$BUILD" --output-on-failure 2>&1 | tee "$OUT/ctest.txt"
  check "1. test suite"

  echo "== 2. HF comparisons on cuda (unfused, and the CUDA kernel if built)"
  XLNET_TEST_DEVICE=cuda "$BUILD/bin/xlnet_model_test" 2>&1 | tee "$OUT/hf_cuda.txt"
  check "2. HF comparisons on cuda"
  XLNET_TEST_DEVICE=cuda XLNET_TEST_ATTENTION=cuda "$BUILD/bin/xlnet_model_test" \
    --gtest_filter='GoldenTest.*:HfExtraTest.*:HfDh64Test.Matches*:CudaAttentionTest.*' 2>&1 |
    tee "$OUT/hf_cuda_kernel.txt"
  check "2. HF comparisons with train.attention=cuda"
  XLNET_TEST_DEVICE=cuda XLNET_TEST_ATTENTION=sdpa "$BUILD/bin/xlnet_model_test" \
    --gtest_filter='GoldenTest.*:HfExtraTest.*:HfDh64Test.Matches*:ActivationCheckpointTest.*:SdpaAttentionTest.*' \
    2>&1 | tee "$OUT/hf_cuda_sdpa.txt"
  check "2. HF comparisons with train.attention=sdpa"
fi

echo "== 3. pretraining on $DEV: SIGKILL after step 100, resume, compare"
DATA=$OUT/data
if [[ ! -e "$DATA/manifest.json" ]]; then
  "$BUILD/bin/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
    --vocab_size 1000 --out "$OUT/spiece.model" &&
  "$BUILD/bin/xlnet-data" prepare --input data/sample/brown_sample.txt \
    --tokenizer "$OUT/spiece.model" --out "$DATA"
  check "3. data"
fi
for dtype in fp32 bf16 fp16; do
  [[ "$DEV" == cpu && "$dtype" == fp16 ]] && continue
  common=(--config configs/tiny.yaml --data "$DATA"
          --set "train.device=$DEV" --set "train.dtype=$dtype"
          --set model.dropout=0 --set train.max_steps=300
          --set train.log_steps=100 --set train.save_steps=100
          --set train.keep_checkpoints=0 --set train.eval_steps=0)
  ref=$OUT/pretrain_$dtype
  run=$OUT/pretrain_${dtype}_killed
  rm -rf "$ref" "$run"
  "$BUILD/bin/xlnet-pretrain" "${common[@]}" --out "$ref" > "$ref.log" 2>&1
  check "3. pretraining $dtype"
  "$BUILD/bin/xlnet-pretrain" "${common[@]}" --out "$run" > "$run.log" 2>&1 &
  kill_when_exists $! "$run/checkpoints/step_100" 3000
  echo "$dtype: killed with $(ls "$run/checkpoints" 2>/dev/null | tr '\n' ' ')"
  "$BUILD/bin/xlnet-pretrain" "${common[@]}" --out "$run" --resume latest \
    >> "$run.log" 2>&1
  check "3. resuming $dtype"
  weights=checkpoints/step_300/model.safetensors
  if cmp -s "$ref/$weights" "$run/$weights"; then
    echo "$dtype: resumed run's step-300 weights are bit-identical"
  else
    echo "$dtype: resumed run's step-300 weights differ from the uninterrupted run"
    $PY - "$ref/$weights" "$run/$weights" <<'PY' 2>/dev/null
import sys
from safetensors.torch import load_file
a, b = (load_file(p) for p in sys.argv[1:])
print("max |weight diff|", max((a[k].double() - b[k].double()).abs().max().item() for k in a))
PY
    false
  fi
  check "3. exact resume $dtype"
  tail -n 1 "$ref/metrics.jsonl"
done

echo "== 4. fine-tuning, export, HuggingFace check"
CKPT=$OUT/pretrain_fp32/checkpoints/step_300
rm -rf "$OUT/finetune" "$OUT/export"
"$BUILD/bin/xlnet-finetune" --config configs/tiny-finetune.yaml \
  --task classification --init "$CKPT" --tokenizer "$OUT/spiece.model" \
  --train data/sample/genre_train.tsv --dev data/sample/genre_dev.tsv \
  --test data/sample/genre_test.tsv --out "$OUT/finetune" \
  --set "train.device=$DEV" 2>&1 | tee "$OUT/finetune.txt"
check "4. fine-tuning"
"$BUILD/bin/xlnet-export" --checkpoint "$OUT/finetune/best" \
  --out "$OUT/export/classifier"
check "4. export classifier"
"$BUILD/bin/xlnet-export" --checkpoint "$CKPT" --out "$OUT/export/encoder" \
  --encoder_only
check "4. export encoder"
if $PY -c 'import transformers' 2>/dev/null; then
  {
    $PY scripts/check_hf_export.py "$OUT/export/encoder" &&
    for split in dev test; do
      $PY scripts/check_hf_export.py "$OUT/export/classifier" --max_length 64 \
        --tsv data/sample/genre_$split.tsv \
        --predictions "$OUT/finetune/predictions_$split.tsv" || exit 1
    done
  } 2>&1 | tee "$OUT/hf_export.txt"
  check "4. HuggingFace loading check"
else
  echo "skipped the HuggingFace check: no transformers"
fi

if [[ "$DEV" == cuda ]]; then
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
      check "5. $ranks rank(s) on one GPU"
      tail -n 1 "$RUN/metrics.jsonl"
    done
  fi
fi

if ((${#failed[@]} > 0)); then
  echo "gpu_check: FAILED steps: ${failed[*]} ($OUT)"
  exit 1
fi
echo "gpu_check: all steps passed ($OUT)"
