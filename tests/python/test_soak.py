"""Soak: 4 ranks run a long random mix of collectives (op, dtype, size, sync
or async) that must all match the references, without hangs or memory growth."""
import os

from multiproc import TRANSPORTS, run_world
from soak_cases import soak

OPS = int(os.environ.get("RINGREDUCE_SOAK_OPS", "20000"))


def test_soak_random_collectives_four_ranks():
    results = run_world(4, soak, OPS, env=TRANSPORTS["shm"], timeout=300)
    for rank, r in enumerate(results):
        assert r["failed"] == 0, f"rank {rank}: {r['failed']} mismatches, first: {r['failures']}"
        # Measured from 10% in (after warm-up caches); a leak per op would
        # show as megabytes over tens of thousands of ops.
        assert r["rss_growth"] < 64 << 20, f"rank {rank} grew {r['rss_growth'] >> 20} MiB"
