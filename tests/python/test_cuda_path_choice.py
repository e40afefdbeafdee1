"""What CUDA allreduce, all_gather_into_tensor and reduce_scatter_tensor take,
as the group decides it at creation from the host identities its ranks
exchanged (no GPU needed to decide): auto takes the device-flags path where
every rank runs on this host, RINGREDUCE_CUDA_ALGO=flags asks for it
anywhere, a named IPC algorithm keeps the older kernels, and ranks on two
(faked) nodes keep the device ring, NCCL or host staging. The GPU tests
(tests/gpu) run what each choice does."""
import pytest

from multiproc import TRANSPORTS, run_world
from test_two_level_fake_nodes import _on_fake_node


def _choice(rank, world, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    t = torch.ones(3)
    dist.all_reduce(t)  # the group works whatever it chose for CUDA tensors
    return {"flags": backend._device_flags(), "sum": t.tolist()}


@pytest.mark.parametrize("algo,expected", [(None, True), ("auto", True), ("flags", True),
                                           ("twoshot", False), ("nccl", False)])
def test_auto_takes_the_device_flags_on_one_host(algo, expected):
    env = {} if algo is None else {"RINGREDUCE_CUDA_ALGO": algo}
    for rank, result in enumerate(run_world(2, _choice, env=env, timeout=120)):
        assert result["flags"] is expected, (rank, algo, result)
        assert result["sum"] == [2.0] * 3


def test_a_wire_dtype_keeps_auto_on_the_ipc_kernels_and_is_refused_with_flags():
    env = {"RINGREDUCE_CUDA_WIRE_DTYPE": "bf16"}
    for rank, result in enumerate(run_world(2, _choice, env=env, timeout=120)):
        assert result["flags"] is False, (rank, result)
    refused = run_world(2, _init_error, env=dict(env, RINGREDUCE_CUDA_ALGO="flags"), timeout=120)
    for rank, message in enumerate(refused):
        assert "ValueError" in message and "RINGREDUCE_CUDA_WIRE_DTYPE=bf16" in message, \
            (rank, message)


def _init_error(rank, world, init_method):
    import torch.distributed as dist

    try:
        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world)
    except Exception as error:  # noqa: BLE001 (the message is the result)
        return f"{type(error).__name__}: {error}"
    return "created"


def test_auto_keeps_the_device_flags_off_across_nodes():
    env = dict(TRANSPORTS["tcp"])
    reports = run_world(2, _on_fake_node, [0, 1], _choice, env=env, timeout=120)
    if "skip" in reports[0]:
        pytest.skip(reports[0]["skip"])
    for rank, report in enumerate(reports):
        assert report["hostname"] == f"ringreduce-fake-node-{rank}"
        assert report["flags"] is False, (rank, report)
        assert report["sum"] == [2.0] * 3
