"""The device ring (RINGREDUCE_CUDA_ALGO=ring) on the one GPU of the test
machine: UCX moves device segments between the ranks (cuda_ipc, cuda_copy)
and the fused kernel reduces each received segment on the device. Needs a
UCX that registers CUDA memory (pip's libucx-cu13: scripts/gpu_check.sh
quick builds against it when .gpu/ carries it); skipped, saying why,
without one or without a GPU."""
import os
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
sys.path.insert(0, os.path.dirname(__file__))
from multiproc import run_world  # noqa: E402


def _ucx_moves_device_memory():
    if not torch.cuda.is_available():
        return False, "no CUDA device on this machine"
    from torch_ringreduce import _C
    info = _C.ucx_device_memory()
    if not info["cuda"]:
        return False, f"this build's UCX ({_C.ucx_version()}) does not register CUDA memory"
    return True, ""


_OK, _WHY = _ucx_moves_device_memory()
pytestmark = pytest.mark.skipif(not _OK, reason=_WHY or "-")


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_against_the_oracle(world):
    import ring_cases
    results = run_world(world, ring_cases.sweep, env={"RINGREDUCE_CUDA_ALGO": "ring"},
                        timeout=600)
    for rank, result in enumerate(results):
        assert result["checked"] > 0, f"rank {rank} checked nothing"
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:20])
