"""Rank bodies for test_async_on_caller.py (run in fresh processes by multiproc)."""
import json
import random
import time


def _init(rank, world_size, init_method):
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)


def _paths(op="allreduce"):
    """(direct, queued) counts of the `op`s in this rank's flight recorder."""
    import torch_ringreduce

    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    ops = [e for e in entries if e["op"] == op]
    return sum(1 for e in ops if e["direct"]), sum(1 for e in ops if not e["direct"])


def _late_rank(rank, world_size, draw, delays):
    """One rank, drawn alike on every rank, computes (busy) for a delay drawn from `delays`."""
    late = draw.randrange(world_size)
    delay = draw.choice(delays)
    if rank == late and delay:
        end = time.perf_counter() + delay  # busy, as compute would be
        while time.perf_counter() < end:
            pass


def _coalesced_all_reduce(tensors, asynchronous):
    """One all_reduce per tensor inside torch's coalescing manager, waited for."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    with _coalescing_manager(async_ops=asynchronous) as manager:
        for t in tensors:
            dist.all_reduce(t)
    if asynchronous:
        manager.wait()


def staggered_arrivals(rank, world_size, init_method, calls=300):
    """Small asynchronous allreduces whose ranks arrive together, a little
    apart or a millisecond apart, each waited for at once, later or after
    the next one was issued: every result exact, whichever rank ran its part
    on its own thread and whichever queued it."""
    import torch
    import torch.distributed as dist

    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    pending = []
    for i in range(calls):
        # The same draw on every rank: who is late, by how much.
        draw = random.Random(i)
        late = draw.randrange(world_size)
        delay = draw.choice([0.0, 0.0, 0.0, 20e-6, 100e-6, 1e-3, 20e-3])
        numel = draw.choice([1, 7, 256, 4096])
        if rank == late and delay:
            end = time.perf_counter() + delay  # busy, as compute would be
            while time.perf_counter() < end:
                pass
        t = torch.full((numel,), float(rank + 1 + i))
        work = dist.all_reduce(t, async_op=True)
        expected = float(sum(r + 1 + i for r in range(world_size)))
        pending.append((i, t, work, expected))
        if draw.random() < 0.7 or len(pending) > 3:
            for j, tensor, w, value in pending:
                w.wait()
                if not torch.equal(tensor, torch.full_like(tensor, value)):
                    failures.append(f"call {j}: {tensor[:4].tolist()} != {value}")
            pending.clear()
    for j, tensor, w, value in pending:
        w.wait()
        if not torch.equal(tensor, torch.full_like(tensor, value)):
            failures.append(f"call {j}: {tensor[:4].tolist()} != {value}")
    direct, queued = _paths()
    dist.destroy_process_group()
    return {"failures": failures, "direct": direct, "queued": queued}


def other_group_first(rank, world_size, init_method):
    """Rank 0 issues an asynchronous allreduce and then an allreduce on a
    second group, which rank 1 calls before the first one: rank 0 must not
    wait inside its asynchronous call for a peer that first waits for it
    on the other group (on NCCL, too, the two groups' collectives proceed
    apart)."""
    import torch
    import torch.distributed as dist

    _init(rank, world_size, init_method)
    other = dist.new_group(backend="ringreduce")
    for group in (None, other):
        dist.all_reduce(torch.ones(4), group=group)  # opens each host channel
    results = []
    for step in range(6):
        t = torch.full((16,), float(rank + step))
        u = torch.full((5,), float(rank * step))
        if rank == 0:
            work = dist.all_reduce(t, async_op=True)
            dist.all_reduce(u, group=other)
            work.wait()
        else:
            dist.all_reduce(u, group=other)
            if step % 2:
                dist.all_reduce(t, async_op=True).wait()
            else:
                dist.all_reduce(t)
        results.append(u.tolist() == [float(step)] * 5)
        results.append(t.tolist() == [float(2 * step + 1)] * 16)
    dist.destroy_process_group()
    return results


def functional_collectives(rank, world_size, init_method):
    """torch's functional collectives, as DTensor and compiled FSDP call them:
    all_gather_into_tensor and reduce_scatter_tensor reach the backend as
    their coalesced forms with one tensor, all_reduce as itself. Every
    result exact; the flight recorder says which ran on the caller's thread."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    import torch_ringreduce

    _init(rank, world_size, init_method)
    ops = torch.ops._c10d_functional
    name = dist.group.WORLD.group_name
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    for step, numel in enumerate((1, 6, 1000)):
        mine = torch.arange(numel, dtype=torch.float32) + 100 * rank + step
        every = [torch.arange(numel, dtype=torch.float32) + 100 * r + step
                 for r in range(world_size)]
        for label, got in (
                ("funcol.all_gather_tensor", funcol.wait_tensor(
                    funcol.all_gather_tensor(mine, 0, dist.group.WORLD))),
                ("_c10d_functional.all_gather_into_tensor", ops.wait_tensor(
                    ops.all_gather_into_tensor(mine, world_size, name)))):
            if not torch.equal(got, torch.cat(every)):
                failures.append(f"{label} {numel}: {got[:4].tolist()}")
        full = torch.arange(numel * world_size, dtype=torch.float32) * (rank + 1)
        expected = (torch.arange(numel * world_size, dtype=torch.float32)
                    * sum(r + 1 for r in range(world_size)))[rank * numel:(rank + 1) * numel]
        for label, got in (
                ("funcol.reduce_scatter_tensor", funcol.wait_tensor(
                    funcol.reduce_scatter_tensor(full, "sum", 0, dist.group.WORLD))),
                ("_c10d_functional.reduce_scatter_tensor", ops.wait_tensor(
                    ops.reduce_scatter_tensor(full, "sum", world_size, name)))):
            if not torch.equal(got, expected):
                failures.append(f"{label} {numel}: {got[:4].tolist()}")
    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    ops_seen = sorted({(e["op"], e["direct"]) for e in entries})
    dist.destroy_process_group()
    return {"failures": failures, "ops": ops_seen}


