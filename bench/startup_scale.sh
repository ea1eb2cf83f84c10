#!/usr/bin/env bash
# What one rank reads of the shards to start, at world sizes 1, 2, 4 and 8:
# generates a corpus of SIZE_MB from the bundled Brown sample (documents
# reshuffled per copy, bench/make_corpus.py), trains a 1000-piece tokenizer
# on the sample, prepares the corpus in shards of about SHARD_MB of text,
# then for every rank r of W runs `xlnet-data dump --rank r --world_size W
# --batches 1` (open the training split, make rank r's first batch of a
# global batch of 8 rows, one stream each: bi_data off) and records the
# "rank r read N bytes of shard data to start" line and the command's wall
# time. The same runs follow on a copy of the directory whose
# manifest.json lacks the recorded split (as one written before it was
# recorded: every shard's document table read at start-up). Then, when
# xlnet-pretrain is built, a one-step run of configs/tiny.yaml with
# evaluation on (so the unigram baseline is formed at start-up) and no
# prefetching on W local ranks (--nproc_per_node W), for both directories: every rank's line and
# the run's wall time. Figures (per W: mean and largest bytes over the
# ranks, seconds) go to OUT/results.txt. Nothing is asserted; on a shared
# machine say so next to any figure quoted.
#
#   bench/startup_scale.sh OUT_DIR [SIZE_MB (default 200)] [SHARD_MB (1)]
#
# Needs a build (xlnet-data; xlnet-pretrain for the runs), python3 and
# about 3 x SIZE_MB of free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/startup_scale.sh OUT_DIR [SIZE_MB] [SHARD_MB]}
size_mb=${2:-200}
shard_mb=${3:-1}
bin=${XLNET_BUILD_DIR:-build}/bin
[[ -x "$bin/xlnet-data" ]] || { echo "startup_scale: $bin/xlnet-data missing: run scripts/build.sh" >&2; exit 1; }
mkdir -p "$out"
results="$out/results.txt"
: >"$results"
note() { echo "$*" | tee -a "$results"; }

note "startup_scale: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
note "build: $("$bin/xlnet-data" --version 2>&1 | head -1)"

corpus="$out/corpus.txt"
if [[ ! -s "$corpus" ]] || (( $(stat -c %s "$corpus") < size_mb * 1000000 )); then
  python3 bench/make_corpus.py "$corpus" "$size_mb" data/sample/brown_sample.txt
fi

export XLNET_LOG_LEVEL=info
"$bin/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
  --vocab_size 1000 --out "$out/spiece.model" >/dev/null 2>&1
start=$(date +%s.%N)
"$bin/xlnet-data" prepare --input "$corpus" --tokenizer "$out/spiece.model" \
  --out "$out/data" --workers 2 --shard_bytes $((shard_mb * 1000000)) \
  >"$out/prepare.log" 2>&1
note "prepare: $(grep -m1 '^prepared' "$out/prepare.log" | cut -c1-160) ($(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s)"
note "shard data: $(du -cb "$out"/data/shard-*.bin | tail -1 | cut -f1) bytes in $(ls "$out"/data/shard-*.bin | wc -l) shards; manifest.json $(stat -c %s "$out/data/manifest.json") bytes"

# The same shards (hard links) under a manifest without the split.
rm -rf "$out/data_old"
cp -al "$out/data" "$out/data_old"
rm "$out/data_old/manifest.json"
python3 - "$out/data/manifest.json" "$out/data_old/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m.pop("split", None)
json.dump(m, open(sys.argv[2], "w"), indent=2)
EOF

# One rank's start: bytes (from its log line) and wall seconds.
run_rank() {
  local dir=$1 rank=$2 world=$3 log="$out/dump.log"
  local t0 t1
  t0=$(date +%s.%N)
  "$bin/xlnet-data" dump --data "$dir" --batches 1 --rank "$rank" \
    --world_size "$world" --set train.batch_size=8 --set data.bi_data=false \
    --set data.prefetch_batches=0 --set data.seq_len=128 \
    --set data.reuse_len=64 --set data.perm_size=64 --set data.num_predict=20 \
    --out "$out/dump.safetensors" >"$log" 2>&1
  t1=$(date +%s.%N)
  local bytes
  bytes=$(sed -n 's/.*rank [0-9]* read \([0-9]*\) bytes of shard data to start.*/\1/p' "$log")
  [[ -n "$bytes" ]] || { echo "startup_scale: no start-up line in $log" >&2; cat "$log" >&2; exit 1; }
  echo "$bytes $(python3 -c "print(f'{$t1 - $t0:.3f}')")"
}

# 1. The batch source alone: every rank r of W in its own process.
for variant in data data_old; do
  note ""
  note "dump, $variant ($([[ $variant == data ]] && echo "split recorded: per slice" || echo "no split recorded: every shard's table"))"
  note "   W   mean bytes/rank    max bytes/rank   mean s/rank"
  for world in 1 2 4 8; do
    sum=0 max=0 secs=()
    for ((r = 0; r < world; ++r)); do
      read -r bytes s < <(run_rank "$out/$variant" "$r" "$world")
      sum=$((sum + bytes)); ((bytes > max)) && max=$bytes
      secs+=("$s")
    done
    mean_s=$(python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(f'{sum(v)/len(v):.2f}')" "${secs[@]}")
    note "$(printf '%4d %17d %17d %13s' "$world" $((sum / world)) "$max" "$mean_s")"
  done
done

# 2. xlnet-pretrain on W local ranks (configs/tiny.yaml, global batch 8,
# evaluation on, so the unigram baseline is formed at start-up; one step;
# no prefetching, so the line counts the first batch and not also the
# steps the loader thread built ahead while the model was set up): every
# rank's start-up line, and the run's wall time.
if [[ -x "$bin/xlnet-pretrain" ]]; then
  for variant in data data_old; do
    note ""
    note "xlnet-pretrain --nproc_per_node W, $variant"
    note "   W   mean bytes/rank    max bytes/rank   run s"
    for world in 1 2 4 8; do
      rm -rf "$out/run"
      t0=$(date +%s.%N)
      "$bin/xlnet-pretrain" --nproc_per_node "$world" --config configs/tiny.yaml \
        --data "$out/$variant" --out "$out/run" --set train.max_steps=1 \
        --set train.save_steps=0 --set train.eval_steps=1 \
        --set train.eval_batches=1 --set data.eval_fraction=0.01 \
        --set data.prefetch_batches=0 --set train.threads=1 \
        >"$out/pretrain.log" 2>&1 ||
        { echo "startup_scale: xlnet-pretrain failed" >&2; tail "$out/pretrain.log" >&2; exit 1; }
      t1=$(date +%s.%N)
      mapfile -t all < <(sed -n 's/.*rank [0-9]* read \([0-9]*\) bytes of shard data to start.*/\1/p' "$out/pretrain.log")
      (( ${#all[@]} == world )) || { echo "startup_scale: ${#all[@]} start-up lines for $world ranks" >&2; exit 1; }
      sum=0 max=0
      for b in "${all[@]}"; do sum=$((sum + b)); ((b > max)) && max=$b; done
      note "$(printf '%4d %17d %17d %7s' "$world" $((sum / world)) "$max" "$(python3 -c "print(f'{$t1 - $t0:.1f}')")")"
    done
  done
fi
