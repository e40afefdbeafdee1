"""Every collective and call form that training frameworks issue, against
Open MPI's equivalent in the same processes (issue 53).

    python3 benchmarks/collective_anchors.py [--ops all_gather_into_tensor,barrier,...]
        [--sizes 64,4096,65536,1048576] [--patterns back-to-back,after-compute,late-peer,after-sleep]
        [--libraries mpi,deepspeed,ringreduce,fake,gloo] [--floor null|fake] [--world 2] [--quick]

launches itself like anchors.py (its sibling, for allreduce at every size):
under Open MPI's `mpirun` when openmpi-bin and mpi4py are installed, else as
plain processes (Open MPI then skipped, with a message). Each rank times, op
by op, every library on the same tensors in interleaved short blocks:

  op (--ops name)                  torch.distributed call            Open MPI (mpi4py, btl vader)
  all_gather_into_tensor           all_gather_into_tensor(out, in)   Allgather
  all_gather_single                all_gather_single(out, in)        Allgather
  all_gather                       all_gather([out per rank], in)    Allgather
  reduce_scatter_tensor            reduce_scatter_tensor(out, in)    Reduce_scatter_block
  reduce_scatter_single            reduce_scatter_single(out, in)    Reduce_scatter_block
  broadcast                        broadcast(t, src=0)               Bcast
  barrier                          barrier()                         Barrier
  all_to_all_single                all_to_all_single(out, in)        Alltoall
  all_to_all                       all_to_all([out per rank], [in per rank])   Alltoall
  reduce_scatter                   reduce_scatter(out, [in per rank])          Reduce_scatter_block
  reduce                           reduce(t, dst=0)                  Reduce (IN_PLACE at the root)
  gather                           gather(in, [out per rank] at the root, dst=0)   Gather
  scatter                          scatter(out, [in per rank] at the root, src=0)  Scatter
  all_reduce                       all_reduce(t)                     Allreduce(IN_PLACE)
  all_reduce_async                 all_reduce(t, async_op=True).wait()   Iallreduce + Wait
  all_reduce_future                the same, its get_future().wait()    Iallreduce + Wait
  all_reduce_then                  the same, get_future().then(hook).wait()   Iallreduce + Wait
  coalesced_all_reduce             four all_reduce in _coalescing_manager  Allreduce of the four
  coalesced_all_gather             four all_gather_into_tensor in it       Allgather of the four
  coalesced_reduce_scatter         four reduce_scatter_tensor in it        Reduce_scatter_block of the four
  all_gather_coalesced             all_gather_coalesced of the four (deprecated)   Allgather of the four
  device_coalesced_all_reduce      coalesced_all_reduce, the manager given device="cpu"  (the same)
  device_coalesced_all_gather      coalesced_all_gather, likewise (DeepSpeed's form)     (the same)
  send_recv                        isend to the next rank, irecv from the previous, both waited   Sendrecv
  batch_isend_irecv                the same two in batch_isend_irecv                 Sendrecv
  functional_all_reduce            funcol.all_reduce + funcol.wait_tensor          Iallreduce + Wait
  functional_all_gather_tensor     funcol.all_gather_tensor + wait_tensor          Iallgather + Wait
  functional_reduce_scatter_tensor funcol.reduce_scatter_tensor + wait_tensor      Ireduce_scatter_block + Wait
  c10d_functional_all_reduce       torch.ops._c10d_functional.all_reduce + wait_tensor
                                   (what compiled graphs run: no AsyncCollectiveTensor)   Iallreduce + Wait

(funcol: torch.distributed._functional_collectives, eager, as DTensor calls it;
the functional forms allocate their output at each call, as that API does,
where MPI writes a buffer made once; floor+mpi has Open MPI write the output
the floor's call allocated, as a backend would.) Torch 2.13 deprecates
all_gather_into_tensor and reduce_scatter_tensor (a FutureWarning at each
call, timed, not printed) for *_single, which FSDP2 calls (synchronously, on
the CPU); DeepSpeed 0.19 still calls the deprecated ones.
DeepSpeed's CPU shared-memory op (`inference_all_reduce_`, when deepspeed is
installed) joins all_reduce: in deepspeed 0.19.x's ShareMemComm op that is
its only collective (it has no all_gather). The libraries: mpi; deepspeed;
ringreduce (the world group); floor ("fake" in the code), the null backend
(null_backend/: every call returns a completed Work and moves nothing), what
any C++ backend pays through torch for the same call at every size: torch's
own Python, dispatcher and Work, with the caches the caller left (with
--floor fake, torch's `fake` backend, which also copies each input into the
outputs of the gathers, scatters, reduce-scatters and all-to-alls, so that
from 64 KiB its calls hold copies no backend needs); floor+sync ("synced",
under mpirun), the floor's call
followed by Open MPI's barrier: what a backend that only brought the ranks
together would cost through torch, the skew between the ranks' Python
included, which the floor leaves out; floor+mpi ("floormpi", under mpirun),
the floor's call followed by Open MPI's equivalent, timed as one call: what
Open MPI itself would cost reached through torch.distributed (torch's
dispatch, then its collective, with that skew); gloo, PyTorch's baseline.

Sizes are bytes of float32 per rank: the tensor reduced or broadcast, each
rank's shard for all_gather (its input) and reduce_scatter (its output), each
rank's input for all_to_all. Inputs are written before each call (not timed),
two patterns: back to back, and after 2 ms of busy CPU work before each call.
Per call the slowest rank's time counts. A third on request, late-peer: the
last rank computes 10 us (--late-us) before each call and its time counts
(its peers are in the call before it comes; what the call adds to a step
whose ranks arrive apart). A fourth, early-rank: every rank computes 2 ms,
the last rank --late-us more, and rank 0's time counts (what the call costs
a rank whose peer comes later: a broadcast's or scatter's root, a gather's
or reduce's other ranks need not wait for it; an allreduce must). A fifth,
after-sleep: every rank sleeps 2 ms (--sleep-ms) before each call, its core
idle as in a data loader's wait. Printed per op and size: p50, p90
and mean in us per library, then (ring - floor) / MPI and ring / MPI at p50
(and the same against DeepSpeed where it runs the op), with floor+sync
(ring - floor+sync) / MPI, and with floor+mpi ring / floor+mpi. Every
library's result is checked before it is timed. `--quick` is a smoke run (two sizes, a few
calls): its figures mean nothing. `--sleeps` adds, under each row, how often
each library's calling thread slept per call (voluntary context switches, the
more of the two ranks): a p50 near 40 us on the 2-core machine with a p90
far above it is calls that sleep and wake, which this tells apart from a
slow path.
"""
import argparse
import os

