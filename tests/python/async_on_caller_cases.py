"""Rank bodies for test_async_on_caller.py (run in fresh processes by multiproc)."""
import json
import random
import time


def _init(rank, world_size, init_method):
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)


def _published_ahead():
    """How many of this rank's queued collectives went up on the channel before they were
    queued, by its flight recorder."""
    import torch_ringreduce

    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    return sum(1 for e in entries if e["published_ahead"] and not e["direct"])


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
    size (and empty ones), views of one tensor side by side (one segment),
    and the forms that take the fused buffer instead (a strided view, one
    tensor twice): every element exact, on the caller's thread or queued (a
    late peer), a rank on either path meeting one on the other."""
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
        sizes = [draw.choice([0, 1, 3, 100, 5000, 40000]) for _ in range(draw.randrange(1, 5))]
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
    allreduces = _paths("allreduce_coalesced")
    dist.destroy_process_group()
    return {"failures": failures, "allreduces": allreduces}


def coalesced_gathers(rank, world_size, init_method, calls=100):
    """torch's coalescing manager around all_gather_into_tensor and
    reduce_scatter_tensor calls of several tensors: one collective whose
    tensors are one message on the channel (hostChannelAllgatherParts,
    hostChannelReduceScatterParts), on the caller's thread or queued (a late
    peer), a rank on either path meeting one on the other. Sizes that cross
    the channel's pieces, dtypes mixed (gathers) or alike (reductions, a
    mixed block keeps one collective per tensor), inputs in their own place
    of the output or inside another tensor's output, strided outputs, SUM,
    AVG and PREMUL_SUM: every element exact, inputs left as they were."""
    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager
    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    world = world_size

    def values(n, k, r, dtype):
        # Small integers: exact in every dtype, bfloat16 too, and when summed.
        return ((torch.arange(n) * 3 + 11 * k + r) % 61).to(dtype)  # sums under 256

    for i in range(calls):
        draw = random.Random(9000 + i)
        _late_rank(rank, world_size, draw, [0.0, 0.0, 0.0, 100e-6, 3e-3])
        asynchronous = draw.random() < 0.5
        sizes = [draw.choice([1, 3, 100, 5000, 40000]) for _ in range(draw.randrange(2, 5))]
        form = draw.choice(["plain", "plain", "in place", "inside another", "strided"])
        mixed = draw.random() < 0.3
        dtypes = [draw.choice([torch.float32, torch.int64, torch.bfloat16]) if mixed
                  else torch.float32 for _ in sizes]
        # all_gather_into_tensor of each tensor, under the manager.
        ins = [values(n, k, rank, dt) for k, (n, dt) in enumerate(zip(sizes, dtypes))]
        outs = [torch.zeros(n * world, dtype=dt) for n, dt in zip(sizes, dtypes)]
        if form == "in place":
            for k, (n, o) in enumerate(zip(sizes, outs)):
                o[rank * n:(rank + 1) * n] = ins[k]
                ins[k] = o[rank * n:(rank + 1) * n]
        elif form == "inside another" and dtypes[0] == dtypes[1]:
            # Input 0 lies where output 1 receives rank 0's block: read first.
            n0 = sizes[0]
            base = torch.zeros(max(n0, sizes[1] * world), dtype=dtypes[1])
            base[:n0] = ins[0]
            outs[1], ins[0] = base[:sizes[1] * world], base[:n0]
        elif form == "strided":
            outs[0] = torch.zeros(sizes[0] * world * 2, dtype=dtypes[0])[::2]
        kept = [t.clone() for t in ins]
        with _coalescing_manager(async_ops=asynchronous) as manager:
            for o, t in zip(outs, ins):
                dist.all_gather_into_tensor(o, t)
        if asynchronous:
            manager.wait()
        for k, (n, dt, o) in enumerate(zip(sizes, dtypes, outs)):
            expected = torch.cat([kept[k] if r == rank else values(n, k, r, dt)
                                  for r in range(world)])
            if not torch.equal(o, expected):
                bad = (o != expected).nonzero()[:3].flatten()
                failures.append(f"all_gather call {i} {form} tensor {k} ({dt}, {n}): at "
                                f"{bad.tolist()} {o[bad].tolist()} != {expected[bad].tolist()}")
        # reduce_scatter_tensor of each tensor, under the manager.
        op = draw.choice(["sum", "avg", "premul"])
        rdtype = torch.float64 if op != "sum" else dtypes[0]
        rdtypes = [rdtype] * len(sizes) if not mixed else dtypes
        if op != "sum":
            rdtypes = [torch.float64] * len(sizes)
        full = [values(n * world, k, rank, dt) for k, (n, dt) in enumerate(zip(sizes, rdtypes))]
        kept = [t.clone() for t in full]
        rs_outs = [torch.zeros(n, dtype=dt) for n, dt in zip(sizes, rdtypes)]
        if form == "in place":  # each output its own block of its input (torch allows it)
            rs_outs = [t[rank * n:(rank + 1) * n] for t, n in zip(full, sizes)]
        elif form == "strided":
            rs_outs[0] = torch.zeros(sizes[0] * 2, dtype=rdtypes[0])[::2]
        reduce_op = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG,
                     "premul": dist._make_nccl_premul_sum(2.0)}[op]
        with _coalescing_manager(async_ops=asynchronous) as manager:
            for o, t in zip(rs_outs, full):
                dist.reduce_scatter_tensor(o, t, op=reduce_op)
        if asynchronous:
            manager.wait()
        for k, (n, dt, o) in enumerate(zip(sizes, rdtypes, rs_outs)):
            total = sum((kept[k] if r == rank else values(n * world, k, r, dt)).double()
                        for r in range(world))
            mine = total[rank * n:(rank + 1) * n]
            mine = {"sum": mine, "avg": mine / world, "premul": mine * 2.0}[op]
            if not torch.equal(o.double(), mine):
                bad = (o.double() != mine).nonzero()[:3].flatten()
                failures.append(f"reduce_scatter call {i} {form} {op} tensor {k} ({dt}, {n}): "
                                f"at {bad.tolist()} {o[bad].tolist()} != {mine[bad].tolist()}")
            if form != "in place" and not torch.equal(full[k], kept[k]):
                failures.append(f"reduce_scatter call {i} {form} tensor {k}: input changed")
    gathers = _paths("all_gather_into_tensor_coalesced")
    scatters = _paths("reduce_scatter_tensor_coalesced")
    dist.destroy_process_group()
    return {"failures": failures, "gathers": gathers, "scatters": scatters}


def uneven_alltoalls(rank, world_size, init_method, calls=100):
    """all_to_all_single with split sizes and all_to_all's lists through the
    channel's uneven all-to-all, on the caller's thread or queued (a late
    peer, an asynchronous call), a rank on either path meeting one on the
    other: zero-row blocks, blocks of several turns, and blocks too large for
    the channel's turns, which every rank moves with messages where all
    queued it, and through the channel in as many turns as they need where
    one ran it on its caller's thread. Every element exact, inputs unchanged."""
    import torch
    import torch.distributed as dist
    _init(rank, world_size, init_method)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    world = world_size
    forced = 0
    for i in range(calls):
        draw = random.Random(7000 + i)
        _late_rank(rank, world_size, draw, [0.0, 0.0, 0.0, 100e-6, 3e-3])
        asynchronous = draw.random() < 0.5
        form = draw.choice(["single", "single", "strided", "list"])
        dtype = draw.choice([torch.float32, torch.int64, torch.bfloat16])
        # Rank src sends rows[src][dst] rows of 3 to dst (12-24 bytes a row;
        # 256 KiB buffers: about 128 KiB a slot at world 2, 4 turns at most).
        scales = [0, 1, 3, 100, 5000, 40000, 100000]
        rows = [[draw.choice(scales) for _ in range(world)] for _ in range(world)]

        def block(src, k, n):
            # Small integers: exact in every dtype.
            return ((torch.arange(n * 3) + 7 * src + 13 * k + i) % 97).to(dtype).view(n, 3)

        sent = torch.cat([block(rank, dst, rows[rank][dst]) for dst in range(world)])
        kept = sent.clone()
        expected = torch.cat([block(src, rank, rows[src][rank]) for src in range(world)])
        recv_rows = [rows[src][rank] for src in range(world)]
        if form == "list":
            outs = [torch.full((n, 3), 99, dtype=dtype) for n in recv_rows]
            work = dist.all_to_all(outs, list(sent.split(rows[rank])), async_op=asynchronous)
            if asynchronous:
                work.wait()
            got = torch.cat(outs)
        else:
            source = sent
            if form == "strided":
                source = torch.zeros(sent.shape[0], 6, dtype=dtype)[:, ::2]
                source.copy_(sent)
            got = torch.full((sum(recv_rows), 3), 99, dtype=dtype)
            work = dist.all_to_all_single(got, source, recv_rows, rows[rank],
                                          async_op=asynchronous)
            if asynchronous:
                work.wait()
        if not torch.equal(got, expected):
            bad = (got != expected).nonzero()[:3].tolist()
            failures.append(f"call {i} {form} {dtype} rows {rows}: differs at {bad}")
        if not torch.equal(sent, kept):
            failures.append(f"call {i} {form}: input changed")
        # Blocks beyond the channel's four turns (256 KiB buffers, a 64-byte
        # header) that this rank moved from its caller's thread: every rank
        # took as many turns as they needed.
        slot = (262144 - 64) // world
        too_large = max(max(r) for r in rows) * 3 * sent.element_size() > 4 * slot
        if too_large and _last_entry_direct():
            forced += 1
    singles = _paths("all_to_all_single")
    lists = _paths("all_to_all")
    dist.destroy_process_group()
    return {"failures": failures, "singles": singles, "lists": lists, "forced": forced}


