"""Horovod's collectives on the ringreduce process group: allreduce (Average by
default), grouped allreduce, allgather with first dimensions that differ,
broadcast, alltoall with splits and barrier; `*_async` return Horovod's
handles (handles.py).

Each operation queues its record exchange (negotiation.py) and its data
operations on the group at once; the backend runs them in issue order.
allgather and alltoall wait for the records first: they need every rank's
first dimension or splits to size their buffers.
"""
import math
import warnings

import torch
import torch.distributed as dist

from . import negotiation as neg
from .basics import (Adasum, Average, CollectiveMismatchError, Max, Min, Product, Sum,
                     check_process_set, context, global_process_set)
from .compression import Compression
from .handles import (Composite, Pending, Single, issue, records_now, register, synchronize,
                      translated, translated_errors)

REDUCE_OPS = {Average: dist.ReduceOp.AVG, Sum: dist.ReduceOp.SUM, Min: dist.ReduceOp.MIN,
               Max: dist.ReduceOp.MAX, Product: dist.ReduceOp.PRODUCT}


def resolve_op(op, average=None):
    if average is not None:
        warnings.warn("hvd: the `average` argument is deprecated, use `op`", DeprecationWarning,
                      stacklevel=3)
        if op is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of them.")
        op = Average if average else Sum
    if op is None:
        return Average
    if op == Adasum:
        raise NotImplementedError("Adasum is not supported by torch_ringreduce.horovod; "
                                  "use op=hvd.Average (or hvd.Sum)")
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction op {op!r}: use hvd.Average, hvd.Sum, hvd.Min, "
                         f"hvd.Max or hvd.Product")
    return op


# ---------------------------------------------------------------- allreduce

def _scale(tensor, factor):
    if factor == 1.0:
        return
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        tensor.mul_(factor)
    elif tensor.dtype == torch.bool:
        raise ValueError("prescale_factor/postscale_factor need a numeric tensor, not bool")
    else:  # integers: scaled in float64, truncated toward zero
        tensor.copy_(tensor.double().mul_(factor).trunc_())


def _fused(tensors, inplace):
    """One contiguous buffer holding the tensors (the tensor itself when it is
    alone and the operation works in place)."""
    if len(tensors) == 1:
        return tensors[0] if inplace else tensors[0].clone(memory_format=torch.contiguous_format)
    return torch.cat([t.reshape(-1) for t in tensors])


def _unfused(buffer, tensors, inplace):
    """The results as a list: written back into `tensors`, or views of `buffer`."""
    if len(tensors) == 1:
        return [buffer]
    pieces = torch.split(buffer, [t.numel() for t in tensors])
    if inplace:
        for t, piece in zip(tensors, pieces):
            t.copy_(piece.view(t.shape))
        return tensors
    return [piece.view(t.shape) for t, piece in zip(tensors, pieces)]


def per_dtype(tensors, name, start):
    """Runs start(tensors of one dtype and device, name) for each kind of
    tensor in the list; one pending result list in the list's order."""
    parts = {}
    for i, t in enumerate(tensors):
        parts.setdefault((t.dtype, t.device), []).append(i)
    pendings = []
    for n, indices in enumerate(parts.values()):
        part_name = name if name is None or len(parts) == 1 else f"{name}.{n}"
        pendings.append((start([tensors[i] for i in indices], part_name), indices))
    return Composite(pendings, len(tensors))


def _start_allreduce(tensors, inplace, name, op, prescale, postscale):
    """One allreduce over tensors of one dtype and device, fused into one
    buffer when there are several; results written into `tensors` (inplace)
    or new tensors, as a list."""
    ctx = context()
    tensors = [t.detach() for t in tensors]
    buffer = _fused(tensors, inplace)
    _scale(buffer, prescale)
    desc = neg.Desc(neg.ALLREDUCE, buffer.dtype, op, name, [t.shape for t in tensors],
                    numel=buffer.numel())
    seq, exchange = issue(ctx, desc)
    work = dist.all_reduce(buffer, op=REDUCE_OPS[op], group=ctx.group, async_op=True)

    def finish():
        _scale(buffer, postscale)
        return _unfused(buffer, tensors, inplace)

    return Pending(ctx, seq, exchange=exchange, works=[work], finish=finish)


def _start_grouped(tensors, inplace, average, name, op, prescale, postscale, process_set):
    """The allreduce behind every public allreduce: one fused operation per dtype."""
    check_process_set(process_set)
    op = resolve_op(op, average)
    return per_dtype(list(tensors), name, lambda part, part_name: _start_allreduce(
        part, inplace, part_name, op, prescale, postscale))


