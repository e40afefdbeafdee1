"""Rank-side bodies of the send/recv and coalescing tests."""
import time
import torch
import torch.distributed as dist

from oracle import DTYPES, make_input


def point_to_point(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    failures = []
    checked = [0]
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def check(what, ok):
        checked[0] += 1
        if not ok:
            failures.append(what)

    # torch.distributed's Python API refuses self as a peer; the backend
    # supports it, so self-messages (world 1) go to the backend object.
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))

    def isend(t, dst, tag):
        return backend.send([t], dst, tag) if dst == rank else dist.isend(t, dst=dst, tag=tag)

    def irecv(t, src, tag):
        return backend.recv([t], src, tag) if src == rank else dist.irecv(t, src=src, tag=tag)

    # isend/irecv around the ring, every dtype, non-contiguous receive target too.
    for i, dtype in enumerate(DTYPES):
        payload = make_input(dtype, (3, 4), rank, 60000 + i)
        expected = make_input(dtype, (3, 4), prv, 60000 + i)
        target = torch.zeros((3, 8), dtype=dtype)[:, ::2]
        rq = irecv(target, prv, i)
        sq = isend(payload, nxt, i)
        rq.wait()
        sq.wait()
        check(f"ring isend/irecv {dtype}", torch.equal(target, expected))

    # Tags select messages: two sends with different tags, received in the other order.
    if world >= 2 and rank in (0, 1):
        peer = 1 - rank
        if rank == 0:
            a = dist.isend(torch.full((2,), 1.0), dst=peer, tag=11)
            b = dist.isend(torch.full((2,), 2.0), dst=peer, tag=22)
            a.wait()
            b.wait()
        else:
            second, first = torch.empty(2), torch.empty(2)
            dist.recv(second, src=peer, tag=22)
            dist.recv(first, src=peer, tag=11)
            check("tags select messages", first.tolist() == [1.0, 1.0] and second.tolist() == [2.0, 2.0])

    # Send to self.
    own = torch.empty(3)
    rq = backend.recv([own], rank, 5)
    backend.send([torch.full((3,), float(rank))], rank, 5).wait()
    rq.wait()
    check("send to self", own.tolist() == [float(rank)] * 3)

    # Receive from any source: rank 0 hears from everyone else.
    if rank == 0:
        heard = {}
        for _ in range(world - 1):
            t = torch.empty(1)
            src = dist.recv(t, tag=9)
            heard[src] = t.item()
        check(f"recv any source {heard}", heard == {r: float(r * 10) for r in range(1, world)})
    else:
        dist.send(torch.tensor([float(rank * 10)]), dst=0, tag=9)

    # A pending irecv does not hold up collectives queued after it.
    late = torch.empty(2)
    pending = irecv(late, prv, 77)
    x = torch.ones(4)
    dist.all_reduce(x)
    check("allreduce behind a pending irecv", x.tolist() == [float(world)] * 4)
    isend(torch.full((2,), float(rank)), nxt, 77).wait()
    pending.wait()
    check("late irecv", late.tolist() == [float(prv)] * 2)

    # batch_isend_irecv both directions around the ring.
    if world == 1:
        dist.barrier()
        return {"failures": failures, "checked": checked[0]}
    to_next, to_prev = torch.full((5,), float(rank)), torch.full((5,), float(-rank))
    from_prev, from_next = torch.empty(5), torch.empty(5)
    ops = [dist.P2POp(dist.isend, to_next, nxt), dist.P2POp(dist.irecv, from_prev, prv),
           dist.P2POp(dist.isend, to_prev, prv), dist.P2POp(dist.irecv, from_next, nxt)]
    requests = dist.batch_isend_irecv(ops)
    # One Work per op, as batch_isend_irecv's documentation gives them (the
    # backend does not ask torch to coalesce them into one).
    check("batch_isend_irecv gives a Work per op", len(requests) == len(ops))
    for req in requests:
        req.wait()
    check("batch_isend_irecv", from_prev.tolist() == [float(prv)] * 5
          and from_next.tolist() == [float(-nxt)] * 5)

    # Dropped, finished Works let their tensors go at once, as gloo's do (the
    # list of sends and receives in flight keeps only weak references).
    import gc
    import weakref

    sent_t, got_t = torch.full((1024,), float(rank)), torch.empty(1024)
    refs = [weakref.ref(sent_t), weakref.ref(got_t)]
    works = [dist.isend(sent_t, nxt, tag=66), dist.irecv(got_t, prv, tag=66)]
    for work in works:
        work.wait()
    check("irecv before its tensor is dropped", got_t[0].item() == float(prv))
    del works, work, sent_t, got_t
    gc.collect()
    check("tensors of dropped, finished sends and receives are freed",
          all(ref() is None for ref in refs))

    # An irecv whose message comes late, polled with is_completed() and never
    # waited for: the poll moves it on its own thread (or the worker does,
    # when it holds the transport just then).
    polled = torch.empty(3)
    pending = dist.irecv(polled, src=prv, tag=88)
    time.sleep(0.003)
    sent = dist.isend(torch.full((3,), float(rank + 100)), dst=nxt, tag=88)
    deadline = time.monotonic() + 60
    while not pending.is_completed() and time.monotonic() < deadline:
        pass
    check("polled irecv completes", pending.is_completed())
    check("polled irecv's tensor once completed", polled.tolist() == [float(prv + 100)] * 3)
    sent.wait()
    pending.wait()
    dist.barrier()
    return {"failures": failures, "checked": checked[0]}


