#!/usr/bin/env bash
# README command 2: install what is needed, then run the whole suite:
# GoogleTest (through CTest) for the torch-free layers, then pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh || exit 1
. scripts/python_env.sh
ringreduce_python_env || exit 1

# Tests use loopback only.
export UCX_NET_DEVICES=lo
export OMP_NUM_THREADS=1

echo "=== C++ unit tests (GoogleTest via CTest) ==="
cmake -S . -B build/cpp -G Ninja -DRINGREDUCE_BUILD_PYTHON=OFF -DRINGREDUCE_BUILD_TESTS=ON \
    -DRINGREDUCE_PYTHON="$(command -v "$PYTHON")" >/dev/null \
  && cmake --build build/cpp >/dev/null \
  && ctest --test-dir build/cpp --output-on-failure --timeout 120
cpp_status=$?

echo "=== Python tests (pytest) ==="
"$PYTHON" -m pytest tests/python tests/gpu -ra -p no:cacheprovider "$@"
py_status=$?

if [ $cpp_status -ne 0 ] || [ $py_status -ne 0 ]; then
  echo "FAILED: ctest exit $cpp_status, pytest exit $py_status"
  exit 1
fi
