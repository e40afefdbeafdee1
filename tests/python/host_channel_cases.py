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


class _ExactChecks:
    """check(what, actual, expected): counts the results checked and keeps a
    line for each that is not bit for bit its reference."""

    def __init__(self, torch):
        self.torch, self.failures, self.checked = torch, [], 0

    def __call__(self, what, actual, expected):
        self.checked += 1
        if not self.torch.equal(actual, expected):
            self.failures.append(f"{what}: {actual.flatten()[:8].tolist()} != "
                                 f"{expected.flatten()[:8].tolist()}")


def _strided(torch, tensor):
    """The same values in a non-contiguous tensor (every other element of a larger one)."""
    holder = torch.zeros(tensor.numel() * 2, dtype=tensor.dtype)
    view = holder[::2]
    view.copy_(tensor)
    return view


def _check_rooted_lists_apart_or_shared(torch, dist, check, rank, n, root, inputs, whole, what):
    """gather and scatter whose root's list the channel cannot use where it is
    (gathers.cpp: gatherBody, scatterBody): a strided tensor in the list, and
    the root's own tensor inside the list (in place)."""
    numel, dtype = inputs[rank].numel(), inputs[rank].dtype
    gathered = [torch.empty(numel, dtype=dtype) for _ in range(n)]
    gathered[n - 1] = _strided(torch, gathered[n - 1])
    dist.gather(inputs[rank].clone(), gathered if rank == root else None, dst=root)
    if rank == root:
        check(f"gather to {root} (strided output) {what}", torch.cat(gathered), torch.cat(inputs))
    gathered = [torch.empty(numel, dtype=dtype) for _ in range(n)]
    gathered[rank] = inputs[rank].clone()
    dist.gather(gathered[rank], gathered if rank == root else None, dst=root)
    if rank == root:
        check(f"gather to {root} (in place) {what}", torch.cat(gathered), torch.cat(inputs))
    mine = whole[rank * numel:(rank + 1) * numel]
    blocks = [_strided(torch, b) for b in whole.chunk(n)] if rank == root else None
    got = torch.empty(numel, dtype=dtype)
    dist.scatter(got, blocks, src=root)
    check(f"scatter from {root} (strided inputs) {what}", got, mine)
    blocks = [b.clone() for b in whole.chunk(n)] if rank == root else None
    got = blocks[rank] if rank == root else torch.empty(numel, dtype=dtype)
    dist.scatter(got, blocks, src=root)
    check(f"scatter from {root} (in place) {what}", got, mine)
    got = _strided(torch, torch.empty(numel, dtype=dtype))
    dist.scatter(got, list(whole.chunk(n)) if rank == root else None, src=root)
    check(f"scatter from {root} (strided output) {what}", got, mine)


