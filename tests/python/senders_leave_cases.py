"""A rank that only sends in a collective on the host channel (a broadcast's
or scatter's root, a gather's or reduce's other ranks) returns once its part
is up, without waiting for the ranks that read it (algorithms/host_channel/
turn.h): here the readers call only after every sender has returned (an event
each sender sets afterwards; a sender that waited for its readers would never
set it, and the readers' wait for it would time out)."""
import datetime

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"
from multiproc import event_store

ROOT = 0


def _rooted(rank, world, name, numel, async_op):
    """Runs collective `name` rooted at ROOT on this rank; returns (whether
    this rank only sends in it, what it ended with, what it must end with)."""
    mine = torch.arange(numel, dtype=torch.float32) + 1000 * rank
    if name == "broadcast":
        work = dist.broadcast(mine, src=ROOT, async_op=async_op)
        expected, got, sends = torch.arange(numel, dtype=torch.float32) + 1000 * ROOT, mine, rank == ROOT
    elif name == "reduce":
        work = dist.reduce(mine, dst=ROOT, async_op=async_op)
        expected = (sum(torch.arange(numel, dtype=torch.float32) + 1000 * r for r in range(world))
                    if rank == ROOT else torch.arange(numel, dtype=torch.float32) + 1000 * rank)
        got, sends = mine, rank != ROOT
    elif name == "gather":
        outs = [torch.empty(numel) for _ in range(world)] if rank == ROOT else None
        work = dist.gather(mine, outs, dst=ROOT, async_op=async_op)
        got = torch.cat(outs) if rank == ROOT else torch.empty(0)
        expected = (torch.cat([torch.arange(numel, dtype=torch.float32) + 1000 * r
                               for r in range(world)]) if rank == ROOT else torch.empty(0))
        sends = rank != ROOT
    else:  # scatter
        pieces = ([torch.arange(numel, dtype=torch.float32) + 1000 * ROOT + 100000 * r
                   for r in range(world)] if rank == ROOT else None)
        got = torch.empty(numel)
        work = dist.scatter(got, pieces, src=ROOT, async_op=async_op)
        expected = torch.arange(numel, dtype=torch.float32) + 1000 * ROOT + 100000 * rank
        sends = rank == ROOT
    if async_op:
        work.wait()
    return sends, got, expected


def senders_leave_before_readers_come(rank, world, init_method):
    """Each rooted collective, waited for and asynchronous: the senders return before the readers call;
    then an asynchronous and a plain allreduce (the senders' first turn there
    waits for the readers to have read). Returns the mismatches."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    events = event_store(init_method, world, timeout_s=30)
    failures = []
    dist.all_reduce(torch.ones(1))  # the channel open on every rank
    step = 0
    for name in ("broadcast", "reduce", "gather", "scatter"):
        for async_op in (False, True):
            # 64 B and 64 KiB: one turn of the buffers (in a message of several
            # the senders wait for their readers in all but the last).
            for numel in (16, 1 << 14):
                step += 1
                senders = [r for r in range(world) if (r == ROOT) == (name in ("broadcast", "scatter"))]
                if rank not in senders:
                    events.wait([f"{step} sent by {r}" for r in senders])
                sends, got, expected = _rooted(rank, world, name, numel, async_op)
                assert sends == (rank in senders)
                if sends:
                    events.set(f"{step} sent by {rank}", b"1")
                if not torch.equal(got, expected):
                    failures.append(f"{name} async={async_op} numel={numel} on rank {rank}")
                ones = torch.ones(8)
                dist.all_reduce(ones, async_op=True).wait()
                dist.all_reduce(ones)
                if not torch.equal(ones, torch.full((8,), float(world * world))):
                    failures.append(f"allreduce after {name} async={async_op} numel={numel}: {ones}")
    dist.destroy_process_group()
    return failures


def two_roots_learn_it_at_their_next_collective(rank, world, init_method):
    """Both ranks broadcast as the root (a mismatch): each only sends, so
    both broadcasts return with the rank's own data; their next collective
    raises, naming the broadcast, instead of running. Returns (the tensor
    after the broadcast, the next collective's error or None)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    dist.all_reduce(torch.ones(1))  # the channel open on every rank
    mine = torch.full((16,), float(rank))
    dist.broadcast(mine, src=rank)
    error = None
    try:
        dist.all_reduce(torch.ones(4))
    except Exception as e:  # noqa: BLE001  (the test checks its type and text)
        error = f"{type(e).__name__}: {e}"
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001  a group that failed may refuse a clean end
        pass
    return mine.tolist(), error
