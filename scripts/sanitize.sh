#!/usr/bin/env bash
# Builds the torch-free C++ layers and their unit tests under AddressSanitizer
# (with leak checking), UndefinedBehaviorSanitizer and ThreadSanitizer, and
# runs them. Usage: bash scripts/sanitize.sh [address|undefined|thread ...]
set -euo pipefail
cd "$(dirname "$0")/.."
export UCX_NET_DEVICES=lo
# UCX's memory hooks (malloc/mmap interception) fight the sanitizers' own.
export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1
status=0
for sanitizer in "${@:-address undefined thread}"; do
  for s in $sanitizer; do
    echo "=== $s ==="
    cmake -S . -B "build/$s" -G Ninja -DRINGREDUCE_BUILD_PYTHON=OFF -DRINGREDUCE_BUILD_TESTS=ON \
      -DRINGREDUCE_SANITIZE="$s" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "build/$s" >/dev/null
    ctest --test-dir "build/$s" --output-on-failure --timeout 300 || status=1
  done
done
exit $status