def _check_list_all_gathers(torch, dist, check, rank, n, inputs, what):
    """all_gather into lists the channel fills in place (gathers.cpp): strided
    outputs, outputs of another shape than the input, the input as this
    rank's own output, and the input as another rank's output (read before
    that rank's block lands on it)."""
    numel = inputs[rank].numel()
    dtype = inputs[rank].dtype
    expected = torch.cat(inputs)
    mine = inputs[rank]

    outs = [_strided(torch, torch.zeros(numel, dtype=dtype)) for _ in range(n)]
    outs[0] = torch.zeros(numel, dtype=dtype)  # contiguous and strided in one list
    dist.all_gather(outs, _strided(torch, mine))
    check(f"all_gather (strided outputs) {what}", torch.cat(outs), expected)

    shaped = [torch.zeros(1, numel, 1, dtype=dtype) for _ in range(n)]
    dist.all_gather(shaped, mine)
    check(f"all_gather (outputs shaped 1 x {numel} x 1) {what}",
          torch.cat([t.flatten() for t in shaped]), expected)
    assert all(t.shape == (1, numel, 1) for t in shaped)

    outs = [torch.zeros(numel, dtype=dtype) for _ in range(n)]
    outs[rank].copy_(mine)
    dist.all_gather(outs, outs[rank])
    check(f"all_gather (in place) {what}", torch.cat(outs), expected)

    outs = [torch.zeros(numel, dtype=dtype) for _ in range(n)]
    other = (rank + 1) % n
    outs[other].copy_(mine)
    dist.all_gather(outs, outs[other])
    check(f"all_gather (input is rank {other}'s output) {what}", torch.cat(outs), expected)

    # One storage, the outputs its slices: the input a view overlapping
    # another rank's slice from an offset.
    storage = torch.zeros(n * numel + 1, dtype=dtype)
    outs = list(storage[:n * numel].chunk(n))
    view = storage[other * numel + 1:other * numel + 1 + numel]
    view.copy_(mine)
    dist.all_gather(outs, view)
    check(f"all_gather (input overlaps rank {other}'s output) {what}", torch.cat(outs),
          expected)


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
            # In place (the input is this rank's block of the output), and an
            # input that is another rank's block of the output (read before
            # that block arrives over it).
            out = torch.zeros(n * numel, dtype=dtype)
            out[rank * numel:(rank + 1) * numel].copy_(mine)
            dist.all_gather_into_tensor(out, out[rank * numel:(rank + 1) * numel])
            check(f"all_gather_into_tensor (in place) {what}", out, torch.cat(inputs))
            out = torch.zeros(n * numel, dtype=dtype)
            other = (rank + 1) % n
            out[other * numel:(other + 1) * numel].copy_(mine)
            dist.all_gather_into_tensor(out, out[other * numel:(other + 1) * numel])
            check(f"all_gather_into_tensor (input in a peer's block) {what}", out,
                  torch.cat(inputs))

            outs = [torch.empty(numel, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, mine)
            check(f"all_gather {what}", torch.cat(outs), torch.cat(inputs))
            _check_list_all_gathers(torch, dist, check, rank, n, inputs, what)

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
            # A rank's own block is read from its input, not its channel
            # buffer (reduce_scatter.cpp), unless the output is in that block:
            # the input must stay as it was, and in place must still add up.
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
                stacked = torch.stack(full)
                total = stacked.sum(0, dtype=dtype) if op == dist.ReduceOp.SUM \
                    else stacked.max(0).values
                want = total[rank * numel:(rank + 1) * numel]
                x = full[rank].clone()
                dist.reduce_scatter_tensor(got, x, op=op)
                check(f"reduce_scatter_tensor {op} input untouched {what}", x, full[rank])
                dist.reduce_scatter_tensor(x[rank * numel:(rank + 1) * numel], x, op=op)
                check(f"reduce_scatter_tensor {op} into its own block {what}",
                      x[rank * numel:(rank + 1) * numel], want)
                blocks = [b.clone() for b in full[rank].chunk(n)]
                dist.reduce_scatter(got, blocks, op=op)
                check(f"reduce_scatter (list) {op} {what}", got, want)
                check(f"reduce_scatter (list) {op} inputs untouched {what}", torch.cat(blocks),
                      full[rank])
                dist.reduce_scatter(blocks[rank], blocks, op=op)
                check(f"reduce_scatter (list) {op} into its own block {what}", blocks[rank], want)

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
                _check_rooted_lists_apart_or_shared(torch, dist, check, rank, n, root, inputs,
                                                    full[root], what)

            got = torch.empty(n * numel, dtype=dtype)
            dist.all_to_all_single(got, full[rank])
            expected = torch.cat([full[q][rank * numel:(rank + 1) * numel] for q in range(n)])
            check(f"all_to_all_single {what}", got, expected)

    # all_to_all_single with split sizes and all_to_all's lists (queued, on the channel where the
    # first turn finds every block fits): zero-row blocks, one rank's blocks
    # larger than the others', a strided input, and blocks too large for the
    # test's 8 KiB channel (every rank then moves them with messages).
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for scale in (1, 3, 100, 700):
            step += 1
            # Rank src sends rows[src][dst] rows of 3 to dst.
            rows = [[((src + 2 * dst) % 3) * scale * (1 + src) for dst in range(n)]
                    for src in range(n)]
            sent = [_input(torch, src, step, sum(rows[src]) * 3, dtype).view(-1, 3)
                    for src in range(n)]
            recv_rows = [rows[src][rank] for src in range(n)]
            expected = torch.cat([sent[src].split(rows[src])[rank] for src in range(n)])
            what = f"{dtype}, rows {rows}"
            got = torch.full((sum(recv_rows), 3), 99, dtype=dtype)
            dist.all_to_all_single(got, sent[rank], recv_rows, rows[rank])
            check(f"all_to_all_single (uneven) {what}", got, expected)
            strided = torch.zeros(sent[rank].shape[0], 6, dtype=dtype)[:, ::2]
            strided.copy_(sent[rank])
            got = torch.full((sum(recv_rows), 3), 99, dtype=dtype)
            dist.all_to_all_single(got, strided, recv_rows, rows[rank])
            check(f"all_to_all_single (uneven, strided input) {what}", got, expected)
            # The list form: each block its own tensor, sized per rank alike.
            outs = [torch.full((rows[src][rank], 3), 99, dtype=dtype) for src in range(n)]
            dist.all_to_all(outs, list(sent[rank].split(rows[rank])))
            check(f"all_to_all (uneven list) {what}", torch.cat(outs), expected)
            # Lists the channel cannot read and write where they are (gathers.cpp's
            # alltoallList): a strided output, and an input that is an output (in place).
            outs = [torch.full((rows[src][rank], 3), 99, dtype=dtype) for src in range(n)]
            outs[0] = torch.zeros(rows[0][rank], 6, dtype=dtype)[:, ::2]
            dist.all_to_all(outs, list(sent[rank].split(rows[rank])))
            check(f"all_to_all (uneven list, strided output) {what}", torch.cat(outs), expected)
            if all(rows[a][b] == rows[b][a] for a in range(n) for b in range(n)):  # a block's
                # size to each rank is what that rank sends back: every rank, or none, calls it
                blocks = [b.clone() for b in sent[rank].split(rows[rank])]
                dist.all_to_all(blocks, blocks)
                check(f"all_to_all (uneven list, in place) {what}", torch.cat(blocks), expected)

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


def mismatched_splits(rank, world_size, init_method):
    """Rank 1 sends rank 0 three rows where rank 0 expects two: the channel's
    first turn tells rank 0 so, naming the sizes."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    dist.barrier()
    send = [[1, 1], [3, 1]][rank]  # rank r sends send[j] rows to j
    recv = [[1, 2], [1, 1]][rank]  # rank 0 expects 2 rows from rank 1, which sends 3
    error = None
    try:
        dist.all_to_all_single(torch.empty(sum(recv), 4), torch.ones(sum(send), 4), recv, send)
    except Exception as e:  # noqa: BLE001  the error torch raises
        error = f"{type(e).__name__}: {e}"
    return {"error": error}


def gathers_read_in_place(rank, world_size, init_method):
    """All-gathers, gathers (and scatters) and all-to-alls (equal, with split sizes and of
    lists) whose blocks are read from the peers' memory in place (from 256 KiB a
    block: cross_memory_gather.h, alltoall.h),
    within the channel's buffers and beyond them, synchronous and
    asynchronous, with inputs that are copies the backend makes (strided, or
    lying in a peer's place of the output): each result against its local
    reference. Returns the failures and how many results were checked."""
    import warnings

    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    n, check = world_size, _ExactChecks(torch)

    for step, numel in enumerate((70_000, (1 << 20) + 5), start=1):  # 280 KiB, 4 MiB + 20 B
        for async_op in (False, True):
            what = f"{numel} floats{' async' if async_op else ''}"
            inputs = [_input(torch, r, step, numel, torch.float32) for r in range(n)]
            mine = inputs[rank]

            def run(work):
                if async_op:
                    work.wait()

            out = torch.empty(n * numel)
            run(dist.all_gather_into_tensor(out, mine, async_op=async_op))
            check(f"all_gather_into_tensor {what}", out, torch.cat(inputs))
            out = _strided(torch, torch.zeros(n * numel))
            run(dist.all_gather_into_tensor(out, _strided(torch, mine), async_op=async_op))
            check(f"all_gather_into_tensor (strided) {what}", out, torch.cat(inputs))
            out = torch.zeros(n * numel)
            other = (rank + 1) % n
            out[other * numel:(other + 1) * numel].copy_(mine)
            run(dist.all_gather_into_tensor(out, out[other * numel:(other + 1) * numel],
                                            async_op=async_op))
            check(f"all_gather_into_tensor (input in a peer's block) {what}", out,
                  torch.cat(inputs))
            outs = [torch.empty(numel) for _ in range(n)]
            run(dist.all_gather(outs, mine, async_op=async_op))
            check(f"all_gather {what}", torch.cat(outs), torch.cat(inputs))

            blocks = [_input(torch, r, step + 10, n * numel, torch.float32) for r in range(n)]
            out = torch.empty(n * numel)
            run(dist.all_to_all_single(out, blocks[rank], async_op=async_op))
            check(f"all_to_all_single {what}", out,
                  torch.cat([b[rank * numel:(rank + 1) * numel] for b in blocks]))

            # Uneven splits (rank r sends rank j (1 + (r + j) % n) / 2 of a
            # block; from 256 KiB a block, read from the sender's memory after
            # the first turn), from a strided input too, and the lists' form.
            def split(src, dst):
                return numel * (1 + (src + dst) % n) // 2

            sends = [split(rank, j) for j in range(n)]
            recvs = [split(q, rank) for q in range(n)]
            flats = [_input(torch, r, step + 20, sum(split(r, j) for j in range(n)),
                            torch.float32) for r in range(n)]

            def sent_to_me(q):
                start = sum(split(q, j) for j in range(rank))
                return flats[q][start:start + split(q, rank)]

            expected = torch.cat([sent_to_me(q) for q in range(n)])
            out = torch.empty(sum(recvs))
            run(dist.all_to_all_single(out, flats[rank], recvs, sends, async_op=async_op))
            check(f"all_to_all_single (splits) {what}", out, expected)
            out = torch.empty(sum(recvs))
            run(dist.all_to_all_single(out, _strided(torch, flats[rank]), recvs, sends,
                                       async_op=async_op))
            check(f"all_to_all_single (splits, strided) {what}", out, expected)
            outs = [torch.empty(count) for count in recvs]
            run(dist.all_to_all(outs, list(flats[rank].split(sends)), async_op=async_op))
            check(f"all_to_all {what}", torch.cat(outs), expected)

            gathered = [torch.empty(numel) for _ in range(n)] if rank == 1 else None
            run(dist.gather(mine, gathered, dst=1, async_op=async_op))
            if rank == 1:
                check(f"gather {what}", torch.cat(gathered), torch.cat(inputs))
            # Four tensors as one message: torch's coalescing manager around
            # all_gather_into_tensor, and the deprecated all_gather_coalesced.
            from torch.distributed.distributed_c10d import _coalescing_manager

            parts = [p.clone() for p in mine.chunk(4)]
            outs = [torch.empty(n * p.numel()) for p in parts]
            with _coalescing_manager(async_ops=async_op) as manager:
                for out, part in zip(outs, parts):
                    dist.all_gather_into_tensor(out, part)
            if async_op:
                manager.wait()
            check(f"coalesced all_gather_into_tensor {what}",
                  torch.cat([o.view(n, -1) for o in outs], dim=1).flatten(), torch.cat(inputs))
            lists = [[torch.empty_like(p) for p in parts] for _ in range(n)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                run(dist.all_gather_coalesced(lists, parts, async_op=async_op))
            check(f"all_gather_coalesced {what}", torch.cat([torch.cat(l) for l in lists]),
                  torch.cat(inputs))
            # And back (beyond the buffers with UCX's messages, the root's blocks sent in place).
            got = torch.empty(numel)
            run(dist.scatter(got, inputs if rank == 0 else None, src=0, async_op=async_op))
            check(f"scatter {what}", got, inputs[rank])
    dist.destroy_process_group()
    return {"failures": check.failures, "checked": check.checked}


def large_broadcasts(rank, world_size, init_method):
    """Broadcasts beyond the channel's buffers (large_broadcast.h: through
    the buffers in many turns, or the receivers read the root's tensor in
    place, as the root sees the cores), from every root: float32, int64 and bfloat16 of 4 MiB + a few
    elements (a root share of whole pages and a remainder), a strided target
    (the backend's contiguous copy), synchronous, asynchronous, and queued on
    the root only while the others run it on their own threads. Each result
    against the root's input. Returns the failures, how many results were
    checked and the trace's (op, direct) pairs."""
    import json

    import torch
    import torch.distributed as dist
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    n, check = world_size, _ExactChecks(torch)

    step = 0
    for dtype, numel in ((torch.float32, (1 << 20) + 3), (torch.int64, (1 << 19) + 1029),
                         (torch.bfloat16, (3 << 20) + 1)):
        for root in range(n):
            for form in ("sync", "async", "strided", "queued on the root"):
                step += 1
                source = _input(torch, root, step, numel, dtype)
                mine = _input(torch, rank, step, numel, dtype)
                if form == "strided":
                    mine = _strided(torch, mine)
                async_op = form == "async" or (form == "queued on the root" and rank == root)
                work = dist.broadcast(mine, src=root, async_op=async_op)
                if async_op:
                    work.wait()
                check(f"broadcast {dtype} {numel} root {root} {form}", mine, source)
    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    paths = sorted({(e["op"], e["direct"]) for e in entries})
    dist.destroy_process_group()
    return {"failures": check.failures, "checked": check.checked, "paths": paths}


def _anon_huge_kilobytes(address):
    """AnonHugePages (kB) of this process's mapping that holds `address`."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                begin, end = (int(x, 16) for x in head.split("-"))
                inside = begin <= address < end
            elif inside and line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


def _collapse_refusal():
    """errno of MADV_COLLAPSE on fresh 4 KiB-paged memory now (0: it worked):
    EAGAIN or ENOMEM where the kernel has no free huge page at the moment."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    region = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.write(b"\1" * (8 << 20))
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    start = (base + (2 << 20) - 1) // (2 << 20) * (2 << 20)
    madv_collapse = 25
    failed = libc.madvise(start, 4 << 20, madv_collapse) != 0
    error = ctypes.get_errno() if failed else 0
    del base
    return error


def _tensor_in_a_mapping_of_its_own(torch, values):
    """A float32 tensor holding `values` in an anonymous mapping of its own:
    inaccessible pages on both sides keep the kernel from merging it with a
    neighbour, so that smaps' AnonHugePages of its mapping are its own."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page, bytes_ = 4096, values.numel() * 4
    prot_none, prot_rw, private_anonymous = 0, 3, 0x22
    region = libc.mmap(None, bytes_ + 2 * page, prot_none, private_anonymous, -1, 0)
    assert region not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    assert libc.mprotect(region + page, bytes_, prot_rw) == 0, ctypes.get_errno()
    floats = (ctypes.c_float * values.numel()).from_address(region + page)
    tensor = torch.frombuffer(floats, dtype=torch.float32)
    tensor.copy_(values)
    return tensor


def recurring_inputs_read_in_place(rank, world_size, init_method):
    """An all-gather's and an all-to-all's input of 8 MiB and an uneven
    all-to-all's 8 MiB block to each peer, which the peers read where they
    lie (beyond the channel's buffers), three times each: the
    backend moves such a recurring buffer onto 2 MiB pages, as it does the
    buffers of its UCX path (core/base/huge_pages.h), so that the peers'
    reads pin 512x fewer pages. Returns each input's AnonHugePages (kB), the
    results' exactness, and, where an input stayed on small pages, whether
    the kernel refuses a collapse right now (no free huge page)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    n, numel = world_size, 2 << 20  # 8 MiB of float32
    inputs = [_input(torch, r, 1, numel, torch.float32) for r in range(n)]
    mine = _tensor_in_a_mapping_of_its_own(torch, inputs[rank])
    gathered = torch.empty(n * numel)
    blocks = [_input(torch, r, 2, n * numel, torch.float32) for r in range(n)]
    my_blocks = _tensor_in_a_mapping_of_its_own(torch, blocks[rank])
    exchanged = torch.empty(n * numel)
    # Uneven: numel to every peer, half of it to itself (rank r's flat input).
    splits = [[numel if j != r else numel // 2 for j in range(n)] for r in range(n)]
    flats = [_input(torch, r, 3, sum(splits[r]), torch.float32) for r in range(n)]
    my_flat = _tensor_in_a_mapping_of_its_own(torch, flats[rank])
    received = torch.empty(sum(splits[q][rank] for q in range(n)))

    def sent_to_me(q):
        start = sum(splits[q][:rank])
        return flats[q][start:start + splits[q][rank]]

    exact = True
    for _ in range(3):
        dist.all_gather_into_tensor(gathered, mine)
        exact &= torch.equal(gathered, torch.cat(inputs))
        dist.all_to_all_single(exchanged, my_blocks)
        exact &= torch.equal(exchanged, torch.cat([b[rank * numel:(rank + 1) * numel]
                                                   for b in blocks]))
        dist.all_to_all_single(received, my_flat, [splits[q][rank] for q in range(n)],
                               splits[rank])
        exact &= torch.equal(received, torch.cat([sent_to_me(q) for q in range(n)]))
    huge = {"all_gather_into_tensor": _anon_huge_kilobytes(mine.data_ptr()),
            "all_to_all_single": _anon_huge_kilobytes(my_blocks.data_ptr()),
            "all_to_all_single with splits": _anon_huge_kilobytes(my_flat.data_ptr())}
    dist.destroy_process_group()
    return {"huge_kb": huge, "exact": exact,
            "refusal": _collapse_refusal() if 0 in huge.values() else 0}