@translated
def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor; `tensor` is left unchanged."""
    return register(Single(_start_grouped([tensor], False, average, name, op, prescale_factor,
                                            postscale_factor, process_set)))


@translated
def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce in place."""
    return register(Single(_start_grouped([tensor], True, average, name, op, prescale_factor,
                                            postscale_factor, process_set), tensor))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, tensor, name, op, prescale, postscale):
        fctx.args = (op, prescale, postscale)
        return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale,
                                           postscale_factor=postscale))

    @staticmethod
    def backward(fctx, grad):
        op, prescale, postscale = fctx.args
        return allreduce(grad, op=op, prescale_factor=prescale,
                         postscale_factor=postscale), None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reduction of `tensor` over all ranks, a new tensor (Average unless
    `op` says otherwise); differentiable."""
    check_process_set(process_set)
    op = resolve_op(op, average)
    compressed, cctx = compression.compress(tensor)
    reduced = _AllreduceFn.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, cctx)


@translated
def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts one fused allreduce of a list of tensors (one per dtype);
    synchronize returns a list of new tensors."""
    return register(_start_grouped(tensors, False, average, name, op, prescale_factor,
                                    postscale_factor, process_set))


@translated
def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return register(_start_grouped(tensors, True, average, name, op, prescale_factor,
                                    postscale_factor, process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class _GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, name, op, prescale, postscale, *tensors):
        fctx.args = (op, prescale, postscale)
        return tuple(synchronize(grouped_allreduce_async(
            tensors, name=name, op=op, prescale_factor=prescale, postscale_factor=postscale)))

    @staticmethod
    def backward(fctx, *grads):
        op, prescale, postscale = fctx.args
        reduced = grouped_allreduce(list(grads), op=op, prescale_factor=prescale,
                                    postscale_factor=postscale)
        return (None, None, None, None, *reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """allreduce of a list of tensors in one fused operation; differentiable."""
    check_process_set(process_set)
    op = resolve_op(op, average)
    compressed, cctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    reduced = _GroupedAllreduceFn.apply(name, op, prescale_factor, postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, cctxs)]


# ---------------------------------------------------------------- allgather

def gather_rows(ctx, rows, dim0s, row, dtype, device):
    """all_gather of each rank's first `dim0s[r]` rows of `row` elements,
    padded to the longest; returns (works, finish -> the rows of all ranks, flat)."""
    longest = max(dim0s)
    per_rank = longest * row
    if per_rank == 0:
        return [], lambda: torch.empty(0, dtype=dtype, device=device)
    flat = rows.reshape(-1)
    if flat.numel() != per_rank:
        padded = torch.zeros(per_rank, dtype=dtype, device=device)
        padded[:flat.numel()] = flat
        flat = padded
    out = torch.empty(ctx.size * per_rank, dtype=dtype, device=device)
    work = neg._all_gather(out, flat.contiguous(), group=ctx.group, async_op=True)

    def finish():
        if all(d == longest for d in dim0s):
            return out
        return torch.cat([out[r * per_rank:r * per_rank + dim0s[r] * row]
                          for r in range(ctx.size)])

    return [work], finish


def start_allgather(tensor, name):
    if tensor.dim() == 0:
        raise ValueError("hvd.allgather needs a tensor with at least one dimension "
                         "(it concatenates along the first)")
    ctx = context()
    tensor = tensor.detach()
    shape = tuple(tensor.shape)
    row = math.prod(shape[1:])
    desc = neg.Desc(neg.ALLGATHER, tensor.dtype, 0, name, [shape[1:]], numel=tensor.numel(),
                    dim0=shape[0], row=row)
    seq, records = records_now(ctx, desc)
    dim0s = [r[neg.S_DIM0] for r in records]
    works, rows = gather_rows(ctx, tensor, dim0s, row, tensor.dtype, tensor.device)
    pending = Pending(ctx, seq, records=records, works=works,
                       finish=lambda: rows().view(sum(dim0s), *shape[1:]))
    pending.dim0s = dim0s
    return pending


@translated
def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts the concatenation of every rank's `tensor` along the first
    dimension, which may differ between ranks."""
    check_process_set(process_set)
    return register(start_allgather(tensor, name))


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, tensor, name):
        with translated_errors():
            pending = start_allgather(tensor, name)
            fctx.dim0s = pending.dim0s
            return pending.wait()

    @staticmethod
    def backward(fctx, grad):
        reduced = allreduce(grad, op=Average)
        me = context().rank
        return reduced.narrow(0, sum(fctx.dim0s[:me]), fctx.dim0s[me]), None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's `tensor` concatenated along the first dimension; differentiable."""
    check_process_set(process_set)
    return _AllgatherFn.apply(tensor, name)


# ---------------------------------------------------------------- broadcast

def _check_root(ctx, root_rank):
    if not isinstance(root_rank, int) or not 0 <= root_rank < ctx.size:
        raise ValueError(f"root_rank {root_rank!r} is not a rank of this job (size {ctx.size})")


def start_broadcast(tensors, root_rank, name, inplace):
    """One broadcast of tensors of one dtype and device, fused when several."""
    ctx = context()
    _check_root(ctx, root_rank)
    tensors = [t.detach() for t in tensors]
    buffer = _fused(tensors, inplace)
    desc = neg.Desc(neg.BROADCAST, buffer.dtype, root_rank, name, [t.shape for t in tensors],
                    numel=buffer.numel())
    seq, exchange = issue(ctx, desc)
    work = dist.broadcast(buffer, group=ctx.group, group_src=root_rank, async_op=True)

    def root_has_not_joined(records):
        if records[root_rank][neg.S_KIND] == neg.JOIN:
            raise CollectiveMismatchError(f"hvd.broadcast from root rank {root_rank}, which has "
                                          f"already called hvd.join(): it has nothing to send")

    return Pending(ctx, seq, exchange=exchange, works=[work],
                    finish=lambda: _unfused(buffer, tensors, inplace),
                    checks=[root_has_not_joined])


@translated
def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    check_process_set(process_set)
    return register(Single(start_broadcast([tensor], root_rank, name, False)))


@translated
def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    check_process_set(process_set)
    return register(Single(start_broadcast([tensor], root_rank, name, True), tensor))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    synchronize(broadcast_async_(tensor, root_rank, name, process_set))
    return tensor


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, tensor, root_rank, name):
        fctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(fctx, grad):
        reduced = allreduce(grad, op=Average)
        if context().rank != fctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's `tensor`, a new tensor on every rank; differentiable."""
    check_process_set(process_set)
    return _BroadcastFn.apply(tensor, root_rank, name)


