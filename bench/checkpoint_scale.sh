#!/usr/bin/env bash
# Checkpoint cost per rank against the number of ranks: the real
# xlnet-pretrain launched as W = 1, 2, 4, 8 processes on this machine
# (srun's variables set by hand, as tests/train/launch_e2e_test.cc does),
# configs/tiny.yaml with a long memory (model.mem_len, default 1024) so that
# each rank's stream state (its memory) is a visible share of the bytes, on
# the bundled sample prepared as tests/tools/hf_check_test.sh prepares it.
# Each W trains until the memory is full (MEM_LEN / data.reuse_len 32 steps)
# and saves that step, then resumes it (--resume latest, one more step, no
# save). Per W it reports, from the INFO lines:
#   save_s          rank 0's save time ("saved checkpoint DIR in S s")
#   r0_checksummed  bytes rank 0 read to checksum while saving
#                   ("checksummed N bytes": the shared files and its own)
#   r0_verified     bytes rank 0 read to verify at resume ("rank 0 verified
#                   N bytes of DIR": the shared files and its own)
#   rk_verified     the most any other rank read to verify (its own files)
#   ckpt_bytes      the whole checkpoint; rank_bytes: one rank's own files
# The target: none of the first four grows with W. Nothing is asserted; on a
# shared machine say so next to any figure quoted.
#
#   bench/checkpoint_scale.sh OUT_DIR [MEM_LEN (1024)] [W list ("1 2 4 8")]
#
# Needs a build of xlnet-data and xlnet-pretrain (XLNET_BUILD_DIR, default
# build) with Gloo.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/checkpoint_scale.sh OUT_DIR [MEM_LEN] [W list]}
mem_len=${2:-1024}
worlds=${3:-"1 2 4 8"}
bin=${XLNET_BUILD_DIR:-build}/bin
for t in xlnet-data xlnet-pretrain; do
  [[ -x "$bin/$t" ]] || { echo "checkpoint_scale: $bin/$t missing: build it" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
results="$out/results.txt"
: >"$results"
note() { echo "$*" | tee -a "$results"; }
# The memory grows by data.reuse_len (32 in configs/tiny.yaml) per step.
steps=$((mem_len / 32 > 2 ? mem_len / 32 : 2))
note "checkpoint_scale: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), model.mem_len=$mem_len"

if [[ ! -d "$out/data" ]]; then
  "$bin/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
    --vocab_size 1000 --out "$out/spiece.model" >"$out/data.log" 2>&1
  "$bin/xlnet-data" prepare --input data/sample/brown_sample.txt \
    --tokenizer "$out/spiece.model" --out "$out/data" >>"$out/data.log" 2>&1
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Runs xlnet-pretrain as W tasks (logs RUN/taskT.PHASE.log); extra args after W.
launch() {
  local run=$1 phase=$2 w=$3
  shift 3
  local port pids=() t
  port=$(free_port)
  for ((t = 0; t < w; t++)); do
    env -u RANK -u WORLD_SIZE -u LOCAL_RANK XLNET_LOG_LEVEL=info \
      SLURM_PROCID=$t SLURM_LOCALID=$t SLURM_NTASKS=$w SLURM_NODEID=0 \
      SLURM_STEP_TASKS_PER_NODE=$w SLURM_JOB_ID=4242 \
      SLURM_JOB_NODELIST=localhost MASTER_PORT=$port \
      "$bin/xlnet-pretrain" --config configs/tiny.yaml --data "$out/data" \
      --out "$run" --set train.threads=1 --set train.eval_steps=0 \
      --set model.dropout=0 --set "model.mem_len=$mem_len" \
      --set "train.batch_size=$((2 * w))" --set train.log_steps=1 \
      --set train.keep_checkpoints=0 "$@" \
      >"$run.task$t.$phase.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for t in "${!pids[@]}"; do
    wait "${pids[$t]}" || { echo "task $t of $w ($phase) failed:" >&2; tail -5 "$run.task$t.$phase.log" >&2; failed=1; }
  done
  return $failed
}

note "$(printf '%-3s %8s %15s %13s %13s %12s %11s' W save_s r0_checksummed r0_verified rk_verified ckpt_bytes rank_bytes)"
for w in $worlds; do
  run="$out/w$w"
  rm -rf "$run" "$run".task*.log
  launch "$run" save "$w" --set "train.max_steps=$steps" \
    --set "train.save_steps=$steps"
  launch "$run" resume "$w" --set "train.max_steps=$((steps + 1))" \
    --set train.save_steps=0 --resume latest
  ckpt="$run/checkpoints/step_$steps"
  saved=$(grep -h "saved checkpoint $ckpt in" "$run.task0.save.log")
  save_s=$(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<<"$saved")
  checksummed=$(sed -E 's/.*checksummed ([0-9]+) bytes.*/\1/' <<<"$saved")
  r0=$(grep -h "rank 0 verified" "$run.task0.resume.log" | sed -E 's/.*verified ([0-9]+) bytes.*/\1/')
  rk=0
  for ((t = 1; t < w; t++)); do
    v=$(grep -h "rank $t verified" "$run.task$t.resume.log" | sed -E 's/.*verified ([0-9]+) bytes.*/\1/')
    ((v > rk)) && rk=$v
  done
  ckpt_bytes=$(du -sb "$ckpt" | cut -f1)
  rank_bytes=$(stat -c %s "$ckpt"/*.rank0.safetensors | awk '{s += $1} END {print s}')
  note "$(printf '%-3s %8s %15s %13s %13s %12s %11s' "$w" "$save_s" "$checksummed" "$r0" "$rk" "$ckpt_bytes" "$rank_bytes")"
done