import anchor_harness as harness
from build_info import loaded_build
from anchor_harness import RankBase, bind, stats_cells, stats_header

LIBRARIES = ("mpi", "deepspeed", "ringreduce", "fake", "synced", "floormpi",
             "gloo")  # the table's order
LABELS = {"fake": "floor", "synced": "floor+sync", "floormpi": "floor+mpi"}
# They stand for torch's part, not for a library: the floor's call
# communicates nothing (floor+mpi's result is Open MPI's, checked as mpi's).
UNCHECKED = ("fake", "synced", "floormpi")
TORCH_LIBRARIES = ("ringreduce", "fake", "gloo")
# What the floor column times, by the backend that runs it (--floor).
FLOORS = {"null": "the null backend (moves nothing)",
          "fake": "torch's fake backend (copies in gathers, scatters and all-to-alls)"}
DEFAULT_SIZES = "64,4096,65536,1048576"


class Case:
    """One op at one size on this rank: the tensors each call reads (written
    before each call), how each library calls it, and what it must produce
    (`result(library)`: the tensor its call filled)."""

    def __init__(self, rank, inputs, outputs, result, expected):
        self.inputs, self.outputs, self.result, self.expected = inputs, outputs, result, expected
        # Two versions of each input, alternating, so that each call reads freshly written data.
        self.sources = [rank.sources(t.numel()) for t in inputs]
        self.calls = {}
        # For floor+mpi, where the op's output is made by torch at each call
        # (the functional forms): Open MPI's call into the output the floor's
        # call just returned, as a backend reached through torch would write
        # it. Else floor+mpi runs Open MPI's own call (`mpi`).
        self.mpi_into_floors_output = None

    def prepare(self, i):
        for tensor, source in zip(self.inputs, self.sources):
            tensor.copy_(source[i & 1])

    def add_torch(self, rank, call_on, without=()):
        """call_on(group) -> the call on that group, for each torch backend
        wanted but those named in `without` (that cannot make the call)."""
        for name, group in rank.torch_groups().items():
            if name not in without:
                self.calls[name] = call_on(group)
        if "synced" in rank.wanted and rank.comm and "fake" in self.calls:
            # The floor with the ranks brought together, at the cost of Open
            # MPI's barrier (about 1 us here): what a backend that only
            # synchronised would cost through torch. Where the ranks' Python
            # before each call varies (the eager functional forms: 70-200 us
            # of it), each call of a real collective waits for the slower
            # rank, which the floor's unsynchronised calls never do.
            fake, barrier = self.calls["fake"], rank.comm.Barrier

            def synced():
                fake()
                barrier()
            self.calls["synced"] = synced

    def add_mpi_through_torch(self, rank):
        """floor+mpi, once the case has its Open MPI call: the floor's call, then
        Open MPI's, timed as one. What a torch backend that did nothing but
        call Open MPI would cost: where ringreduce's whole call is at most this
        one's, Open MPI itself, reached through torch.distributed in the same
        run, would miss the target ringreduce misses (anchor_verdicts.py)."""
        if "floormpi" in rank.wanted and "fake" in self.calls and "mpi" in self.calls:
            fake, mpi = self.calls["fake"], self.mpi_into_floors_output or self.calls["mpi"]

            def through_torch():
                fake()
                mpi()
            self.calls["floormpi"] = through_torch


