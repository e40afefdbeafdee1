"""Where several ranks' NaNs meet in a SUM, PRODUCT or AVG, every rank ends with
the same bits (docs/COLLECTIVES.md), whichever one-host path the size takes
(the host channel in one pass, in two phases, in pieces, or cma beyond) and
with the channel off (UCX's ring). Which NaN a path keeps is not asserted:
paths combine in different orders. (That one instruction set gives the bits
of another, NaNs included, is tests/cpp/test_host_loops.cpp's.)"""
import pytest
import torch

from multiproc import run_world

# Elements per rank: 4 KiB (one pass), 1 MiB (two phases between two ranks),
# 3 MiB (channel pieces), 6 MiB (cma) of float32; +5 leaves a tail outside
# the vector loops.
SIZES = (1024 + 5, (1 << 18) + 5, 3 * (1 << 18) + 5, 6 * (1 << 18) + 5)


def _nan_sums(rank, world_size, init_method, dtype_name):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    dtype = getattr(torch, dtype_name)
    int_view = torch.int32 if dtype == torch.float32 else torch.int64
    out = {}
    for n in SIZES if dtype == torch.float32 else SIZES[:2]:
        x = torch.arange(n, dtype=dtype) % 7 - 3
        # Every rank's own NaN payload and sign at every 3rd element (so
        # several ranks' NaNs meet at every lane position and in the tail),
        # a NaN of this rank alone at others.
        bits = x.view(int_view)
        top = 0x7FC00000 if dtype == torch.float32 else 0x7FF8000000000000
        sign = -(1 << 31) if dtype == torch.float32 else -(1 << 63)
        payload = torch.arange(n, dtype=int_view) % 1000 + 1 + rank * 4096
        nan = (payload | top) | (sign if rank % 2 else 0)
        shared = torch.arange(n) % 3 == 0
        bits[shared] = nan[shared]
        alone = torch.arange(n) % 11 == rank + 1
        bits[alone & ~shared] = nan[alone & ~shared]
        for op in ("SUM", "PRODUCT", "AVG"):
            y = x.clone()
            dist.all_reduce(y, op=getattr(dist.ReduceOp, op))
            out[f"{n} {op}"] = y.view(int_view).clone()
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("channel", ["on", "off"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_every_rank_holds_the_same_bits_where_nans_meet(world_size, channel, dtype_name):
    env = {} if channel == "on" else {"RINGREDUCE_SHM_BYTES": "0"}
    results = run_world(world_size, _nan_sums, dtype_name, env=env, timeout=180)
    for key, want in results[0].items():
        got_nan = torch.isnan(want.view(getattr(torch, dtype_name)))
        assert got_nan.any(), key  # the NaNs went through
        for rank in range(1, world_size):
            differ = (results[rank][key] != want).nonzero()
            assert differ.numel() == 0, (
                f"{key}: rank {rank} differs from rank 0 at {differ.numel()} elements, "
                f"first {differ[0].item()}: {results[rank][key][differ[0]].item():#x} against "
                f"{want[differ[0]].item():#x}")
