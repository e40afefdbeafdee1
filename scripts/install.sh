#!/usr/bin/env bash
# Installs what torch_ringreduce needs and builds it; skips what is already there.
# Debian packages: UCX (libucx-dev, ucx-utils), GoogleTest, CMake, Ninja, pkg-config.
# PyPI: torch 2.13.0 (CPU build), pytest. The extension is built against the
# installed torch with --no-build-isolation, so pip never pulls a second torch.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# Probing torch must not depend on this package: a stale earlier install (its
# source folder gone) makes torch's backend autoload fail `import torch`.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
APT_PACKAGES=(libucx-dev ucx-utils libgtest-dev cmake ninja-build pkg-config g++)
TORCH_VERSION=2.13.0

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[install] apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$PYTHON" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "[install] pip install torch==$TORCH_VERSION"
  "$PYTHON" -m pip install -q "torch==$TORCH_VERSION"
fi
"$PYTHON" -c "import pytest" 2>/dev/null || "$PYTHON" -m pip install -q pytest
# NCCL, which the CUDA path loads with dlopen when it needs it: where nvcc
# compiles that path, the wheel's header checks our declarations of its ABI
# and its library the loader (tests/cpp/test_cuda_layer.cpp).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$PYTHON" -c "import nvidia.nccl" 2>/dev/null || "$PYTHON" -m pip install -q nvidia-nccl-cu13
fi
"$PYTHON" -c "import setuptools, wheel" 2>/dev/null || "$PYTHON" -m pip install -q setuptools wheel

# Editable build: the extension lands in torch_ringreduce/ and CMake keeps its
# build folder (build/py), so a rebuild only compiles what changed.
echo "[install] building torch_ringreduce against torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
set +e
"$PYTHON" -m pip install -q --no-build-isolation --no-deps -e . 2>&1 \
  | grep -v "Running pip as the 'root' user"
build_status=${PIPESTATUS[0]}
set -e
[ "$build_status" -eq 0 ] || { echo "[install] build failed (pip exit $build_status)" >&2; exit 1; }
"$PYTHON" -c "import torch_ringreduce" || { echo "[install] import failed" >&2; exit 1; }
