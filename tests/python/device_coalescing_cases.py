"""Rank bodies for test_device_coalescing_manager.py (run by multiproc).

torch's coalescing manager given a device (`_coalescing_manager(device=...)`,
as DeepSpeed's all_gather_coalesced calls it, and torch's batch_isend_irecv
for backends that ask it to coalesce)
brackets what it issues with the backend's startCoalescing and
endCoalescing: the block's one coalesced call, its sends and receives, and
whatever else the block's code calls directly."""
import json
import random
import time

from async_on_caller_cases import _init, _late_rank, _paths


def _device_block(kind, tensors, outputs, asynchronous):
    """One device coalescing manager block of `kind` (all_reduce,
    all_gather_into_tensor or reduce_scatter_tensor) over `tensors`, waited
    for as torch leaves it to the caller: by the manager itself when
    synchronous, through its Work otherwise."""
    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    with _coalescing_manager(device=torch.device("cpu"), async_ops=asynchronous) as manager:
        for k, t in enumerate(tensors):
            if kind == "all_reduce":
                dist.all_reduce(t)
            elif kind == "all_gather_into_tensor":
                dist.all_gather_into_tensor(outputs[k], t)
            else:
                dist.reduce_scatter_tensor(outputs[k], t)
    if asynchronous:
        manager.wait()


