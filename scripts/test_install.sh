#!/usr/bin/env bash
# Installs an already-built tree into a temporary prefix and uses it as a
# user would: builds tests/install/ (find_package(xlnet_cpp), a forward of a
# tiny XLNet) against it and runs it, then runs the installed xlnet-data to
# train a tokenizer (proves it finds libxlnet_spm_bridge.so in
# PREFIX/lib/xlnet), checks the files beside the code (configs, licence,
# Debian copyright) and runs the installed xlnet-plot. Usage: scripts/test_install.sh [BUILD_DIR] (default
# build). Needs the libraries and tools built (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(realpath "${1:-build}")
SRC=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
cmake --install "$BUILD" --prefix "$tmp/prefix" >"$tmp/install.log"
cmake -S "$SRC/tests/install" -B "$tmp/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log"
ninja -C "$tmp/consumer" >"$tmp/build.log"
"$tmp/consumer/consumer"
"$tmp/prefix/bin/xlnet-export" --version
# The installed tool loads the SentencePiece bridge from beside itself
# (PREFIX/lib/xlnet), not from the build tree (the dynamic loader's log
# names the file it opened).
for i in $(seq 1 200); do
  echo "The quick brown fox $i jumps over the lazy dog number $((i * 7))."
done >"$tmp/corpus.txt"
env -u XLNET_SPM_BRIDGE LD_DEBUG=files "$tmp/prefix/bin/xlnet-data" tokenizer \
  --input "$tmp/corpus.txt" --vocab_size 100 --out "$tmp/spiece.model" \
  >"$tmp/data.log" 2>&1 || { cat "$tmp/data.log"; exit 1; }
if ! grep -q "file=$tmp/prefix/bin/../lib/xlnet/libxlnet_spm_bridge.so" \
    "$tmp/data.log"; then
  grep "spm_bridge" "$tmp/data.log" || true
  echo "test_install: the installed xlnet-data did not load PREFIX/lib/xlnet's bridge"
  exit 1
fi
test -s "$tmp/spiece.model"
# What else the package ships: every example config, the licence and
# Debian's copyright file (DEP-5, naming Apache-2.0), and xlnet-plot.
P="$tmp/prefix"
for f in configs/*.yaml; do
  test -s "$P/share/xlnet/$f" || { echo "test_install: $P/share/xlnet/$f missing"; exit 1; }
done
cmp -s LICENSE "$P/share/doc/xlnet-cpp/LICENSE" ||
  { echo "test_install: $P/share/doc/xlnet-cpp/LICENSE missing or not LICENSE"; exit 1; }
copyright="$P/share/doc/xlnet-cpp/copyright"
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' "$copyright" &&
  grep -q '^License: Apache-2.0' "$copyright" ||
  { echo "test_install: $copyright missing or not DEP-5 naming Apache-2.0"; exit 1; }
test -x "$P/bin/xlnet-plot" || { echo "test_install: $P/bin/xlnet-plot missing"; exit 1; }
(cd "$tmp" && "$P/bin/xlnet-plot" --help) >"$tmp/plot.log" 2>&1 ||
  { cat "$tmp/plot.log"; echo "test_install: the installed xlnet-plot --help failed"; exit 1; }
grep -q "usage: xlnet-plot" "$tmp/plot.log" ||
  { cat "$tmp/plot.log"; echo "test_install: xlnet-plot --help printed no usage"; exit 1; }
echo "test_install: ok ($(( $(date +%s) - start ))s)"
