#!/usr/bin/env bash
# One GPU window, one phase per call, each well under 10 minutes: results as
# JSON and logs under $OUT (default runs/gpu_window), a short table last.
#
#   scripts/gpu_window.sh env        # the machine, the binaries' libraries
#   scripts/gpu_window.sh A          # kernels against their CPU code,
#                                    # compute-sanitizer, matmul peaks, copy
#                                    # bandwidth
#   scripts/gpu_window.sh B          # xlnet-bench at the base preset: each
#                                    # variant, baseline rerun beside it
#   scripts/gpu_window.sh C          # compare_hf.py on the best path, bf16
#                                    # loss against fp32, two-run determinism
#   scripts/gpu_window.sh D          # longer checks: SIGKILL + resume exact
#                                    # on the device, 2,000-step held-out
#                                    # losses per path, two ranks on one GPU
#                                    # (Gloo), what a checkpoint save costs
#                                    # the steps around it, SDPA backends
#   scripts/gpu_window.sh A B        # several phases in one call
#
# Binaries: XLNET_GPU_BIN (default build-cuda/bin; built by
# scripts/setup_cuda.sh --no-check when missing). XLNET_GPU_BASELINE_BIN,
# when set, holds the binaries of the code before a change: phase B runs
# them beside the new ones, interleaved (base, new, base, new), so the
# spread between two runs of one binary shows next to the difference.
# XLNET_GPU_EXTRA_BIN, when set, holds a third set (e.g. the new code
# built with -DXLNET_CUDA_PENDING=ON): phase B runs it after each new run,
# named extra_*. XLNET_GPU_PROFILE="name:--set ...": phase B then also
# profiles 2 steps of those settings with the new binaries and the extra
# ones (per-kernel times, and by launching operator: bench/trace_ops.py,
# printed).
# XLNET_GPU_LIB: extra library folders (':'-separated) the binaries need
# (e.g. Debian's absl, ICU, SentencePiece, yaml-cpp copied beside binaries
# built elsewhere); LibTorch's own folder is taken from python3's torch.
# XLNET_GPU_DATA: prepared shards for the benchmark (xlnet-data prepare);
# default: prepared here from data/sample/brown_sample.txt.
# scripts/gpu_bundle.sh packs binaries built elsewhere with their libraries
# and shards; its unpack.sh prints XLNET_GPU_BIN, XLNET_GPU_LIB and
# XLNET_GPU_DATA for them.
# XLNET_GPU_VARIANTS: phase B's variants, ';'-separated "name:--set k=v ..."
# (default below; a name starting with '+' runs the new binaries only, for
# a setting the baseline does not know). XLNET_GPU_KERNEL_TESTS: the gtest filter of the tests
# that run CUDA kernels against their CPU implementations (and HfDh64Test:
# the tensor-core kernels against HuggingFace; Bf16PathTest's weight casts,
# which run the cast kernel in builds with XLNET_CUDA_PENDING). XLNET_GPU_RACECHECK_TESTS,
# when set (e.g. CudaAttentionTest.TensorCoreKernelsMatchTheCpuPath): phase
# A also runs those tests under compute-sanitizer's racecheck (shared-memory
# hazards; XLNET_GPU_RACECHECK_TIMEOUT seconds, default 240).
#
# XLNET_GPU_DRY_RUN=1 runs every phase on the CPU with tiny sizes, to check
# the script itself on a machine without a GPU.
set -uo pipefail
source "$(dirname "$0")/script_util.sh"
(($# > 0)) || { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_window}
mkdir -p "$OUT"
BIN=${XLNET_GPU_BIN:-build-cuda/bin}
BASE_BIN=${XLNET_GPU_BASELINE_BIN:-}
EXTRA_BIN=${XLNET_GPU_EXTRA_BIN:-}
DRY=${XLNET_GPU_DRY_RUN:-0}
PY=${PYTHON:-python3}
check() {  # check NAME: records a failed step (call right after it)
  local rc=$?
  if ((rc != 0)); then

    echo "gpu_window: '$1' failed (exit $rc)"
  fi
}
run_logged() {  # run_logged LOG CMD...: the command's output into LOG
  local log=$1
  shift
  "$@" > "$log" 2>&1
}
# Every command's time, so the window's budget can be planned from the log.
timed() {  # timed NAME CMD...
  local name=$1 start=$SECONDS
  shift
  "$@"
  local rc=$?
  echo "gpu_window: $name took $((SECONDS - start)) s (exit $rc)"
  return $rc
}

if ((DRY)); then
  DEVICE=cpu
  CONFIG=configs/tiny.yaml
  STEPS=(--steps 3 --warmup 1)
else
  DEVICE=cuda
  CONFIG=configs/xlnet-base.yaml
  STEPS=(--steps 10 --warmup 3)
fi

torch_lib=$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
# The CUDA libraries of pip's nvidia-* wheels (cudart, cuBLAS, NCCL, ...),
# which binaries linked against that LibTorch need too.
nvidia_libs=$($PY -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null)
export LD_LIBRARY_PATH=${XLNET_GPU_LIB:+$XLNET_GPU_LIB:}${torch_lib:+$torch_lib:}${nvidia_libs:+$nvidia_libs:}${LD_LIBRARY_PATH:-}

if [[ ! -x "$BIN/xlnet-bench" ]]; then
  timed build scripts/setup_cuda.sh --no-check --no-apt --python "$PY" \
    --build-dir "$(dirname "$BIN")" || exit 1
fi

DATA=${XLNET_GPU_DATA:-$OUT/data}
prepare_data() {
  [[ -e "$DATA/manifest.json" ]] && return 0
  "$BIN/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
    --vocab_size 1000 --out "$OUT/spiece.model" &&
    "$BIN/xlnet-data" prepare --input data/sample/brown_sample.txt \
      --tokenizer "$OUT/spiece.model" --out "$DATA"
}

phase_env() {
  echo "== env"
  nvidia-smi 2>&1 | head -15
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))'
  for dir in "$BIN" ${BASE_BIN:+"$BASE_BIN"} ${EXTRA_BIN:+"$EXTRA_BIN"}; do
    for b in "$dir"/*; do
      [[ -x "$b" && -f "$b" ]] || continue
      missing=$(ldd "$b" 2>/dev/null | grep "not found")
      [[ -z "$missing" ]] || { echo "$b: $missing"; false; }
    done
  done
  check "env: libraries"
  "$BIN/xlnet-inspect" --runtime 2>&1 | tee "$OUT/runtime.txt"
  check "env: runtime"
}

phase_A() {
  echo "== A: kernels against their CPU implementations"
  local filter=${XLNET_GPU_KERNEL_TESTS:-'*Cuda*:*Fused*:*Sdpa*:*PositionBias*:HfDh64Test.*:Bf16PathTest.WeightsCastTogether*'}
  XLNET_TEST_DEVICE=$DEVICE timed "A kernels" run_logged "$OUT/A_kernels.log" \
    "$BIN/xlnet_model_test" --gtest_filter="$filter" \
    --gtest_output="json:$OUT/A_kernels.json"
  check "A: kernel tests"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/A_kernels.log"
  if [[ -x "$BIN/xlnet_train_test" ]]; then
    # The optimizer's device-side skip (train.step_reads: deferred).
    timed "A train" run_logged "$OUT/A_train.log" "$BIN/xlnet_train_test" \
      --gtest_filter="${XLNET_GPU_TRAIN_TESTS:-*Cuda*}"
    check "A: train tests on the device"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/A_train.log"
  fi
  if [[ -x "$BIN/xlnet_data_test" ]]; then
    XLNET_TEST_DEVICE=$DEVICE timed "A data" run_logged "$OUT/A_data.log" \
      "$BIN/xlnet_data_test" --gtest_filter="${XLNET_GPU_DATA_TESTS:-*Pinned*}"
    check "A: data tests on the device"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/A_data.log"
  fi
  local sanitize=${XLNET_GPU_SANITIZER_TESTS:-*Fused*Cuda*:CudaAttentionTest.TensorCoreKernelsOnDrawnProblems}
  if ((!DRY)) && command -v compute-sanitizer > /dev/null &&
    "$BIN/xlnet_model_test" --gtest_list_tests --gtest_filter="$sanitize" |
    grep -q "^  "; then
    # Memcheck slows the kernels tenfold and more: fewer drawn problems.
    XLNET_TEST_DEVICE=cuda XLNET_TC_RANDOM_PROBLEMS=8 timed "A sanitizer" \
      run_logged "$OUT/A_sanitizer.log" \
      timeout "${XLNET_GPU_SANITIZER_TIMEOUT:-120}" \
      compute-sanitizer --tool memcheck \
      --error-exitcode 9 "$BIN/xlnet_model_test" \
      --gtest_filter="$sanitize"
    check "A: compute-sanitizer"
    tail -n 3 "$OUT/A_sanitizer.log"
  fi
  # Shared-memory hazards the CPU emulation cannot see (a missing
  # __syncwarp between lanes of one warp), in the kernels' own tests.
  local racecheck=${XLNET_GPU_RACECHECK_TESTS:-}
  if ((!DRY)) && [[ -n "$racecheck" ]] && command -v compute-sanitizer > /dev/null; then
    XLNET_TEST_DEVICE=cuda timed "A racecheck" run_logged \
      "$OUT/A_racecheck.log" timeout "${XLNET_GPU_RACECHECK_TIMEOUT:-240}" \
      compute-sanitizer --tool racecheck --racecheck-report hazard \
      --error-exitcode 9 "$BIN/xlnet_model_test" \
      --gtest_filter="$racecheck"
    check "A: racecheck"
    tail -n 3 "$OUT/A_racecheck.log"
  fi
  echo "== A: matmul peaks and copy bandwidth"
  timed "A peaks" $PY - "$DEVICE" "$OUT/A_peaks.json" <<'PY'
import json, sys, torch
dev = sys.argv[1]
out = {}
def bench(fn, reps):
    fn()
    if dev == "cuda":
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            s.record(); fn(); e.record(); e.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
    else:
        import time
        times = []
        for _ in range(reps):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]
shapes = [("8192^3", 8192, 8192, 8192)] if dev == "cuda" else [("512^3", 512, 512, 512)]
# The base preset's products (tokens x in -> out): q/k/v/o and FFN over
# B*L = 16384 rows (and B*(M+L) = 28672 for keys/values).
if dev == "cuda":
    shapes += [("ffn1 16384x768x3072", 16384, 768, 3072),
               ("ffn2 16384x3072x768", 16384, 3072, 768),
               ("kv 28672x768x1536", 28672, 768, 1536),
               ("q 16384x768x768", 16384, 768, 768)]
for dtype in (torch.bfloat16, torch.float32):
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, m, k, n in shapes:
        a = torch.randn(m, k, device=dev, dtype=dtype)
        b = torch.randn(k, n, device=dev, dtype=dtype)
        t = bench(lambda: a @ b, 20)
        out[f"{name} {str(dtype)[6:]} TFLOP/s"] = round(2 * m * k * n / t / 1e12, 3)
n = (1 << 30) if dev == "cuda" else (1 << 24)
x = torch.randn(n // 4, device=dev)
y = torch.empty_like(x)
t = bench(lambda: y.copy_(x), 20)
out["d2d copy GB/s (read+write)"] = round(2 * n / t / 1e9, 1)
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
  check "A: peaks"
  cat "$OUT/A_peaks.json"
}

# bench_run NAME BIN [--set ...]: one xlnet-bench run at the preset.
bench_run() {
  local name=$1 bin=$2
  shift 2
  local log=$OUT/B_$name.log
  timed "B $name" run_logged "$log" "$bin/xlnet-bench" --config "$CONFIG" \
    --data "$DATA" "${STEPS[@]}" --matmul_seconds 1 \
    --set "train.device=$DEVICE" --json "$OUT/B_$name.json" "$@"
  check "B: $name"
  tail -n 1 "$log"
}

phase_B() {
  echo "== B: xlnet-bench ($CONFIG on $DEVICE)"
  prepare_data || { echo "gpu_window: 'B: data' failed"; return; }
  local variants=${XLNET_GPU_VARIANTS:-"bf16_sdpa:--set train.dtype=bf16 --set train.attention=sdpa --set train.fused_elementwise=true;bf16_cuda:--set train.dtype=bf16 --set train.attention=cuda --set train.fused_elementwise=true;bf16_unfused:--set train.dtype=bf16 --set train.attention=unfused --set train.fused_elementwise=false;+bf16_sdpa_deferred:--set train.dtype=bf16 --set train.attention=sdpa --set train.fused_elementwise=true --set train.step_reads=deferred"}
  local round spec name args
  for round in 1 2; do
    IFS=';' read -ra specs <<< "$variants"
    for spec in "${specs[@]}"; do
      name=${spec%%:*}
      read -ra args <<< "${spec#*:}"
      if [[ $name == +* ]]; then
        name=${name#+}  # "+name": a switch the baseline does not have
      elif [[ -n "$BASE_BIN" ]]; then
        bench_run "base_${name}_$round" "$BASE_BIN" "${args[@]}"
      fi
      bench_run "new_${name}_$round" "$BIN" "${args[@]}"
      if [[ -n "$EXTRA_BIN" ]]; then
        bench_run "extra_${name}_$round" "$EXTRA_BIN" "${args[@]}"
      fi
    done
    ((${XLNET_GPU_ROUNDS:-2} >= 2)) || break
  done
  if [[ -n "${XLNET_GPU_PROFILE:-}" ]]; then
    # XLNET_GPU_PROFILE="name:--set ...": the kernels of 2 more steps, of
    # the new binaries and (when set) the extra ones, printed too: which
    # kernels a change moved.
    name=${XLNET_GPU_PROFILE%%:*}
    read -ra args <<< "${XLNET_GPU_PROFILE#*:}"
    local set_name set_bin
    for set_name in new extra; do
      set_bin=$BIN
      if [[ $set_name == extra ]]; then
        [[ -n "$EXTRA_BIN" ]] || continue
        set_bin=$EXTRA_BIN
      fi
      local trace=$OUT/B_profile_${set_name}_$name.trace.json
      bench_run "profile_${set_name}_$name" "$set_bin" "${args[@]}" \
        --profile_steps 2 --profile_top 40 --profile_trace "$trace"
      sed -n '/kernel\|operator/,$p' "$OUT/B_profile_${set_name}_$name.log" |
        head -60 > "$OUT/B_profile_${set_name}_$name.txt"
      cat "$OUT/B_profile_${set_name}_$name.txt"
      # The same device time by the operator (and autograd node) that
      # launched each kernel: which op makes the copies, adds and
      # reductions. The trace itself is too large to bring back.
      if [[ -f $trace ]]; then  # not where LibTorch lacks Kineto (Debian's)
        timed "B trace_ops $set_name" run_logged \
          "$OUT/B_profile_${set_name}_${name}_ops.txt" \
          $PY bench/trace_ops.py "$trace" --steps 2 --top 60 --depth 3
        check "B: trace_ops $set_name"
        head -70 "$OUT/B_profile_${set_name}_${name}_ops.txt"
        rm -f "$trace"
      fi
    done
  fi
}

phase_C() {
  echo "== C: HuggingFace in the same invocation, loss, determinism"
  prepare_data || { echo "gpu_window: 'C: data' failed"; return; }
  # The defaults in bf16: attention auto (the tensor-core kernels where
  # built), fused_elementwise auto.
  local best=${XLNET_GPU_BEST:---set train.dtype=bf16}
  read -ra args <<< "$best"
  timed "C compare_hf" run_logged "$OUT/C_compare_hf.log" $PY \
    bench/compare_hf.py --config "$CONFIG" "${STEPS[@]:0:2}" \
    --bench "$BIN/xlnet-bench" --set "train.device=$DEVICE" "${args[@]}"
  check "C: compare_hf"
  tail -n 4 "$OUT/C_compare_hf.log"
  # Determinism of XLNET_GPU_DET's settings (default: the best path's).
  read -ra args <<< "${XLNET_GPU_DET:-$best}"
  local n=${XLNET_GPU_DET_STEPS:-200}
  for run in 1 2; do
    rm -rf "$OUT/C_det_$run"
    timed "C determinism $run" run_logged "$OUT/C_det_$run.log" \
      "$BIN/xlnet-pretrain" --config configs/tiny.yaml --data "$DATA" \
      --out "$OUT/C_det_$run" --set "train.device=$DEVICE" "${args[@]}" \
      --set "train.max_steps=$n" --set train.save_steps=$n \
      --set train.eval_steps=0 --set train.log_steps=$n
    check "C: determinism run $run"
  done
  local w=checkpoints/step_$n/model.safetensors
  if cmp -s "$OUT/C_det_1/$w" "$OUT/C_det_2/$w"; then
    echo "C: two identical runs: bit-identical weights" | tee "$OUT/C_det.txt"
  else
    echo "C: two identical runs: weights differ" | tee "$OUT/C_det.txt"
  fi
}

# D1: SIGKILL after the step-100 checkpoint, resume, compare with an
# uninterrupted run (bit-identical expected on the device too).
resume_check() {  # resume_check NAME [--set ...]
  local name=$1
  shift
  local common=(--config configs/tiny.yaml --data "$DATA"
    --set "train.device=$DEVICE" --set model.dropout=0
    --set train.max_steps=300 --set train.log_steps=100
    --set train.save_steps=100 --set train.keep_checkpoints=0
    --set train.eval_steps=0 "$@")
  local ref=$OUT/D_resume_${name}_ref run=$OUT/D_resume_${name}_killed
  rm -rf "$ref" "$run"
  timeout 300 "$BIN/xlnet-pretrain" "${common[@]}" --out "$ref" \
    > "$ref.log" 2>&1
  check "D: resume $name: reference run"
  "$BIN/xlnet-pretrain" "${common[@]}" --out "$run" > "$run.log" 2>&1 &
  kill_when_exists $! "$run/checkpoints/step_100"
  timeout 300 "$BIN/xlnet-pretrain" "${common[@]}" --out "$run" \
    --resume latest >> "$run.log" 2>&1
  check "D: resume $name: resumed run"
  local w=checkpoints/step_300/model.safetensors
  if cmp -s "$ref/$w" "$run/$w"; then
    echo "D: resume $name: killed with $(ls "$run/checkpoints" | paste -sd' '), step-300 weights bit-identical"
  else
    echo "D: resume $name: step-300 weights differ from the uninterrupted run"
    false
  fi
  check "D: exact resume $name"
}

phase_D() {
  echo "== D: exact resume, long losses, two ranks on one GPU, save stall"
  prepare_data || { echo "gpu_window: 'D: data' failed"; return; }
  # Which parts run: XLNET_GPU_D, a subset of "resume losses ranks save
  # probe" (default: all).
  local parts=" ${XLNET_GPU_D:-resume losses ranks save probe} "
  local spec name args
  # ';'-separated "name:--set k=v ..." as in phase B.
  # bf16_cuda64: tiny's head size 16 runs attention 'cuda' on the SIMT
  # kernels; one head of 64 runs it on the tensor-core kernels.
  local resumes=${XLNET_GPU_RESUME:-"bf16:--set train.dtype=bf16 --set train.fused_elementwise=false;bf16_fused:--set train.dtype=bf16 --set train.fused_elementwise=true;bf16_deferred:--set train.dtype=bf16 --set train.fused_elementwise=true --set train.step_reads=deferred;bf16_cuda64:--set train.dtype=bf16 --set train.fused_elementwise=true --set train.attention=cuda --set model.n_head=1 --set model.d_head=64"}
  ((DRY)) && resumes="fp32:--set train.dtype=fp32"
  [[ $parts == *" resume "* ]] || resumes=""
  IFS=';' read -ra specs <<< "$resumes"
  for spec in "${specs[@]}"; do
    read -ra args <<< "${spec#*:}"
    timed "D resume ${spec%%:*}" resume_check "${spec%%:*}" "${args[@]}"
  done

  # D2: held-out loss after N steps (tiny, dropout 0.1) for each path, the
  # runs side by side on the one device (each is deterministic alone).
  local n=${XLNET_GPU_LOSS_STEPS:-2000}
  ((DRY)) && n=20
  local losses=${XLNET_GPU_LOSSES:-"fp32:--set train.dtype=fp32 --set train.fused_elementwise=false;bf16:--set train.dtype=bf16 --set train.fused_elementwise=false;bf16_fused:--set train.dtype=bf16 --set train.fused_elementwise=true;bf16_sdpa_fused:--set train.dtype=bf16 --set train.attention=sdpa --set train.fused_elementwise=true"}
  ((DRY)) && losses="fp32:--set train.dtype=fp32;bf16:--set train.dtype=bf16"
  local pids=() start=$SECONDS
  [[ $parts == *" losses "* ]] || losses=""
  IFS=';' read -ra specs <<< "$losses"
  for spec in "${specs[@]}"; do
    name=${spec%%:*}
    read -ra args <<< "${spec#*:}"
    rm -rf "$OUT/D_loss_$name"
    timeout 400 "$BIN/xlnet-pretrain" --config configs/tiny.yaml \
      --data "$DATA" --out "$OUT/D_loss_$name" --set "train.device=$DEVICE" "${args[@]}" \
      --set "train.max_steps=$n" --set "train.eval_steps=$n" \
      --set "train.save_steps=$n" --set train.log_steps=100 \
      > "$OUT/D_loss_$name.log" 2>&1 &
    pids+=($!)
  done
  local failed=0 pid
  for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid" || failed=1; done
  echo "gpu_window: D losses took $((SECONDS - start)) s (exit $failed)"
  ((failed == 0))
  check "D: $n-step loss runs"
  ((${#specs[@]} > 0)) && $PY - "$OUT" "$n" "${specs[@]%%:*}" <<'PY' | tee "$OUT/D_losses.txt"
import json, sys
out, n, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in names:
    ev = tr = None
    try:
        for line in open(f"{out}/D_loss_{name}/metrics.jsonl"):
            j = json.loads(line)
            if "eval_loss" in j:
                ev = j["eval_loss"]
            elif "loss" in j:
                tr = j["loss"]
    except OSError as e:
        print(f"D: {name}: no metrics ({e})")
        continue
    print(f"D: {n} steps, {name:16s} held-out loss {ev}, last train loss {tr}")
PY

  # D3: two ranks on the one GPU (Gloo over CUDA tensors), fp32 and bf16
  # gradient reduction, against one rank.
  if ((!DRY)) && [[ $parts == *" ranks "* ]] && command -v torchrun > /dev/null; then
    local r dt
    for spec in 1:fp32 2:fp32 2:bf16; do
      r=${spec%%:*} dt=${spec#*:}
      rm -rf "$OUT/D_ranks_${r}_$dt"
      timed "D ranks $r $dt" run_logged "$OUT/D_ranks_${r}_$dt.log" \
        timeout 120 torchrun --nproc_per_node "$r" --redirects 1 --tee 1 --no_python \
        "$BIN/xlnet-pretrain" --config configs/tiny.yaml --data "$DATA" \
        --out "$OUT/D_ranks_${r}_$dt" --set train.device=cuda \
        --set train.ranks_per_device=2 --set model.dropout=0 \
        --set train.max_steps=50 --set train.log_steps=10 \
        --set "train.grad_reduce_dtype=$dt"
      check "D: $r rank(s) on one GPU, $dt reduce"
      echo "D: $r rank(s), $dt reduce: $(tail -n 1 "$OUT/D_ranks_${r}_$dt/metrics.jsonl" 2> /dev/null)"
    done
  fi

  # D4: what a checkpoint save costs the steps around it at the preset:
  # XLNET_GPU_SAVE_STEPS steps with a save every XLNET_GPU_SAVE_EVERY, each
  # mode of XLNET_GPU_SAVE_MODES (foreground, background:
  # train.background_save), read by bench/save_stall.py.
  local save_steps=${XLNET_GPU_SAVE_STEPS:-16} mode flag
  local every=${XLNET_GPU_SAVE_EVERY:-4}
  ((DRY)) && save_steps=8
  read -ra args <<< "${XLNET_GPU_SAVE_ARGS:-${XLNET_GPU_BEST:---set train.dtype=bf16}}"
  ((DRY)) && args=(--set train.dtype=fp32)
  [[ $parts == *" save "* ]] || save_steps=0
  ((save_steps > 0)) && for mode in ${XLNET_GPU_SAVE_MODES:-foreground}; do
    flag=()
    [[ $mode == background ]] && flag=(--set train.background_save=true)
    rm -rf "$OUT/D_save_$mode"
    XLNET_LOG_LEVEL=info timed "D save $mode" run_logged \
      "$OUT/D_save_$mode.log" timeout 300 "$BIN/xlnet-pretrain" \
      --config "$CONFIG" \
      --data "$DATA" --out "$OUT/D_save_$mode" --set "train.device=$DEVICE" \
      "${args[@]}" "${flag[@]}" --set "train.max_steps=$save_steps" \
      --set train.log_steps=1 --set "train.save_steps=$every" \
      --set train.eval_steps=0 --set train.keep_checkpoints=1
    check "D: save $mode"
    $PY bench/save_stall.py "$OUT/D_save_$mode.log" \
      --json "$OUT/D_save_$mode.json" | tee "$OUT/D_save_$mode.txt"
  done

  # D5: which SDPA backends take a bias with a gradient, and one layer's
  # core timed (bench/sdpa_probe.py).
  if ((!DRY)) && [[ $parts == *" probe "* ]]; then
    timed "D sdpa probe" run_logged "$OUT/D_sdpa_probe.log" \
      timeout 180 $PY bench/sdpa_probe.py --steps 10
    check "D: sdpa probe"
    tail -n 16 "$OUT/D_sdpa_probe.log"
  fi
}

summary() {
  $PY - "$OUT" <<'PY'
import glob, json, os, sys
rows = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "B_*.json"))):
    try:
        j = json.load(open(path))
    except Exception as e:
        rows.append((os.path.basename(path), "unreadable", "", "", "", ""))
        continue
    rows.append((os.path.basename(path)[2:-5],
                 f"{j.get('tokens_per_sec', 0):,.0f}",
                 f"{j.get('step_seconds_median', 0) * 1e3:.1f}",
                 f"{j.get('step_cpu_seconds_median', 0) * 1e3:.1f}",
                 f"{100 * j.get('fraction_of_matmul_peak', 0):.1f}%",
                 f"{j.get('gpu_peak_allocated_mb', -1):,.0f}"))
if rows:
    print(f"{'run':28} {'tokens/s':>10} {'ms/step':>8} {'cpu ms':>8} {'of peak':>8} {'peak MiB':>9}")
    for r in rows:
        print(f"{r[0]:28} {r[1]:>10} {r[2]:>8} {r[3]:>8} {r[4]:>8} {r[5]:>9}")
PY
}

for phase in "$@"; do
  case $phase in
    env) phase_env ;;
    A) phase_A ;;
    B) phase_B ;;
    C) phase_C ;;
    D) phase_D ;;
    *) echo "unknown phase '$phase' (env, A, B, C, D)"; exit 2 ;;
  esac
done 2>&1 | tee "$OUT/gpu_window.log"
summary | tee "$OUT/summary.txt"
if grep -q "^gpu_window: '.*' failed" "$OUT/gpu_window.log"; then
  echo "gpu_window: FAILED: $(grep "^gpu_window: '.*' failed" "$OUT/gpu_window.log" | sed "s/gpu_window: '\(.*\)' failed.*/\1/" | paste -sd,)"
  exit 1
fi
echo "gpu_window: all steps passed ($OUT)"