def _last_entry_direct():
    """Whether this rank ran its latest collective on its caller's thread."""
    import torch_ringreduce

    return json.loads(torch_ringreduce.trace_json())["entries"][-1]["direct"]


def _busy(seconds):
    end = time.perf_counter() + seconds  # busy, as compute would be
    while time.perf_counter() < end:
        pass


def late_peers_every_collective(rank, world_size, init_method, calls=40):
    """Every small asynchronous host collective with one rank late by 0-3 ms
    (drawn alike on every rank): the ranks that came first put their part
    up before queueing it (Engine::runOnCaller's publish-ahead), the late
    one completes its own at once from the channel. Each result exact,
    whether its Work was waited for at once, through its future (which never
    runs the task on the waiting thread), only after the next calls, or
    never: is_completed() polled until it says so (a poll runs nothing
    either), the output then final without a wait()."""
    import torch
    import torch.distributed as dist

    _init(rank, world_size, init_method)
    n = world_size
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    pending = []

    def one(op, i, m):
        """(work, check): the call, and what makes its result a failure line."""
        base = float(100 * i)
        if op == "all_reduce":
            t = torch.arange(m, dtype=torch.float32) + base + rank
            want = (torch.arange(m, dtype=torch.float32) + base) * n + sum(range(n))
            return dist.all_reduce(t, async_op=True), lambda: (t, want)
        if op == "all_gather_into_tensor":
            out = torch.empty(n * m)
            want = torch.cat([torch.full((m,), base + r) for r in range(n)])
            return dist.all_gather_into_tensor(out, torch.full((m,), base + rank),
                                               async_op=True), lambda: (out, want)
        if op == "reduce_scatter_tensor":
            out = torch.empty(m)
            src = torch.arange(n * m, dtype=torch.float32) + base + rank
            full = (torch.arange(n * m, dtype=torch.float32) + base) * n + sum(range(n))
            return (dist.reduce_scatter_tensor(out, src, async_op=True),
                    lambda: (out, full[rank * m:(rank + 1) * m]))
        if op == "broadcast":
            t = torch.full((m,), base + rank)
            return dist.broadcast(t, src=1, async_op=True), lambda: (t, torch.full((m,), base + 1))
        if op == "all_to_all_single":
            src = torch.cat([torch.full((m,), base + 10 * rank + j) for j in range(n)])
            out = torch.empty(n * m)
            want = torch.cat([torch.full((m,), base + 10 * r + rank) for r in range(n)])
            return dist.all_to_all_single(out, src, async_op=True), lambda: (out, want)
        if op == "gather":
            outs = [torch.empty(m) for _ in range(n)] if rank == 0 else None
            work = dist.gather(torch.full((m,), base + rank), outs, dst=0, async_op=True)
            want = torch.cat([torch.full((m,), base + r) for r in range(n)])
            return work, lambda: (torch.cat(outs) if rank == 0 else want, want)
        if op == "scatter":
            out = torch.empty(m)
            ins = [torch.full((m,), base + r) for r in range(n)] if rank == 0 else None
            return (dist.scatter(out, ins, src=0, async_op=True),
                    lambda: (out, torch.full((m,), base + rank)))
        if op == "reduce":
            t = torch.full((m,), base + rank)
            want = torch.full((m,), base * n + sum(range(n))) if rank == 0 else t.clone()
            return dist.reduce(t, dst=0, async_op=True), lambda: (t, want)
        work = dist.barrier(async_op=True)
        return work, lambda: (torch.zeros(1), torch.zeros(1))

    one_output = {"all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
                  "all_to_all_single", "scatter", "reduce"}

    def settle(entries, how):
        for label, work, check in entries:
            if how == "future":
                work.get_future().wait()
            if how == "polled":
                deadline = time.monotonic() + 60
                while not work.is_completed():
                    if time.monotonic() > deadline:
                        break
                if not work.is_completed():
                    failures.append(f"{label}: is_completed() still False after 60 s")
                    continue
            else:
                work.wait()
            got, want = check()
            if not torch.equal(got, want):
                failures.append(f"{label}: {got[:4].tolist()} != {want[:4].tolist()}")
            if how == "polled":
                work.wait()  # completed: raises the error it may have ended with
            if how == "later" and label.split()[0] in one_output:
                # A future first asked for once the work has ended holds its output too.
                value = work.get_future().wait()
                if not torch.equal(value[0], want):
                    failures.append(f"{label}: get_future() after the end: "
                                    f"{value[0][:4].tolist()} != {want[:4].tolist()}")

    ops = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
           "all_to_all_single", "gather", "scatter", "reduce", "barrier"]
    for i in range(calls):
        for op in ops:
            draw = random.Random(f"{op}{i}")
            _late_rank(rank, world_size, draw, [0.0, 3e-4, 1e-3, 3e-3])
            m = draw.choice([1, 16, 1000])
            work, check = one(op, i, m)
            pending.append((f"{op} {i} ({m})", work, check))
            how = draw.choice(["wait", "future", "later", "polled"])
            if how != "later" or len(pending) > 3:
                settle(pending, how)
                pending.clear()
    settle(pending, "wait")
    direct, queued = _paths()
    ahead = _published_ahead()
    dist.destroy_process_group()
    return {"failures": failures, "direct": direct, "queued": queued, "published_ahead": ahead}


