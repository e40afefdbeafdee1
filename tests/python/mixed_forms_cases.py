"""The same collectives on every rank, each rank calling them in a form of its
own: one rank waits at once (the caller's-thread paths) while a peer issued
the same collective asynchronously, inside a coalescing manager or through
the functional API (DTensor's funcol forms and the ops a compiled graph runs),
and keeps several in flight. Ranks that ran a collective different ways must
still meet in it: every result is checked against the local reference
(oracle.py), across every collective that has an on-caller form, sizes from
empty to past the channel's buffers, and ranks now and then late by up to
milliseconds.

Each step draws (op, dtype, size, reduction, root) from a seed shared by all
ranks and (form, lateness, how many to keep in flight) from one of its own."""
import json
import os
import random
import signal
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from oracle import make_input, reference_allreduce

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.uint8]
# Elements per rank: nothing, a few, the channel's small sizes, several turns of it.
SIZES = [0, 1, 3, 17, 64, 255, 1024, 4096, 16384, 65536, 200000, 600000]
REDUCTIONS = ["SUM", "MAX", "MIN"]


class Step:
    """One collective of the shared sequence, as this rank calls it."""

    def __init__(self, index, rank, world, draw):
        self.index, self.rank, self.world = index, rank, world
        self.dtype = draw.choice(DTYPES)
        self.n = draw.choice(SIZES)
        self.reduction = draw.choice(REDUCTIONS)
        self.root = draw.randrange(world)

    def input(self, rank, n=None):
        return make_input(self.dtype, (self.n if n is None else n,), rank, self.index)

    def reduced(self, inputs):
        return reference_allreduce(inputs, self.reduction)

    @property
    def op(self):
        return getattr(dist.ReduceOp, self.reduction)


def _alltoall_counts(step):
    """Rank q sends rank k this many elements: uneven, some blocks empty."""
    return lambda q, k: (step.n + q + 2 * k) // (k + 1) if step.n else (q + k) % 2


# Each op: (step, asynchronous, group) -> (work or None, [(actual, expected)] to
# compare once the work is done). A functional call returns its result tensor
# as the work: waiting for it is wait_tensor.
def _all_reduce(s, a, group):
    mine = s.input(s.rank)
    expected = s.reduced([s.input(r) for r in range(s.world)])
    return dist.all_reduce(mine, op=s.op, async_op=a, group=group), [(mine, expected)]


def _broadcast(s, a, group):
    mine = s.input(s.rank)
    return dist.broadcast(mine, src=s.root, async_op=a), [(mine, s.input(s.root))]


def _all_gather_into_tensor(s, a, group):
    out = torch.empty(s.n * s.world, dtype=s.dtype)
    expected = torch.cat([s.input(r) for r in range(s.world)])
    return dist.all_gather_into_tensor(out, s.input(s.rank), async_op=a), [(out, expected)]


def _all_gather(s, a, group):
    outs = [torch.empty(s.n, dtype=s.dtype) for _ in range(s.world)]
    pairs = [(outs[r], s.input(r)) for r in range(s.world)]
    return dist.all_gather(outs, s.input(s.rank), async_op=a), pairs


def _reduce_scatter(s, a, group, as_list):
    full = [s.input(r, s.n * s.world) for r in range(s.world)]
    expected = s.reduced(full)[s.rank * s.n:(s.rank + 1) * s.n]
    out = torch.empty(s.n, dtype=s.dtype)
    if as_list:
        blocks = [full[s.rank][r * s.n:(r + 1) * s.n] for r in range(s.world)]
        work = dist.reduce_scatter(out, blocks, op=s.op, async_op=a)
    else:
        work = dist.reduce_scatter_tensor(out, full[s.rank], op=s.op, async_op=a)
    return work, [(out, expected)]


def _all_to_all_single(s, a, group):
    sent = [s.input(r, s.n * s.world) for r in range(s.world)]
    expected = torch.cat([sent[r][s.rank * s.n:(s.rank + 1) * s.n] for r in range(s.world)])
    out = torch.empty(s.n * s.world, dtype=s.dtype)
    return dist.all_to_all_single(out, sent[s.rank], async_op=a), [(out, expected)]


