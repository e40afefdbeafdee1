"""init, shutdown, sizes and ranks, reduction ops and errors: Horovod's basics
on a ringreduce process group.

`init()` adopts the default process group when the script has already called
`dist.init_process_group`, otherwise it creates one with the "ringreduce"
backend from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...), or
a world of one process when the script runs without a launcher, as Horovod
does.
"""
import atexit
import hashlib
import os
import socket

import torch
import torch.distributed as dist

import torch_ringreduce

# Horovod's values for its reduction ops (horovod/common: AVERAGE=0, SUM=1,
# ADASUM=2, MIN=3, MAX=4, PRODUCT=5), so code that stores or compares them
# keeps working.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
            Product: "Product"}

NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."


class HorovodInternalError(RuntimeError):
    """A collective failed (a peer died, a timeout, the backend refused it).
    hvd.elastic.run restores the last committed state when it sees one."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod raises this when hosts join or leave an elastic job. Here the
    set of hosts changes only through a torchrun restart, so it is never
    raised; it exists for code that catches it."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


class CollectiveMismatchError(RuntimeError):
    """Ranks called different collectives at the same point: other names,
    kinds, dtypes, shapes, ops or roots. Not a HorovodInternalError: retrying
    from a checkpoint would meet the same mismatch."""


class ProcessSet:
    """Horovod's process sets; only the global one exists here."""

    def __init__(self, ranks=None):
        self.ranks = ranks
        self.process_set_id = 0

    def size(self):
        return size()

    def rank(self):
        return rank()

    def included(self):
        return True

    def __repr__(self):
        return "ProcessSet(global)"


global_process_set = ProcessSet()


def check_process_set(process_set):
    if process_set is not None and process_set is not global_process_set:
        raise NotImplementedError("torch_ringreduce.horovod supports only the global process set; "
                                  "use torch.distributed.new_group for subsets of ranks")


class _Context:
    """What init() set up; None when not initialized."""

    def __init__(self, group, owns_group):
        self.group = group
        self.owns_group = owns_group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.local_rank = self.local_size = self.cross_rank = self.cross_size = None
        self.seq = 0            # negotiated operations issued so far (same count on every rank)
        self.joined_at = None   # seq at which this rank called join(), while inside join()
        self.handles = {}       # int handle -> pending operation
        self.next_handle = 0


_ctx = None


def context():
    """The live context; Horovod's ValueError before init()."""
    if _ctx is None:
        raise ValueError(NOT_INITIALIZED)
    return _ctx


def _node_key():
    # torchrun numbers its agents (one per node): two agents on one machine
    # (a multi-node test on one host) are two nodes, as Horovod would see them.
    group_rank = os.environ.get("GROUP_RANK")
    host = socket.gethostname()
    return f"{host}/agent{group_rank}" if group_rank is not None else host


def _set_topology(ctx):
    """local_*: ranks on this node; cross_*: ranks with this local rank (Horovod's
    cross communicator), both ordered by global rank. The node keys travel as
    hashes in a CPU tensor: an object collective could pick a CUDA device
    before the script has chosen its own (torch.cuda.set_device(hvd.local_rank()))."""
    digest = hashlib.blake2b(_node_key().encode(), digest_size=7).digest()
    mine = torch.tensor([int.from_bytes(digest, "little")], dtype=torch.int64)
    gathered = torch.empty(ctx.size, dtype=torch.int64)
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    all_gather(gathered, mine, group=ctx.group)
    keys = gathered.tolist()
    local = [r for r in range(ctx.size) if keys[r] == keys[ctx.rank]]
    ctx.local_rank, ctx.local_size = local.index(ctx.rank), len(local)
    local_ranks = [[r for r in range(ctx.size) if keys[r] == keys[q]].index(q)
                   for q in range(ctx.size)]
    cross = [r for r in range(ctx.size) if local_ranks[r] == ctx.local_rank]
    ctx.cross_rank, ctx.cross_size = cross.index(ctx.rank), len(cross)


def init(comm=None, process_sets=None, process_group=None):
    """Initialises Horovod on ringreduce. `comm` (an MPI communicator or a list
    of ranks in Horovod) and `process_sets` are not supported: there is no MPI
    and only the global process set. `process_group` (not in Horovod) runs
    hvd on an existing torch.distributed group instead of the default one."""
    global _ctx
    if comm is not None:
        raise NotImplementedError("hvd.init(comm=...) needs MPI; torch_ringreduce.horovod runs on "
                                  "torch.distributed: launch with torchrun or "
                                  "python -m torch_ringreduce.run")
    if process_sets:
        raise NotImplementedError("process sets other than the global one are not supported")
    if _ctx is not None:
        return
    owns = False
    if process_group is None:
        if not dist.is_initialized():
            if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
                dist.init_process_group(torch_ringreduce.BACKEND_NAME)
            else:
                # No launcher: one process, as `python train.py` is with Horovod.
                dist.init_process_group(torch_ringreduce.BACKEND_NAME, store=dist.HashStore(),
                                        rank=0, world_size=1)
            owns = True
        process_group = dist.group.WORLD
    ctx = _Context(process_group, owns)
    _set_topology(ctx)
    _ctx = ctx
    if owns:
        # As Horovod's init does: scripts rarely call shutdown(), and a group
        # still alive when the interpreter finalizes can abort the process
        # (its worker thread may drop the last reference to a tensor then).
        atexit.unregister(shutdown)  # once, however often init() runs
        atexit.register(shutdown)


def shutdown():
    """Forgets the context; destroys the process group only if init() made it."""
    global _ctx
    ctx, _ctx = _ctx, None
    if ctx is not None and ctx.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def is_initialized():
    return _ctx is not None


def size():
    return context().size


def rank():
    return context().rank


def local_size():
    return context().local_size


def local_rank():
    return context().local_rank


def cross_size():
    return context().cross_size


def cross_rank():
    return context().cross_rank


def is_homogeneous():
    """True when every node runs the same number of ranks."""
    ctx = context()
    return ctx.size % ctx.local_size == 0 and ctx.cross_size * ctx.local_size == ctx.size


# What Horovod scripts ask about the build. There is no MPI, Gloo controller,
# DDL or oneCCL here; collectives run in ringreduce (CUDA kernels and NCCL
# when the extension was built with nvcc).
def _false():
    return False


mpi_threads_supported = mpi_enabled = mpi_built = gloo_enabled = gloo_built = _false
ddl_built = ccl_built = rocm_built = _false


def cuda_built():
    return bool(torch_ringreduce._C.build_info().get("cuda_path"))


def nccl_built():
    return cuda_built()
