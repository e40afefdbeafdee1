"""RINGREDUCE_WIRE_DTYPE=fp16|bf16: float32 SUM/AVG allreduces travel as 16-bit
floats (Horovod's Compression.fp16 without touching the model code)."""
import pytest

from multiproc import LOOPBACK_ENV, run_world


def _input_of(rank):
    """Rank `rank`'s input, from its seed: the test rebuilds every rank's
    input itself, never through the backend under test."""
    import torch

    gen = torch.Generator().manual_seed(100 + rank)
    return torch.randn(100_003, generator=gen) * 4


def _allreduce_over_wire(rank, world_size, init_method, wire):
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    x = _input_of(rank)
    summed, averaged, largest = x.clone(), x.clone(), x.clone()
    dist.all_reduce(summed)
    dist.all_reduce(averaged, op=dist.ReduceOp.AVG)
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    return {"sum": summed, "avg": averaged, "max": largest}


@pytest.mark.parametrize("wire,dtype", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_float32_allreduce_travels_as_16_bits(wire, dtype):
    import torch

    world = 3
    env = dict(LOOPBACK_ENV, RINGREDUCE_WIRE_DTYPE=wire)
    results = run_world(world, _allreduce_over_wire, wire, env=env, timeout=120)
    inputs = torch.stack([_input_of(r) for r in range(world)]).double()
    low = getattr(torch, dtype)
    rounded = inputs.to(low).double()  # each rank rounds its own values once
    # Each of the world-1 steps rounds once to the wire type: the bound of
    # core/math/host_loops.h, (n-1) * u * sum|x|, plus the final widening (exact).
    unit = torch.finfo(low).eps / 2
    bound = (world - 1) * unit * rounded.abs().sum(0) + 1e-30
    for rank, result in enumerate(results):
        assert torch.equal(result["sum"], results[0]["sum"]), f"rank {rank} differs from rank 0"
        error = (result["sum"].double() - rounded.sum(0)).abs()
        assert (error <= bound).all(), f"rank {rank}: worst error {error.max()}"
        # The result went through the wire type: it is a value of it.
        assert torch.equal(result["sum"].to(low).float(), result["sum"])
        avg_error = (result["avg"].double() - rounded.sum(0) / world).abs()
        assert (avg_error <= bound / world + unit * rounded.abs().sum(0) / world).all()
        # MAX is not compressed: exactly the float32 maximum.
        assert torch.equal(result["max"], inputs.max(0).values.float())


def _init_only(rank, world_size, init_method):
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)


def test_bad_wire_dtype_names_the_choices():
    env = dict(LOOPBACK_ENV, RINGREDUCE_WIRE_DTYPE="int8")
    with pytest.raises(AssertionError) as failure:
        run_world(2, _init_only, env=env, timeout=60)
    message = str(failure.value)
    assert "RINGREDUCE_WIRE_DTYPE" in message and "bf16" in message and "fp16" in message
