#!/usr/bin/env bash
# README command 2: install what is needed, then run the whole suite:
# GoogleTest (through CTest) for the torch-free layers, then pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh || exit 1
. scripts/python_env.sh
ringreduce_python_env || exit 1

# The frameworks our users reach us through (tests/python/test_frameworks.py),
# pinned so that CI runs what was checked. Only the suite needs them; without
# a package index their tests are skipped and say so.
"$PYTHON" -c "import lightning, accelerate, transformers" 2>/dev/null ||
  "$PYTHON" -m pip install -q "lightning==2.6.6" "accelerate==1.15.0" "transformers==4.57.6" 2>&1 |
    grep -v "Running pip as the 'root' user\|Location 'file:.*' is ignored" ||
  true
"$PYTHON" -c "import lightning, accelerate, transformers" 2>/dev/null ||
  echo "[test] lightning/accelerate/transformers unavailable: their tests will be skipped" >&2
# cloudpickle, which Horovod pickles objects with (its dependency), so that
# torch_ringreduce.horovod's broadcast_object of a lambda is tested too
# (tests/python/test_horovod.py); without it the shim uses pickle.
"$PYTHON" -c "import cloudpickle" 2>/dev/null ||
  "$PYTHON" -m pip install -q cloudpickle 2>&1 |
    grep -v "Running pip as the 'root' user\|Location 'file:.*' is ignored" ||
  true
# DeepSpeed (tests/python/test_deepspeed.py), its wheel without its declared
# dependencies (pip would otherwise resolve a torch for it) and then the light
# ones it imports.
"$PYTHON" -c "import deepspeed" 2>/dev/null || {
  "$PYTHON" -m pip install -q --no-deps "deepspeed==0.19.8" &&
    "$PYTHON" -m pip install -q hjson py-cpuinfo pydantic msgpack psutil ninja einops tqdm packaging
} 2>&1 | grep -v "Running pip as the 'root' user\|Location 'file:.*' is ignored" || true
"$PYTHON" -c "import deepspeed" 2>/dev/null ||
  echo "[test] deepspeed unavailable: its tests will be skipped" >&2

# Tests use loopback only.
export UCX_NET_DEVICES=lo
export OMP_NUM_THREADS=1

echo "=== C++ unit tests (GoogleTest via CTest) ==="
# The tests build in the extension's own folder (install.sh built it above;
# setup.py's RINGREDUCE_BUILD_DIR, else build/py): they link the torch-free
# libraries and the CUDA kernels it compiled as they are, instead of a second
# folder compiling them all again (about two minutes of a fresh clone's CI).
# setup.py configures a new folder with the tests off; this turns them on and
# builds them alone (the ringreduce_tests target), not the extension again.
# That folder's libraries take torch's string ABI; Debian's GoogleTest has
# the C++11 one, so beside a torch without it (wheels before 2.7) the tests
# get a torch-free folder of their own.
# CTest runs a test per core: each is a process of its own, shared memory
# named by its pid (2 cores: 110-120 s instead of 165-195, 4 of 4 runs green).
# nproc reads OMP_NUM_THREADS, set to 1 above: the cores without it.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
cpp_build=${RINGREDUCE_BUILD_DIR:-build/py}
cpp_args=()
if [ "$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" -c \
        'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')" != 1 ]; then
  cpp_build=build/cpp
  cpp_args=(-G Ninja -DRINGREDUCE_BUILD_PYTHON=OFF)
fi
# CMake's output goes to a log, shown only where configuring or building the
# tests failed (a test that does not compile against this machine's headers
# said nothing but "ctest exit 1" before).
cpp_log="$cpp_build/tests_build.log"
mkdir -p "$cpp_build"
if cmake -S . -B "$cpp_build" ${cpp_args[@]+"${cpp_args[@]}"} -DRINGREDUCE_BUILD_TESTS=ON \
     -DRINGREDUCE_PYTHON="$(command -v "$PYTHON")" >"$cpp_log" 2>&1 &&
   cmake --build "$cpp_build" --target ringreduce_tests >>"$cpp_log" 2>&1; then
  ctest --test-dir "$cpp_build" --output-on-failure --timeout 120 -j "$cores"
  cpp_status=$?
else
  cpp_status=$?
  echo "[test] the C++ tests did not build (the whole log: $cpp_log); its errors:"
  grep -E "error|Error|FAILED" "$cpp_log" | head -40
fi

echo "=== Python tests (pytest) ==="
# --durations: the slowest tests, above the summary, to keep the suite's
# time in view (it must stay well under 30 minutes with the C++ tests).
"$PYTHON" -m pytest tests/python tests/gpu -ra -p no:cacheprovider --durations=20 "$@"
py_status=$?

# What CMake left out (a test binary it cannot build here) says so last,
# beside pytest's skipped groups: CMake's own output is hidden above.
if [ -s "$cpp_build/tests_not_built.txt" ]; then
  while IFS= read -r line; do echo "NOT BUILT (C++): $line"; done < "$cpp_build/tests_not_built.txt"
fi

if [ $cpp_status -ne 0 ] || [ $py_status -ne 0 ]; then
  echo "FAILED: ctest exit $cpp_status, pytest exit $py_status"
  exit 1
fi