def _all_to_all_uneven(s, a, group, as_list):
    count = _alltoall_counts(s)
    sent = [s.input(q, sum(count(q, k) for k in range(s.world))) for q in range(s.world)]

    def block(q, k):
        start = sum(count(q, j) for j in range(k))
        return sent[q][start:start + count(q, k)]

    expected = [block(q, s.rank) for q in range(s.world)]
    if as_list:
        outs = [torch.empty(count(q, s.rank), dtype=s.dtype) for q in range(s.world)]
        ins = [block(s.rank, k).clone() for k in range(s.world)]
        return dist.all_to_all(outs, ins, async_op=a), list(zip(outs, expected))
    out = torch.empty(sum(e.numel() for e in expected), dtype=s.dtype)
    work = dist.all_to_all_single(out, sent[s.rank], [count(q, s.rank) for q in range(s.world)],
                                  [count(s.rank, k) for k in range(s.world)], async_op=a)
    return work, [(out, torch.cat(expected))]


def _reduce(s, a, group):
    mine = s.input(s.rank)
    expected = (s.reduced([s.input(r) for r in range(s.world)]) if s.rank == s.root
                else mine.clone())
    return dist.reduce(mine, dst=s.root, op=s.op, async_op=a), [(mine, expected)]


def _gather(s, a, group):
    outs = [torch.empty(s.n, dtype=s.dtype) for _ in range(s.world)] if s.rank == s.root else None
    work = dist.gather(s.input(s.rank), outs, dst=s.root, async_op=a)
    return work, [(outs[r], s.input(r)) for r in range(s.world)] if outs else []


def _scatter(s, a, group):
    out = torch.empty(s.n, dtype=s.dtype)
    ins = [s.input(s.world + r) for r in range(s.world)] if s.rank == s.root else None
    return dist.scatter(out, ins, src=s.root, async_op=a), [(out, s.input(s.world + s.rank))]


def _coalesced(s, a, group, issue, device=None):
    """torch's coalescing manager around `issue`; given a device (DeepSpeed's
    form), it brackets its one coalesced call with the backend's
    startCoalescing and endCoalescing."""
    from torch.distributed.distributed_c10d import _coalescing_manager

    with _coalescing_manager(device=device, async_ops=a) as manager:
        pairs = issue()
    return (manager if a else None), pairs


def _coalesced_all_reduce(s, a, group, device=None):
    def issue():
        pairs = []
        for part in range(3):
            mine = s.input(s.rank + part * s.world)
            pairs.append((mine, s.reduced([s.input(r + part * s.world) for r in range(s.world)])))
            dist.all_reduce(mine, op=s.op)
        return pairs
    return _coalesced(s, a, group, issue, device)


def _coalesced_all_gather(s, a, group, device=None):
    def issue():
        pairs = []
        for part in range(2):
            out = torch.empty(s.n * s.world, dtype=s.dtype)
            pairs.append((out, torch.cat([s.input(r + part * s.world) for r in range(s.world)])))
            dist.all_gather_into_tensor(out, s.input(s.rank + part * s.world))
        return pairs
    return _coalesced(s, a, group, issue, device)


def _coalesced_reduce_scatter(s, a, group, device=None):
    def issue():
        pairs = []
        for part in range(2):
            full = [s.input(r + part * s.world, s.n * s.world) for r in range(s.world)]
            out = torch.empty(s.n, dtype=s.dtype)
            pairs.append((out, s.reduced(full)[s.rank * s.n:(s.rank + 1) * s.n]))
            dist.reduce_scatter_tensor(out, full[s.rank], op=s.op)
        return pairs
    return _coalesced(s, a, group, issue, device)


