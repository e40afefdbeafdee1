"""A long random mix of collectives: every rank draws the same sequence of
(op, dtype, size, async) from a shared seed and checks each result against
the local reference; resident memory is sampled to catch leaks. Pending
works are polled with is_completed() as they pile up, and half of them until
they say so before their wait."""
import random
import time

import torch
import torch.distributed as dist

from oracle import make_input, reference_allreduce

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.int8, torch.bfloat16,
          torch.bool]
OPS = ["all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor",
       "all_to_all_single", "reduce", "ring_send_recv", "barrier"]


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _reduce_op_for(dtype, rng):
    choices = ["SUM", "MAX", "MIN"] + (["BOR", "BXOR"] if not dtype.is_floating_point else [])
    return rng.choice(choices)


def soak(rank, world, init_method, count):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    rng = random.Random(4242)  # same sequence on every rank
    pending = []  # (work, check)
    failures = []
    rss_start = None

    # Half the time a pending work is polled with is_completed() until it
    # says so before its wait (a poll moves messages and runs ready
    # collectives on this thread); each rank draws its own.
    polls = random.Random(1000 + rank)

    def finish_pending():
        for work, check in pending:
            if polls.random() < 0.5:
                limit = time.monotonic() + 120
                while not work.is_completed() and time.monotonic() < limit:
                    pass
            work.wait()
            problem = check()
            if problem:
                failures.append(problem)
        pending.clear()

    for step in range(count):
        if step == count // 10:
            finish_pending()
            rss_start = _rss_bytes()
        op = rng.choice(OPS)
        dtype = rng.choice(DTYPES)
        n = rng.choice([0, 1, 3, 17, 64, 255]) if rng.random() < 0.9 else rng.choice([4096, 50000])
        async_op = rng.random() < 0.3
        seed = step
        what = f"step {step} {op} {dtype} n={n}"
        if op == "all_reduce":
            name = _reduce_op_for(dtype, rng)
            mine = make_input(dtype, (n,), rank, seed)
            expected = reference_allreduce([make_input(dtype, (n,), r, seed) for r in range(world)],
                                           name)
            work = dist.all_reduce(mine, op=getattr(dist.ReduceOp, name), async_op=async_op)
            check = (lambda m=mine, e=expected, w=what: None if torch.equal(m, e) else w)
        elif op == "broadcast":
            root = rng.randrange(world)
            mine = make_input(dtype, (n,), rank, seed)
            expected = make_input(dtype, (n,), root, seed)
            work = dist.broadcast(mine, src=root, async_op=async_op)
            check = (lambda m=mine, e=expected, w=what: None if torch.equal(m, e) else w)
        elif op == "all_gather_into_tensor":
            out = torch.empty(n * world, dtype=dtype)
            expected = torch.cat([make_input(dtype, (n,), r, seed) for r in range(world)])
            work = dist.all_gather_into_tensor(out, make_input(dtype, (n,), rank, seed),
                                               async_op=async_op)
            check = (lambda m=out, e=expected, w=what: None if torch.equal(m, e) else w)
        elif op == "reduce_scatter_tensor":
            name = _reduce_op_for(dtype, rng)
            out = torch.empty(n, dtype=dtype)
            full = [make_input(dtype, (n * world,), r, seed) for r in range(world)]
            expected = reference_allreduce(full, name)[rank * n:(rank + 1) * n]
            work = dist.reduce_scatter_tensor(out, full[rank], op=getattr(dist.ReduceOp, name),
                                              async_op=async_op)
            check = (lambda m=out, e=expected, w=what: None if torch.equal(m, e) else w)
        elif op == "all_to_all_single":
            out = torch.empty(n * world, dtype=dtype)
            sent = [make_input(dtype, (n * world,), r, seed) for r in range(world)]
            expected = torch.cat([sent[r][rank * n:(rank + 1) * n] for r in range(world)])
            work = dist.all_to_all_single(out, sent[rank], async_op=async_op)
            check = (lambda m=out, e=expected, w=what: None if torch.equal(m, e) else w)
        elif op == "reduce":
            name = _reduce_op_for(dtype, rng)
            root = rng.randrange(world)
            mine = make_input(dtype, (n,), rank, seed)
            expected = (reference_allreduce([make_input(dtype, (n,), r, seed) for r in range(world)],
                                            name) if rank == root else mine.clone())
            work = dist.reduce(mine, dst=root, op=getattr(dist.ReduceOp, name), async_op=async_op)
            check = (lambda m=mine, e=expected, w=what: None if torch.equal(m, e) else w)
        elif op == "ring_send_recv" and world > 1:
            got = torch.empty(n, dtype=dtype)
            prv, nxt = (rank - 1) % world, (rank + 1) % world
            recv = dist.irecv(got, src=prv, tag=step % 1000)
            dist.isend(make_input(dtype, (n,), rank, seed), dst=nxt, tag=step % 1000).wait()
            expected = make_input(dtype, (n,), prv, seed)
            work, check = recv, (lambda m=got, e=expected, w=what: None if torch.equal(m, e) else w)
            async_op = True
        else:
            work = dist.barrier(async_op=True)
            check = (lambda: None)
            async_op = True
        if async_op:
            pending.append((work, check))
            for earlier, _ in pending:  # one poll each, as a loop that checks on its work
                earlier.is_completed()
            if len(pending) >= 4:
                finish_pending()
        else:
            problem = check()
            if problem:
                failures.append(problem)
    finish_pending()
    dist.barrier()
    return {"failures": failures[:20], "failed": len(failures),
            "rss_growth": _rss_bytes() - rss_start}
