"""hvd.join: a rank out of data serves the others' collectives until every
rank has joined."""
import math

import torch
import torch.distributed as dist

from . import negotiation as neg
from .basics import Average, Min, Product, Sum, context
from .handles import translated
from .mpi_ops import REDUCE_OPS, exchange_splits, gather_rows, move_rows


def identity(numel, dtype, op, device):
    """What a joined rank contributes: the value that leaves the others' result
    unchanged (zeros for Sum and Average, which still divides by size())."""
    if op in (Sum, Average):
        return torch.zeros(numel, dtype=dtype, device=device)
    if op == Product:
        return torch.ones(numel, dtype=dtype, device=device)
    if dtype == torch.bool:
        fill = op == Min
    elif dtype.is_floating_point:
        fill = math.inf if op == Min else -math.inf
    else:
        info = torch.iinfo(dtype)
        fill = info.max if op == Min else info.min
    return torch.full((numel,), fill, dtype=dtype, device=device)


def _serve(ctx, records, reference, device):
    """A joined rank's side of the others' collective: neutral data in, results dropped."""
    kind = reference[neg.S_KIND]
    if kind == neg.BARRIER:
        return
    dtype = neg.dtype_of(reference[neg.S_DTYPE])
    row = reference[neg.S_ROW]
    nothing = torch.empty(0, dtype=dtype, device=device)
    if kind == neg.ALLREDUCE:
        op = reference[neg.S_ARG]
        dist.all_reduce(identity(reference[neg.S_NUMEL], dtype, op, device),
                        op=REDUCE_OPS[op], group=ctx.group)
    elif kind == neg.BROADCAST:
        dist.broadcast(torch.zeros(reference[neg.S_NUMEL], dtype=dtype, device=device),
                       group=ctx.group, group_src=reference[neg.S_ARG])
    elif kind == neg.ALLGATHER:
        works, _ = gather_rows(ctx, nothing, [r[neg.S_DIM0] for r in records], row, dtype, device)
        for work in works:
            work.wait()
    elif kind == neg.ALLTOALL:
        zeros = [0] * ctx.size
        works, _ = move_rows(ctx, nothing, zeros, exchange_splits(ctx, zeros), row, dtype, device)
        for work in works:
            work.wait()


@translated
def join(device=-1):
    """This rank has no more data: until every rank has joined, it takes part
    in the others' collectives with neutral tensors (zeros for Sum and Average,
    which still divides by size(), as Horovod; ones for Product; the dtype's
    extreme for Min and Max) made on `device` (-1: CPU, else that CUDA
    device). Returns the rank that joined last."""
    ctx = context()
    dev = torch.device("cpu") if device is None or device < 0 else torch.device("cuda", device)
    record = neg.Desc(neg.JOIN).record(joined_at=ctx.seq + 1)
    ctx.joined_at = ctx.seq + 1
    try:
        while True:
            ctx.seq += 1
            records = neg.finish_exchange(*neg.start_exchange(ctx, record), ctx.size)
            active = [r for r in records if r[neg.S_KIND] != neg.JOIN]
            if not active:
                return max(range(ctx.size), key=lambda r: (records[r][neg.S_JOINED_AT], r))
            neg.check(ctx.seq, ctx.rank, records)
            _serve(ctx, records, active[0], dev)
    finally:
        ctx.joined_at = None
