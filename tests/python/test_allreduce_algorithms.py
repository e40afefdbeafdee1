"""The host allreduce algorithms through the backend: the whole collective
sweep (every op x dtype against local references and gloo) with
RINGREDUCE_ALGORITHM forced to each algorithm, and with auto, on worlds of 3
and 4 ranks; reduce_scatter and allgather (halving/doubling on powers of
two) through the second sweep. All ranks share this host, so the selector's
exchange of host identities finds one node and two_level runs its one-node
form, and cma finds every rank's memory within reach."""
import pytest

from collective_cases import run_sweep, run_sweep_more
from multiproc import TRANSPORTS, run_world

ALGORITHMS = ["auto", "ring", "halving_doubling", "two_level", "direct", "cma"]


def _sweep(world_size, algorithm, sweep, checked, gloo_checked):
    env = dict(TRANSPORTS["shm"], RINGREDUCE_ALGORITHM=algorithm)
    reports = run_world(world_size, sweep, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > checked
        assert report["gloo_checked"] > gloo_checked, report["gloo_skipped"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("world_size", [3, 4])
def test_every_algorithm_matches_references(world_size, algorithm):
    _sweep(world_size, algorithm, run_sweep, 800, 50)


@pytest.mark.parametrize("algorithm", ["auto", "halving_doubling", "direct"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_reduce_scatter_and_gathers_match_references(world_size, algorithm):
    _sweep(world_size, algorithm, run_sweep_more, 400, 20)


def _reduce_scatter_in_and_out_of_place(rank, world, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    # 4 MiB of float32 and a few more per rank: large enough that auto takes
    # direct on one node of 3, which reads the input where it is. Integers
    # below 256 in every sum: exact in bfloat16 too.
    n = (1 << 20) + 3

    def inputs(r, dtype):
        return (torch.arange(n * world, dtype=torch.float64) % 31 + r).to(dtype)

    failures = []

    def check(what, got, want):
        if not torch.equal(got, want):
            failures.append(f"rank {rank}: {what}")

    for dtype in (torch.float32, torch.bfloat16):
        for op, scale in ((dist.ReduceOp.SUM, 1), (dist.ReduceOp.AVG, world)):
            total = sum(inputs(r, torch.float64) for r in range(world)) / scale
            want = total.to(dtype).view(world, n)[rank]
            x = inputs(rank, dtype)
            kept = x.clone()
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, x, op=op)
            check(f"{dtype} {op} plain", out, want)
            check(f"{dtype} {op} input untouched", x, kept)
            # The output is the rank's own chunk of the input.
            x = inputs(rank, dtype)
            dist.reduce_scatter_tensor(x.view(world, n)[rank], x, op=op)
            check(f"{dtype} {op} output inside the input", x.view(world, n)[rank], want)
            # A non-contiguous input (a transposed view): its logical order.
            x = inputs(rank, dtype).view(world, n).t()
            kept = x.clone()
            flat = sum(inputs(r, torch.float64).view(world, n).t().reshape(-1)
                       for r in range(world)) / scale
            dist.reduce_scatter_tensor(out, x, op=op)
            check(f"{dtype} {op} non-contiguous", out, flat.to(dtype).view(world, n)[rank])
            check(f"{dtype} {op} non-contiguous input untouched", x, kept)
            # The list form: each block a tensor of its own, read where it is.
            blocks = [b.clone() for b in inputs(rank, dtype).view(world, n)]
            kept = [b.clone() for b in blocks]
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter(out, blocks, op=op)
            check(f"{dtype} {op} list", out, want)
            check(f"{dtype} {op} list untouched", torch.stack(blocks), torch.stack(kept))
            # Into the rank's own block; a block that is a transposed view.
            blocks[(rank + 1) % world] = blocks[(rank + 1) % world].view(-1, 1).t()[0]
            odd = torch.empty(2 * n, dtype=dtype)[::2]
            odd.copy_(blocks[(rank + 2) % world])
            blocks[(rank + 2) % world] = odd
            dist.reduce_scatter(blocks[rank], blocks, op=op)
            check(f"{dtype} {op} list into its own block", blocks[rank], want)
            # Blocks that are the columns of one matrix (views of one storage).
            columns = inputs(rank, dtype).view(world, n).t().contiguous()
            dist.reduce_scatter(out, list(columns.t()), op=op)
            check(f"{dtype} {op} list of one matrix's columns", out, want)
            # An output that overlaps another rank's block waits apart.
            shared = inputs(rank, dtype).view(world, n).clone()
            blocks = list(shared)
            other = (rank + 1) % world
            dist.reduce_scatter(shared[other], blocks, op=op)
            check(f"{dtype} {op} list into another's block", shared[other], want)
    dist.destroy_process_group()
    return failures


@pytest.mark.parametrize("algorithm", ["auto", "direct", "ring"])
def test_reduce_scatter_tensor_leaves_its_input_and_takes_any_layout(algorithm):
    # Direct reads the caller's input in place and reduces into the output;
    # an output inside the input, or an input that is not plain memory,
    # must still give the ring's numbers and leave the input as it was.
    env = dict(TRANSPORTS["shm"], RINGREDUCE_ALGORITHM=algorithm)
    reports = run_world(3, _reduce_scatter_in_and_out_of_place, env=env, timeout=300)
    for failures in reports:
        assert failures == []


def _create_group(rank, world, init_method):
    import torch.distributed as dist

    try:
        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world)
    except Exception as error:  # torch may wrap the creator's ValueError
        return str(error)
    return "created"


def test_a_bad_algorithm_name_lists_the_choices():
    messages = run_world(1, _create_group, env={"RINGREDUCE_ALGORITHM": "tree"}, timeout=120)
    assert "auto, ring, halving_doubling, two_level, direct" in messages[0], messages[0]
