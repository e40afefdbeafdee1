"""Rank bodies for test_host_channel_collectives.py: the collectives other than
allreduce through the host channel from the caller's thread (the trace marks
each "direct"), against references computed locally, and a mismatch of two
such collectives."""
from datetime import timedelta

ON_CALLER_OPS = ["all_gather_into_tensor", "all_gather", "reduce_scatter_tensor", "broadcast",
              "barrier", "all_to_all_single", "reduce", "gather", "scatter", "reduce_scatter"]


def _input(torch, rank, step, numel, dtype):
    """Rank r's input at a step: small integers, exact in every dtype and sum."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    values = torch.randint(-8, 8, (numel,), generator=g)
    if dtype == torch.bool:
        return values > 0
    if not dtype.is_floating_point and not dtype.is_complex and not dtype.is_signed:
        values = values.abs()
    return values.to(dtype)


def _strided(torch, tensor):
    """The same values in a non-contiguous tensor (every other element of a larger one)."""
    holder = torch.zeros(tensor.numel() * 2, dtype=tensor.dtype)
    view = holder[::2]
    view.copy_(tensor)
    return view


def every_op_on_caller(rank, world_size, init_method):
    import json

    import torch
    import torch.distributed as dist
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    failures = []
    checked = 0

    def check(what, actual, expected, exact=True):
        nonlocal checked
        checked += 1
        same = torch.equal(actual, expected) if exact else torch.allclose(actual, expected)
        if actual.dtype != expected.dtype or not same:
            failures.append(f"{what}: {actual.flatten()[:8].tolist()} != "
                            f"{expected.flatten()[:8].tolist()}")

    n = world_size
    step = 0
    # With RINGREDUCE_SHM_BYTES=8192 (the test's setting): 7 elements fit a
    # buffer, 3000 take several pieces.
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64,
                  torch.uint8):
        for numel in (7, 3000):
            step += 1
            inputs = [_input(torch, r, step, numel, dtype) for r in range(n)]
            mine = inputs[rank]
            what = f"{dtype} x {numel}"

            out = torch.empty(n * numel, dtype=dtype)
            dist.all_gather_into_tensor(out, mine)
            check(f"all_gather_into_tensor {what}", out, torch.cat(inputs))
            out = _strided(torch, torch.zeros(n * numel, dtype=dtype))
            dist.all_gather_into_tensor(out, _strided(torch, mine))
            check(f"all_gather_into_tensor (strided) {what}", out, torch.cat(inputs))

            outs = [torch.empty(numel, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, mine)
            check(f"all_gather {what}", torch.cat(outs), torch.cat(inputs))

            full = [_input(torch, r, step + 100, n * numel, dtype) for r in range(n)]
            ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN]
            if dtype in (torch.float32, torch.float64):
                ops.append(dist.ReduceOp.AVG)
            for op in ops:
                got = torch.empty(numel, dtype=dtype)
                dist.reduce_scatter_tensor(got, full[rank], op=op)
                stacked = torch.stack(full)
                if op == dist.ReduceOp.SUM:
                    total = stacked.sum(0, dtype=dtype)
                elif op == dist.ReduceOp.MAX:
                    total = stacked.max(0).values
                elif op == dist.ReduceOp.MIN:
                    total = stacked.min(0).values
                else:
                    total = (stacked.to(torch.float64).sum(0) / n).to(dtype)
                # AVG divides once, as torch may not: equal to rounding.
                check(f"reduce_scatter_tensor {op} {what}", got,
                      total[rank * numel:(rank + 1) * numel], exact=op != dist.ReduceOp.AVG)

            got = torch.empty(numel, dtype=dtype)
            dist.reduce_scatter(got, list(full[rank].chunk(n)))
            check(f"reduce_scatter (list) {what}", got,
                  torch.stack(full).sum(0, dtype=dtype)[rank * numel:(rank + 1) * numel])

            for root in sorted({0, n - 1}):
                t = inputs[rank].clone()
                dist.broadcast(t, src=root)
                check(f"broadcast from {root} {what}", t, inputs[root])
                s = _strided(torch, inputs[rank])
                dist.broadcast(s, src=root)
                check(f"broadcast (strided) from {root} {what}", s, inputs[root])

            dist.barrier()

            for root in sorted({0, n - 1}):
                t = inputs[rank].clone()
                dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
                check(f"reduce MAX to {root} {what}", t,
                      torch.stack(inputs).max(0).values if rank == root else inputs[rank])
                gathered = [torch.empty(numel, dtype=dtype) for _ in range(n)]
                dist.gather(mine, gathered if rank == root else None, dst=root)
                if rank == root:
                    check(f"gather to {root} {what}", torch.cat(gathered), torch.cat(inputs))
                got = torch.empty(numel, dtype=dtype)
                blocks = list(full[root].chunk(n)) if rank == root else None
                dist.scatter(got, blocks, src=root)
                check(f"scatter from {root} {what}", got,
                      full[root][rank * numel:(rank + 1) * numel])

            got = torch.empty(n * numel, dtype=dtype)
            dist.all_to_all_single(got, full[rank])
            expected = torch.cat([full[q][rank * numel:(rank + 1) * numel] for q in range(n)])
            check(f"all_to_all_single {what}", got, expected)

    # A rank that queues (async_op=True) meets ranks that ran it directly:
    # the queued body takes the same channel.
    t = _input(torch, rank, 999, 64, torch.float32)
    out = torch.empty(64 * n, dtype=torch.float32)
    work = dist.all_gather_into_tensor(out, t, async_op=(rank == 0))
    if work is not None:
        work.wait()
    check("all_gather_into_tensor, queued on rank 0 only", out,
          torch.cat([_input(torch, r, 999, 64, torch.float32) for r in range(n)]))
    b = torch.full((5,), float(rank))
    work = dist.broadcast(b, src=n - 1, async_op=(rank == n - 1))
    if work is not None:
        work.wait()
    check("broadcast, queued on the root only", b, torch.full((5,), float(n - 1)))

    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    paths = sorted({(e["op"], e["direct"]) for e in entries})
    dist.destroy_process_group()
    return {"failures": failures, "checked": checked, "paths": paths}


def mismatched_ops(rank, world_size, init_method):
    """Rank 0 gathers while rank 1 broadcasts, both past the queue."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    dist.barrier()
    error = None
    try:
        if rank == 0:
            dist.all_gather_into_tensor(torch.empty(16), torch.ones(8))
        else:
            dist.broadcast(torch.ones(8), src=0)
    except Exception as e:  # DistBackendError
        error = f"{type(e).__name__}: {e}"
    return {"error": error}
