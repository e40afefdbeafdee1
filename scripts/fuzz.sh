#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (installed from Debian if missing)
# and runs each for FUZZ_SECONDS (default 60). Usage: bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++-14 >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
fi
CC=clang-14 CXX=clang++-14 cmake -S . -B build/fuzz -G Ninja -DRINGREDUCE_BUILD_PYTHON=OFF \
  -DRINGREDUCE_BUILD_TESTS=OFF -DRINGREDUCE_BUILD_FUZZERS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz --target fuzz_address_record >/dev/null
mkdir -p build/fuzz/corpus
build/fuzz/fuzz_address_record -max_total_time="${FUZZ_SECONDS:-60}" -print_final_stats=1 build/fuzz/corpus