def a_moment_late_peer_in_two_phase_allreduces(rank, world_size, init_method):
    """1 MiB asynchronous allreduces (two phases on the channel: each rank
    reduces its share, then reads the others') whose last rank computes 50 us
    (busy) before each call: the others put their first turn up before it
    comes and, since it will wait for their second phase too, wait a moment
    longer for it and run the rest on their own threads (Engine::runOnCaller)
    instead of queueing it. Each result exact; the flight recorder counts the
    calls that went up ahead and then ran on the caller."""
    # float32: 1 MiB, two phases from 512 KiB (256 KiB from 3 ranks)
    return _a_moment_late_peer(rank, world_size, init_method, 1 << 18, 50e-6)


def a_moment_late_peer_in_small_allreduces(rank, world_size, init_method):
    """4 KiB asynchronous allreduces (one turn on the channel) whose last rank
    computes 5 us (busy) before each call, less than the others wait for it:
    they put their part up before they wait (Engine::runOnCaller), so that it
    completes its own at once, and run the call on their own threads when it
    comes. Each result exact; the flight recorder counts those calls."""
    return _a_moment_late_peer(rank, world_size, init_method, 1 << 10, 5e-6)


def _a_moment_late_peer(rank, world_size, init_method, m, late_by, calls=100):
    """Asynchronous allreduces of `m` float32 whose last rank computes
    `late_by` seconds (busy) before each call, the ranks in step before it
    (without that, two ranks could settle for good into one that came 30-70
    us early and queued every call: seen once in CI, 100 of 100 calls, and
    here in 1 of 3 three-rank worlds): each result checked, and this
    rank's calls counted by path (direct or queued) and by whether their first
    turn went up before the peers came (published_ahead)."""
    import torch
    import torch.distributed as dist
    import torch_ringreduce

    _init(rank, world_size, init_method)
    n = world_size
    dist.all_reduce(torch.ones(4))  # opens the host channel
    failures = []
    in_step = torch.zeros(1)
    for i in range(calls):
        # In step again (a synchronous call ends on every rank together), so
        # that the last rank is late by `late_by`, not by what earlier calls
        # left between them.
        dist.all_reduce(in_step)
        if rank == n - 1:
            _busy(late_by)
        t = torch.arange(m, dtype=torch.float32) + i + rank
        want = (torch.arange(m, dtype=torch.float32) + i) * n + sum(range(n))
        dist.all_reduce(t, async_op=True).wait()
        if not torch.equal(t, want):
            failures.append(f"call {i}: {t[:4].tolist()} != {want[:4].tolist()}")
    entries = [e for e in json.loads(torch_ringreduce.trace_json())["entries"]
               if e["op"] == "allreduce" and e["summary"].startswith(f"{m} x")]
    dist.destroy_process_group()

    def count(direct, ahead):
        return sum(1 for e in entries if e["direct"] == direct and e["published_ahead"] == ahead)

    return {"failures": failures, "direct": count(True, False),
            "ahead_then_direct": count(True, True), "ahead_then_queued": count(False, True),
            "queued": count(False, False)}