# ---------------------------------------------------------------- alltoall

def exchange_splits(ctx, send_splits):
    send = torch.tensor(send_splits, dtype=torch.int64)
    recv = torch.empty(ctx.size, dtype=torch.int64)
    dist.all_to_all_single(recv, send, group=ctx.group)
    return recv.tolist()


def move_rows(ctx, rows, send_splits, recv_splits, row, dtype, device):
    """all_to_all_single of rows; returns (works, finish -> received rows, flat)."""
    out = torch.empty(sum(recv_splits) * row, dtype=dtype, device=device)
    work = dist.all_to_all_single(out, rows.reshape(-1).contiguous(),
                                  output_split_sizes=[n * row for n in recv_splits],
                                  input_split_sizes=[n * row for n in send_splits],
                                  group=ctx.group, async_op=True)
    return [work], lambda: out


def _split_list(ctx, tensor, splits):
    dim0 = tensor.shape[0]
    if splits is None:
        if dim0 % ctx.size:
            raise ValueError(f"hvd.alltoall without splits divides the first dimension equally: "
                             f"{dim0} is not a multiple of size() = {ctx.size}")
        return [dim0 // ctx.size] * ctx.size
    values = splits.tolist() if isinstance(splits, torch.Tensor) else list(splits)
    if len(values) != ctx.size or any(v < 0 for v in values) or sum(values) != dim0:
        raise ValueError(f"hvd.alltoall splits {values} must be size() = {ctx.size} "
                         f"non-negative numbers of rows that add up to the first dimension {dim0}")
    return [int(v) for v in values]


def _start_alltoall(tensor, splits, name):
    if tensor.dim() == 0:
        raise ValueError("hvd.alltoall needs a tensor with at least one dimension")
    ctx = context()
    tensor = tensor.detach()
    send = _split_list(ctx, tensor, splits)
    shape = tuple(tensor.shape)
    row = math.prod(shape[1:])
    desc = neg.Desc(neg.ALLTOALL, tensor.dtype, 0, name, [shape[1:]], numel=tensor.numel(),
                    dim0=shape[0], row=row)
    seq, records = records_now(ctx, desc)
    recv = exchange_splits(ctx, send)
    works, rows = move_rows(ctx, tensor, send, recv, row, tensor.dtype, tensor.device)
    split_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32
    received = torch.tensor(recv, dtype=split_dtype)
    return Pending(ctx, seq, records=records, works=works,
                    finish=lambda: (rows().view(sum(recv), *shape[1:]), received))


@translated
def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: rows splits[r] go to rank r (equal parts without
    splits); synchronize returns (received rows, received splits)."""
    check_process_set(process_set)
    return register(_start_alltoall(tensor, splits, name))


class _AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, tensor, splits, name):
        output, received = synchronize(alltoall_async(tensor, splits, name))
        fctx.received = received
        fctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(fctx, grad, _unused):
        grad_in, _ = synchronize(alltoall_async(grad.contiguous(), fctx.received))
        return grad_in, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of `tensor` to all ranks and gathers what they send: the
    received rows, and with `splits` also the received splits (as Horovod)."""
    check_process_set(process_set)
    output, received = _AlltoallFn.apply(tensor, splits, name)
    return output if splits is None else (output, received)


# ---------------------------------------------------------------- barrier

@translated
def barrier(process_set=global_process_set):
    """Returns once every rank has called it."""
    check_process_set(process_set)
    records_now(context(), neg.Desc(neg.BARRIER))