def device_blocks(rank, world_size, init_method, calls=150):
    """Device coalescing manager blocks of all_reduce, all_gather_into_tensor
    and reduce_scatter_tensor, synchronous or not, ranks arriving together or
    apart; rings of isend and irecv in a block; and a block whose code calls a blocking
    broadcast directly: every result exact, on whichever path each rank took.
    Returns the (direct, queued) counts of the blocks' coalesced collectives."""
    import torch
    import torch.distributed as dist

    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    world = world_size
    failures = []
    for i in range(calls):
        draw = random.Random(5000 + i)
        _late_rank(rank, world_size, draw, [0.0, 0.0, 20e-6, 100e-6, 3e-3])
        kind = draw.choice(["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                            "p2p_block", "broadcast"])
        asynchronous = draw.random() < 0.5
        sizes = [draw.choice([1, 7, 300, 4096]) * world for _ in range(draw.randrange(1, 4))]
        if kind == "all_reduce":
            tensors = [torch.full((n,), float(rank + 1 + k)) for k, n in enumerate(sizes)]
            _device_block(kind, tensors, None, asynchronous)
            for k, t in enumerate(tensors):
                expected = float(sum(r + 1 + k for r in range(world)))
                if not torch.equal(t, torch.full_like(t, expected)):
                    failures.append(f"call {i} all_reduce {k}: {t[:3].tolist()} != {expected}")
        elif kind == "all_gather_into_tensor":
            tensors = [torch.arange(n, dtype=torch.float32) + 1000 * rank + k for k, n in
                       enumerate(sizes)]
            outputs = [torch.zeros(n * world) for n in sizes]
            _device_block(kind, tensors, outputs, asynchronous)
            for k, (n, o) in enumerate(zip(sizes, outputs)):
                expected = torch.cat([torch.arange(n, dtype=torch.float32) + 1000 * r + k
                                      for r in range(world)])
                if not torch.equal(o, expected):
                    failures.append(f"call {i} all_gather {k} ({n}) differs")
        elif kind == "reduce_scatter_tensor":
            tensors = [torch.arange(n, dtype=torch.float32) + rank + k for k, n in
                       enumerate(sizes)]
            outputs = [torch.zeros(n // world) for n in sizes]
            _device_block(kind, tensors, outputs, asynchronous)
            for k, (n, o) in enumerate(zip(sizes, outputs)):
                total = sum(torch.arange(n, dtype=torch.float32) + r + k for r in range(world))
                if not torch.equal(o, total.chunk(world)[rank]):
                    failures.append(f"call {i} reduce_scatter {k} ({n}) differs")
        elif kind == "p2p_block":
            # A ring: each rank sends to the next and receives from the one before.
            n = sizes[0]
            send = torch.full((n,), float(rank * 10 + i))
            got = torch.zeros(n)
            # In a device block, as torch's batch_isend_irecv issues them
            # for a backend that asks it to coalesce (ringreduce does not).
            from torch.distributed.distributed_c10d import _coalescing_manager

            with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as block:
                dist.isend(send, (rank + 1) % world)
                dist.irecv(got, (rank - 1) % world)
            block.wait()
            expected = float(((rank - 1) % world) * 10 + i)
            if not torch.equal(got, torch.full_like(got, expected)):
                failures.append(f"call {i} isend/irecv block: {got[:3].tolist()} != {expected}")
        else:
            # A blocking call inside the block, before anything asynchronous:
            # it runs as outside the block (held, its wait would never end).
            from torch.distributed.distributed_c10d import _coalescing_manager

            root = i % world
            t = torch.full((sizes[0],), float(rank))
            with _coalescing_manager(device=torch.device("cpu")):
                dist.broadcast(t, root)
            if not torch.equal(t, torch.full_like(t, float(root))):
                failures.append(f"call {i} broadcast inside a block: {t[:3].tolist()}")
    paths = {op: _paths(op) for op in ("allreduce_coalesced", "all_gather_into_tensor_coalesced",
                                       "reduce_scatter_tensor_coalesced")}
    dist.destroy_process_group()
    return {"failures": failures, "paths": paths}


def _in_block_catching(before, failing):
    """A device block (async_ops=True) that runs `before`, then `failing`,
    whose error it catches inside the block, as a user who recovers must: an
    exception that leaves torch's manager leaves torch's own op list for the
    group set (for every backend), and every later collective is only
    recorded. Waits for the block; returns {"error", "raised_s"}."""
    import torch
    from torch.distributed.distributed_c10d import _coalescing_manager

    report = {"error": None}
    start = time.monotonic()
    with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as manager:
        before()
        try:
            failing()
        except Exception as e:
            report["error"] = (type(e).__name__, str(e))
    report["raised_s"] = time.monotonic() - start
    manager.wait()
    return report


def wait_behind_held(rank, world_size, init_method):
    """A device block whose code issues an asynchronous broadcast and then a
    blocking one: the blocking one raises on every rank (its wait could end
    only with the block) instead of hanging; the asynchronous one still runs
    and is exact; the group and later blocks work. Returns what happened."""
    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))
    first = torch.full((64,), float(rank))
    second = torch.full((64,), float(rank))
    works = []
    report = _in_block_catching(lambda: works.append(dist.broadcast(first, 0, async_op=True)),
                                lambda: dist.broadcast(second, 1))
    works[0].wait()
    report["first"] = first[:2].tolist()
    report["second"] = second[:2].tolist()  # untouched: the call raised before running
    # The group goes on: a plain collective, and a block of the same calls
    # made right (both asynchronous), waited for through the manager.
    x = torch.ones(8)
    dist.all_reduce(x)
    report["after"] = x[0].item()
    with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as manager:
        w1 = dist.broadcast(first.fill_(rank), 1, async_op=True)
        w2 = dist.broadcast(second.fill_(rank), 0, async_op=True)
    manager.wait()
    w1.wait()
    w2.wait()
    report["block_after"] = (first[0].item(), second[0].item())
    report["trace_ops"] = [e["op"] for e in
                           json.loads(__import__("torch_ringreduce").trace_json())["entries"]]
    dist.destroy_process_group()
    return report


def p2p_wait_inside_block(rank, world_size, init_method):
    """torch's send() and recv() wait at once: inside a device block, which
    holds them until it ends, the wait raises on both ranks instead of
    hanging; caught inside the block, the block's end still runs them (the
    message arrives) and the group goes on."""
    import torch
    import torch.distributed as dist

    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))
    t = torch.full((16,), float(rank + 7))
    report = _in_block_catching(lambda: None,
                                lambda: dist.send(t, 1) if rank == 0 else dist.recv(t, 0))
    report["received"] = t[:2].tolist()
    x = torch.ones(4)
    dist.all_reduce(x)
    report["after"] = x[0].item()
    dist.destroy_process_group()
    return report


