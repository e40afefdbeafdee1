#!/usr/bin/env bash
# On a GPU machine: build against that machine's torch, run tests/gpu, print
# the benchmark table last. Needs .gpu/ from scripts/gpu_prepare.sh (UCX and
# pytest wheels, which the GPU machine lacks).
#   bash scripts/gpu_check.sh [quick|latency|all|build|test|bench] [arguments for pytest or the benchmark]
# `quick` fits one 8-minute call on a 16-core H100, build included: each
# phase under its own `timeout`, so one hang costs that phase, not the call
# (bash scripts/gpu_check.sh quick; timings: its last table). `latency` is
# the quick check's latency phases alone (the build, incremental, then
# benchmarks/cuda_latency.py under MPS and without: the plain-kernel floor,
# worlds 1, 2 and 4, NCCL at world 1, the sweep; $OUT/bench.txt). `all` does
# build, test and bench in order. Where one command may run for 10 minutes
# at most (the device tool), run `build`, then `test` (pytest's -k can split
# it), then `bench`, in calls on the same warm machine: the build stays in
# the tree. Results also go to $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/ringreduce-gpu}
mkdir -p "$OUT"
ROOT=$PWD/.gpu/root
if [ ! -d "$ROOT/usr/include/ucp" ]; then
  echo "missing .gpu/root: run scripts/gpu_prepare.sh where Debian's packages are, and carry .gpu" >&2
  exit 2
fi
export LD_LIBRARY_PATH=$ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_NET_DEVICES=lo UCX_LOG_LEVEL=error
# Nothing can be fetched there: every pip call uses the carried wheels only.
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.gpu/wheels
"$PYTHON" -c "import pytest" 2>/dev/null || "$PYTHON" -m pip install -q pytest
"$PYTHON" -c "import setuptools.command.bdist_wheel" 2>/dev/null ||
  "$PYTHON" -m pip install -q "setuptools>=70.1"

phase=${1:-all}
[ $# -gt 0 ] && shift
status=0

if [ "$phase" = quick ]; then
  exec bash scripts/gpu_quick.sh
fi
if [ "$phase" = latency ]; then
  RINGREDUCE_GPU_PHASES=bench-mps,bench exec bash scripts/gpu_quick.sh
fi

if [ "$phase" = all ] || [ "$phase" = build ]; then
  nvidia-smi -L || true
  # The image's default CXX and CUDAHOSTCXX (/opt/gcc/bin/g++) link
  # libstdc++ statically, which crashes beside torch's: the build picks a
  # compatible compiler itself and says which (cmake/toolchain_check.py).
  echo "CXX=${CXX:-unset} CUDAHOSTCXX=${CUDAHOSTCXX:-unset} c++: $(c++ --version | head -1)"
  echo "=== build (torch $("$PYTHON" -c 'import torch; print(torch.__version__)')) ==="
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
  export CMAKE_ARGS="-DRINGREDUCE_UCX_ROOT=$ROOT"
  rm -rf build/py
  "$PYTHON" -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 ||
    { tail -60 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  grep -i "compiler\|not using" "$OUT/build.log" | head -5
  "$PYTHON" -m torch_ringreduce.info --require cuda,gpu | tee "$OUT/info.txt" ||
    { echo "INFO REPORTS PROBLEMS"; exit 1; }
fi

if [ "$phase" = all ] || [ "$phase" = test ]; then
  echo "=== tests/gpu ==="
  if [ "$phase" = all ]; then set --; fi
  "$PYTHON" -m pytest tests/gpu -ra -p no:cacheprovider -q "$@" 2>&1 | tee "$OUT/gpu_tests.txt"
  status=${PIPESTATUS[0]}
fi

if [ "$phase" = all ] || [ "$phase" = bench ]; then
  echo "=== benchmark ==="
  if [ "$phase" = all ]; then set --; fi
  "$PYTHON" benchmarks/cuda_allreduce.py "$@" 2>&1 | tee "$OUT/benchmark.txt"
fi
exit "$status"
