#!/usr/bin/env bash
# The data pipeline at corpus scale (#17): generates a corpus of SIZE_MB from
# the bundled Brown sample (documents reshuffled per copy, so no two copies
# are byte-identical in order), then measures with /usr/bin/time -v:
#   1. xlnet-data tokenizer at its default sample (--max_sentences 10M) or,
#      when the memory estimate refuses that, at the largest sample the tool
#      says fits (the refusal and its figures are recorded);
#   2. xlnet-data prepare with 1 and 2 workers: tokens/s and peak RSS;
#   3. xlnet-pretrain (configs/small.yaml, 1 step, no checkpoint): wall time
#      from start to the first step's metrics line and peak RSS.
# Figures go to OUT/results.txt. Nothing here is asserted; on a shared
# machine say so next to any figure quoted.
#
#   bench/corpus_scale.sh OUT_DIR [SIZE_MB (default 2100)] [VOCAB (16000)]
#
# VOCAB defaults to 16000, not the official 32000: the generated corpus is
# the bundled sample repeated, whose distinct text yields at most ~16,250
# pieces (SentencePiece refuses 32000 with "Vocabulary size too high ...
# <= 16251", after training: measured 2026-11-23 at 8.2M sentences).
#
# Needs a build (scripts/build.sh) and about 4 x SIZE_MB of free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/corpus_scale.sh OUT_DIR [SIZE_MB] [VOCAB]}
size_mb=${2:-2100}
vocab=${3:-16000}
bin=${XLNET_BUILD_DIR:-build}/bin
for t in xlnet-data xlnet-pretrain; do
  [[ -x "$bin/$t" ]] || { echo "corpus_scale: $bin/$t missing: run scripts/build.sh" >&2; exit 1; }
done
[[ -x /usr/bin/time ]] || { echo "corpus_scale: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
mkdir -p "$out"
results="$out/results.txt"
: >"$results"
note() { echo "$*" | tee -a "$results"; }

# Peak RSS (MiB) and wall seconds of a /usr/bin/time -v log.
rss_mib() { awk -F: '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$1"; }
wall_s() {
  awk -F': ' '/Elapsed \(wall clock\)/ {
    n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.1f", s }' "$1"
}

note "corpus_scale: $(date -u +%FT%TZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
note "build: $("$bin/xlnet-data" --version 2>&1 | head -1)"

corpus="$out/corpus.txt"
if [[ ! -s "$corpus" ]] || (( $(stat -c %s "$corpus") < size_mb * 1000000 )); then
  python3 bench/make_corpus.py "$corpus" "$size_mb" data/sample/brown_sample.txt
fi
bytes=$(stat -c %s "$corpus")
lines=$(grep -c . "$corpus" || true)
note "corpus: $corpus, $((bytes / 1000000)) MB, $lines sentences"

# 1. Tokenizer at the default sample, else the largest sample that fits.
tok_log="$out/tokenizer.log"
if /usr/bin/time -v -o "$out/tokenizer.time" "$bin/xlnet-data" tokenizer \
    --input "$corpus" --vocab_size "$vocab" --out "$out/spiece.model" >"$tok_log" 2>&1; then
  note "tokenizer (default --max_sentences): $(wall_s "$out/tokenizer.time") s, peak RSS $(rss_mib "$out/tokenizer.time") MiB"
else
  note "tokenizer (default --max_sentences) refused: $(tail -1 "$tok_log")"
  fit=$(grep -o 'about [0-9]* fit' "$tok_log" | head -1 | grep -o '[0-9]*' || true)
  [[ -n "$fit" ]] || { echo "corpus_scale: no sentence count in $tok_log" >&2; exit 1; }
  /usr/bin/time -v -o "$out/tokenizer.time" "$bin/xlnet-data" tokenizer \
      --input "$corpus" --vocab_size "$vocab" --out "$out/spiece.model" \
      --max_sentences "$fit" >"$tok_log" 2>&1
  note "tokenizer (--max_sentences $fit): $(wall_s "$out/tokenizer.time") s, peak RSS $(rss_mib "$out/tokenizer.time") MiB"
fi
note "  $(grep -m1 'training needs' "$tok_log" || true)"

# 2. prepare with 1 and 2 workers.
for w in 1 2; do
  rm -rf "$out/data_w$w"
  /usr/bin/time -v -o "$out/prepare_w$w.time" "$bin/xlnet-data" prepare \
      --input "$corpus" --tokenizer "$out/spiece.model" --out "$out/data_w$w" \
      --workers "$w" >"$out/prepare_w$w.log" 2>&1
  note "prepare --workers $w: $(wall_s "$out/prepare_w$w.time") s, peak RSS $(rss_mib "$out/prepare_w$w.time") MiB; $(grep -o '[0-9]* tokens/s' "$out/prepare_w$w.log" | tail -1)"
done
note "  shards: $(du -sm "$out/data_w2" | cut -f1) MiB"

# 3. Time to the first pretraining step and its RSS.
rm -rf "$out/run"
start=$(date +%s.%N)
/usr/bin/time -v -o "$out/pretrain.time" "$bin/xlnet-pretrain" --config configs/small.yaml \
    --data "$out/data_w2" --out "$out/run" --set model.vocab_size="$vocab" \
    --set train.max_steps=1 --set train.save_steps=0 --set train.log_steps=1 \
    --set train.eval_steps=0 >"$out/pretrain.log" 2>&1
first=$(stat -c %.9Y "$out/run/metrics.jsonl")
note "xlnet-pretrain small, 1 step: first metrics line after $(awk -v a="$start" -v b="$first" 'BEGIN {printf "%.1f", b - a}') s; whole run (incl. the final checkpoint) $(wall_s "$out/pretrain.time") s; peak RSS $(rss_mib "$out/pretrain.time") MiB"
echo "corpus_scale: figures in $results"
