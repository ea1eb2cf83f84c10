#!/usr/bin/env bash
# Configures and builds xlnet.cpp (Release, Ninja) into build/.
# Extra arguments go to cmake, e.g. scripts/build.sh -DXLNET_SANITIZE=address
# XLNET_TARGETS="a b" builds only those ninja targets (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${XLNET_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
read -r -a targets <<<"${XLNET_TARGETS:-}"
ninja -C "$BUILD_DIR" -j "${XLNET_JOBS:-$(nproc)}" "${targets[@]}"
"$BUILD_DIR/bin/xlnet-inspect" --runtime
