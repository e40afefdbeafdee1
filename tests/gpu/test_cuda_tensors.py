"""GPU tests: CUDA tensors in every collective, on the default path (auto:
the device-flags path on one node) and on our IPC kernels (one-shot,
two-shot, staged, with and without a 16-bit wire), host staging, stream
semantics and DDP on CUDA; world sizes 1, 2 and 4 on one GPU.

They run where a CUDA device exists and are skipped, visibly, elsewhere.
scripts/gpu_check.sh runs them on the GPU machine.
"""
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
from multiproc import run_world  # noqa: E402

import cuda_cases  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this machine")

ALGORITHMS = {
    "auto": {},
    "oneshot": {"RINGREDUCE_CUDA_ALGO": "oneshot", "RINGREDUCE_CUDA_SCRATCH_BYTES": str(8 << 20)},
    "twoshot": {"RINGREDUCE_CUDA_ALGO": "twoshot"},
    "staged": {"RINGREDUCE_CUDA_ALGO": "staged", "RINGREDUCE_CUDA_SCRATCH_BYTES": str(4 << 20)},
    "staged-bf16-wire": {"RINGREDUCE_CUDA_ALGO": "staged", "RINGREDUCE_CUDA_WIRE_DTYPE": "bf16"},
    "oneshot-fp16-wire": {"RINGREDUCE_CUDA_ALGO": "oneshot", "RINGREDUCE_CUDA_WIRE_DTYPE": "fp16"},
    "twoshot-expandable": {"RINGREDUCE_CUDA_ALGO": "twoshot",
                           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "host": {"RINGREDUCE_CUDA_ALGO": "host"},
}


def _no_failures(results):
    for rank, result in enumerate(results):
        assert result["checked"] > 0, f"rank {rank} checked nothing"
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:20])


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_allreduce_every_dtype_and_op(world, algorithm):
    _no_failures(run_world(world, cuda_cases.sweep_allreduce, env=ALGORITHMS[algorithm],
                           timeout=600))


# broadcast, all_gather_into_tensor and reduce_scatter_tensor have device
# paths (IPC on one node) with host fallbacks; the rest is host-staged.
OTHER_PATHS = {
    "auto": {},
    "host": {"RINGREDUCE_CUDA_ALGO": "host"},
    "expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
}


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("paths", list(OTHER_PATHS))
def test_other_collectives_on_cuda_tensors(world, paths):
    _no_failures(run_world(world, cuda_cases.sweep_other_collectives, env=OTHER_PATHS[paths],
                           timeout=600))


@pytest.mark.parametrize("world", [1, 2, 4])
def test_stream_semantics(world):
    _no_failures(run_world(world, cuda_cases.stream_semantics, timeout=300))


def test_nccl_on_a_shared_gpu_is_a_clear_error():
    results = run_world(2, cuda_cases.nccl_refused_on_shared_gpu,
                        env={"RINGREDUCE_CUDA_ALGO": "nccl"}, timeout=300)
    for result in results:
        assert "share a GPU" in result["message"], result["message"]
        assert result["cpu"] == [2.0] * 4


def test_bad_device_outputs_raise_at_the_call():
    """Outputs whose host shadows would be apart, though on the device they
    cannot be written (expanded) or share memory: refused on every rank
    before anything is staged or sent, naming the op, and the group goes on."""
    results = run_world(2, cuda_cases.bad_device_outputs, timeout=300)
    for rank, result in enumerate(results):
        for name, message in result["messages"].items():
            op = name.split(",")[0]
            assert op in message and f"rank {rank}" in message, f"rank {rank}, {name}: {message}"
            assert "overlapping memory" in message or "share memory" in message, message
        assert result["after"] == result["expected"], result


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_on_cuda_matches_gloo(world):
    for rank, result in enumerate(run_world(world, cuda_cases.ddp_against_gloo, timeout=600)):
        for name, ring in result["ring"].items():
            gloo = result["gloo"][name]
            assert torch.allclose(ring.double(), gloo.double(), rtol=1e-9, atol=1e-9), \
                f"rank {rank} {name}: max diff {(ring.double() - gloo.double()).abs().max()}"
