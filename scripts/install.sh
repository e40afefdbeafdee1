#!/usr/bin/env bash
# Installs what torch_ringreduce needs and builds it; skips what is already there.
# Debian packages: UCX (libucx-dev, ucx-utils), GoogleTest, CMake, Ninja, pkg-config.
# PyPI: torch, pytest, numpy, expecttest. An installed torch of 2.11 or newer is kept (your own
# `pip install torch`, either wheel); where there is none, torch 2.13.0 (RINGREDUCE_TORCH picks
# another), whatever `pip install torch==2.13.0` resolves to: on x86-64 from PyPI that is the CUDA
# wheel (several GB with its nvidia-* packages; it runs on machines without a GPU too). For the CPU
# wheel, install it first from PyTorch's CPU index (pip install torch==2.13.0 --index-url
# https://download.pytorch.org/whl/cpu). An older torch is left alone and the script stops,
# saying how to go on (scripts/torch_plan.sh).
# The extension is built against the installed torch with --no-build-isolation, so pip never
# pulls a second torch.
set -euo pipefail
cd "$(dirname "$0")/.."

# Probing torch must not depend on this package: a stale earlier install (its
# source folder gone) makes torch's backend autoload fail `import torch`.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
APT_PACKAGES=(libucx-dev ucx-utils libgtest-dev cmake ninja-build pkg-config g++)
# Debian's python3 needs its venv module to install anywhere (PEP 668).
if [ -z "${PYTHON:-}" ] && [ ! -x .venv/bin/python ] && command -v python3 >/dev/null &&
   ! python3 -c "import ensurepip" 2>/dev/null; then
  APT_PACKAGES+=(python3-venv)
fi

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

. scripts/python_env.sh
ringreduce_python_env create
echo "[install] python: $PYTHON"

. scripts/torch_plan.sh
installed_torch=$("$PYTHON" -c "import torch; print(torch.__version__)" 2>/dev/null || true)
plan=$(ringreduce_torch_plan "$installed_torch")
case "$plan" in
  install*)
    version=${plan#install }
    echo "[install] pip install torch==$version (from PyPI on x86-64: the CUDA wheel, several GB;" \
         "for the CPU wheel, install torch==$version from https://download.pytorch.org/whl/cpu first)"
    "$PYTHON" -m pip install -q "torch==$version"
    ;;
  refuse*)
    echo "[install] ${plan#refuse }" >&2
    exit 1
    ;;
  *)
    echo "[install] keeping the installed torch $installed_torch${plan#keep}"
    ;;
esac
"$PYTHON" -c "import pytest" 2>/dev/null || "$PYTHON" -m pip install -q pytest
# torch warns on every import without NumPy (a fresh venv has none).
"$PYTHON" -c "import numpy" 2>/dev/null || "$PYTHON" -m pip install -q numpy
# torch's own distributed test-suite (tests/python/test_torch_distributed_suite.py)
# imports torch.testing._internal.common_utils, which needs expecttest. Without
# an index (PIP_NO_INDEX) that module is skipped, not the whole install.
"$PYTHON" -c "import expecttest" 2>/dev/null || "$PYTHON" -m pip install -q expecttest ||
  echo "[install] expecttest unavailable: torch's own test-suite will be skipped" >&2
# NCCL, which the CUDA path loads with dlopen when it needs it: where nvcc
# compiles that path, the wheel's header checks our declarations of its ABI
# and its library the loader (tests/cpp/test_cuda_layer.cpp).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$PYTHON" -c "import nvidia.nccl" 2>/dev/null || "$PYTHON" -m pip install -q nvidia-nccl-cu13
fi
# pyproject.toml's build requirement: with --no-build-isolation it comes from
# this environment. Every pip form builds a wheel: setuptools >= 70.1 has
# bdist_wheel built in (Debian 12's venvs start with 66, without it).
"$PYTHON" -c "import setuptools.command.bdist_wheel" 2>/dev/null ||
  "$PYTHON" -m pip install -q "setuptools>=70.1"

# Editable build: the extension lands in torch_ringreduce/ and CMake keeps its
# build folder (build/py), so a rebuild only compiles what changed.
echo "[install] building torch_ringreduce against torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
set +e
"$PYTHON" -m pip install -q --no-build-isolation --no-deps -e . 2>&1 \
  | grep -v "Running pip as the 'root' user\|Location 'file:.*' is ignored"
build_status=${PIPESTATUS[0]}
set -e
[ "$build_status" -eq 0 ] || { echo "[install] build failed (pip exit $build_status)" >&2; exit 1; }
"$PYTHON" -c "import torch_ringreduce" || { echo "[install] import failed" >&2; exit 1; }
echo "[install] done: run your own scripts with $PYTHON (e.g. $PYTHON -m torch.distributed.run ...)"
