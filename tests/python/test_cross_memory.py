"""The cma allreduce through the backend (algorithms/cross_memory/allreduce.h):
what auto picks by size (RINGREDUCE_DEBUG=TRACE names each choice on
stderr), exact results for float32, bfloat16 AVG and a non-contiguous
tensor, and ranks that pass different sizes: each gets a clear error
instead of a peer writing past its tensor. The whole dtype x op sweep with
cma forced is in test_allreduce_algorithms.py; a rank killed mid-allreduce,
which at 4 MiB now runs cma, in test_failures.py."""
import pytest

from multiproc import TRANSPORTS, run_world


def _allreduces_of_each_size(rank, world, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    wrong = []
    # 16 KiB, 64 KiB, 1 MiB, 1 MiB and 12 B, 3 MiB, 4 MiB, 4 MiB and 12 B
    for numel in (4096, 16384, 1 << 18, (1 << 18) + 3, 3 << 18, 1 << 20, (1 << 20) + 3):
        t = torch.arange(numel, dtype=torch.float32) % 97 + rank
        dist.all_reduce(t)
        want = (torch.arange(numel, dtype=torch.float32) % 97) * world + sum(range(world))
        if not torch.equal(t, want):
            wrong.append(f"float32 SUM of {numel}")
    # AVG of bfloat16 whose sums and quotients are exact in 8 bits of mantissa.
    b = torch.full(((1 << 21) + 1,), float(2 * (rank + 1)), dtype=torch.bfloat16)
    dist.all_reduce(b, op=dist.ReduceOp.AVG)
    if not torch.equal(b, torch.full_like(b, float(world + 1))):
        wrong.append(f"bfloat16 AVG: {b[:4].tolist()}")
    # A transposed matrix: the backend reduces a contiguous copy and writes it back.
    m = (torch.arange(512 * 1100, dtype=torch.float64).view(512, 1100) + rank).t()
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    if not torch.equal(m, (torch.arange(512 * 1100, dtype=torch.float64).view(512, 1100) + world - 1).t()):
        wrong.append("float64 MAX of a transposed view")
    dist.destroy_process_group()
    return wrong


@pytest.mark.parametrize("host_channel", [True, False])
def test_auto_runs_shm_then_cma_and_its_results_are_exact(capfd, host_channel):
    # With the host channel (the default) it takes what is below 4 MiB (up to
    # four of its 1 MiB buffers, a turn each) and cma the rest; without it
    # (RINGREDUCE_SHM_BYTES=0) cma starts at 32 KiB.
    env = dict(TRANSPORTS["shm"], RINGREDUCE_DEBUG="TRACE")
    if not host_channel:
        env["RINGREDUCE_SHM_BYTES"] = "0"
    reports = run_world(2, _allreduces_of_each_size, env=env, timeout=120)
    for rank, wrong in enumerate(reports):
        assert wrong == [], f"rank {rank}: {wrong}"
    err = capfd.readouterr().err
    assert err.count("cross-memory attach: every rank in reach") == 2, err[-3000:]
    ran = {}
    for line in err.splitlines():
        if "allreduce #" in line and " B: " in line:
            nbytes = int(line.split(" of ")[1].split(" B: ")[0])
            ran.setdefault(nbytes, set()).add(line.split(" B: ")[1].strip())
    if host_channel:
        assert ran[16384] == {"shm"} and ran[65536] == {"shm"}, ran
    else:
        assert ran[16384] not in ({"cma"}, {"shm"}) and ran[65536] == {"cma"}, ran
    for nbytes in (1 << 20, 4 * ((1 << 18) + 3), 3 << 20):  # 1 MiB, just over one buffer, 3 MiB
        assert ran[nbytes] == ({"shm"} if host_channel else {"cma"}), ran
    # From 4 MiB (float32, 4 MiB and 4 MiB + 12 B; bfloat16, 4 MiB + 2 B;
    # float64, 4.3 MiB): cma either way.
    for nbytes in (4 << 20, 4 * ((1 << 20) + 3), 2 * ((1 << 21) + 1), 8 * 512 * 1100):
        assert ran[nbytes] == {"cma"}, ran


def test_turned_off_on_one_rank_the_group_falls_back_and_stays_exact(capfd):
    """RINGREDUCE_CROSS_MEMORY=0 on rank 1 only: every rank learns it in the
    first allreduce, no allreduce runs cma, and the results are the same."""
    env = dict(TRANSPORTS["shm"], RINGREDUCE_DEBUG="TRACE")
    reports = run_world(2, _one_rank_without_cma, env=env, timeout=120)
    for rank, wrong in enumerate(reports):
        assert wrong == [], f"rank {rank}: {wrong}"
    err = capfd.readouterr().err
    assert err.count("cross-memory attach: rank 1 turned it off (RINGREDUCE_CROSS_MEMORY=0)") == 2, (
        err[-3000:])
    ran = [line.split(" B: ")[1].strip() for line in err.splitlines()
           if "allreduce #" in line and " B: " in line]
    assert ran and "cma" not in ran, ran


def _one_rank_without_cma(rank, world, init_method):
    import os

    if rank == 1:
        os.environ["RINGREDUCE_CROSS_MEMORY"] = "0"  # read when the group is made
    return _allreduces_of_each_size(rank, world, init_method)


def _different_sizes(rank, world, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    t = torch.ones(100000 if rank == 0 else 50000)
    try:
        dist.all_reduce(t)
        outcome = ("ok", None)
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    untouched = bool(torch.all(t == 1))
    dist.destroy_process_group()
    return {"outcome": outcome, "untouched": untouched}


def test_ranks_that_pass_different_sizes_all_get_a_clear_error_and_keep_their_tensors():
    """The collective's fingerprint in every message tag catches it first
    here; cma's own check of every rank's size (the C++ test
    CrossMemoryAllreduce.RanksWithDifferentSizesAllFailBeforeTouchingAnyBuffer)
    is there for the fingerprints that collide (1 in 256)."""
    reports = run_world(2, _different_sizes, env=TRANSPORTS["shm"], timeout=120)
    for rank, report in enumerate(reports):
        kind, message = report["outcome"]
        assert kind in ("DistBackendError", "ValueError"), report
        assert "different collective" in message or (
            "the ranks' tensors differ" in message), message
        assert report["untouched"], f"rank {rank}'s tensor was written"