def coalesced_allreduces(rank, world_size, init_method, calls=150):
    """torch's coalescing manager around all_reduce calls (one
    allreduce_coalesced of the block's tensors): ranks arriving together or
    apart, blocks of one dtype (fused, on the caller's thread or queued) and
    of two (queued, one fused buffer per dtype), waited for by the manager or
    through its Work: every result exact on either path."""
    import torch
    import torch.distributed as dist
    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    for i in range(calls):
        draw = random.Random(1000 + i)
        _late_rank(rank, world_size, draw, [0.0, 0.0, 20e-6, 100e-6, 5e-3])
        dtypes = [torch.float32] * 3 if draw.random() < 0.8 else [torch.float32, torch.float64,
                                                                   torch.float32]
        tensors = [torch.full((draw.choice([1, 5, 300, 2048]),), float(rank + 1 + i + k),
                              dtype=dtype) for k, dtype in enumerate(dtypes)]
        _coalesced_all_reduce(tensors, asynchronous=draw.random() < 0.5)
        for k, t in enumerate(tensors):
            expected = float(sum(r + 1 + i + k for r in range(world_size)))
            if not torch.equal(t, torch.full_like(t, expected)):
                failures.append(f"call {i} tensor {k} ({t.dtype}): {t[:4].tolist()} != {expected}")
    direct, queued = _paths("allreduce_coalesced")
    dist.destroy_process_group()
    return {"failures": failures, "direct": direct, "queued": queued}


def coalesced_segments(rank, world_size, init_method, calls=120):
    """The coalescing manager's tensors reduced in place, as the segments of
    one message (hostChannelAllreduceSegments): tensors of distinct values
    per element, of sizes that cross the channel's pieces and its two-phase
    size, views of one tensor side by side, and the forms that take the
    fused buffer instead (a strided view, one tensor twice): every element
    exact, on the caller's thread or queued (a late peer), a rank on either
    path meeting one on the other."""
    import torch
    import torch.distributed as dist
    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    for i in range(calls):
        draw = random.Random(5000 + i)
        _late_rank(rank, world_size, draw, [0.0, 0.0, 0.0, 100e-6, 3e-3])
        dtype = draw.choice([torch.float32, torch.float64, torch.int32, torch.bfloat16])
        form = draw.choice(["tensors", "tensors", "views", "strided", "twice"])
        sizes = [draw.choice([1, 3, 100, 5000, 40000]) for _ in range(draw.randrange(1, 5))]
        # Small integers: exact in every dtype, bfloat16 too, and when summed.
        base = [(torch.arange(n) % 61 + 7 * k + rank + 1).to(dtype) for k, n in enumerate(sizes)]
        if form == "views":  # side by side in one tensor
            tensors = list(torch.cat(base).split(sizes))
        elif form == "strided":  # the first one a view of every other element
            tensors = [torch.stack([b, b], 1).view(-1)[::2] if k == 0 else b.clone()
                       for k, b in enumerate(base)]
        else:
            tensors = [b.clone() for b in base]
        # "twice": the first tensor in the block again; the fused buffer
        # reduces both copies and writes each back: the same sum.
        block = tensors + ([tensors[0]] if form == "twice" else [])
        # Asynchronous: queued where a peer has not come yet (and that peer,
        # coming last, runs it on its thread).
        _coalesced_all_reduce(block, asynchronous=draw.random() < 0.5)
        for k, (t, n) in enumerate(zip(tensors, sizes)):
            expected = ((torch.arange(n) % 61 + 7 * k) * world_size
                        + sum(r + 1 for r in range(world_size))).to(torch.float64)
            got = t.to(torch.float64)
            if not torch.equal(got, expected):
                bad = (got != expected).nonzero()[:3].flatten()
                failures.append(f"call {i} {form} {dtype} tensor {k} of {n}: at {bad.tolist()} "
                                f"{got[bad].tolist()} != {expected[bad].tolist()}")
    direct, queued = _paths("allreduce_coalesced")
    dist.destroy_process_group()
    return {"failures": failures, "direct": direct, "queued": queued}
