"""GPU checks. They run where a GPU exists and are skipped (visibly) elsewhere.

Until the GPU data path lands, a CUDA tensor must get a clear error that says
so and points to the NCCL combination, never a crash or wrong data.
"""
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
from multiproc import run_world  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def _cuda_tensor_error(rank, world, init_method):
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    try:
        dist.all_reduce(torch.ones(4, device="cuda"))
    except ValueError as error:
        message = str(error)
    else:
        message = "no error"
    cpu = torch.ones(4)
    dist.all_reduce(cpu)  # the group still works for CPU tensors
    return {"message": message, "cpu": cpu.tolist()}


def test_cuda_tensor_gets_clear_error_until_gpu_path_lands():
    for result in run_world(2, _cuda_tensor_error, timeout=120):
        assert "no GPU data path yet" in result["message"], result["message"]
        assert "cuda:nccl" in result["message"]
        assert result["cpu"] == [2.0] * 4
