#!/usr/bin/env bash
# Packs binaries built on this machine against pip's LibTorch
# (scripts/test_libtorch2.sh) for a GPU machine that has PyTorch but no
# package registry or network, so that scripts/gpu_window.sh runs them
# there: the programs and tests it calls, the shared libraries they need
# besides LibTorch, CUDA and the C runtime (Debian's absl, ICU,
# SentencePiece, yaml-cpp, glog, ...) as ldd resolves them here, and the
# benchmark's prepared shards. Binaries and libraries are xz tarballs, so
# the folder stays small (about 40 MB for a full build).
#
# usage: scripts/gpu_bundle.sh OUT [BIN_DIR]
#   BIN_DIR: the binaries (default build-t2/bin; XLNET_TORCH2_DIR as in
#   test_libtorch2.sh, default build/torch2, for resolving their libraries)
#
# On the GPU machine, from the repository root:
#   eval "$(OUT/unpack.sh)"   # unpacks; sets XLNET_GPU_BIN, XLNET_GPU_LIB,
#                             # XLNET_GPU_DATA for gpu_window.sh
# A second bundle of the code before a change (another OUT) gives the
# baseline: XLNET_GPU_BASELINE_BIN=<its OUT>/bin.
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 1)) || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
OUT=$1
BIN=${2:-build-t2/bin}
TORCH2=${XLNET_TORCH2_DIR:-build/torch2}
fail() {
  echo "gpu_bundle: $*" >&2
  exit 1
}
[[ -x "$BIN/xlnet-bench" ]] || fail "no binaries in $BIN (build them with scripts/test_libtorch2.sh --build-only)"
# What gpu_window.sh runs; the tests it finds are optional.
programs=(xlnet-bench xlnet-bench-attention xlnet-pretrain xlnet-data
  xlnet-inspect xlnet_model_test xlnet_train_test xlnet_data_test)
files=()
for p in "${programs[@]}" libxlnet_spm_bridge.so; do
  [[ -e "$BIN/$p" ]] && files+=("$p")
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
tar -C "$BIN" -cJf "$OUT/bin.tar.xz" "${files[@]}"

# Libraries: what ldd resolves under the system's folders, but for the C
# runtime the GPU machine has its own (newer) copy of. LibTorch, CUDA and
# the nvidia wheels' libraries resolve under TORCH2 (they come with the
# GPU machine's torch).
torch_libs=$(find "$TORCH2" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
runtime='^(libc|libm|libdl|librt|libpthread|libutil|libstdc\+\+|libgcc_s|ld-linux-x86-64|libz)\.so'
libs=$(for f in "${files[@]}"; do
  LD_LIBRARY_PATH="$BIN${torch_libs:+:$torch_libs}:/usr/local/cuda/lib64" ldd "$BIN/$f"
done | awk '$2 == "=>" && $3 ~ /^\/(usr\/)?lib\// {print $3}' | sort -u |
  while read -r lib; do
    [[ "$(basename "$lib")" =~ $runtime ]] || echo "$lib"
  done)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for lib in $libs; do cp -L "$lib" "$stage/"; done
tar -C "$stage" -cJf "$OUT/lib.tar.xz" .

# The benchmark's shards, prepared with this machine's build (the format
# does not depend on it).
if [[ ! -e "$OUT/data/manifest.json" ]]; then
  data_bin=build/bin
  [[ -x "$data_bin/xlnet-data" ]] || data_bin=$BIN
  { "$data_bin/xlnet-data" tokenizer --input data/sample/brown_sample.txt \
    --vocab_size 1000 --out "$stage/spiece.model" &&
    "$data_bin/xlnet-data" prepare --input data/sample/brown_sample.txt \
      --tokenizer "$stage/spiece.model" --out "$OUT/data"; } \
    > "$stage/data.log" 2>&1 || { cat "$stage/data.log" >&2; fail "preparing the shards failed"; }
fi

cat > "$OUT/unpack.sh" << 'EOF'
#!/usr/bin/env bash
# Unpacks this bundle beside itself and prints the exports gpu_window.sh
# reads: eval "$(path/to/unpack.sh)".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/bin" "$here/lib"
tar -C "$here/bin" -xJf "$here/bin.tar.xz"
tar -C "$here/lib" -xJf "$here/lib.tar.xz"
echo "export XLNET_GPU_BIN='$here/bin' XLNET_GPU_LIB='$here/lib:$here/bin' XLNET_GPU_DATA='$here/data'"
EOF
chmod +x "$OUT/unpack.sh"
echo "gpu_bundle: $OUT: ${#files[@]} binaries, $(wc -w <<< "$libs") libraries, $(du -sh "$OUT" | cut -f1)"
