#!/usr/bin/env bash
# The README's main command: install dependencies, build, and run the main
# job on the bundled sample corpus. It grows with the toolkit; today it
# builds and exercises xlnet-inspect on the presets and a tensor file.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BIN=build/bin
OUT=${XLNET_DEMO_OUT:-runs/demo}
mkdir -p "$OUT"

echo "== resolved tiny config (with an override)"
"$BIN/xlnet-inspect" configs/tiny.yaml --set train.max_steps=50 | tee "$OUT/tiny.resolved.yaml" | head -20
echo "== a malformed config is refused with the file, line and key:"
printf 'model:\n  d_modle: 64\n' > "$OUT/typo.yaml"
if "$BIN/xlnet-inspect" "$OUT/typo.yaml"; then echo "unexpected success" >&2; exit 1; fi
echo "demo: done (outputs in $OUT)"
