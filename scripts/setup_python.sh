#!/usr/bin/env bash
# Creates or updates the Python environment of the transformers/TensorBoard
# checks (CTest xlnet_hf_check_test, scripts/check_hf_export.py,
# scripts/check_tensorboard.py): a venv at BUILD_DIR/pyenv (default
# build/pyenv; XLNET_BUILD_DIR as scripts/build.sh) made from Debian's
# /usr/bin/python3 with --system-site-packages, so it uses python3-torch 1.13
# from scripts/setup.sh, plus the exact versions of
# scripts/requirements-check.txt from PyPI (never torch).
#
# Idempotent: when the venv's stamp matches the requirements file and the
# packages import, it returns at once without touching the network.
# Outside CI a failure (an offline machine) prints what is missing and exits
# 0: the checks then skip, naming what to install. With CI set (CI=true, as
# CI runners set it) a failure exits 1, and the checks fail rather than skip.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${XLNET_BUILD_DIR:-build}
VENV="$BUILD_DIR/pyenv"
REQUIREMENTS=scripts/requirements-check.txt
BASE_PYTHON=${XLNET_BASE_PYTHON:-/usr/bin/python3}
IMPORTS="import torch, transformers, sentencepiece, tensorboard"

fail() {
  echo "setup_python: $*" >&2
  if [[ -n "${CI:-}" ]]; then
    echo "setup_python: CI is set, so this is an error" >&2
    exit 1
  fi
  echo "setup_python: the transformers/TensorBoard checks will skip;" \
    "rerun scripts/setup_python.sh with network access to install them" >&2
  exit 0
}

stamp="$("$BASE_PYTHON" --version 2>&1) $(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$VENV/.xlnet-stamp" &&
      "$(cat "$VENV/.xlnet-stamp")" == "$stamp" ]] &&
   "$VENV/bin/python" -c "$IMPORTS" 2>/dev/null; then
  echo "setup_python: $VENV up to date"
  exit 0
fi

"$BASE_PYTHON" -c "import torch" 2>/dev/null ||
  fail "$BASE_PYTHON cannot import torch: install python3-torch (scripts/setup.sh)"
mkdir -p "$BUILD_DIR"
if [[ ! -x "$VENV/bin/python" ]]; then
  "$BASE_PYTHON" -m venv --system-site-packages "$VENV" ||
    fail "could not create the venv $VENV (Debian: install python3-venv, scripts/setup.sh)"
fi
rm -f "$VENV/.xlnet-stamp"
echo "setup_python: installing $REQUIREMENTS into $VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-input -r "$REQUIREMENTS" ||
  fail "pip could not install $REQUIREMENTS into $VENV"
"$VENV/bin/python" -c "$IMPORTS" ||
  fail "$VENV/bin/python cannot import the checked packages after pip install"
echo "$stamp" >"$VENV/.xlnet-stamp"
echo "setup_python: $VENV ready ($("$VENV/bin/python" -c \
  'import torch, transformers, tensorboard
print(f"torch {torch.__version__}, transformers {transformers.__version__}, tensorboard {tensorboard.__version__}")'))"