def all_gather_flat(name):
    """torch.distributed.`name`(out, in), one output tensor: all_gather_into_tensor
    or torch 2.13's all_gather_single (what FSDP2 calls)."""
    def build(r, n):
        inp, out = r.empty(n), r.empty(n * r.world)
        case = Case(r, [inp], [out], lambda name: out, r.gathered(n))
        case.add_torch(r, lambda g: bind(getattr(r.dist, name), out, inp, g))
        if r.comm:
            case.calls["mpi"] = bind(r.comm.Allgather, inp.numpy(), out.numpy())
        return case
    return build


def all_gather(r, n):
    inp, out = r.empty(n), r.empty(n * r.world)
    pieces = [r.empty(n) for _ in range(r.world)]  # torch's list; MPI fills `out`
    result = lambda name: out if name == "mpi" else r.torch.cat(pieces)  # noqa: E731
    case = Case(r, [inp], pieces + [out], result, r.gathered(n))
    case.add_torch(r, lambda g: bind(r.dist.all_gather, pieces, inp, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Allgather, inp.numpy(), out.numpy())
    return case


def reduce_scatter_flat(name):
    """torch.distributed.`name`(out, in): reduce_scatter_tensor or torch 2.13's
    reduce_scatter_single (what FSDP2 calls)."""
    def build(r, n):
        inp, out = r.empty(n * r.world), r.empty(n)
        case = Case(r, [inp], [out], lambda name: out, r.scattered_sum(n))
        case.add_torch(r, lambda g: bind(getattr(r.dist, name), out, inp, r.dist.ReduceOp.SUM,
                                         g))
        if r.comm:
            case.calls["mpi"] = bind(r.comm.Reduce_scatter_block, inp.numpy(), out.numpy(),
                                     r.MPI.SUM)
        return case
    return build


def broadcast(r, n):
    t = r.empty(n)
    case = Case(r, [t], [], lambda name: t, r.source_of(0, n)[0])
    case.add_torch(r, lambda g: bind(r.dist.broadcast, t, 0, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Bcast, t.numpy(), 0)
    return case


def point_to_point(batched):
    """Each rank sends its n elements to the next rank and receives the
    previous rank's (a pipeline's stage boundary): isend and irecv, then a
    wait for each, or the two in one batch_isend_irecv; Open MPI's Sendrecv."""
    def build(r, n):
        inp, out = r.empty(n), r.empty(n)
        nxt, prev = (r.rank + 1) % r.world, (r.rank - 1) % r.world
        case = Case(r, [inp], [out], lambda name: out, r.source_of(prev, n)[0])

        def call_on(group):
            if batched:
                ops = [r.dist.P2POp(r.dist.isend, inp, nxt, group),
                       r.dist.P2POp(r.dist.irecv, out, prev, group)]

                def call():
                    for work in r.dist.batch_isend_irecv(ops):
                        work.wait()
            else:
                def call():
                    sent = r.dist.isend(inp, nxt, group)
                    got = r.dist.irecv(out, prev, group)
                    sent.wait()
                    got.wait()
            return call
        case.add_torch(r, call_on)
        if r.comm:
            case.calls["mpi"] = bind(r.comm.Sendrecv, inp.numpy(), nxt, 0, out.numpy(), prev, 0)
        return case
    return build


def barrier(r, n):
    case = Case(r, [], [], None, None)
    case.add_torch(r, lambda g: bind(r.dist.barrier, g))
    if r.comm:
        case.calls["mpi"] = r.comm.Barrier
    return case


def all_to_all_single(r, n):
    n = -(-n // r.world) * r.world  # a whole number of elements to each rank
    inp, out = r.empty(n), r.empty(n)
    piece = n // r.world
    expected = r.torch.cat([r.source_of(k, n)[0][r.rank * piece:(r.rank + 1) * piece]
                            for k in range(r.world)])
    case = Case(r, [inp], [out], lambda name: out, expected)
    case.add_torch(r, lambda g: bind(r.dist.all_to_all_single, out, inp, None, None, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Alltoall, inp.numpy(), out.numpy())
    return case


def all_to_all_splits(r, n):
    """all_to_all_single with split sizes (MoE's token exchange): rank q
    sends rank k (1 + (q + k) % world) units, about n elements in all."""
    w = r.world
    unit = max(1, n // (w * (w + 1) // 2))
    sizes = [[unit * (1 + (q + k) % w) for k in range(w)] for q in range(w)]
    sends = sizes[r.rank]
    recvs = [sizes[q][r.rank] for q in range(w)]
    inp, out = r.empty(sum(sends)), r.empty(sum(recvs))

    def block_of(q):  # what rank q sends this rank
        start = sum(sizes[q][:r.rank])
        return r.source_of(q, sum(sizes[q]))[0][start:start + sizes[q][r.rank]]
    case = Case(r, [inp], [out], lambda name: out, r.torch.cat([block_of(q) for q in range(w)]))
    case.add_torch(r, lambda g: bind(r.dist.all_to_all_single, out, inp, recvs, sends, g))
    if r.comm:
        offsets = lambda counts: [sum(counts[:k]) for k in range(w)]  # noqa: E731
        case.calls["mpi"] = bind(r.comm.Alltoallv,
                                 [inp.numpy(), (sends, offsets(sends)), r.MPI.FLOAT],
                                 [out.numpy(), (recvs, offsets(recvs)), r.MPI.FLOAT])
    return case


def all_to_all(r, n):
    """all_to_all of lists (one tensor to and from each rank), Alltoall's
    buffers seen as the lists' pieces."""
    n = -(-n // r.world) * r.world
    inp, out = r.empty(n), r.empty(n)
    piece = n // r.world
    expected = r.torch.cat([r.source_of(k, n)[0][r.rank * piece:(r.rank + 1) * piece]
                            for k in range(r.world)])
    case = Case(r, [inp], [out], lambda name: out, expected)
    ins, outs = list(inp.split(piece)), list(out.split(piece))
    case.add_torch(r, lambda g: bind(r.dist.all_to_all, outs, ins, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Alltoall, inp.numpy(), out.numpy())
    return case


def reduce_scatter(r, n):
    """reduce_scatter of a list (one input per rank), the views of one tensor
    that Reduce_scatter_block reads."""
    inp, out = r.empty(n * r.world), r.empty(n)
    case = Case(r, [inp], [out], lambda name: out, r.scattered_sum(n))
    ins = list(inp.split(n))
    case.add_torch(r, lambda g: bind(r.dist.reduce_scatter, out, ins, r.dist.ReduceOp.SUM, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Reduce_scatter_block, inp.numpy(), out.numpy(),
                                 r.MPI.SUM)
    return case


def reduce(r, n):
    """reduce to rank 0: only the root's result is checked (what a rank that
    is not the root holds after it is unspecified)."""
    t = r.empty(n)
    root = r.rank == 0
    case = Case(r, [t], [], lambda name: t, r.summed(n) if root else None)
    case.add_torch(r, lambda g: bind(r.dist.reduce, t, 0, r.dist.ReduceOp.SUM, g))
    if r.comm:
        if root:
            case.calls["mpi"] = bind(r.comm.Reduce, r.MPI.IN_PLACE, t.numpy(), r.MPI.SUM, 0)
        else:
            case.calls["mpi"] = bind(r.comm.Reduce, t.numpy(), None, r.MPI.SUM, 0)
    return case


def gather(r, n):
    """gather to rank 0 into one tensor's views (Gather's buffer)."""
    inp, out = r.empty(n), r.empty(n * r.world)
    root = r.rank == 0
    pieces = list(out.split(n)) if root else None
    case = Case(r, [inp], [out], lambda name: out, r.gathered(n) if root else None)
    case.add_torch(r, lambda g: bind(r.dist.gather, inp, pieces, 0, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Gather, inp.numpy(), out.numpy() if root else None, 0)
    return case


def scatter(r, n):
    """scatter from rank 0 of one tensor's views (Scatter's buffer)."""
    root = r.rank == 0
    inp, out = r.empty(n * r.world), r.empty(n)
    pieces = list(inp.split(n)) if root else None
    whole = r.source_of(0, n * r.world)[0]
    case = Case(r, [inp] if root else [], [out], lambda name: out,
                whole[r.rank * n:(r.rank + 1) * n])
    case.add_torch(r, lambda g: bind(r.dist.scatter, out, pieces, 0, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Scatter, inp.numpy() if root else None, out.numpy(), 0)
    return case


def all_reduce(r, n):
    t = r.empty(n)
    case = Case(r, [t], [], lambda name: t, r.summed(n))
    case.add_torch(r, lambda g: bind(r.dist.all_reduce, t, r.dist.ReduceOp.SUM, g))
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Allreduce, r.MPI.IN_PLACE, t.numpy(), r.MPI.SUM)
    if r.deepspeed_all_reduce is not None:
        case.calls["deepspeed"] = bind(r.deepspeed_all_reduce, t)
    return case


def all_reduce_async(r, n, completion="wait"):
    """all_reduce(async_op=True) completed by `completion`: "wait" (the
    Work's wait()), "future" (its get_future().wait(), what DDP's reducer
    waits on) or "then" (a completion hook chained with then(), as DDP's
    Python comm hooks do, and the chained future waited for)."""
    t = r.empty(n)
    case = Case(r, [t], [], lambda name: t, r.summed(n))

    def call_on(group):
        def wait():
            r.dist.all_reduce(t, group=group, async_op=True).wait()

        def future():
            r.dist.all_reduce(t, group=group, async_op=True).get_future().wait()

        def then():
            r.dist.all_reduce(t, group=group, async_op=True).get_future().then(
                lambda done: done.value()).wait()
        return {"wait": wait, "future": future, "then": then}[completion]
    case.add_torch(r, call_on)
    if r.comm:
        a, request = t.numpy(), r.comm.Iallreduce

        def mpi():
            request(r.MPI.IN_PLACE, a, r.MPI.SUM).Wait()
        case.calls["mpi"] = mpi
    return case


# The coalescing manager given a device (as DeepSpeed's all_gather_coalesced
# calls it): the backend's startCoalescing and endCoalescing around the
# block's one coalesced call. gloo has no coalescing: not timed.
MANAGER_DEVICE = "cpu"


def _manager(group, device):
    from torch.distributed.distributed_c10d import _coalescing_manager
    import torch

    return _coalescing_manager(group=group, device=torch.device(device) if device else None)


def coalesced_all_reduce(r, n, device=None):
    """Four all_reduce calls in torch's coalescing manager (one
    allreduce_coalesced of the block): four equal views of one tensor of n
    elements, so that Open MPI's equivalent is one Allreduce of the whole
    (what the fused form reduces)."""
    pieces = 4
    n = -(-n // pieces) * pieces
    t = r.empty(n)
    views = list(t.view(pieces, n // pieces).unbind(0))
    case = Case(r, [t], [], lambda name: t, r.summed(n))

    def call_on(group):
        def call():
            with _manager(group, device):
                for v in views:
                    r.dist.all_reduce(v, group=group)
        return call
    case.add_torch(r, call_on, ("gloo",) if device else ())
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Allreduce, r.MPI.IN_PLACE, t.numpy(), r.MPI.SUM)
    return case


class PermutedCase(Case):
    """A Case whose torch call reads a second input, `permuted(first)`,
    written from the first before each call (not timed)."""

    def __init__(self, rank, inputs, outputs, result, expected, permuted_into):
        super().__init__(rank, inputs, outputs, result, expected)
        self.permuted_into = permuted_into

    def prepare(self, i):
        super().prepare(i)
        self.permuted_into()


def coalesced_all_gather(r, n, device=None):
    """Four all_gather_into_tensor calls in torch's coalescing manager (one
    all_gather_into_tensor_coalesced): the quarters of this rank's n
    elements, each into its own output, against Open MPI's one Allgather of
    the whole (the same bytes; the four outputs side by side, rank by rank,
    are its result)."""
    pieces = 4
    n = -(-n // pieces) * pieces
    m, world = n // pieces, r.world
    inp, out, tout = r.empty(n), r.empty(n * world), r.empty(n * world)
    views = list(inp.view(pieces, m).unbind(0))
    outs = list(tout.view(pieces, world * m).unbind(0))

    def result(name):
        return out if name == "mpi" else tout.view(pieces, world, m).transpose(0, 1).reshape(-1)
    case = Case(r, [inp], [out, tout], result, r.gathered(n))

    def call_on(group):
        def call():
            with _manager(group, device):
                for o, v in zip(outs, views):
                    r.dist.all_gather_into_tensor(o, v, group=group)
        return call
    case.add_torch(r, call_on, ("gloo",) if device else ())
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Allgather, inp.numpy(), out.numpy())
    return case


def all_gather_coalesced(r, n):
    """torch's deprecated all_gather_coalesced of the quarters of this rank's
    n elements: outs[q][i] receives quarter i of rank q, each a row of one
    tensor laid rank by rank, which is then Open MPI's one Allgather's
    result."""
    pieces = 4
    n = -(-n // pieces) * pieces
    m, world = n // pieces, r.world
    inp, out = r.empty(n), r.empty(n * world)
    views = list(inp.view(pieces, m).unbind(0))
    lists = [list(rows.unbind(0)) for rows in out.view(world, pieces, m).unbind(0)]
    case = Case(r, [inp], [out], lambda name: out, r.gathered(n))

    def call_on(group):
        def call():
            r.dist.all_gather_coalesced(lists, views, group=group)
        return call
    case.add_torch(r, call_on)
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Allgather, inp.numpy(), out.numpy())
    return case


def coalesced_reduce_scatter(r, n):
    """Four reduce_scatter_tensor calls in torch's coalescing manager (one
    reduce_scatter_tensor_coalesced) whose outputs, side by side, are this
    rank's n elements, against Open MPI's one Reduce_scatter_block of the
    whole: torch's input q holds the q-th quarter of every rank's block of
    MPI's (rewritten from it before each call, not timed)."""
    from torch.distributed.distributed_c10d import _coalescing_manager

    pieces = 4
    n = -(-n // pieces) * pieces
    m, world = n // pieces, r.world
    inp, tin, out = r.empty(n * world), r.empty(n * world), r.empty(n)
    ins = list(tin.view(pieces, world * m).unbind(0))
    outs = list(out.view(pieces, m).unbind(0))

    def permute():
        tin.view(pieces, world, m).copy_(inp.view(world, pieces, m).transpose(0, 1))
    case = PermutedCase(r, [inp], [out], lambda name: out, r.scattered_sum(n), permute)

    def call_on(group):
        def call():
            with _coalescing_manager(group=group):
                for o, t in zip(outs, ins):
                    r.dist.reduce_scatter_tensor(o, t, r.dist.ReduceOp.SUM, group=group)
        return call
    case.add_torch(r, call_on)
    if r.comm:
        case.calls["mpi"] = bind(r.comm.Reduce_scatter_block, inp.numpy(), out.numpy(),
                                 r.MPI.SUM)
    return case


# A functional collective's kind: (input, output) elements per rank's n, its
# result, and Open MPI's nonblocking equivalent.
KINDS = {
    "all_reduce": (lambda r, n: (n, n), lambda r, n: r.summed(n), "Iallreduce"),
    "all_gather": (lambda r, n: (n, n * r.world), lambda r, n: r.gathered(n), "Iallgather"),
    "reduce_scatter": (lambda r, n: (n * r.world, n), lambda r, n: r.scattered_sum(n),
                       "Ireduce_scatter_block"),
}


def functional(collective, kind, *extra):
    """An op of torch's functional collectives (`collective(input, *extra,
    group)`, then wait_tensor on what it returns) against Open MPI's
    nonblocking equivalent + Wait."""
    elements, expected_of, mpi_name = KINDS[kind]

    def build(r, n):
        inp, out = (r.empty(e) for e in elements(r, n))
        box = {}
        case = Case(r, [inp], [out], lambda name: box.pop("out"), expected_of(r, n))
        run, wait = collective(r)

        def call_on(group):
            def call():
                box["out"] = wait(run(inp, *extra, group))
            return call
        case.add_torch(r, call_on)
        if r.comm:
            start, a_in, a_out = getattr(r.comm, mpi_name), inp.numpy(), out.numpy()
            op = () if kind == "all_gather" else (r.MPI.SUM,)

            def mpi():
                start(a_in, a_out, *op).Wait()
                box["out"] = out
            case.calls["mpi"] = mpi

            def mpi_into_floors_output():
                # The floor's call left its output in the box: memory torch
                # has just allocated, whose pages a first write may fault in.
                start(a_in, box["out"].numpy(), *op).Wait()
            case.mpi_into_floors_output = mpi_into_floors_output
        return case
    return build


def eager_functional(name):
    """(the eager functional collective `name`, funcol.wait_tensor)"""
    def pick(r):
        import torch.distributed._functional_collectives as funcol
        return getattr(funcol, name), funcol.wait_tensor
    return pick


def compiled_all_reduce(r):
    """The ops a compiled graph calls: no AsyncCollectiveTensor, the group by name."""
    ops = r.torch.ops._c10d_functional
    return (lambda t, reduce_op, group: ops.all_reduce(t, reduce_op, group.group_name),
            ops.wait_tensor)


OPS = {
    "all_gather_into_tensor": all_gather_flat("all_gather_into_tensor"),
    "all_gather_single": all_gather_flat("all_gather_single"),
    "all_gather": all_gather,
    "reduce_scatter_tensor": reduce_scatter_flat("reduce_scatter_tensor"),
    "reduce_scatter_single": reduce_scatter_flat("reduce_scatter_single"),
    "broadcast": broadcast,
    "barrier": barrier,
    "all_to_all_single": all_to_all_single,
    "all_to_all_splits": all_to_all_splits,
    "all_to_all": all_to_all,
    "reduce_scatter": reduce_scatter,
    "reduce": reduce,
    "gather": gather,
    "scatter": scatter,
    "all_reduce": all_reduce,
    "all_reduce_async": all_reduce_async,
    "all_reduce_future": lambda r, n: all_reduce_async(r, n, "future"),
    "all_reduce_then": lambda r, n: all_reduce_async(r, n, "then"),
    "coalesced_all_reduce": coalesced_all_reduce,
    "coalesced_all_gather": coalesced_all_gather,
    "coalesced_reduce_scatter": coalesced_reduce_scatter,
    "all_gather_coalesced": all_gather_coalesced,
    "device_coalesced_all_reduce": lambda r, n: coalesced_all_reduce(r, n, MANAGER_DEVICE),
    "device_coalesced_all_gather": lambda r, n: coalesced_all_gather(r, n, MANAGER_DEVICE),
    "send_recv": point_to_point(batched=False),
    "batch_isend_irecv": point_to_point(batched=True),
    "functional_all_reduce": functional(eager_functional("all_reduce"), "all_reduce", "sum"),
    "functional_all_gather_tensor": functional(eager_functional("all_gather_tensor"),
                                               "all_gather", 0),
    "functional_reduce_scatter_tensor": functional(eager_functional("reduce_scatter_tensor"),
                                                   "reduce_scatter", "sum", 0),
    "c10d_functional_all_reduce": functional(compiled_all_reduce, "all_reduce", "sum"),
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    harness.add_arguments(parser, DEFAULT_SIZES, LIBRARIES)
    parser.add_argument("--ops", default=",".join(OPS), help="comma separated, of: " + ", ".join(OPS))
    parser.add_argument("--floor", choices=sorted(FLOORS), default="null",
                        help="the backend whose calls are the floor: null (moves nothing; "
                             "compiled on first use, about 25 s) or torch's fake (copies "
                             "the inputs into the outputs of gathers, scatters, reduce-scatters "
                             "and all-to-alls)")
    args = harness.finish_arguments(parser.parse_args(), parser)
    unknown = set(args.ops.split(",")) - set(OPS)
    if unknown:
        parser.error(f"unknown ops {sorted(unknown)}; known: {', '.join(OPS)}")
    if "all_reduce" not in args.ops.split(","):  # DeepSpeed's one op: not worth its build
        args.libraries = ",".join(n for n in args.libraries.split(",") if n != "deepspeed")
    return args


def ratio_width(peer):
    """The widths of the two ratio columns against `peer`."""
    return max(17, len("(ring-floor)/" + peer)), max(14, len("ring/" + peer))


class Rank(RankBase):
    def empty(self, n):
        return self.torch.empty(n, dtype=self.torch.float32)

    def source_of(self, rank, n):
        """Rank `rank`'s two versions of an n-element input: small integers,
        so that every sum is exact in float32 and every result checkable."""
        seeded = self.torch.Generator().manual_seed((n * 1024 + rank) * 2)
        return [self.torch.randint(-8, 8, (n,), generator=seeded).float() for _ in range(2)]

    def sources(self, n):
        return self.source_of(self.rank, n)

    def summed(self, n):
        return sum(self.source_of(k, n)[0] for k in range(self.world))

    def gathered(self, n):
        return self.torch.cat([self.source_of(k, n)[0] for k in range(self.world)])

    def scattered_sum(self, n):
        whole = sum(self.source_of(k, n * self.world)[0] for k in range(self.world))
        return whole[self.rank * n:(self.rank + 1) * n]

    def usable(self, op, case, size):
        """The case's calls that ran and gave the right result on every rank
        (the floor's result is not checked: it communicates nothing)."""
        usable = {}
        for name in LIBRARIES:
            if name not in case.calls:
                continue
            why = ""
            try:
                for t in case.outputs:
                    t.fill_(float("nan"))
                case.prepare(0)
                case.calls[name]()
                checked = name not in UNCHECKED and case.result and case.expected is not None
                if checked and not self.torch.equal(case.result(name), case.expected):
                    why = "a wrong result"
            except Exception as e:  # noqa: BLE001  a library without this op is skipped
                why = f"{type(e).__name__}: {e}".splitlines()[0]
            if self.agree(bool(why)):
                if self.rank == 0 or why:
                    print(f"# {op} {size} B: {name} skipped on rank {self.rank}: "
                          f"{why or 'failed on another rank'}", flush=True)
                continue
            usable[name] = case.calls[name]
        return usable

    def report(self, op, pattern, size, stats, state):
        if self.rank != 0:
            return
        names = [n for n in LIBRARIES if n in stats]
        peers = [n for n in ("mpi", "deepspeed") if n in stats]
        if state.get("names") != names:
            state["names"] = names
            head = f"{'pattern':>13} {'bytes':>9} |" + stats_header(
                [LABELS.get(n, n) for n in names])
            for peer in peers:
                head += f" {'(ring-floor)/' + peer:>{ratio_width(peer)[0]}}" \
                        f" {'ring/' + peer:>{ratio_width(peer)[1]}}"
            if "synced" in stats and "mpi" in stats:
                head += f" {'(ring-floor+sync)/mpi':>21}"
            if "floormpi" in stats:
                head += f" {'ring/floor+mpi':>14}"
            print(head, flush=True)
        row = f"{pattern:>13} {size if op != 'barrier' else '-':>9} |" + stats_cells(names, stats)
        ring = stats.get("ringreduce", (None,))[0]
        floor = stats["fake"][0] if "fake" in stats else 0.0
        for peer in peers:
            first, second = ratio_width(peer)
            if ring is None:
                row += f" {'-':>{first}} {'-':>{second}}"
            else:
                row += f" {(ring - floor) / stats[peer][0]:{first}.2f}" \
                       f" {ring / stats[peer][0]:{second}.2f}"
        if "synced" in stats and "mpi" in stats:
            row += (f" {'-':>21}" if ring is None
                    else f" {(ring - stats['synced'][0]) / stats['mpi'][0]:21.2f}")
        if "floormpi" in stats:
            row += f" {'-':>14}" if ring is None else f" {ring / stats['floormpi'][0]:14.2f}"
        print(row, flush=True)

    def run(self, args):
        if self.rank == 0:
            print(f"# world {self.world}, torch {self.torch.__version__}, "
                  f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, {os.cpu_count()} cores; "
                  f"float32, per call the slowest rank, us; floor = {FLOORS[self.floor_backend]}",
                  flush=True)
            print(f"# {loaded_build()}", flush=True)
            if self.MPI is not None:
                # Open MPI's version string ends in a NUL byte, which makes the
                # output a binary file to grep.
                version = self.MPI.Get_library_version().replace("\0", "")
                print(f"# {version.splitlines()[0].strip()}", flush=True)
        sizes = [int(s) for s in args.sizes.split(",")]
        for op in args.ops.split(","):
            if self.rank == 0:
                print(f"\n## {op}", flush=True)
            state = {}
            for pattern, before in self.patterns(args):
                for size in ([0] if op == "barrier" else sizes):
                    case = OPS[op](self, max(1, size // 4))
                    case.add_mpi_through_torch(self)
                    calls = self.usable(op, case, size)
                    if not calls:
                        continue
                    stats = self.measure(calls, case.prepare, before, args,
                                         late=pattern == "late-peer",
                                         timed_rank=0 if pattern == "early-rank" else None)
                    self.report(op, pattern, size, stats, state)
                    self.print_sleeps(args, LABELS)
        self.finish()


if __name__ == "__main__":
    harness.main(__file__, parse_args, Rank)
