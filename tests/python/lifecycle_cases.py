"""Rank-side bodies of the lifecycle tests."""
import os
import time

import torch
import torch.distributed as dist


def tcp_init_and_reinit(rank, world, _file_init, port):
    """tcp:// rendezvous, then destroy and a second init in the same process."""
    sums = []
    for round_ in range(3):
        # A new port each round: the previous round's TCPStore server is gone.
        dist.init_process_group("ringreduce", init_method=f"tcp://127.0.0.1:{port + round_}",
                                rank=rank, world_size=world)
        t = torch.full((1000,), float(rank + round_))
        dist.all_reduce(t)
        sums.append(t[0].item())
        dist.destroy_process_group()
    return sums


def reinit_same_store(rank, world, init_method):
    """destroy_process_group() then init again on the same store, as on
    torchrun's agent store (one store that outlives the groups): no stale
    addresses may be read. One FileStore object for every round: a FileStore
    made per round (init_method) deletes its file when the last rank lets go
    of its store (a count kept in the file), and a faster rank's first keys
    of the next round, written between that count and the removal, are lost
    with it (the ranks then wait in the constructor for addresses that are
    gone, or in different generations: a hang about once in 40 runs)."""
    store = dist.FileStore(init_method[len("file://"):], world)
    sums = []
    for round_ in range(3):
        dist.init_process_group("ringreduce", store=store, rank=rank, world_size=world)
        t = torch.full((10,), float(rank * 10 + round_))
        dist.all_reduce(t)
        sums.append(t[0].item())
        dist.destroy_process_group()
    return sums


def several_groups(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    everyone = dist.new_group(list(range(world)))
    reversed_group = dist.new_group(list(reversed(range(world))))
    low = dist.new_group([0, 1])
    high = dist.new_group([1, 2])
    results = {}
    # Interleave async collectives of different groups.
    a = torch.full((100,), float(rank))
    b = torch.full((100,), float(rank * 2))
    wa = dist.all_reduce(a, group=everyone, async_op=True)
    wb = dist.all_reduce(b, group=reversed_group, async_op=True)
    if rank in (0, 1):
        c = torch.full((3,), float(rank + 1))
        dist.all_reduce(c, group=low)
        results["low"] = c.tolist()
    if rank in (1, 2):
        d = torch.full((3,), float(rank + 1))
        dist.broadcast(d, src=2, group=high)
        results["high"] = d.tolist()
    wa.wait()
    wb.wait()
    results["everyone"] = a[0].item()
    results["reversed"] = b[0].item()
    dist.barrier()
    return results


def idle_cpu(rank, world, init_method):
    """CPU seconds a rank burns while its group sits idle for a while."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    t = torch.ones(1 << 16)
    dist.all_reduce(t)  # connections up, executor thread idle afterwards
    dist.barrier()
    start_cpu, start_wall = time.process_time(), time.monotonic()
    time.sleep(1.5)
    used = time.process_time() - start_cpu
    wall = time.monotonic() - start_wall
    dist.barrier()
    return {"cpu": used, "wall": wall, "threads": len(os.listdir("/proc/self/task"))}


def destroy_with_work_in_flight(rank, world, init_method):
    """destroy_process_group() right after queuing async collectives and a
    receive nobody answers: queued collectives complete, the receive fails,
    nothing crashes."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    tensors = [torch.full((1 << 15,), float(rank)) for _ in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    orphan = dist.irecv(torch.empty(4), src=(rank + 1) % world, tag=999)
    dist.destroy_process_group()
    done = all(w.is_completed() for w in works)
    sums_ok = all(t[0].item() == float(sum(range(world))) for t in tensors)
    try:
        orphan.wait()
        orphan_outcome = "completed"
    except Exception as error:
        orphan_outcome = str(error)
    return {"done": done, "sums_ok": sums_ok, "orphan": orphan_outcome}


def all_to_all_then_destroy(rank, world, init_method, late_rank=-1):
    """A few all_to_alls among every rank, then destroy_process_group(): the
    ranks leave at different times (`late_rank` 0.5 s after the others)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    block = 16384  # 64 KiB per peer
    sent = torch.full((world * block,), float(rank))
    received = torch.empty_like(sent)
    for _ in range(3):
        dist.all_to_all_single(received, sent)
    exact = torch.equal(received, torch.arange(world).repeat_interleave(block).float())
    if rank == late_rank:
        time.sleep(0.5)
    dist.destroy_process_group()
    return exact