def coalescing(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    failures = []
    cpu = torch.device("cpu")
    # all_reduce under the coalescing manager: one fused op per dtype.
    dtypes = [torch.float32, torch.float64, torch.int32, torch.float32, torch.bfloat16]
    tensors = [make_input(dt, (i + 3,), rank, 70000 + i) for i, dt in enumerate(dtypes)]
    expected = [sum(make_input(dt, (i + 3,), r, 70000 + i).double() for r in range(world)).to(dt)
                for i, dt in enumerate(dtypes)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for t in tensors:
            dist.all_reduce(t)
    cm.wait()
    for i, (t, e) in enumerate(zip(tensors, expected)):
        if not torch.equal(t, e):
            failures.append(f"coalesced all_reduce tensor {i} {t.dtype}: {t} != {e}")
    # all_gather_into_tensor and reduce_scatter_tensor under the manager.
    ins = [make_input(torch.float32, (k,), rank, 71000 + k) for k in (1, 4, 7)]
    outs = [torch.empty(k * world) for k in (1, 4, 7)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for o, k in zip(outs, (1, 4, 7)):
        e = torch.cat([make_input(torch.float32, (k,), r, 71000 + k) for r in range(world)])
        if not torch.equal(o, e):
            failures.append(f"coalesced all_gather_into_tensor {k}")
    full = [make_input(torch.int64, (world * k,), rank, 72000 + k) for k in (2, 5)]
    rs_out = [torch.empty(k, dtype=torch.int64) for k in (2, 5)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for o, i in zip(rs_out, full):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    for o, k in zip(rs_out, (2, 5)):
        total = sum(make_input(torch.int64, (world * k,), r, 72000 + k) for r in range(world))
        if not torch.equal(o, total[rank * k:(rank + 1) * k]):
            failures.append(f"coalesced reduce_scatter_tensor {k}")
    # Large enough (4 MiB and up) that one machine takes direct, which reads
    # the inputs where they are: they must stay as they were.
    sizes = ((1 << 20) + 3, 1 << 20)
    full = [make_input(torch.int64, (world * k,), rank, 73000 + k) for k in sizes]
    kept = [t.clone() for t in full]
    rs_out = [torch.empty(k, dtype=torch.int64) for k in sizes]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for o, i in zip(rs_out, full):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    for o, i, kept_i, k in zip(rs_out, full, kept, sizes):
        total = sum(make_input(torch.int64, (world * k,), r, 73000 + k) for r in range(world))
        if not torch.equal(o, total[rank * k:(rank + 1) * k]):
            failures.append(f"coalesced reduce_scatter_tensor {k}")
        if not torch.equal(i, kept_i):
            failures.append(f"coalesced reduce_scatter_tensor {k}: input changed")
    # The explicit coalesced APIs.
    a, b = torch.full((3,), float(rank)), torch.full((2,), float(rank))
    dist.all_reduce_coalesced([a, b])
    if a.tolist() != [float(sum(range(world)))] * 3 or b.tolist() != [float(sum(range(world)))] * 2:
        failures.append("all_reduce_coalesced")
    # As torch defines it: output_tensor_lists[r][i] receives input i of rank r.
    def inputs_of(r):
        return [torch.full((2,), float(r)), torch.full((3,), 10.0 * r), torch.arange(4.0) + r]
    gathered = [[torch.empty_like(t) for t in inputs_of(0)] for _ in range(world)]
    dist.all_gather_coalesced(gathered, inputs_of(rank))
    for r in range(world):
        if [t.tolist() for t in gathered[r]] != [t.tolist() for t in inputs_of(r)]:
            failures.append(f"all_gather_coalesced from rank {r}: {[t.tolist() for t in gathered[r]]}")
    dist.barrier()
    return failures


def subgroups(rank, world, init_method):
    """All collectives on a reversed-order group and on a size-1 group."""
    from collective_cases import Report, _gloo, sweep_allgather, sweep_allreduce, sweep_broadcast

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    reversed_ranks = list(reversed(range(world)))
    rev = dist.new_group(reversed_ranks)
    singles = [dist.new_group([r]) for r in range(world)]
    report = Report()
    # torch decides the group's rank order (it sorts the list it is given):
    # take the order from torch, and check ringreduce follows it.
    order = dist.get_process_group_ranks(rev)  # global rank of each group rank
    group_rank = dist.get_group_rank(rev, rank)
    x = torch.full((6,), float(rank))
    dist.all_reduce(x, group=rev)
    report.check("reversed all_reduce", x, torch.full((6,), float(sum(range(world)))))
    b = torch.full((3,), float(rank))
    dist.broadcast(b, group_src=0, group=rev)  # group rank 0 is the last global rank
    report.check("reversed broadcast from group rank 0", b, torch.full((3,), float(order[0])))
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank)), group=rev)
    report.check("reversed all_gather order", torch.stack(outs),
                 torch.tensor([[float(r)] * 2 for r in order]))
    rs = torch.empty(2)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * world) + rank, group=rev)
    report.check("reversed reduce_scatter block", rs,
                 (torch.arange(2.0 * world) * world + sum(range(world)))[2 * group_rank:2 * group_rank + 2])
    # Size-1 group: everything is the identity.
    me = singles[rank]
    y = torch.arange(5.0)
    dist.all_reduce(y, group=me)
    report.check("size-1 all_reduce", y, torch.arange(5.0))
    one = [torch.empty(5)]
    dist.all_gather(one, y, group=me)
    report.check("size-1 all_gather", one[0], y)
    dist.barrier(group=me)
    dist.barrier()
    return report.as_dict()


def sparse_allreduce(rank, world, init_method):
    """Sparse COO SUM against the dense sum and against gloo."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    failures = []
    for case, (shape, dense_dims) in enumerate([((6, 5), 0), ((4, 3, 2), 1), ((7,), 0)]):
        def dense_of(r):
            g = torch.Generator().manual_seed(80000 + 10 * case + r)
            d = torch.randint(-4, 5, shape, generator=g).double()
            mask = torch.rand(shape[:len(shape) - dense_dims], generator=g) < 0.4
            while mask.dim() < d.dim():
                mask = mask.unsqueeze(-1)
            return d * mask  # rank-specific sparsity pattern, exact sums
        mine = dense_of(rank).to_sparse(len(shape) - dense_dims)
        theirs = mine.clone()
        dist.all_reduce(mine)
        dist.all_reduce(theirs, group=gloo)
        expected = sum(dense_of(r) for r in range(world))
        if not mine.is_sparse or not torch.equal(mine.to_dense(), expected):
            failures.append(f"sparse case {case}: {mine.to_dense()} != {expected}")
        if not torch.equal(mine.to_dense(), theirs.to_dense()):
            failures.append(f"sparse case {case} differs from gloo")
    return failures
