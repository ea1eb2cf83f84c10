#!/usr/bin/env bash
# Installs xlnet.cpp's build and runtime dependencies from Debian 12 packages.
# Idempotent: installs only what is missing. As root it runs apt-get itself;
# otherwise it prints the exact command to run and exits non-zero.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config
  libtorch-dev               # LibTorch 1.13.1 (CPU)
  libsentencepiece-dev       # tokenizer training and encoding
  libicu-dev                 # Unicode normalisation and case rules of the tokenizer
  libabsl-dev                # absl::Status / StatusOr, strings
  libyaml-cpp-dev            # configs
  nlohmann-json3-dev         # safetensors headers, config.json, manifests
  libgtest-dev               # tests
  zlib1g-dev                 # CRC-32 checksums of checkpoints; .gz corpora (prepare)
  libzstd-dev                # .zst corpora (xlnet-data prepare)
  libgloo-dev                # headers for c10d's Gloo backend (CPU data parallel)
  libopenblas0-openmp        # fast BLAS for LibTorch (5-11x the reference BLAS)
  python3-matplotlib         # xlnet-plot (tools/xlnet_plot.py): loss curves to PNG
  python3-torch              # torchrun (PyTorch 1.13) for the launch tests (tests/train/launch_e2e_test.cc); the torch of scripts/setup_python.sh's venv
  python3-venv               # scripts/setup_python.sh: the venv of the transformers/TensorBoard checks
  python3-protobuf           # tests/train/read_tfevents.py: the independent reader of TensorBoard event files
  iproute2                   # ip netns: the two hosts of tests/train/two_host_test.sh
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  [[ "$pkg" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run as root:  sudo sh -c '$cmd'" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch calls BLAS through libblas.so.3; point it at OpenBLAS (OpenMP
# build, which shares LibTorch's thread pool) rather than the reference BLAS.
arch_dir=/usr/lib/x86_64-linux-gnu
want="$arch_dir/openblas-openmp/libblas.so.3"
current=$(readlink -f "$arch_dir/libblas.so.3" 2>/dev/null || true)
current0=$(readlink -f "$arch_dir/libopenblas.so.0" 2>/dev/null || true)
if [[ -e "$want" && ( "$current" != "$(readlink -f "$want")" ||
      ( -n "$current0" && "$current0" != *openblas-openmp* ) ) ]]; then
  if [[ $(id -u) -eq 0 ]]; then
    update-alternatives --set libblas.so.3-x86_64-linux-gnu "$want" >/dev/null
    update-alternatives --set liblapack.so.3-x86_64-linux-gnu \
      "$arch_dir/openblas-openmp/liblapack.so.3" >/dev/null
    # LibTorch also links libopenblas.so.0 directly (its own alternative).
    if update-alternatives --list libopenblas.so.0-x86_64-linux-gnu >/dev/null 2>&1; then
      update-alternatives --set libopenblas.so.0-x86_64-linux-gnu \
        "$arch_dir/openblas-openmp/libopenblas.so.0" >/dev/null
    fi
    echo "setup: libblas.so.3 -> OpenBLAS (OpenMP)"
  else
    echo "setup: warning: libblas.so.3 is $current, not OpenBLAS; run as root:" >&2
    echo "  update-alternatives --set libblas.so.3-x86_64-linux-gnu $want" >&2
  fi
fi
echo "setup: dependencies present"
