#!/usr/bin/env bash
# Run here (a Debian machine with network to its package mirror and PyPI):
# fills .gpu/ with what the GPU machine lacks, for the device tool to carry
# (`carry: [".gpu"]`, a few MB): UCX from Debian's packages unpacked into
# .gpu/root (not into /), and the wheels of pytest and setuptools. Then scripts/gpu_check.sh
# runs there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
rm -rf .gpu && mkdir -p .gpu/debs .gpu/root .gpu/wheels
(cd .gpu/debs && apt-get download -q libucx0 libucx-dev libnuma1 >/dev/null)
for deb in .gpu/debs/*.deb; do dpkg -x "$deb" .gpu/root; done
rm -rf .gpu/debs .gpu/root/usr/share
find .gpu/root -name "*.a" -delete
# Only the transports a single node uses; the ib/rdmacm modules would need
# libibverbs, which is not carried.
rm -f .gpu/root/usr/lib/x86_64-linux-gnu/ucx/libuct_ib* \
      .gpu/root/usr/lib/x86_64-linux-gnu/ucx/libuct_rdmacm*
# iproute2's `ip` and `tc`, which the GPU image lacks and the emulated nodes
# need (their own network namespaces; tc for a rate-limited link): the
# binaries and their libraries (about 2 MB), each behind a wrapper that
# gives them the libraries alone, so they never shadow the image's own.
# gpu_quick.sh puts .gpu/ip on PATH.
mkdir -p .gpu/ipdebs .gpu/ip/lib
(cd .gpu/ipdebs && apt-get download -q iproute2 libbpf1 libelf1 libmnl0 libbsd0 libmd0 libcap2 \
   libxtables12 >/dev/null)
for deb in .gpu/ipdebs/*.deb; do dpkg -x "$deb" .gpu/ipdebs/root; done
find .gpu/ipdebs/root -name "lib*.so*" \( -type f -o -type l \) -exec cp -a {} .gpu/ip/lib/ \;
for tool in ip tc; do
  cp .gpu/ipdebs/root/sbin/$tool .gpu/ip/$tool.bin
  cat > .gpu/ip/$tool <<WRAPPER
#!/bin/sh
here=\$(dirname "\$(readlink -f "\$0")")
LD_LIBRARY_PATH="\$here/lib" exec "\$here/$tool.bin" "\$@"
WRAPPER
  chmod +x .gpu/ip/$tool
done
rm -rf .gpu/ipdebs
"$PYTHON" -m pip download -q --dest .gpu/wheels pytest >/dev/null
# The build's one requirement (pyproject.toml), should that image's be older.
"$PYTHON" -m pip download -q --no-deps --dest .gpu/wheels "setuptools>=70.1" >/dev/null
# UCX that moves CUDA memory (cuda_copy, cuda_ipc), for the device ring
# (tests/gpu/test_device_ring.py); about 43 MB, within the device tool's
# 64 MiB. Without it the GPU check builds against Debian's UCX above.
"$PYTHON" -m pip download -q --no-deps --dest .gpu/wheels libucx-cu13 >/dev/null ||
  echo "libucx-cu13 not downloaded: the device ring's GPU tests will be skipped" >&2
du -sh .gpu
