#!/usr/bin/env bash
# Transformer-XL's job on the bundled sample (README, "Causal language
# modelling"): a tiny causal LM (configs/tiny-clm.yaml, train.objective clm)
# and, for comparison, the tiny permutation LM (configs/tiny.yaml) pretrained
# the same number of steps on the first 21 documents of
# data/sample/brown_sample.txt, then scored by xlnet-lm on the last 4
# documents (held out: never trained on, tokenizer included):
#   1. perplexity and bits per byte with memory, without memory and with a
#      sliding window (segments of L = 64, memory M = 64, and M = 256);
#   2. evaluation speed of the memory mode against the sliding window at the
#      same attention length, for L = M = 32, 64, 128;
#   3. generation from a held-out prompt with the memory as the cache
#      against recomputing the window for every token (greedy, same tokens).
#
# usage: scripts/experiments/causal_lm.sh [OUT]
#   XLNET_BIN picks the binaries' folder; XLNET_STEPS (default 2000) the
#   pretraining steps; XLNET_THREADS (default 1) the threads of every
#   command. Finished runs are kept: a second call only scores.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/causal_lm}
BIN=${XLNET_BIN:-build/bin}
STEPS=${XLNET_STEPS:-2000}
THREADS=${XLNET_THREADS:-1}
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
mkdir -p "$OUT"

# Documents 1-21 for training, 22-25 held out (blank lines separate them).
SAMPLE=data/sample/brown_sample.txt
awk -v out="$OUT" 'BEGIN{d=1} /^$/{d++} {print > (d <= 21 ? out "/train.txt" : out "/heldout.txt")}' "$SAMPLE"
sed -i '1{/^$/d}' "$OUT/heldout.txt"
echo "train: $(wc -l <"$OUT/train.txt") lines; held out: $(wc -l <"$OUT/heldout.txt") lines"

[[ -f $OUT/spiece.model ]] || "$BIN/xlnet-data" tokenizer --input "$OUT/train.txt" \
  --vocab_size 1000 --out "$OUT/spiece.model"
[[ -f $OUT/data/manifest.json ]] || "$BIN/xlnet-data" prepare --input "$OUT/train.txt" \
  --tokenizer "$OUT/spiece.model" --out "$OUT/data"

pretrain() {  # NAME CONFIG
  local ckpt="$OUT/$1/checkpoints/step_$STEPS"
  if [[ ! -d $ckpt ]]; then
    local t0=$SECONDS
    "$BIN/xlnet-pretrain" --config "$2" --data "$OUT/data" --out "$OUT/$1" \
      --resume latest --set "train.max_steps=$STEPS" --set train.save_steps=0 \
      --set "train.threads=$THREADS" --set train.eval_steps=0 2>"$OUT/$1.log"
    echo "$1: pretrained $STEPS steps in $((SECONDS - t0)) s"
  fi
}
pretrain clm configs/tiny-clm.yaml
pretrain plm configs/tiny.yaml

echo "== 1. held-out perplexity (L = 64)"
for name in clm plm; do
  ckpt="$OUT/$name/checkpoints/step_$STEPS"
  "$BIN/xlnet-lm" eval --model "$ckpt" --text "$OUT/heldout.txt" --mode all \
    --seq_len 64 --mem_len 64 --batch_size 16 --json "$OUT/eval_$name.json"
  "$BIN/xlnet-lm" eval --model "$ckpt" --text "$OUT/heldout.txt" --mode memory \
    --seq_len 64 --mem_len 256 --json "$OUT/eval_${name}_m256.json"
done

echo "== 2. memory against sliding window, clm, L = M"
for l in 32 64 128; do
  "$BIN/xlnet-lm" eval --model "$OUT/clm/checkpoints/step_$STEPS" \
    --text "$OUT/heldout.txt" --mode memory --seq_len "$l" --mem_len "$l" \
    --max_tokens 4000 --json "$OUT/speed_memory_$l.json"
  "$BIN/xlnet-lm" eval --model "$OUT/clm/checkpoints/step_$STEPS" \
    --text "$OUT/heldout.txt" --mode sliding --seq_len "$l" --batch_size 16 \
    --max_tokens 4000 --json "$OUT/speed_sliding_$l.json"
done

echo "== 3. generation, clm, greedy, memory 256"
PROMPT=$(sed -n '3p' "$OUT/heldout.txt")
echo "prompt: $PROMPT"
for cache in "" --no_cache; do
  "$BIN/xlnet-lm" generate --model "$OUT/clm/checkpoints/step_$STEPS" \
    --prompt "$PROMPT" --max_new_tokens 200 --greedy --mem_len 256 $cache
done
"$BIN/xlnet-lm" generate --model "$OUT/clm/checkpoints/step_$STEPS" \
  --prompt "$PROMPT" --max_new_tokens 60 --temperature 0.8 --top_k 40 \
  --seed 7 --mem_len 256