def coalesced_call_raises(rank, world_size, init_method):
    """A device block whose one coalesced call raises (an expanded output or
    input, which every rank refuses alike): torch's manager then never calls
    endCoalescing, so the backend ends the block itself. Later collectives,
    queued or not, and later blocks of the same call work and are exact.
    Returns {case: {"error": (type, message), "after": [...], "block": ok}}."""
    import torch
    import torch.distributed as dist

    _init(rank, world_size, init_method)
    world = world_size
    n = 4
    report = {}
    bad = {
        "all_reduce": ([torch.ones(n), torch.zeros(1).expand(n)], None),
        "all_gather_into_tensor": ([torch.ones(n), torch.ones(n)],
                                   [torch.zeros(world * n), torch.zeros(1).expand(world * n)]),
        "reduce_scatter_tensor": ([torch.ones(world * n), torch.ones(world * n)],
                                  [torch.zeros(n), torch.zeros(1).expand(n)]),
    }
    for kind, (tensors, outputs) in bad.items():
        for asynchronous in (False, True):
            case = {"error": None}
            try:
                _device_block(kind, tensors, outputs, asynchronous)
            except Exception as e:
                case["error"] = (type(e).__name__, str(e))
            # Later calls: a blocking one, an asynchronous one (queued: a
            # block left open would hold it), a large one, then the same
            # block made right.
            x = torch.ones(8)
            dist.all_reduce(x)
            y = torch.ones(8)
            dist.all_reduce(y, async_op=True).wait()
            z = torch.ones(1 << 20)
            dist.all_reduce(z, async_op=True).wait()
            case["after"] = [x[0].item(), y[0].item(), z[-1].item()]
            good = [torch.full((n,), float(rank + 1)), torch.full((n,), float(rank + 1))]
            if kind == "all_reduce":
                _device_block(kind, good, None, asynchronous)
                case["block"] = all(torch.equal(t, torch.full((n,), float(world * (world + 1) // 2)))
                                    for t in good)
            elif kind == "all_gather_into_tensor":
                outs = [torch.zeros(world * n), torch.zeros(world * n)]
                _device_block(kind, good, outs, asynchronous)
                expected = torch.arange(1, world + 1, dtype=torch.float32).repeat_interleave(n)
                case["block"] = all(torch.equal(o, expected) for o in outs)
            else:
                ins = [torch.full((world * n,), float(rank + 1)) for _ in range(2)]
                outs = [torch.zeros(n), torch.zeros(n)]
                _device_block(kind, ins, outs, asynchronous)
                case["block"] = all(torch.equal(o, torch.full((n,), float(world * (world + 1) // 2)))
                                    for o in outs)
            report[f"{kind} {'async' if asynchronous else 'sync'}"] = case
    dist.destroy_process_group()
    return report


def manager_raises_first(rank, world_size, init_method):
    """torch's manager raising before its block's end (collectives of mixed
    kinds in one block) leaves the backend's block open: the next
    all_reduce, all_gather_into_tensor, reduce_scatter_tensor or block ends
    it (ProcessGroupRing::endBlockTorchLeftOpen, Engine::startCoalescing),
    what it held running first. Each case: the mixed block, an asynchronous
    broadcast the open block holds, then the next call; both exact. Then a
    functional collective inside a block that torch ends: exact too.
    Returns {case: {"error": str or None, "values": [...]}}."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.distributed_c10d import _coalescing_manager

    _init(rank, world_size, init_method)
    world = world_size
    n = 4

    def mixed():
        with _coalescing_manager(device=torch.device("cpu")):
            dist.all_reduce(torch.ones(n))
            dist.all_gather_into_tensor(torch.zeros(world * n), torch.ones(n))

    def all_reduce(asynchronous):
        t = torch.full((n,), float(rank + 1))
        work = dist.all_reduce(t, async_op=asynchronous)
        if asynchronous:
            work.wait()
        return t.tolist()

    def all_gather():
        out = torch.zeros(world * n)
        dist.all_gather_into_tensor(out, torch.full((n,), float(rank + 1)), async_op=True).wait()
        return out.tolist()

    def reduce_scatter():
        out = torch.zeros(n)
        dist.reduce_scatter_tensor(out, torch.full((world * n,), float(rank + 1)),
                                   async_op=True).wait()
        return out.tolist()

    def block(asynchronous):
        ts = [torch.full((n,), float(rank + 1)) for _ in range(2)]
        _device_block("all_reduce", ts, None, asynchronous)
        return ts[0].tolist() + ts[1].tolist()

    nexts = {
        "all_reduce": lambda: all_reduce(False),
        "async all_reduce": lambda: all_reduce(True),
        "all_gather_into_tensor": all_gather,
        "reduce_scatter_tensor": reduce_scatter,
        "block": lambda: block(False),
        "async block": lambda: block(True),
    }
    report = {}
    for name, next_call in nexts.items():
        case = {"error": None}
        try:
            mixed()
        except RuntimeError as e:
            case["error"] = str(e)
        held = torch.full((n,), float(rank))
        work = dist.broadcast(held, world - 1, async_op=True)
        case["values"] = next_call()
        work.wait()
        case["held"] = held.tolist()
        report[name] = case
    # A large one after: DDP's bucket, queued.
    big = torch.ones(1 << 20)
    dist.all_reduce(big, async_op=True).wait()
    report["large after"] = {"error": None, "values": [big[0].item(), big[-1].item()]}
    # A functional collective inside a block torch does end: it ends the
    # block early, and the block's own call and end still complete.
    a = torch.full((n,), float(rank + 1))
    with _coalescing_manager(device=torch.device("cpu")):
        dist.all_reduce(a)
        f = funcol.wait_tensor(funcol.all_reduce(torch.full((n,), float(rank + 1)), "sum",
                                                 dist.group.WORLD))
    report["functional in a block"] = {"error": None, "values": a.tolist() + f.tolist()}
    dist.destroy_process_group()
    return report