def late_peer_while_the_first_rank_is_elsewhere(rank, world_size, init_method):
    """Rank 0 issues an asynchronous allreduce and, without waiting for it,
    blocks on something else: an event that rank 1 sets only after its own
    synchronous allreduce of the same collective has returned, 20 ms later.
    Rank 1 must complete it without rank 0's caller (rank 0's part went up
    before it queued the call); rank 0's work then completes, by its worker
    or its wait(). Then the same with rank 0 never waiting: it polls
    is_completed() until its worker has run it."""
    import torch
    import torch.distributed as dist
    from multiproc import event_store

    _init(rank, world_size, init_method)
    events = event_store(init_method, world_size)
    dist.all_reduce(torch.ones(4))  # opens the host channel
    results = {}
    for step in range(4):
        t = torch.full((8,), float(rank + 1 + step))
        if rank == 0:
            work = dist.all_reduce(t, async_op=True)
            events.wait([f"peer done {step}"])
            if step % 2:
                work.wait()
            else:
                deadline = time.monotonic() + 30
                while not work.is_completed() and time.monotonic() < deadline:
                    time.sleep(0.001)
                results[f"completed unwaited {step}"] = work.is_completed()
        else:
            time.sleep(0.02)
            dist.all_reduce(t)
            events.set(f"peer done {step}", b"1")
        results[f"value {step}"] = t.tolist() == [float(3 + 2 * step)] * 8
    dist.barrier()
    dist.destroy_process_group()
    return results