def _all_gather_coalesced(s, a, group):
    """The deprecated list-of-lists form: outs[r][i] receives input i of rank
    r; rank 1's second part lands in a strided column (not contiguous)."""
    import warnings

    sizes = (s.n, s.n // 2 + 1)
    ins = [s.input(s.rank + part * s.world, k) for part, k in enumerate(sizes)]
    outs = [[torch.empty(k, dtype=s.dtype) for k in sizes] for _ in range(s.world)]
    outs[1 % s.world][1] = torch.empty((sizes[1], 2), dtype=s.dtype)[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        work = dist.all_gather_coalesced(outs, ins, async_op=a)
    return work, [(outs[r][part], s.input(r + part * s.world, k))
                  for r in range(s.world) for part, k in enumerate(sizes)]


def _functional(s, a, call, expected):
    """A functional collective: its result is the work (waiting for it is
    wait_tensor); `expected` is one tensor or, for a coalesced call, a list."""
    result = call(funcol)
    if not a:
        result = _wait_functional(result)
    results = result if isinstance(result, list) else [result]
    expected = expected if isinstance(expected, list) else [expected]
    return result, list(zip(results, expected))


def _wait_functional(result):
    if isinstance(result, list):
        return [funcol.wait_tensor(r) for r in result]
    return funcol.wait_tensor(result)


def _functional_all_reduce(s, a, group):
    expected = s.reduced([s.input(r) for r in range(s.world)])
    return _functional(s, a, lambda f: f.all_reduce(s.input(s.rank), s.reduction.lower(),
                                                    dist.group.WORLD), expected)


def _functional_all_gather(s, a, group):
    expected = torch.cat([s.input(r) for r in range(s.world)])
    return _functional(s, a, lambda f: f.all_gather_tensor(s.input(s.rank), 0, dist.group.WORLD),
                       expected)


def _functional_reduce_scatter(s, a, group):
    """DTensor's Partial -> Shard: funcol.reduce_scatter_single."""
    full = [s.input(r, s.n * s.world) for r in range(s.world)]
    expected = s.reduced(full)[s.rank * s.n:(s.rank + 1) * s.n]
    return _functional(s, a, lambda f: f.reduce_scatter_single(
        full[s.rank], s.reduction.lower(), 0, dist.group.WORLD), expected)


def _functional_all_to_all_uneven(s, a, group):
    """DTensor's Shard(i) -> Shard(j): funcol.all_to_all_single with split sizes."""
    count = _alltoall_counts(s)
    sent = [s.input(q, sum(count(q, k) for k in range(s.world))) for q in range(s.world)]
    starts = [[sum(count(q, j) for j in range(k)) for k in range(s.world)] for q in range(s.world)]
    expected = torch.cat([sent[q][starts[q][s.rank]:starts[q][s.rank] + count(q, s.rank)]
                          for q in range(s.world)])
    return _functional(s, a, lambda f: f.all_to_all_single(
        sent[s.rank], [count(q, s.rank) for q in range(s.world)],
        [count(s.rank, k) for k in range(s.world)], dist.group.WORLD), expected)


def _functional_broadcast(s, a, group):
    return _functional(s, a, lambda f: f.broadcast(s.input(s.rank), s.root, dist.group.WORLD),
                       s.input(s.root))


def _functional_all_reduce_coalesced(s, a, group):
    parts = range(3)
    expected = [s.reduced([s.input(r + part * s.world) for r in range(s.world)]) for part in parts]
    return _functional(s, a, lambda f: f.all_reduce_coalesced(
        [s.input(s.rank + part * s.world) for part in parts], s.reduction.lower(),
        dist.group.WORLD), expected)


def _compiled_all_reduce(s, a, group):
    """What a compiled graph runs: the op itself, a plain tensor (no
    AsyncCollectiveTensor), waited for with wait_tensor."""
    expected = s.reduced([s.input(r) for r in range(s.world)])
    return _functional(s, a, lambda f: torch.ops._c10d_functional.all_reduce(
        s.input(s.rank), s.reduction.lower(), dist.group.WORLD.group_name), expected)


def _barrier(s, a, group):
    return dist.barrier(async_op=a), []


OPS = {
    "all_reduce": _all_reduce,
    "all_reduce_in_a_subgroup": _all_reduce,  # the world's ranks in reverse order
    "broadcast": _broadcast,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "all_gather": _all_gather,
    "reduce_scatter_tensor": lambda s, a, g: _reduce_scatter(s, a, g, as_list=False),
    "reduce_scatter": lambda s, a, g: _reduce_scatter(s, a, g, as_list=True),
    "all_to_all_single": _all_to_all_single,
    "all_to_all_single_splits": lambda s, a, g: _all_to_all_uneven(s, a, g, as_list=False),
    "all_to_all": lambda s, a, g: _all_to_all_uneven(s, a, g, as_list=True),
    "reduce": _reduce,
    "gather": _gather,
    "scatter": _scatter,
    "coalesced_all_reduce": _coalesced_all_reduce,
    "coalesced_all_gather": _coalesced_all_gather,
    "coalesced_reduce_scatter": _coalesced_reduce_scatter,
    "all_gather_coalesced": _all_gather_coalesced,
    "functional_all_reduce": _functional_all_reduce,
    "functional_all_gather": _functional_all_gather,
    "functional_reduce_scatter": _functional_reduce_scatter,
    "functional_all_to_all": _functional_all_to_all_uneven,
    "functional_broadcast": _functional_broadcast,
    "functional_all_reduce_coalesced": _functional_all_reduce_coalesced,
    "compiled_all_reduce": _compiled_all_reduce,
    "barrier": _barrier,
}
# The manager's forms a rank may also run given a device (DeepSpeed's form):
# its own choice, from a generator of its own, so the shared draws and each
# rank's other choices stay those a seed gave before (the seeds the tests
# replay).
DEVICE_BLOCK_OPS = ("coalesced_all_reduce", "coalesced_all_gather", "coalesced_reduce_scatter")


def _late(own, rank):
    """Now and then this rank computes (busy) for up to 3 ms before its call."""
    if own.random() < 0.05:
        end = time.perf_counter() + own.choice([0.0005, 0.003])
        while time.perf_counter() < end:
            pass


def _direct_and_queued():
    """(on the caller's thread, queued) counts in this rank's flight recorder."""
    import torch_ringreduce

    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    return sum(1 for e in entries if e["direct"]), sum(1 for e in entries if not e["direct"])


def _init(rank, world_size, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    # The world's ranks in reverse order: the subgroup's rank r is world rank n-1-r.
    return dist.new_group(list(range(world_size))[::-1])


def _mixed_steps(rank, world_size, reversed_group, steps, seed, before_step=lambda index: None):
    """Runs the shared sequence in this rank's forms: (wrong results, forms counted)."""
    shared = random.Random(seed)
    own = random.Random(seed * 1000 + rank)
    blocks = random.Random(f"{seed} {rank} device blocks")
    pending, failures, forms = [], [], {"at once": 0, "asynchronous": 0, "device block": 0}

    def finish(work, pairs, what):
        if isinstance(work, (torch.Tensor, list)):
            _wait_functional(work)  # a functional collective's result
        elif work is not None:
            work.wait()
        for actual, expected in pairs:
            if not torch.equal(actual, expected):
                failures.append(what)
                return

    for index in range(steps):
        name = shared.choice(list(OPS))
        step = Step(index, rank, world_size, shared)
        group = reversed_group if name == "all_reduce_in_a_subgroup" else None
        asynchronous = own.random() < 0.4
        forms["asynchronous" if asynchronous else "at once"] += 1
        _late(own, rank)
        before_step(index)
        if name in DEVICE_BLOCK_OPS and blocks.random() < 0.5:
            work, pairs = OPS[name](step, asynchronous, group, torch.device("cpu"))
            name = "device_" + name
            forms["device block"] += 1
        else:
            work, pairs = OPS[name](step, asynchronous, group)
        what = f"step {index}: {name} of {step.n} {step.dtype} ({step.reduction}, root " \
               f"{step.root}), {'asynchronous' if asynchronous else 'at once'} on rank {rank}"
        if asynchronous:
            pending.append((work, pairs, what))
            if len(pending) >= own.choice([1, 3, 6]):
                for entry in pending:
                    finish(*entry)
                pending.clear()
        else:
            finish(work, pairs, what)
    for entry in pending:
        finish(*entry)
    return failures, forms


def each_rank_its_own_form(rank, world_size, init_method, steps, seed):
    reversed_group = _init(rank, world_size, init_method)
    failures, forms = _mixed_steps(rank, world_size, reversed_group, steps, seed)
    direct, queued = _direct_and_queued()
    dist.barrier()
    dist.destroy_process_group()
    return {"failures": failures[:10], "failed": len(failures), "forms": forms,
            "direct": direct, "queued": queued}


def killed_amid_forms(rank, world_size, init_method, seed, victim, die_at, kill_file):
    """The victim SIGKILLs itself before step `die_at` of the mix, where its
    peers may be on their caller's thread or have several collectives queued
    (some of them behind, waiting for one the victim had queued): each
    survivor's first error, and how long after the kill it came (the victim
    writes the time to `kill_file` first; the ranks share the host's clock)."""
    reversed_group = _init(rank, world_size, init_method)

    def before_step(index):
        if index == die_at and rank == victim:
            with open(kill_file, "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        _mixed_steps(rank, world_size, reversed_group, die_at + 1000, seed, before_step)
    except Exception as e:  # what the user's code would catch
        now = time.time()
        with open(kill_file) as f:
            killed = float(f.read())
        return {"error": (type(e).__name__, str(e)), "latency": now - killed}
    return {"error": None}
