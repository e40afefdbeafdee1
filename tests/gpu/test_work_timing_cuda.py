"""Work._get_duration() and get_future_result() on CUDA tensors (issue 50,
item 3): as with NCCL, durations come from CUDA events recorded only once
timing is on; before, get_duration() raises saying how to turn it on. On the
default path (device flags on one node: Works of collectives run from the
caller's thread) and on host staging (queued Works).

They run where a CUDA device exists and are skipped, visibly, elsewhere."""
import random
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
from multiproc import run_world  # noqa: E402

import work_timing_cases  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this machine")


@pytest.mark.parametrize("path", [{}, {"RINGREDUCE_CUDA_ALGO": "host"}], ids=["auto", "host"])
@pytest.mark.parametrize("world", [1, 2])
def test_cuda_durations_from_events_once_timing_is_on(path, world):
    from torch._C._distributed_c10d import WorkResult

    for r in run_world(world, work_timing_cases.cuda_durations, random.randrange(1 << 20),
                       env=path, timeout=300):
        for exact, duration, result in r["untimed"]:
            assert exact and WorkResult(result) == WorkResult.SUCCESS
            assert "_enable_collectives_timing" in duration, duration
        for exact, duration, result in r["timed"]:
            assert exact and WorkResult(result) == WorkResult.SUCCESS
            assert isinstance(duration, float) and duration > 0.0, duration
